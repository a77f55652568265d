"""RTL == golden, value for value, for the PeZO generators (one side-by-side build)."""
import json

import pytest

from zoforge.cli import main
from zoforge.golden.rng import GaussianConfig, OnTheFlyConfig, PregenConfig
from zoforge.sim.rng_cosim import cosim_configs

# The acceptance set (slow: one Verilator build of ~40 generators takes minutes on 2 cores):
# on-the-fly with every n in {3, 7, 15, 31, 63} and every b in 4..16, LUT ranges 0..5
# (constant; 1-, 2- and 3-bit shift amounts). Non-constant LUTs above 2^14 entries are left
# out: their initialisers alone make the build minutes longer.
ACCEPTANCE = {3: (4, 5, 6, 7, 8, 9, 10, 11), 7: (4, 5, 6, 7, 8, 9, 10, 12, 13),
              15: (5, 6, 7, 8, 9, 10, 11), 31: (6, 8, 11, 14), 63: (15, 16)}
# The default set: every feature once (constant and 1/2/3-bit LUTs, both Table 6 on-the-fly
# configurations, snapshot on all strategies, both pool layouts).
CORE = {3: (5, 9), 7: (4, 7), 15: (11,), 31: (8, 14), 63: (16,)}
CYCLES = 1200


def configs_for(onthefly: dict) -> list[tuple]:
    """(configuration, perturbation length) pairs; the length matters for pools only."""
    configs = [OnTheFlyConfig(n_rng=n, bits=b) for n, widths in onthefly.items() for b in widths]
    configs += [
        OnTheFlyConfig(n_rng=7, bits=5, snapshot=True),
        OnTheFlyConfig(n_rng=31, bits=8, snapshot=True),
        OnTheFlyConfig(n_rng=3, bits=5, snapshot=True),
        (PregenConfig(pool_size=255, bits=8, banks=4, pool_seed=1, layout="striped"), 37),
        (PregenConfig(pool_size=511, bits=12, banks=8, pool_seed=2, snapshot=True), 100),
        (PregenConfig(pool_size=1023, bits=16, banks=16, pool_seed=4, layout="striped",
                      snapshot=True), 333),
        GaussianConfig(n_rng=4, bits=8, terms=3, snapshot=True),
        GaussianConfig(n_rng=16, bits=10, terms=4),
    ]
    if onthefly is ACCEPTANCE:
        configs += [(PregenConfig(pool_size=255, bits=6, banks=1, pool_seed=3), 10),
                    GaussianConfig(n_rng=1, bits=4, terms=1)]
    return [c if isinstance(c, tuple) else (c, 100) for c in configs]


def acceptance_configs() -> list:
    return [config for config, _ in configs_for(ACCEPTANCE)]


def run_side_by_side(pairs, simulator):
    return cosim_configs([c for c, _ in pairs], CYCLES, simulator=simulator, seed=1,
                         lengths=[length for _, length in pairs])


# Both sets run on every simulator (the ``simulator`` fixture of tests/conftest.py): the
# default one on Verilator and Icarus alike (~25 s on Icarus), the acceptance set with -m slow.
@pytest.fixture(scope="module", params=[
    "core", pytest.param("acceptance", marks=pytest.mark.slow)])
def report(request, simulator):
    onthefly = CORE if request.param == "core" else ACCEPTANCE
    return run_side_by_side(configs_for(onthefly), simulator)


def test_enough_configurations():
    configs = acceptance_configs()
    onthefly = [c for c in configs if c.variant == "onthefly"]
    assert len(onthefly) >= 30
    assert {c.n_rng for c in onthefly} == {3, 7, 15, 31, 63}
    assert {c.bits for c in onthefly} == set(range(4, 17))
    shifts = {c.golden().k_max - c.golden().k_min for c in onthefly}
    assert {0, 1, 2, 3, 4, 5} <= shifts                # constant; 1-, 2- and 3-bit shifts
    core = [c for c, _ in configs_for(CORE) if c.variant == "onthefly"]
    assert {c.golden().k_max - c.golden().k_min for c in core} >= {0, 1, 2, 3, 4}


def test_rtl_equals_golden_value_for_value(report):
    assert report["passed"], report["failures"]
    bad = [(c["name"], c["first_mismatch"]) for c in report["configs"] if not c["bit_exact"]]
    assert not bad
    assert report["bit_exact"]
    for config in report["configs"]:
        assert config["transfers"] > 0.7 * CYCLES     # stalls only where ready was low


def test_two_full_lut_periods_for_small_widths(report):
    for config in report["configs"]:
        if config["strategy"] == "onthefly" and config["bits"] <= 8:
            assert config["transfers"] >= 2 * (2 ** config["bits"] - 1), config["name"]


def test_save_and_restore_were_exercised(report):
    for config in report["configs"]:
        if config["snapshot"]:
            assert config["saves"] >= 3 and config["restores"] >= 3, config["name"]


def test_pool_pointer_crossed_several_perturbations_and_wraps(report):
    for config in report["configs"]:
        if config["strategy"] == "pregen":
            perturbations = config["values"] / config["length"]
            assert perturbations >= 3 and config["values"] > config["pool_size"]


def test_cosim_rng_command_prints_json(capsys, simulator):
    # the generator of docs/architecture.md's example (tests/test_architecture_doc.py): one
    # build for both
    assert main(["cosim", "rng", "--n-rng", "3", "--bits", "5", "--cycles", "300",
                 "--simulator", simulator]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["bit_exact"] is True and report["cycles"] == 300
    assert report["simulator"] == simulator and report["cycles_per_s"] > 0
    assert report["transfers"] > 200
