"""The masked on-the-fly generator (issue 25): golden model against an independent
register-level reference (tests/rng_reference.py), its configuration rules and its
diversity at small d."""
import json
import math
import re

import numpy as np
import pytest

from rng_reference import masked_mask_width, masked_register_run
from zoforge.errors import ConfigError
from zoforge.config import config_from_dict
from zoforge.golden.rng import GENERATOR_CONFIGS, MaskedConfig, MaskedGolden, OnTheFlyConfig

CONFIGS = [(31, 8), (3, 5), (7, 6), (15, 11), (63, 9)]


@pytest.mark.parametrize("n, b", CONFIGS)
def test_golden_equals_register_reference(n, b):
    golden = MaskedGolden(n, b)
    assert golden.mask_bits == masked_mask_width(n, b)
    cycles = 2 * ((1 << b) - 1) + 7 if b <= 8 else 300
    expected = masked_register_run(n, b, cycles)
    assert np.array_equal(golden.values_at(np.arange(cycles)), expected)
    start = 123_457 % golden.modulus                        # anywhere in the period
    assert np.array_equal(golden.values_at(np.arange(start, start + 40)),
                          masked_register_run(n, b, 40, start))


def test_format_period_and_range():
    golden = MaskedGolden(31, 8)
    assert (golden.width, golden.frac_bits, golden.mask_bits) == (8, 6, 9)
    assert golden.modulus == 255 * 31 * 511
    values = golden.values_at(np.arange(4000))
    assert values.min() == -128 and values.max() == 127
    # every perturbation continues with the next cycle; save/restore regenerate it
    saved = golden.save()
    first = golden.take(770)
    assert golden.state == 25
    golden.restore(saved)
    assert np.array_equal(golden.take(770), first)


def test_registered_as_a_strategy():
    assert GENERATOR_CONFIGS["masked"] is MaskedConfig
    config = config_from_dict({"kind": "rng", "strategy": "masked", "bits": 9},
                             tuple(GENERATOR_CONFIGS.values()))
    assert config == MaskedConfig(bits=9)


@pytest.mark.parametrize("fields, name", [({"bits": 17}, "bits"), ({"n_rng": 30}, "n_rng"),
                                          ({"n_rng": 63, "bits": 6}, "bits")])
def test_bad_configurations_name_the_field(fields, name):
    with pytest.raises(ConfigError, match=name):
        MaskedConfig(**fields)


def test_more_distinct_vectors_and_less_correlation_than_pezo_at_d_770():
    d = 770
    pezo, masked = OnTheFlyConfig().golden(), MaskedConfig().golden()
    steps = [g.state_after(d) for g in (pezo, masked)]
    distinct = [g.modulus // math.gcd(g.modulus, s) for g, s in zip((pezo, masked), steps)]
    assert distinct[0] == 1581 and distinct[1] > 500 * distinct[0]
    for golden, limit in ((pezo, None), (masked, 0.05)):
        v = golden.values_at(np.arange(5000)).astype(float)
        corr = np.corrcoef(v[:-1, 1:].ravel(), v[1:, :-1].ravel())[0, 1]
        if limit is None:
            assert corr > 0.4          # PeZO's doubling map
        else:
            assert abs(corr) < limit


# -- hardware -------------------------------------------------------------------------------

@pytest.mark.parametrize("config", [MaskedConfig(), MaskedConfig(n_rng=7, bits=6, snapshot=True)],
                         ids=lambda config: config.canonical_json())
def test_masked_verilog_is_lint_clean_with_core_and_shift(config):
    from zoforge.hw.designs import get_design
    from zoforge.hw.export import to_verilog
    from zoforge.sim.lint import lint_verilog
    design = get_design("rng").elaborate(config)
    verilog = to_verilog(design.top, design.name)
    assert set(design.blocks) == {"core", "shift"}
    result = lint_verilog(verilog, design.name)
    assert result.clean, result.messages
    core = verilog.split(f"module \\{design.name}.core ", 1)[1].split("endmodule", 1)[0]
    flip_flops = sum(int(width or 0) + 1 for width in
                     re.findall(r"^\s*reg (?:\[(\d+):0\] )?\S+ = ", core, re.MULTILINE))
    state = config.n_rng * config.bits + masked_mask_width(config.n_rng, config.bits)
    assert flip_flops == state * (2 if config.snapshot else 1)


# -- co-simulation (the RNG co-simulation machinery of tests/test_rng_cosim.py) --------------

COSIM = [MaskedConfig(), MaskedConfig(n_rng=7, bits=6, snapshot=True),
         MaskedConfig(n_rng=15, bits=11), MaskedConfig(n_rng=3, bits=5, snapshot=True)]


def test_masked_rtl_equals_golden_value_for_value(simulator):
    from zoforge.sim.rng_cosim import cosim_configs
    report = cosim_configs(COSIM, 1200, simulator=simulator, seed=3)
    assert report["passed"], report["failures"]
    bad = [(c["name"], c["first_mismatch"]) for c in report["configs"] if not c["bit_exact"]]
    assert not bad and report["bit_exact"]
    for config in report["configs"]:
        assert config["transfers"] > 0.7 * 1200
        if config["snapshot"]:
            assert config["saves"] >= 3 and config["restores"] >= 3
        if config["bits"] <= 6:            # past a full lane period and a mask period
            golden = MaskedConfig(n_rng=config["n_rng"], bits=config["bits"]).golden()
            assert config["transfers"] > max(golden.period, golden.mask_period)


# -- command line ---------------------------------------------------------------------------

def test_generate_and_dump_masked(tmp_path, capsys):
    from zoforge.cli import main
    assert main(["generate", "rng", "--strategy", "masked", "--n-rng", "7", "--bits", "6",
                 "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "rng_masked_n7_b6.json").read_text())
    assert (summary["W"], summary["F"], summary["mask_bits"]) == (6, 4, 7)
    capsys.readouterr()
    assert main(["rng", "dump", "--strategy", "masked", "--n-rng", "7", "--bits", "6",
                 "--cycles", "4", "--start", "5"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0] == "cycle," + ",".join(f"v{p}" for p in range(7))
    expected = MaskedGolden(7, 6).values_at(np.arange(5, 9))
    assert [list(map(int, row.split(",")[1:])) for row in rows[1:]] == expected.tolist()


@pytest.mark.parametrize("argv, flag", [
    (["generate", "rng", "--strategy", "masked", "--bits", "17"], "--bits"),
    (["rng", "dump", "--strategy", "masked", "--n-rng", "6"], "--n-rng"),
    (["rng", "dump", "--strategy", "masked", "--length", "5"], "--length"),
    (["train", "--perturbation", "masked-onthefly", "--pool-size", "255"], "--pool-size")])
def test_masked_misuse_is_a_one_line_error(argv, flag, capsys, tmp_path):
    from zoforge.cli import main
    if argv[0] == "generate":
        argv = argv + ["--out", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and flag in err and "Traceback" not in err
