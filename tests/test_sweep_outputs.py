"""What a sweep writes, pinned on a store filled with known results (no training runs): the
configuration numbers recomputed here from the stored runs, the Pareto fronts with ties and
equal points, the recommendation, and hostile text (names, descriptions, data paths,
errors) through every output: HTML, Markdown, CSV and the plots."""
from __future__ import annotations

import csv
import html
import io
import json
import re
import sqlite3
import statistics

import pytest

from zoforge.boards.registry import get_board
from zoforge.reports.model import (BoardFacts, Fmax, Power, PostRoute, Report, ReportFiles,
                                   Resources)
from zoforge.sweep.outputs import write_outputs
from zoforge.sweep.pareto import pareto_mask, pareto_mask_within
from zoforge.sweep.recommend import commands, summary_lines
from zoforge.sweep.results import group_runs, read_runs
from zoforge.sweep.runner import register_scope
from zoforge.sweep.spec import sweep_from_dict
from zoforge.sweep.store import Owner, Store

HOSTILE = "<script>alert('x')</script> & \"q\" 'a'\n=cmd|pipe\t$x$ \x1b[31m"


def fake_report(lut: int, power_w: float, fmax_mhz: float = 500.0, clock_mhz: float = 300.0,
                *, ff: int | None = None, bram18: int = 0, dsp: int = 0,
                static_w: float = 0.59, post_route: dict | None = None) -> dict:
    """A report's JSON with these figures (core and shift LUTs split 1:3; FF 2 x LUT unless
    given; ``post_route``: nextpnr's ``resources`` and ``fmax_mhz`` dicts)."""
    core = lut // 4
    return Report(
        design="fake", board=BoardFacts.of(get_board("zcu102")), clock_mhz=clock_mhz,
        files=ReportFiles(verilog="fake.v"),
        resources=Resources(total={"LUT": lut, "FF": 2 * lut if ff is None else ff,
                                   "BRAM18": bram18, "DSP": dsp},
                            blocks={"core": {"LUT": core}, "shift": {"LUT": lut - core}}),
        fmax=Fmax(fmax_mhz=fmax_mhz, critical_ns=1000.0 / fmax_mhz, logic_levels=3, path=[],
                  limited_by="logic"),
        power=Power(frequency_mhz=clock_mhz, toggle_rate=0.5, static_w=static_w,
                    dynamic_w=power_w - static_w, breakdown_w={}, static_source="stated by "
                    "the board " + HOSTILE),
        nextpnr=None if post_route is None else PostRoute(
            resources=post_route["resources"], fmax_mhz=post_route["fmax_mhz"],
            constraint_mhz={clock: clock_mhz for clock in post_route["fmax_mhz"]}),
    ).to_json()


def fill_store(folder, data: dict, train, hardware, scope: str | None = None) -> Store:
    """A store holding the sweep ``data`` with every task finished: ``train(point)`` gives a
    training's (accuracy_after, final_loss), its whole result (a dict) or an error text,
    ``hardware(point)`` a report's (LUT, power W[, Fmax MHz]), its whole JSON (a dict) or an
    error text."""
    sweep = sweep_from_dict(data)
    store = Store(folder)
    register_scope(store, scope or sweep.name, sweep, sweep.points)
    owner = Owner.here()
    by_key = {}
    for point in sweep.points:
        by_key[point.train_key] = ("train", point)
        if point.hw_key:
            by_key[point.hw_key] = ("report", point)
    for task in store.claim(scope or sweep.name, 10_000, owner, 600):
        kind, point = by_key[task.key]
        outcome = train(point) if kind == "train" else hardware(point)
        if isinstance(outcome, str):
            store.fail(task.key, owner, outcome, "Traceback: " + outcome)
        elif isinstance(outcome, dict):
            store.finish(task.key, owner, outcome, 1.0)
        elif kind == "train":
            accuracy, loss = outcome
            store.finish(task.key, owner, {
                "accuracy_before": 0.5, "accuracy_after": accuracy, "test_loss_before": 0.7,
                "test_loss_after": 0.6, "final_loss": loss, "steps": 10, "steps_per_s": 100.0,
                "d": 66, "chance_accuracy": 0.5}, 1.0)
        else:
            store.finish(task.key, owner, fake_report(*outcome), 1.0)
    return store


# Three seeds with distinct accuracies per configuration: a mean over the first seed only,
# or an sd over the wrong runs, gives other numbers.
ACCURACY = {(6, 0): 0.50, (6, 1): 0.62, (6, 2): 0.59, (8, 0): 0.70, (8, 1): 0.64,
            (8, 2): 0.73, (10, 0): 0.71, (10, 1): 0.69, (10, 2): 0.66}
COST = {6: (60, 0.597), 8: (86, 0.598), 10: (120, 0.601)}
NUMBERS = {"name": "numbers",
           "train": {"model": "tiny", "perturbation": "pezo-onthefly", "n_rng": 7,
                     "steps": 10},
           "grid": {"bits": [6, 8, 10], "seed": [0, 1, 2]}}


def _numbers_store(folder) -> Store:
    return fill_store(
        folder, NUMBERS,
        lambda p: (ACCURACY[p.train.bits, p.train.seed], 1.0 - ACCURACY[p.train.bits,
                                                                         p.train.seed]),
        lambda p: COST[p.generator.bits])


def _stored_accuracies(folder) -> dict[int, list[float]]:
    """bits -> the stored runs' accuracies, read from the database directly."""
    db = sqlite3.connect(folder / "sweep.db")
    try:
        rows = db.execute("SELECT spec, result FROM tasks WHERE kind = 'train'").fetchall()
    finally:
        db.close()
    out: dict[int, list[float]] = {}
    for spec, result in rows:
        out.setdefault(json.loads(spec)["bits"], []).append(
            json.loads(result)["accuracy_after"])
    return out


def test_configuration_numbers_are_the_stored_runs(tmp_path):
    store = _numbers_store(tmp_path)
    paths = write_outputs(store, "numbers", tmp_path / "out", plots=False)
    stored = _stored_accuracies(tmp_path)
    rows = list(csv.DictReader(io.StringIO(paths["csv"].read_text())))
    configurations = {int(r["bits"]): r for r in rows if r["row"] == "configuration"}
    assert sorted(configurations) == [6, 8, 10]
    markdown = paths["markdown"].read_text()
    page = paths["html"].read_text()
    for bits, values in stored.items():
        row = configurations[bits]
        assert len(values) == 3 and int(row["n"]) == 3
        assert float(row["accuracy_mean"]) == pytest.approx(statistics.fmean(values))
        assert float(row["accuracy_sd"]) == pytest.approx(statistics.stdev(values))
        assert float(row["final_loss_mean"]) == pytest.approx(
            statistics.fmean(1.0 - v for v in values))
        assert int(row["LUT"]) == COST[bits][0] and row["LUT_source"] == "yosys-estimate"
        assert int(row["LUT_core"]) + int(row["LUT_shift"]) == COST[bits][0]
        assert float(row["power_w"]) == pytest.approx(COST[bits][1])
        assert float(row["static_w"]) == pytest.approx(0.59)
        assert row["static_w_source"] == "board-stated"
        # the Markdown shows the same mean ± sd
        cell = f"{statistics.fmean(values):.3g} ± {statistics.stdev(values):.3f}"
        assert re.search(rf"\| {bits} \| 3 \| {re.escape(cell)} \|", markdown), cell
        assert f"<td>{bits}</td><td>3</td><td>{cell}</td>" in page, cell   # and the page
    runs = [r for r in rows if r["row"] == "run"]
    assert sorted(float(r["accuracy_after"]) for r in runs) == sorted(ACCURACY.values())
    assert all(configurations[int(r["bits"])]["configuration"] == r["configuration"]
               for r in runs)


def test_fronts_of_the_means_and_under_noise(tmp_path):
    store = _numbers_store(tmp_path)
    groups = {g.config["bits"]: g for g in group_runs(read_runs(store, "numbers"))}
    # means: 6 bits 0.570, 8 bits 0.690, 10 bits 0.687 (more LUT, less accurate: dominated)
    assert [groups[b].front for b in (6, 8, 10)] == [True, True, False]
    # under noise too: 10 bits costs more in LUTs (exact) and is no more accurate
    assert [groups[b].front_noise for b in (6, 8, 10)] == [True, True, False]


@pytest.mark.parametrize("points, expected", [
    ([(1, 1), (1, 2)], [True, False]),            # ties in one objective, worse in the other
    ([(1, 2), (1, 1)], [False, True]),
    ([(1, 1), (1, 1)], [True, True]),             # equal points both stay
    ([(1, 1, 1), (1, 1, 2), (2, 1, 1)], [True, False, False]),
    ([(0, 3), (1, 2), (2, 1), (1, 3), (2, 2)], [True, True, True, False, False]),
    ([(1, 2), (2, 1)], [True, True]),
])
def test_pareto_mask_with_ties_and_equal_points(points, expected):
    assert pareto_mask(points) == expected
    assert pareto_mask_within(points, lambda i, j, k: 0.0) == expected


def test_front_under_noise_keeps_what_only_noise_removed():
    points = [(-0.75, 100), (-0.74, 100), (-0.70, 100), (-0.76, 200)]
    tolerance = (lambda i, j, k: 0.02 if k == 0 else 0.0)
    # same cost: 0.74 is within 0.02 of 0.75 (kept under noise), 0.70 is not
    assert pareto_mask(points) == [True, False, False, True]
    assert pareto_mask_within(points, tolerance) == [True, True, False, True]


def test_a_difference_within_the_seeds_spread_does_not_decide(tmp_path):
    # equal hardware; bits 8 is 0.01 below bits 6 with sd 0.02 over 3 seeds (within noise),
    # bits 10 is 0.2 below (beyond it)
    accuracy = {6: [0.70, 0.72, 0.68], 8: [0.69, 0.71, 0.67], 10: [0.50, 0.51, 0.49]}
    store = fill_store(tmp_path, NUMBERS, lambda p: (accuracy[p.train.bits][p.train.seed], 0.5),
                       lambda p: (60, 0.597))
    groups = {g.config["bits"]: g for g in group_runs(read_runs(store, "numbers"))}
    assert [groups[b].front for b in (6, 8, 10)] == [True, False, False]
    assert [groups[b].front_noise for b in (6, 8, 10)] == [True, True, False]


def test_front_marks_equal_results_and_drops_a_tie_that_is_worse(tmp_path):
    # bits 6 and 8 cost the same; 8 is less accurate: dominated (a tie in LUT and power
    # does not keep it); 10 equals 6 in every objective: both stay
    accuracy = {6: 0.7, 8: 0.6, 10: 0.7}
    store = fill_store(tmp_path, {**NUMBERS, "grid": {"bits": [6, 8, 10], "seed": [0]}},
                       lambda p: (accuracy[p.train.bits], 0.5), lambda p: (60, 0.597))
    groups = {g.config["bits"]: g for g in group_runs(read_runs(store, "numbers"))}
    assert [groups[b].front for b in (6, 8, 10)] == [True, False, True]
    assert [groups[b].front_noise for b in (6, 8, 10)] == [True, False, True]


def test_the_recommendation_opens_every_output(tmp_path):
    store = _numbers_store(tmp_path)
    paths = write_outputs(store, "numbers", tmp_path / "out", plots=False,
                          budget={"LUT": 100})
    recommendation = paths.recommendation
    assert recommendation.best.group.config["bits"] == 8         # the most accurate <= 100
    assert [g.config["bits"] for g in recommendation.front] == [6, 8]
    assert recommendation.knee.group.config["bits"] in (6, 8)
    generate, build = commands(recommendation.best.group)
    assert generate.startswith("zoforge generate rng ") and "--bits 8" in generate
    assert "--n-rng 7" in generate and "--clock-mhz 300" in build
    markdown = paths["markdown"].read_text()
    page = paths["html"].read_text()
    assert markdown.index("## What to build") < markdown.index("## Configurations")
    assert "best within the budget" in markdown and generate in markdown
    assert page.index("What to build") < page.index("<table>") < page.index("Plots (ours)")
    assert html.escape(generate) in page
    nothing = write_outputs(store, "numbers", tmp_path / "out2", plots=False,
                            budget={"LUT": 10}).recommendation
    assert nothing.best is None and "no configuration fits" in nothing.unmet


def test_a_clock_above_the_fmax_is_flagged_everywhere(tmp_path):
    store = fill_store(tmp_path, {**NUMBERS, "grid": {"bits": [6, 8], "seed": [0]}},
                       lambda p: (0.6, 0.5),
                       lambda p: (60, 0.6, 225.0) if p.generator.bits == 8 else (50, 0.6))
    paths = write_outputs(store, "numbers", tmp_path / "out")
    rows = list(csv.DictReader(io.StringIO(paths["csv"].read_text())))
    flagged = {int(r["bits"]): r for r in rows if r["row"] == "configuration"}
    assert flagged[8]["over_clock"] == "True" and flagged[6]["over_clock"] == "False"
    # power at 225 MHz: 0.59 static + 0.01 dynamic * 225 / 300
    assert float(flagged[8]["power_at_fmax_w"]) == pytest.approx(0.59 + 0.01 * 0.75)
    assert "Fmax 225 MHz below the 300 MHz clock" in paths["markdown"].read_text()
    assert "Fmax 225 MHz below the 300 MHz clock" in paths["html"].read_text()


def _hostile_store(folder) -> Store:
    data = {"name": "evil" + HOSTILE, "description": HOSTILE, "paper": HOSTILE,
            "train": {"model": "tiny", "perturbation": "pezo-onthefly", "n_rng": 7,
                      "steps": 10},
            "points": [{"data": "=cmd|' /C calc'!A0" + HOSTILE, "bits": 6},
                       {"data": "@SUM(1+1)" + HOSTILE, "bits": 8},
                       {"data": "-2+3" + HOSTILE, "bits": 10}],
            "grid": {"seed": [0, 1]}}
    return fill_store(folder, data,
                      lambda p: ("ValueError: " + HOSTILE if p.train.bits == 10
                                 else (0.6 + p.train.seed / 100, 0.5)),
                      lambda p: (60 + p.generator.bits, 0.6), scope="evil" + HOSTILE)


def test_hostile_text_is_escaped_in_every_output(tmp_path):
    store = _hostile_store(tmp_path)
    paths = write_outputs(store, "evil" + HOSTILE, tmp_path / "out")
    page = paths["html"].read_text()
    markdown = paths["markdown"].read_text()
    table = paths["csv"].read_text()
    for text in (page, markdown, table):     # no raw control character but line ends
        assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f]", text)
    assert "<script" not in page and "<script" not in markdown
    # HTML: no tag but ours, every hostile character as an entity
    tags = set(re.findall(r"<([a-zA-Z][a-zA-Z0-9]*)", page))
    assert tags <= {"html", "head", "meta", "link", "title", "style", "body", "h1", "h2",
                    "p", "div", "strong", "span", "pre", "ul", "li", "table", "thead",
                    "tbody", "tr", "th", "td", "figure", "img", "figcaption", "code"}
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; &quot;q&quot;" in page
    assert "ValueError: &lt;script&gt;" in page                  # the failed task's error
    # Markdown: no raw HTML, every table row has as many cells as its header
    assert "&lt;script&gt;" in markdown and "<" not in markdown.replace("<=", "")
    for block in re.findall(r"((?:^\|.*\|$\n?)+)", markdown, flags=re.M):
        lines = block.strip().splitlines()
        widths = {len(re.split(r"(?<!\\)\|", line)) for line in lines}
        assert len(widths) == 1, lines
    # CSV: parses to one record per line; no cell starts like a formula
    records = list(csv.reader(io.StringIO(table)))
    assert len(records) == table.count("\n")
    for record in records:
        for cell in record:
            assert not cell.startswith(("=", "+", "@", "\t", "\r")), cell
            assert not cell.startswith("-") or re.fullmatch(r"-[0-9.e+-]+", cell), cell
    assert any(cell.startswith("'=cmd") for record in records for cell in record)
    assert any(cell.startswith("'@SUM") for record in records for cell in record)
    assert any(cell.startswith("'-2+3") for record in records for cell in record)
    assert paths["plots"].is_dir()       # the plots drew the hostile labels ($ is no math)
    summary = summary_lines(paths.recommendation)     # the terminal's: printable lines
    assert summary and all(line.isprintable() for line in summary)
    assert any("=cmd" in line or "@SUM" in line for line in summary)


def test_the_command_line_prints_hostile_names_as_text(tmp_path, capsys):
    import tomli_w

    from zoforge.cli import main

    def sweep_config(name: str, data: str) -> list[str]:
        config = tmp_path / "SWEEP.toml"
        config.write_text(tomli_w.dumps({
            "name": name, "description": "<script>alert(1)</script> =cmd",
            "train": {"model": "tiny", "steps": 2, "n_train": 8, "n_val": 4, "n_test": 4,
                      "batch": 2, "data": str(tmp_path / data)}}))
        return ["sweep", "--config", str(config), "--store", str(tmp_path / "s"), "--jobs", "1"]

    # control characters never get past the configuration: one line, shown escaped
    assert main(sweep_config("evil\x1b[2J<b>", "missing\x1b[31m<i>.csv")) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert "\x1b" not in captured.err and "\\x1b[" in captured.err
    # markup does: the training fails (no data), and every output shows it as text
    assert main(sweep_config("evil<b>", "missing<i>.csv")) == 1
    page = next((tmp_path / "s").glob("*.html")).read_text()
    assert "<b>" not in page and "&lt;b&gt;" in page and "<script>" not in page
    assert "missing&lt;i&gt;.csv" in page                         # the error, escaped
