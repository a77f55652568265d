"""``zoforge demo``'s summary read back: every number of ``summary.json`` and of the printed
summary compared with the value it is computed from, derived here by hand from a training
result built by hand (no simulation): cycles per step over exactly the steps run, time =
cycles / Fmax, energy = power x time with the dynamic power taken to the Fmax, the losses,
accuracies and co-simulation rates, and the corners (no board report, no step run, an RTL
run that broke off)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from zoforge.cli._train_demo import COST_KEYS, demo_summary, summary_lines
from zoforge.golden.zolayer.network import StepSettings
from zoforge.reports.model import Fmax, Power
from zoforge.sim.zo_training import CHECKS, StepOutcome, StepResult, TrainingResult

#: Each step: (STEP_CYCLES, golden seconds, RTL seconds, golden loss, RTL loss or None).
STEPS = [(19_000, 0.004, 0.05, 0.71, 0.71), (19_500, 0.005, 0.07, 0.69, 0.69),
         (21_100, 0.009, 0.11, 0.66, 0.66)]
SIM_CYCLES = 60_250          # the steps' cycles and the host's between them
ACCURACY = {"accuracy_before": 0.5, "accuracy_after": 0.625,
            "accuracy_before_rtl": 0.4375, "accuracy_after_rtl": 0.6875}
SETTINGS = StepSettings(eps_shift=3, eta_mult=5, eta_shift=7, eps=0.0078125, lr=0.01,
                        gain=64.0)
FMAX_MHZ, ESTIMATED_MHZ, STATIC_W, DYNAMIC_W = 250.0, 300.0, 0.59, 0.084


def training_result(steps=STEPS, requested: int | None = None, failures=(),
                    mismatched=(), accuracies=ACCURACY) -> TrainingResult:
    """A finished run as the lock-step driver records it (``mismatched``: steps whose
    master differs)."""
    recorded = []
    for index, (cycles, golden_s, rtl_s, golden_loss, rtl_loss) in enumerate(steps):
        master = np.full((2, 4), index)
        checks = dict.fromkeys(CHECKS, rtl_loss is not None)
        if index in mismatched:
            checks["master"] = False
        recorded.append(StepResult(
            step=index, batch=np.arange(index, index + 2),
            golden=StepOutcome(golden_loss, [index, -index], master),
            rtl=None if rtl_loss is None else StepOutcome(rtl_loss, [index, -index], master),
            checks=checks, cycles=cycles, golden_s=golden_s, rtl_s=rtl_s))
    return TrainingResult(
        steps=recorded, requested_steps=len(steps) if requested is None else requested,
        design=SimpleNamespace(to_dict=lambda: {"kind": "zo-layer", "rows": 4}),
        settings=SETTINGS, failures=list(failures), simulator="verilator (jobserver)",
        sim_cycles=SIM_CYCLES, stalls={"x": {"idle": 3}}, **accuracies)


def board_report():
    fmax = Fmax(fmax_mhz=FMAX_MHZ, critical_ns=4.0, logic_levels=3, path=["FDRE"],
                limited_by="logic")
    power = Power(frequency_mhz=ESTIMATED_MHZ, toggle_rate=0.2, static_w=STATIC_W,
                  dynamic_w=DYNAMIC_W, breakdown_w={}, static_source="board: a paper's bound")
    return SimpleNamespace(fmax=fmax, power=power)


TRAIN_CONFIG = SimpleNamespace(to_dict=lambda: {"steps": 3, "lr": 0.01})


def expected_numbers(steps=STEPS) -> dict:
    """The summary's numbers, by hand from ``steps``."""
    cycles = sum(s[0] for s in steps) / len(steps)
    rtl_s = sum(s[2] for s in steps)
    seconds = cycles / (FMAX_MHZ * 1e6)
    dynamic_at_fmax = DYNAMIC_W * FMAX_MHZ / ESTIMATED_MHZ
    return {"cycles_per_step": cycles, "seconds_per_step_at_fmax": seconds,
            "dynamic_w_at_fmax": dynamic_at_fmax, "static_w": STATIC_W,
            "static_joules_per_step_at_fmax": STATIC_W * seconds,
            "dynamic_joules_per_step_at_fmax": dynamic_at_fmax * seconds,
            "joules_per_step_at_fmax": (STATIC_W + dynamic_at_fmax) * seconds,
            "pytorch_seconds_per_step": sum(s[1] for s in steps) / len(steps),
            "cosim_steps_per_s": len(steps) / rtl_s, "cosim_cycles_per_s": SIM_CYCLES / rtl_s}


def test_every_summary_number_is_the_value_it_is_computed_from():
    """Three steps of unequal cycles and times, RTL accuracies apart from the golden ones:
    each key of the summary equals its hand derivation (the mean over all three steps, not
    the last or the first two; time at the Fmax, not the report's clock; power times that
    time, the dynamic part scaled by Fmax / 300 MHz)."""
    summary = demo_summary(training_result(), board_report(), True, "zo_layer_top",
                           TRAIN_CONFIG)
    numbers = expected_numbers()
    assert numbers["cycles_per_step"] == pytest.approx(59_600 / 3)
    for key, value in numbers.items():
        assert summary[key] == pytest.approx(value, rel=1e-12), key
    assert summary["fmax_mhz"] == FMAX_MHZ and summary["fmax_source"] == "yosys-estimate"
    assert summary["static_source"] == "board: a paper's bound"
    assert summary["dynamic_source"] == ("activity-model (estimated at 300 MHz, scaled to "
                                         "250 MHz)")
    assert summary["fmax_error"].startswith("model error not measured")
    for key, value in ACCURACY.items():
        assert summary[key] == value, key
    assert summary["loss_golden"] == summary["loss_rtl"] == [0.71, 0.69, 0.66]
    assert (summary["steps"], summary["bit_exact"]) == (3, False)   # RTL accuracies differ
    assert summary["mismatched_steps"] == [] and summary["failures"] == []
    assert summary["stalls"] == {"x": {"idle": 3}} and summary["lint_clean"] is True
    assert summary["design"] == "zo_layer_top"
    assert summary["config"] == {"kind": "zo-layer", "rows": 4}
    assert summary["settings"] == {"eps_shift": 3, "eta_mult": 5, "eta_shift": 7,
                                   "eps": 0.0078125, "lr": 0.01, "gain": 64.0}
    assert summary["train_config"] == {"steps": 3, "lr": 0.01}


def test_a_bit_exact_run_says_so():
    """Equal accuracies on both sides and every step matched: bit_exact True; one step
    whose master differs: False, that step listed."""
    same = {**ACCURACY, "accuracy_before_rtl": 0.5, "accuracy_after_rtl": 0.625}
    exact = demo_summary(training_result(accuracies=same), None, True, "d", TRAIN_CONFIG)
    assert exact["bit_exact"] is True and exact["mismatched_steps"] == []
    off = demo_summary(training_result(accuracies=same, mismatched=(1,)), None, True, "d",
                       TRAIN_CONFIG)
    assert off["bit_exact"] is False and off["mismatched_steps"] == [1]


def test_without_a_board_report_time_and_energy_are_absent():
    summary = demo_summary(training_result(), None, False, "d", TRAIN_CONFIG)
    assert {k: summary[k] for k in COST_KEYS} == dict.fromkeys(COST_KEYS)
    assert summary["cycles_per_step"] == pytest.approx(59_600 / 3)
    assert summary["lint_clean"] is False


def test_a_run_that_broke_off_counts_only_the_steps_it_ran():
    """Two of four steps ran, the second without an RTL outcome (cycles 0): the cycles are
    averaged over those two, the RTL losses list only the RTL's, the failure is kept."""
    steps = [(18_000, 0.004, 0.05, 0.71, 0.70), (0, 0.006, 0.0, 0.69, None)]
    result = training_result(steps, requested=4, failures=["RTL run failed: gone"])
    summary = demo_summary(result, board_report(), True, "d", TRAIN_CONFIG)
    numbers = expected_numbers(steps)
    assert summary["cycles_per_step"] == numbers["cycles_per_step"] == 9_000
    assert summary["seconds_per_step_at_fmax"] == pytest.approx(9_000 / 250e6)
    assert summary["pytorch_seconds_per_step"] == pytest.approx(0.005)
    assert summary["cosim_steps_per_s"] == pytest.approx(2 / 0.05)
    assert summary["loss_rtl"] == [0.70] and summary["loss_golden"] == [0.71, 0.69]
    assert summary["steps"] == 2 and summary["mismatched_steps"] == [1]
    assert summary["failures"] == ["RTL run failed: gone"] and summary["bit_exact"] is False


def test_no_step_run_gives_no_rates():
    summary = demo_summary(training_result([], requested=3), board_report(), True, "d",
                           TRAIN_CONFIG)
    assert summary["cycles_per_step"] == 0.0 and summary["steps"] == 0
    assert summary["pytorch_seconds_per_step"] is None
    assert summary["cosim_steps_per_s"] is None and summary["cosim_cycles_per_s"] is None
    assert summary["seconds_per_step_at_fmax"] == 0.0


def test_the_printed_summary_shows_every_number_in_its_unit(tmp_path):
    """Each printed line, with the numbers formatted here from the hand derivation: us per
    step, uJ per step, W, steps/s, cycles/s, the accuracies and the first and last losses."""
    summary = demo_summary(training_result(failures=["RTL run failed: x"]), board_report(),
                           True, "d", TRAIN_CONFIG)
    n = expected_numbers()
    dynamic_source = "activity-model (estimated at 300 MHz, scaled to 250 MHz)"
    assert summary_lines(summary, tmp_path) == [
        "bit-exact          False: g values and master equal at every one of 3 steps; test "
        "accuracy from the RTL's own outputs 0.688",
        "RTL run failed     RTL run failed: x",
        "loss (RTL/golden)  first 0.7100/0.7100, last 0.6600/0.6600",
        "test accuracy      0.500 -> 0.625",
        f"cycles per step    {59_600 / 3:,.0f} (simulated)",
        f"at Fmax            250 MHz (yosys-estimate; {summary['fmax_error']}): "
        f"{n['seconds_per_step_at_fmax'] * 1e6:.1f} us/step",
        f"energy per step    dynamic {n['dynamic_joules_per_step_at_fmax'] * 1e6:.2f} uJ "
        f"({DYNAMIC_W * 250 / 300:.4f} W, {dynamic_source}); static "
        f"{n['static_joules_per_step_at_fmax'] * 1e6:.2f} uJ (0.590 W, the board's figure: "
        "board: a paper's bound)",
        f"PyTorch, this CPU  {0.018 / 3 * 1e6:.0f} us/step (the golden step, one thread)",
        f"co-simulation      {3 / 0.23:.1f} steps/s, {SIM_CYCLES / 0.23:,.0f} cycles/s (RTL "
        "steps and their host work, one persistent Verilator process)",
        f"files              {tmp_path}/ (summary.json, training.png, design/, report/)"]
    # the same lines, the figures typed in (so a wrong factor cannot hide in both)
    lines = summary_lines(summary, tmp_path)
    assert "19,867 (simulated)" in lines[4] and "79.5 us/step" in lines[5]
    assert "dynamic 5.56 uJ (0.0700 W," in lines[6] and "static 46.89 uJ" in lines[6]
    assert "6000 us/step" in lines[7] and "13.0 steps/s, 261,957 cycles/s" in lines[8]


def test_the_printed_summary_without_a_report_says_n_a(tmp_path):
    summary = demo_summary(training_result(), None, True, "d", TRAIN_CONFIG)
    lines = summary_lines(summary, tmp_path)
    assert lines[4].startswith("at Fmax            n/a MHz") and lines[4].endswith(
        "n/a us/step")
    assert "dynamic n/a uJ (n/a W" in lines[5] and "static n/a uJ (n/a W" in lines[5]
