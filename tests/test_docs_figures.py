"""The docs' measured figures held against their recorded sources (``docs/figures.json``).

``benchmarks/record_doc_figures.py`` runs the commands the docs name (the demo, the ZO
layer's build, ``bench_zolayer_busy.py``, ``bench_zolayer.py``, ``bench_engine.py``) and
records what they measured, with the commit. Here the docs' tables are parsed and every
measured figure in them must be the recorded one (as the doc rounds it), and every derived
column is worked out again by hand from the recorded numbers (floors, ratios, errors,
utilizations, time and energy per step), and the cycle model's columns are the model's
prediction now. A figure re-measured without its doc, or a doc edited without measuring,
fails here. Re-measure with ``python benchmarks/record_doc_figures.py --only PART``; the
slow test below checks that the record is still what the code gives.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from zoforge.golden.zolayer import layer_config
from zoforge.hw.zolayer.cycles import step_cycles

DOCS = Path(__file__).resolve().parent.parent / "docs"
RECORD = json.loads((DOCS / "figures.json").read_text())


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def table_after(doc: str, marker: str) -> list[list[str]]:
    """The rows (header and separator left out) of the first Markdown table after the
    first line of ``doc`` holding ``marker``."""
    lines = (DOCS / doc).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if marker in line)
    first = next(i for i in range(start, len(lines)) if lines[i].startswith("|"))
    rows = []
    for line in lines[first + 2:]:
        if not line.startswith("|"):
            break
        rows.append(_cells(line))
    return rows


def number(text: str) -> float:
    """The first number in ``text``: thousands separators (``,`` or a space) and bold
    markers dropped."""
    match = re.search(r"[-+]?\d[\d, ]*(?:\.\d+)?", text.replace("**", ""))
    assert match, f"no number in {text!r}"
    return float(re.sub(r"[, ]", "", match.group()))


def rounds_to(shown: float, value: float, decimals: int) -> bool:
    """Whether the doc's ``shown`` is ``value`` rounded to ``decimals`` places."""
    return math.isclose(shown, round(value, decimals), abs_tol=10 ** -(decimals + 3))


# -- docs/demo.md ----------------------------------------------------------------------------

def _demo_rows() -> dict[str, str]:
    return {row[0]: row[1] for row in table_after("demo.md", "## Measured")}


def test_demo_cycles_per_step_and_accuracy_are_the_recorded_run():
    """demo.md's cycles per step (rounded to a cycle), test accuracies (3 places), losses
    at the first and last step (3 places) are the recorded demo run's."""
    demo, rows = RECORD["demo"], _demo_rows()
    assert number(rows["cycles per step"]) == round(demo["cycles_per_step"])
    before, after = re.findall(r"\d\.\d+", rows["test accuracy"])[:2]
    assert float(before) == round(demo["accuracy_before"], 3)
    assert float(after) == round(demo["accuracy_after"], 3)
    first, last = re.findall(r"(\d\.\d+) at step", rows["training loss (RTL = golden)"])
    assert float(first) == round(demo["loss_first"], 3)
    assert float(last) == round(demo["loss_last"], 3)
    assert f"all {demo['steps']} steps" in rows["bit-exact"]


def test_demo_board_report_is_the_recorded_run():
    """The board-report row's LUT, FF, BRAM18, DSP and Fmax (MHz) are the run's report; its
    dynamic power at 300 MHz is the report's (3 places)."""
    demo, text = RECORD["demo"], _demo_rows()["board report (zcu102)"]
    for name in ("LUT", "FF", "BRAM18", "DSP"):
        shown = re.search(rf"([\d,]+) {name}\b", text)
        assert shown and number(shown.group(1)) == demo["resources"][name], name
    assert number(re.search(r"Fmax (\d+) MHz", text).group(1)) == round(demo["fmax_mhz"])
    dynamic = re.search(r"dynamic power ([\d.]+) W at 300 MHz", text).group(1)
    assert float(dynamic) == round(demo["dynamic_w"], 3)


def test_demo_time_and_energy_per_step_follow_from_cycles_fmax_and_power():
    """Time per step = cycles / Fmax (µs, 1 place); dynamic energy = the dynamic power at
    Fmax x time, static = static power x time (µJ, 1 place), their sum; each also the
    recorded run's."""
    demo, text = RECORD["demo"], _demo_rows()["at that Fmax, power at the same clock"]
    seconds = demo["cycles_per_step"] / (demo["fmax_mhz"] * 1e6)
    assert seconds == pytest.approx(demo["seconds_per_step_at_fmax"], rel=1e-9)
    dynamic_j = demo["dynamic_w_at_fmax"] * seconds
    static_j = demo["static_w"] * seconds
    assert dynamic_j == pytest.approx(demo["dynamic_joules_per_step_at_fmax"], rel=1e-9)
    assert static_j == pytest.approx(demo["static_joules_per_step_at_fmax"], rel=1e-9)
    shown = re.search(r"([\d.]+) µs per step; energy ([\d.]+) µJ dynamic \(([\d.]+) W at "
                      r"(\d+) MHz\) \+ ([\d.]+) µJ static = ([\d.]+) µJ", text)
    assert shown, text
    us, dyn, dyn_w, mhz, static, total = (float(v) for v in shown.groups())
    assert rounds_to(us, seconds * 1e6, 1)
    assert rounds_to(dyn, dynamic_j * 1e6, 1)
    assert rounds_to(dyn_w, demo["dynamic_w_at_fmax"], 3)
    assert mhz == round(demo["fmax_mhz"])
    assert rounds_to(static, static_j * 1e6, 1)
    assert rounds_to(total, (dynamic_j + static_j) * 1e6, 1)


def test_demo_host_speeds_are_the_recorded_run():
    """The PyTorch step (ms, 1 place) and the co-simulation's steps/s (1 place) and
    simulated cycles/s (millions, 2 places) are the recorded run's."""
    demo, rows = RECORD["demo"], _demo_rows()
    ms = number(rows["the golden step in PyTorch, one CPU thread"])
    assert rounds_to(ms, demo["pytorch_seconds_per_step"] * 1e3, 1)
    steps, cycles = re.search(r"([\d.]+) training steps/s, ([\d.]+)M simulated cycles/s",
                              rows["co-simulation"]).groups()
    assert rounds_to(float(steps), demo["cosim_steps_per_s"], 1)
    assert rounds_to(float(cycles), demo["cosim_cycles_per_s"] / 1e6, 2)


# -- docs/zo-layer.md: resources -----------------------------------------------------------

def test_zo_layer_resources_now_are_the_builds():
    """The resources table's ``now`` row: LUT, FF, CARRY, BRAM18, DSP48E2 of ``zoforge
    build --board zcu102 --design zo-layer --no-power`` and its Fmax (MHz, and the
    critical path in ns to 2 places)."""
    build = RECORD["build"]
    assert build["command"] == "zoforge build --board zcu102 --design zo-layer --no-power"
    rows = table_after("zo-layer.md", "zoforge build --board zcu102 --design zo-layer")
    (now,) = [row for row in rows if row[0].startswith("now")]
    lut, ff, carry, bram, dsp, fmax = now[1:]
    total = build["total"]
    assert [number(v) for v in (lut, ff, carry, bram, dsp)] == [
        total["LUT"], total["FF"], total["CARRY"], total["BRAM18"], total["DSP"]]
    assert number(fmax) == round(build["fmax_mhz"])
    assert float(re.search(r"\(([\d.]+) ns", fmax).group(1)) == round(build["critical_ns"], 2)


def test_zo_layer_per_block_resources_are_the_builds():
    """The per-block paragraph under the table: each block's LUT / FF (/ DSP where shown)
    is the build's, and every block of the build is named."""
    text = (DOCS / "zo-layer.md").read_text()
    paragraph = text[text.index("Per block now"):text.index("Per block after")]
    shown = {name: values for name, *values in re.findall(
        r"`(\w+)`(?:\s+\([^)]*\))?\s+([\d,]+) / ([\d,]+)(?: / (\d+))?", paragraph)}
    top = re.search(r"top\s+\([^)]*\)\s+([\d,]+) / ([\d,]+)", paragraph)
    blocks = RECORD["build"]["blocks"]
    assert set(shown) | {"(top)"} == set(blocks)
    for name, (lut, ff, dsp) in {**shown, "(top)": (*top.groups(), "")}.items():
        assert number(lut) == blocks[name]["LUT"], name
        assert number(ff) == blocks[name]["FF"], name
        if dsp:
            assert int(dsp) == blocks[name]["DSP"], name


# -- docs/zo-layer.md: cycle tables --------------------------------------------------------

def test_zo_layer_busy_table_is_the_recorded_bench():
    """"Keeping the array busy": every case's measured P-RGE and sequential cycles are the
    recorded ones, the model columns are ``step_cycles`` now, the floor is 2q·M·K_t·N /
    (R·C) (K_t = r for LoRA-FA, K for full), x floor = cycles / floor, the speed-up =
    the previous array's cycles / these, the errors (model - measured) / measured."""
    rows = table_after("zo-layer.md", "`python benchmarks/bench_zolayer_busy.py` (")
    recorded = RECORD["busy"]["rows"]
    assert len(rows) == len(recorded)
    previous = None
    for row, rec in zip(rows, recorded):
        mode, m, k, n, r, q, array, b = row[:8]
        assert mode.split()[0] == rec["mode"]
        assert [int(v) for v in (m, k, n, q)] == [rec[x] for x in ("m", "k", "n", "q")]
        assert (0 if r == "-" else int(r)) == rec["r"]
        assert array == f"{rec['array']}x{rec['array']}" and int(b) == rec["branch_lanes"]
        cycles, floor, x_floor, speed_up, model, error, seq, seq_model, seq_error = (
            row[8:])
        assert number(cycles) == rec["cycles_per_step"], row
        assert number(seq) == rec["sequential_cycles_per_step"], row
        size, k_t = rec["array"], rec["r"] if rec["mode"] == "lora-fa" else rec["k"]
        by_hand = 2 * rec["q"] * rec["m"] * k_t * rec["n"] / (size * size)
        assert number(floor) == by_hand
        assert rounds_to(number(x_floor), rec["cycles_per_step"] / by_hand, 2)
        if previous is None or previous["array"] > size:
            assert speed_up == "-"
        else:
            assert rounds_to(number(speed_up),
                             previous["cycles_per_step"] / rec["cycles_per_step"], 2)
        previous = rec
        config = layer_config("onthefly", rows=size, cols=size, mode=rec["mode"],
                              max_m=rec["m"], max_k=rec["k"], max_n=rec["n"],
                              max_r=max(rec["r"], size), branch_lanes=rec["branch_lanes"])
        args = (config, rec["m"], rec["k"], rec["n"], rec["r"], rec["q"])
        for shown, shown_error, measured, sequential in (
                (model, error, rec["cycles_per_step"], False),
                (seq_model, seq_error, rec["sequential_cycles_per_step"], True)):
            predicted = step_cycles(*args, sequential=sequential)
            assert number(shown) == predicted, row
            assert rounds_to(number(shown_error), 100 * (predicted - measured) / measured, 2)


def test_zo_layer_measured_table_is_the_recorded_bench():
    """"Measured": per case the recorded P-RGE and sequential cycles, branch and plain
    branch cycles and PE utilization (1 place, %); ratio = sequential / P-RGE, predicted
    ratio and model from ``step_cycles`` now, error = model / measured - 1."""
    rows = table_after("zo-layer.md", "`python benchmarks/bench_zolayer.py` (")
    recorded = RECORD["zolayer"]["rows"]
    assert len(rows) == len(recorded)
    for row, rec in zip(rows, recorded):
        m, k, n, r, q = (int(v) for v in row[:5])
        assert (m, k, n, r, q) == tuple(rec[x] for x in ("m", "k", "n", "r", "q"))
        prge, seq, ratio, predicted_ratio, model, error, util, branch, plain = row[5:]
        assert number(prge) == rec["cycles_per_step"]
        assert number(seq) == rec["sequential_cycles_per_step"]
        assert number(branch) == rec["branch_cycles"]
        assert number(plain) == rec["plain_branch_cycles"]
        assert rounds_to(number(util), 100 * rec["pe_utilization"], 1)
        assert rounds_to(number(ratio), rec["sequential_cycles_per_step"]
                         / rec["cycles_per_step"], 2)
        config = layer_config("onthefly", rows=4, cols=4, mode="lora-fa", max_m=m, max_k=k,
                              max_n=n, max_r=max(r, 4))
        predicted = step_cycles(config, m, k, n, r, q)
        assert number(model) == predicted
        assert rounds_to(number(predicted_ratio),
                         step_cycles(config, m, k, n, r, q, sequential=True) / predicted, 2)
        assert rounds_to(number(error), 100 * (predicted / rec["cycles_per_step"] - 1), 2)


# -- docs/engine.md ------------------------------------------------------------------------

def test_engine_utilization_table_is_the_recorded_bench():
    """The engine's measured table: cycles are the recorded 8 x 8 jobs', ideal =
    ⌈M·K·N / 64⌉, PE utilization = ideal / cycles (1 place, %)."""
    rows = table_after("engine.md", "benchmarks/bench_engine.py --speed-size 128")
    recorded = RECORD["engine"]["rows"]
    assert len(rows) == len(recorded) == 3
    for (size, cycles, ideal, util), rec in zip(rows, recorded):
        assert number(size) == rec["m"] == rec["k"] == rec["n"]
        assert number(cycles) == rec["cycles"]
        by_hand = -(-rec["m"] * rec["k"] * rec["n"] // 64)
        assert number(ideal) == by_hand
        assert rounds_to(number(util), 100 * by_hand / rec["cycles"], 1)


def test_every_record_names_its_command_and_commit():
    """Each recorded part says which command measured it, at which commit and when."""
    assert set(RECORD) == {"demo", "build", "busy", "zolayer", "engine"}
    for part, figures in RECORD.items():
        assert figures["command"] and figures["commit"] and figures["date"], part


def _recorder():
    import importlib.util
    path = DOCS.parent / "benchmarks" / "record_doc_figures.py"
    spec = importlib.util.spec_from_file_location("record_doc_figures", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_engine_record_is_what_the_engine_does_now():
    """Re-measured (a minute): the engine's recorded cycles are what its RTL gives now."""
    assert _recorder().engine()["rows"] == RECORD["engine"]["rows"]


@pytest.mark.slow
def test_the_build_record_is_what_the_build_gives_now():
    """Re-built (minutes without the synthesis cache): the zo-layer build's recorded
    resources, per block, and Fmax are what ``zoforge build`` reports now."""
    now = _recorder().build(None)
    for key in ("command", "source", "total", "blocks", "fmax_mhz", "critical_ns"):
        assert now[key] == RECORD["build"][key], key
