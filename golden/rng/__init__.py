"""Golden (numpy/PyTorch) models of the PeZO perturbation generators.

* :class:`OnTheFlyGolden`: n rotated LFSR lanes + power-of-two scale LUT;
* :class:`PregenGolden`: a pre-generated, norm-scaled pool read cyclically;
* :class:`GaussianGolden`: the Gaussian baseline (central-limit sum of LFSR values).

All share ``take(d)``, ``take_float(d)``, ``save()``/``restore()``, ``width``,
``frac_bits`` and ``config()``; the hardware in :mod:`zoforge.hw.rng` matches them bit for bit.
"""
from zoforge.golden.rng.gaussian import GaussianGolden
from zoforge.golden.rng.lfsr import lfsr_sequence, taps
from zoforge.golden.rng.onthefly import OnTheFlyGolden, expected_gaussian_norm, scale_lut
from zoforge.golden.rng.pregen import PregenGolden

__all__ = ["OnTheFlyGolden", "PregenGolden", "GaussianGolden", "lfsr_sequence", "taps",
           "scale_lut", "expected_gaussian_norm", "make_golden"]


def make_golden(strategy: str, **params):
    """The golden generator for ``strategy`` ("onthefly", "pregen", "gaussian")."""
    from zoforge.errors import check_choice
    check_choice("--strategy", strategy, ("onthefly", "pregen", "gaussian"))
    return {"onthefly": OnTheFlyGolden, "pregen": PregenGolden,
            "gaussian": GaussianGolden}[strategy](**params)
