"""Golden (numpy/PyTorch) models of the PeZO perturbation generators.

* :class:`OnTheFlyGolden`: n rotated LFSR lanes + power-of-two scale LUT;
* :class:`PregenGolden`: a pre-generated, norm-scaled pool read cyclically;
* :class:`GaussianGolden`: the Gaussian baseline (central-limit sum of LFSR values);
* :class:`MaskedGolden`: PeZO's on-the-fly lanes XOR a rotating mask from a second LFSR
  (issue 25: diversity at small d).

Each is configured by a frozen configuration (:class:`OnTheFlyConfig`, :class:`PregenConfig`,
:class:`GaussianConfig`, :class:`MaskedConfig`; ``config.golden()`` builds the model) and
offers the one interface of :class:`~zoforge.golden.rng.base.GoldenGenerator` (``state``,
``values_at``, ``advance``, ``take``, ``take_float``, ``save``/``restore``, ``width``,
``frac_bits``) plus ``config()``, its derived facts; the hardware in :mod:`zoforge.hw.rng` matches them bit for bit.
"""
from zoforge.errors import check_choice
from zoforge.golden.rng.base import GeneratorConfig, GoldenGenerator
from zoforge.golden.rng.gaussian import GaussianConfig, GaussianGolden
from zoforge.golden.rng.lfsr import lfsr_sequence, taps
from zoforge.golden.rng.masked import MaskedConfig, MaskedGolden
from zoforge.golden.rng.norms import expected_gaussian_norm
from zoforge.golden.rng.onthefly import OnTheFlyConfig, OnTheFlyGolden, scale_lut
from zoforge.golden.rng.pregen import PregenConfig, PregenGolden

__all__ = ["OnTheFlyGolden", "PregenGolden", "GaussianGolden", "GoldenGenerator",
           "GeneratorConfig", "OnTheFlyConfig", "PregenConfig", "GaussianConfig",
           "MaskedGolden", "MaskedConfig",
           "GENERATOR_CONFIGS", "STRATEGIES", "lfsr_sequence", "taps", "scale_lut",
           "expected_gaussian_norm", "make_golden"]

#: The generators' configuration types, by strategy (the one list of strategies).
GENERATOR_CONFIGS = {c.variant: c for c in (OnTheFlyConfig, PregenConfig, GaussianConfig,
                                              MaskedConfig)}
STRATEGIES = tuple(GENERATOR_CONFIGS)


def make_golden(strategy: str, **params):
    """The golden generator for ``strategy`` ("onthefly", "pregen", "gaussian", "masked")
    with the configuration's fields ``params`` (defaults for the rest)."""
    check_choice("strategy", strategy, STRATEGIES)
    return GENERATOR_CONFIGS[strategy](**params).golden()
