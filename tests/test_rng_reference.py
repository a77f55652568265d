# amaranth: UnusedElaboratable=no
"""What the generators' hardware holds at reset, against the independent reference
(tests/rng_reference.py, written from docs/rng.md): the scale LUT's memory contents, the lane
registers' reset states, the Gaussian array's registers and the pool's bank contents, for
every configuration the co-simulation tests run and for LFSR widths up to 20 (the golden
LFSR sequence itself is compared with the reference for every width in test_rng_golden.py).

These are compared with what ``hw/rng`` builds (``lut_memory_init``, the core's ``lanes``
reset value, ``GaussianLanes`` registers, ``PregenGenerator.memories()``), not only with the
golden model: a golden model and hardware that shared a wrong table would agree with each
other in co-simulation and still be wrong.
"""
from __future__ import annotations

import gc
import warnings

import numpy as np
import pytest
from amaranth import Const
from amaranth.hdl import UnusedElaboratable

import rng_reference as ref
from test_rng_cosim import ACCEPTANCE, CORE, configs_for
from zoforge.golden.rng import GaussianConfig, OnTheFlyConfig, PregenConfig, scale_lut
from zoforge.hw.rng.gaussian import GaussianLanes
from zoforge.hw.rng.onthefly import OnTheFlyCore, OnTheFlyGenerator, lut_memory_init
from zoforge.hw.rng.pregen import PregenGenerator

# every configuration of tests/test_rng_cosim.py (both sets), by strategy
COSIM = {}
for _config, _length in configs_for(CORE) + configs_for(ACCEPTANCE):
    COSIM.setdefault(_config.variant, {})[_config.stable_hash()] = _config
ONTHEFLY = list(COSIM["onthefly"].values())
GAUSSIAN = list(COSIM["gaussian"].values())
PREGEN = list(COSIM["pregen"].values())
# Widths above the co-simulated ones, up to 20: constant LUTs (n = 127: co-simulated by
# tests/test_fuzz_cosim.py, no memory) and 1- to 7-bit LUTs. The default run takes the
# non-constant ones at b = 17 only: hw/rng's lut_memory_init takes time quadratic in the
# LUT's size (it recomputes the LUT's minimum for every entry: ~5 s at b = 17, ~200 s at
# b = 20 here), so the wider ones are in the slow run.
WIDE = ([OnTheFlyConfig(n_rng=127, bits=b) for b in range(17, 21)]
        + [OnTheFlyConfig(n_rng=n, bits=17) for n in (3, 31)])
WIDE_SLOW = [OnTheFlyConfig(n_rng=n, bits=b) for b in range(17, 21)
             for n in (3, 7, 15, 31, 63, 255) if (n, b) not in ((3, 17), (31, 17))]


def _ids(configs):
    return [f"n{c.n_rng}-b{c.bits}" + ("-snap" if c.snapshot else "") for c in configs]


def test_the_reference_covers_what_the_cosimulation_runs():
    assert len(ONTHEFLY) >= 30 and GAUSSIAN and PREGEN
    assert {c.bits for c in ONTHEFLY + WIDE} == set(range(4, 21))


@pytest.mark.parametrize("b", range(4, 21))
def test_reference_sequence_is_maximal_length(b):
    states = ref.sequence(b)
    period = (1 << b) - 1
    assert states[0] == 1 and states[period] == 1                 # back to S(0) after P
    assert len(np.unique(states[:period])) == period and states.min() >= 1


def _check_onthefly(config: OnTheFlyConfig) -> None:
    n, b = config.n_rng, config.bits
    k, margin = ref.scale_exponents(n, b)
    assert margin > 1e-9           # no k(t) within float error of a rounding tie
    lut = ref.scale_lut(n, b)
    k_min, k_max = int(k.min()), int(k.max())
    np.testing.assert_array_equal(scale_lut(n, b), lut)            # the golden model
    if k_min != k_max:
        # what the hardware's LUT memory holds (entries k - k_min), straight from hw/rng
        # (a constant LUT has no memory: shift_bits == 0 below)
        np.testing.assert_array_equal(np.array(lut_memory_init(n, b)), lut - k_min)
    core = OnTheFlyCore(config)
    assert core.shift_bits == (k_max - k_min).bit_length()
    assert core.priming_steps == (0 if k_min == k_max else 1)
    lanes = np.array(core.signature.members["lanes"].init)
    np.testing.assert_array_equal(lanes, ref.onthefly_reset_states(n, b))
    generator = OnTheFlyGenerator(config)
    assert generator.width == b + k_max - k_min
    assert generator.golden.frac_bits == b - 1 - k_min


@pytest.mark.parametrize("config", ONTHEFLY + WIDE, ids=_ids(ONTHEFLY + WIDE))
def test_onthefly_lut_and_lane_reset_states(config):
    _check_onthefly(config)


@pytest.mark.slow
@pytest.mark.parametrize("config", WIDE_SLOW, ids=_ids(WIDE_SLOW))
def test_onthefly_lut_and_lane_reset_states_wide(config):
    _check_onthefly(config)


@pytest.mark.parametrize("config", GAUSSIAN + [GaussianConfig(n_rng=3, bits=20, terms=5),
                                               GaussianConfig(n_rng=100, bits=17, terms=2)])
def test_gaussian_register_reset_states(config):
    lanes = GaussianLanes(config.golden(), Const(1))
    held = np.array([[reg.init for reg in lane] for lane in lanes.registers])
    np.testing.assert_array_equal(held, ref.gaussian_lane_states(config.n_rng, config.bits,
                                                                 config.terms))


@pytest.mark.parametrize("config", PREGEN + [
    PregenConfig(pool_size=4095, bits=12, banks=8, layout="striped"),
    PregenConfig(pool_size=65535, bits=32, banks=2, pool_seed=2**64 - 1, layout="striped")])
def test_pool_bank_contents(config):
    values, frac = ref.pool(config.pool_size, config.bits, config.pool_seed)
    assert config.golden().frac_bits == frac
    with warnings.catch_warnings():       # the memories are only looked at here
        warnings.simplefilter("ignore", UnusedElaboratable)
        memories = PregenGenerator(config).memories()
        contents = [np.array([int(v) for v in memory.init], dtype=np.int64)
                    for memory in memories]
        del memories
        gc.collect()
    banks = ref.pool_banks(values, config.banks, config.layout)
    assert len(contents) == len(banks) == config.banks
    mask = (1 << config.bits) - 1
    for held, bank in zip(contents, banks):
        np.testing.assert_array_equal(held[:len(bank)], bank & mask)
        assert not held[len(bank):].any()            # the striped layout's padding
