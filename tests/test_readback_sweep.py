"""Every number of a sweep's outputs read back: each column of the CSV, each cell of the
Markdown and HTML tables and the recommendation, compared with the value it is computed
from, derived here by a second route (plain loops over the made-up results stored below).

The store holds five configurations (``bits`` 6..10) whose accuracies put the noise test at
its corners: two means exactly twice their standard error apart (on the front under noise:
the gap must *exceed* twice the error), a gap between one and two standard errors (kept),
one between two and three (dropped), and a configuration whose post-route LUT count (not
its estimate) decides whether it is dominated. Every value is a binary fraction, so the
threshold cases are exact in floating point."""
from __future__ import annotations

import csv
import io
import math
from html.parser import HTMLParser

import pytest

from test_sweep_outputs import fake_report, fill_store
from zoforge.sweep.outputs import write_outputs
from zoforge.sweep.recommend import recommend, summary_lines
from zoforge.sweep.results import accuracy_tolerance, group_runs, read_runs

SCOPE = "readback"
PERTURBATION = "pezo-onthefly"
CLOCK_MHZ = 275.0
STATIC_W = 0.59
#: bits -> the accuracy after training of each seed. 6: mean 1/2, sd exactly 1/8 over 4
#: seeds (standard error 1/16); 7: one seed exactly 2 standard errors below 6; 8: mean
#: 9/32 (2.47 standard errors of the pair below 6); 9: mean 3/4, sd 1/8; 10: one seed 3/32
#: below 9 (1.5 standard errors).
SEEDS = {6: [0.6875, 0.4375, 0.4375, 0.4375], 7: [0.375],
         8: [0.46875, 0.21875, 0.21875, 0.21875], 9: [0.9375, 0.6875, 0.6875, 0.6875],
         10: [0.65625]}
#: bits -> the report's figures. 6, 7, 8 cost the same (LUT, total power); so do 9 and 10
#: after place and route (9's estimate, 210 LUT, would leave 10 cheaper and undominated);
#: 10's Fmax is below the 275 MHz clock, 8's exactly at it (not over).
HW = {6: dict(lut=100, ff=150, bram18=1, dsp=2, power_w=0.60, fmax=410.0),
      7: dict(lut=100, ff=160, bram18=3, dsp=4, power_w=0.60, fmax=420.0),
      8: dict(lut=100, ff=170, bram18=5, dsp=6, power_w=0.60, fmax=CLOCK_MHZ),
      9: dict(lut=210, ff=180, bram18=7, dsp=8, power_w=0.62, fmax=380.0,
              post_route={"resources": {"LUT": 200, "FF": 190, "BRAM18": 9, "DSP": 10},
                          "fmax_mhz": {"clk": 350.0}}),
      10: dict(lut=200, ff=200, bram18=11, dsp=12, power_w=0.62, fmax=250.0)}
#: The fronts these give, worked out by hand (the loops below must agree).
FRONT = {6: True, 7: False, 8: False, 9: True, 10: False}
FRONT_NOISE = {6: True, 7: True, 8: False, 9: True, 10: True}

DATA = {"name": SCOPE, "report": {"clock_mhz": CLOCK_MHZ},
        "train": {"model": "tiny", "perturbation": PERTURBATION, "n_rng": 7, "steps": 10},
        "points": [{"bits": bits, "seed": seed} for bits, accuracies in SEEDS.items()
                   for seed in range(len(accuracies))]}


def train_result(bits: int, seed: int) -> dict:
    """A training's stored result: every field distinct across runs and columns."""
    accuracy = SEEDS[bits][seed]
    return {"accuracy_before": 0.5 + bits / 128 + seed / 1024, "accuracy_after": accuracy,
            "test_loss_before": 0.7, "test_loss_after": 0.6,
            "final_loss": 1.0 - accuracy + seed / 64, "steps": 10,
            "steps_per_s": 100.0 + 10 * bits + seed, "d": 60 + bits + seed,
            "chance_accuracy": 0.5}


def report_json(bits: int) -> dict:
    hw = HW[bits]
    return fake_report(hw["lut"], hw["power_w"], hw["fmax"], CLOCK_MHZ, ff=hw["ff"],
                       bram18=hw["bram18"], dsp=hw["dsp"], static_w=STATIC_W,
                       post_route=hw.get("post_route"))


@pytest.fixture
def store(tmp_path):
    store = fill_store(tmp_path / "store", DATA,
                       lambda p: train_result(p.train.bits, p.train.seed),
                       lambda p: report_json(p.generator.bits))
    yield store
    store.close()


# -- the expected values, by a second route ----------------------------------------------------

def mean(values):
    return sum(values) / len(values) if values else None


def sd(values):
    """The sample standard deviation (n - 1), None for fewer than two values."""
    if len(values) < 2:
        return None
    m = mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def hardware(bits: int) -> dict[str, tuple[float, str]]:
    """Column -> (value, source label) as documented: a post-route figure before the
    estimate; static power from the board's statement; dynamic power the activity model's."""
    hw, route = HW[bits], HW[bits].get("post_route")
    estimate, routed = "yosys-estimate", "nextpnr"
    core = hw["lut"] // 4
    out = {"LUT": (route["resources"]["LUT"], routed) if route else (hw["lut"], estimate),
           "LUT_core": (core, estimate), "LUT_shift": (hw["lut"] - core, estimate)}
    for column in ("FF", "BRAM18", "DSP"):
        out[column] = ((route["resources"][column], routed) if route
                       else (hw[column.lower()], estimate))
    dynamic = hw["power_w"] - STATIC_W          # how fake_report splits the total
    out["power_w"] = (STATIC_W + dynamic, "activity-model")
    out["static_w"] = (STATIC_W, "board-stated")
    out["dynamic_w"] = (dynamic, "activity-model")
    out["fmax_mhz"] = ((route["fmax_mhz"]["clk"], routed) if route
                       else (hw["fmax"], estimate))
    return out


def over_clock(bits: int) -> bool:
    return hardware(bits)["fmax_mhz"][0] < CLOCK_MHZ


def power_at_fmax(bits: int) -> float | None:
    """Static power plus the dynamic power scaled by Fmax / clock, when over the clock."""
    if not over_clock(bits):
        return None
    hw = hardware(bits)
    return hw["static_w"][0] + hw["dynamic_w"][0] * hw["fmax_mhz"][0] / CLOCK_MHZ


def losses(bits: int) -> list[float]:
    return [train_result(bits, seed)["final_loss"] for seed in range(len(SEEDS[bits]))]


def fronts(accuracies: dict, lut: dict, power: dict, noise: bool) -> dict[int, bool]:
    """The front by a plain loop over bits -> seed accuracies, LUTs, watts: a configuration
    is dominated by another no worse in mean accuracy, LUTs and power and better in one;
    under noise an accuracy counts as better only when the gap exceeds
    2 * sqrt(sd_a^2/n_a + sd_b^2/n_b) (a single seed adds 0)."""
    def tolerance(a: int, b: int) -> float:
        return 2 * math.sqrt(sum((sd(accuracies[g]) or 0.0) ** 2 / len(accuracies[g])
                                 for g in (a, b)))

    def dominates(a: int, b: int) -> bool:
        acc_a, acc_b = mean(accuracies[a]), mean(accuracies[b])
        if not (acc_a >= acc_b and lut[a] <= lut[b] and power[a] <= power[b]):
            return False
        gap = tolerance(a, b) if noise else 0.0
        return acc_a - acc_b > gap or lut[a] < lut[b] or power[a] < power[b]
    return {b: not any(dominates(a, b) for a in accuracies if a != b) for b in accuracies}


def store_fronts(noise: bool) -> dict[int, bool]:
    """:func:`fronts` of the main store's configurations."""
    return fronts(SEEDS, {b: hardware(b)["LUT"][0] for b in SEEDS},
                  {b: hardware(b)["power_w"][0] for b in SEEDS}, noise)


def test_the_hand_worked_fronts_agree_with_the_loop():
    """The literal fronts above are what the definition gives (and the threshold cases are
    exact: bits 7 sits exactly 2 standard errors below bits 6, bits 10 1.5 below bits 9)."""
    assert store_fronts(noise=False) == FRONT and store_fronts(noise=True) == FRONT_NOISE
    assert mean(SEEDS[6]) - mean(SEEDS[7]) == 2 * sd(SEEDS[6]) / math.sqrt(4) == 0.125
    assert mean(SEEDS[9]) - mean(SEEDS[10]) == 1.5 * sd(SEEDS[9]) / 2


# -- the fronts ---------------------------------------------------------------------------------

def test_fronts_and_tolerances_at_the_noise_thresholds(store):
    """Group.front / front_noise of every configuration equal the loop's; the tolerance
    of each pair equals 2 * sqrt(sd_a^2/n_a + sd_b^2/n_b): exactly 1/8 for 6 vs 7 (one
    seed), 2 * sqrt(2) / 16 for 6 vs 8."""
    groups = {g.config["bits"]: g for g in group_runs(read_runs(store, SCOPE))}
    assert {b: g.front for b, g in groups.items()} == store_fronts(noise=False)
    assert {b: g.front_noise for b, g in groups.items()} == store_fronts(noise=True)
    assert accuracy_tolerance(groups[6], groups[7]) == 0.125
    assert accuracy_tolerance(groups[7], groups[10]) == 0.0
    assert accuracy_tolerance(groups[6], groups[8]) == pytest.approx(2 * math.sqrt(2) / 16)
    for bits, group in groups.items():
        assert group.n == len(SEEDS[bits])
        assert group.accuracy == mean(SEEDS[bits])
        assert group.accuracy_sd == sd(SEEDS[bits])


# -- the CSV -----------------------------------------------------------------------------------

HARDWARE_COLUMNS = ("LUT", "LUT_core", "LUT_shift", "FF", "BRAM18", "DSP", "power_w",
                    "static_w", "dynamic_w", "fmax_mhz")
CSV_HEADER = (["row", "configuration", "index", "perturbation", "bits", "seed", "status",
               "n", "accuracy_mean", "accuracy_sd", "final_loss_mean", "final_loss_sd",
               "front", "front_noise", "accuracy_before", "accuracy_after", "final_loss",
               "steps_per_s", "d"]
              + [name for c in HARDWARE_COLUMNS for name in (c, f"{c}_source")]
              + ["clock_mhz", "over_clock", "power_at_fmax_w", "train_key", "hw_key",
                 "error"])


def csv_value(text: str, like):
    """A CSV cell as the type of ``like`` (empty: None)."""
    if text == "":
        return None
    if isinstance(like, bool):
        return {"True": True, "False": False}[text]
    return type(like)(text) if isinstance(like, (int, float)) else text


def assert_row(row: dict, expected: dict) -> None:
    """Every column of ``row`` (a CSV record) equals ``expected`` (None: empty)."""
    assert list(row) == CSV_HEADER
    for column in CSV_HEADER:
        want = expected.get(column)
        got = csv_value(row[column], want)
        if isinstance(want, float):
            assert got == pytest.approx(want, rel=1e-12, abs=0), (column, row[column], want)
        else:
            assert got == want, (column, row[column], want)


def hardware_columns(bits: int) -> dict:
    out = {}
    for column, (value, label) in hardware(bits).items():
        out[column], out[f"{column}_source"] = value, label
    return out


def test_every_csv_column_is_the_value_it_is_computed_from(store, tmp_path):
    """One ``configuration`` row per configuration (mean, sd and n over its seeds, both
    fronts, its hardware with sources, clock, over-clock flag, power at Fmax) and one
    ``run`` row per point (its stored training fields, its configuration's number and
    hardware, its task keys), every column compared: a swapped, shifted or stale column
    fails."""
    paths = write_outputs(store, SCOPE, tmp_path / "out", plots=False)
    rows = list(csv.DictReader(io.StringIO(paths["csv"].read_text())))
    assert len(rows) == len(SEEDS) + sum(len(v) for v in SEEDS.values())
    number = {bits: n for n, bits in enumerate(SEEDS)}
    configurations = [r for r in rows if r["row"] == "configuration"]
    assert [int(r["bits"]) for r in configurations] == list(SEEDS)
    for row in configurations:
        bits = int(row["bits"])
        assert_row(row, {
            "row": "configuration", "configuration": number[bits], "perturbation": PERTURBATION,
            "bits": bits, "status": "done", "n": len(SEEDS[bits]),
            "accuracy_mean": mean(SEEDS[bits]), "accuracy_sd": sd(SEEDS[bits]),
            "final_loss_mean": mean(losses(bits)), "final_loss_sd": sd(losses(bits)),
            "front": FRONT[bits], "front_noise": FRONT_NOISE[bits], **hardware_columns(bits),
            "clock_mhz": CLOCK_MHZ, "over_clock": over_clock(bits),
            "power_at_fmax_w": power_at_fmax(bits)})
    keys = {(p["swept"]["bits"], p["swept"]["seed"]): p for p in store.points(SCOPE)}
    runs = [r for r in rows if r["row"] == "run"]
    assert [(int(r["bits"]), int(r["seed"])) for r in runs] == list(keys)
    for index, row in enumerate(runs):
        bits, seed = int(row["bits"]), int(row["seed"])
        result = train_result(bits, seed)
        assert_row(row, {
            "row": "run", "configuration": number[bits], "index": index,
            "perturbation": PERTURBATION, "bits": bits, "seed": seed, "status": "done",
            **{c: result[c] for c in ("accuracy_before", "accuracy_after", "final_loss",
                                      "steps_per_s", "d")},
            **hardware_columns(bits), "clock_mhz": CLOCK_MHZ, "over_clock": over_clock(bits),
            "power_at_fmax_w": power_at_fmax(bits), "train_key": keys[bits, seed]["train_key"],
            "hw_key": keys[bits, seed]["hw_key"]})


# -- the Markdown and HTML tables ---------------------------------------------------------------

TITLES = {"LUT": "LUT", "LUT_core": "LUT core", "LUT_shift": "LUT shift", "FF": "FF",
          "BRAM18": "BRAM18", "DSP": "DSP", "power_w": "power W",
          "static_w": "static power W", "dynamic_w": "dynamic power W",
          "fmax_mhz": "fmax MHz"}
#: Columns whose values come from more than one source (a label beside each value).
MIXED = {"LUT", "FF", "BRAM18", "DSP", "fmax_mhz"}
AT_FMAX = "power at Fmax W (activity-model, scaled)"


def cell(value) -> str:
    """A number as the tables print it: 3 significant digits, integers with separators."""
    if value is None:
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def hardware_header() -> list[str]:
    return [TITLES[c] if c in MIXED else f"{TITLES[c]} ({hardware(6)[c][1]})"
            for c in HARDWARE_COLUMNS]


def hardware_cells(bits: int) -> list[str]:
    return [cell(value) + (f" [{label}]" if column in MIXED else "")
            for column, (value, label) in hardware(bits).items()]


def timing_cells(bits: int) -> list[str]:
    flag = (f"Fmax {hardware(bits)['fmax_mhz'][0]:.0f} MHz below the {CLOCK_MHZ:g} MHz "
            "clock" if over_clock(bits) else "ok")
    return [flag, cell(power_at_fmax(bits))]


def mean_sd(values) -> str:
    s = sd(values)
    return cell(mean(values)) + ("" if s is None else f" ± {s:.3f}")


def expected_tables() -> list[tuple[list[str], list[list[str]]]]:
    configurations = (
        ["perturbation", "bits", "seeds", "accuracy after", "final loss", *hardware_header(),
         "timing", AT_FMAX, "front", "front (noise)"],
        [[PERTURBATION, str(bits), str(len(SEEDS[bits])), mean_sd(SEEDS[bits]),
          mean_sd(losses(bits)), *hardware_cells(bits), *timing_cells(bits),
          "*" if FRONT[bits] else "", "*" if FRONT_NOISE[bits] else ""] for bits in SEEDS])
    runs_header = ["#", "perturbation", "bits", "seed", "status", "accuracy_before",
                   "accuracy_after", "final_loss", "steps_per_s", "d", *hardware_header(),
                   "timing", AT_FMAX]
    runs, index = [], 0
    for bits, accuracies in SEEDS.items():
        for seed in range(len(accuracies)):
            result = train_result(bits, seed)
            runs.append([str(index), PERTURBATION, str(bits), str(seed), "done"]
                        + [cell(result[c]) for c in ("accuracy_before", "accuracy_after",
                                                     "final_loss", "steps_per_s", "d")]
                        + hardware_cells(bits) + timing_cells(bits))
            index += 1
    return [configurations, (runs_header, runs)]


def markdown_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Each Markdown table as (header, rows), cells unescaped (``\\|`` and entities)."""
    tables, block = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            block.append(line)
        elif block:
            parsed = [[c.strip().replace("\\|", "|").replace("&lt;", "<").replace(
                "&gt;", ">").replace("&amp;", "&") for c in row[2:-2].split(" | ")]
                for row in block]
            tables.append((parsed[0], parsed[2:]))
            block = []
    return tables


class _Tables(HTMLParser):
    """Every <table> of a page as (header, rows) of unescaped text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tables, self._row, self._cell = [], None, None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append(([], []))
        elif tag == "tr":
            self._row = []
        elif tag in ("th", "td"):
            self._cell = ""

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data

    def handle_endtag(self, tag):
        if tag in ("th", "td"):
            self._row.append(self._cell)
            self._cell = None
        elif tag == "tr":
            header, rows = self.tables[-1]
            if not header:
                header.extend(self._row)
            else:
                rows.append(self._row)


def test_markdown_and_html_tables_show_every_value(store, tmp_path):
    """The configurations table (mean ± sd over seeds, hardware with its source label,
    the clock flag and the power at Fmax, both fronts' stars) and the runs table, cell by
    cell, in the Markdown and on the page."""
    paths = write_outputs(store, SCOPE, tmp_path / "out", plots=False)
    expected = expected_tables()
    assert markdown_tables(paths["markdown"].read_text()) == expected
    parser = _Tables()
    parser.feed(paths["html"].read_text())
    assert parser.tables == expected


# -- the recommendation ------------------------------------------------------------------------

#: bits -> (seed accuracies, LUT, watts, or the report's error): 6 the most accurate (mean
#: 1/2, standard error 1/16); 7 exactly two standard errors below it and cheaper; 8 the
#: cheapest; 9 as 8 but more power (dominated by power alone); 10 a little above 8 for 2
#: more LUTs (the knee); 11 within noise of 6 but dominated by its LUTs (and outside the
#: front's LUT range); 12's report failed (no cost: on no front, in no pick); 13 costs as
#: much as 6 and is 1.5 standard errors below it (on the front under noise only).
PICKS = {6: ([0.6875, 0.4375, 0.4375, 0.4375], 100, 0.6), 7: ([0.375], 90, 0.6),
         8: ([0.25], 60, 0.6), 9: ([0.25], 60, 0.7), 10: ([0.3125], 62, 0.6),
         11: ([0.45], 150, 0.6), 12: ([0.4], "RuntimeError: yosys crashed"),
         13: ([0.40625], 100, 0.6)}
PICK_FRONT = {6: True, 7: True, 8: True, 9: False, 10: True, 11: False, 13: False}
PICK_FRONT_NOISE = {**PICK_FRONT, 13: True}


@pytest.fixture
def pick_store(tmp_path):
    data = {"name": "picks", "train": DATA["train"], "report": DATA["report"],
            "points": [{"bits": b, "seed": s} for b, (accs, *_) in PICKS.items()
                       for s in range(len(accs))]}

    def report(point):
        _, *cost = PICKS[point.generator.bits]
        return cost[0] if len(cost) == 1 else fake_report(cost[0], cost[1], 400.0, CLOCK_MHZ)
    store = fill_store(tmp_path / "picks", data,
                       lambda p: (PICKS[p.train.bits][0][p.train.seed], 0.5), report)
    yield store
    store.close()


def pick_fronts(noise: bool) -> dict[int, bool]:
    costed = {b: v for b, v in PICKS.items() if len(v) == 3}
    return fronts({b: v[0] for b, v in costed.items()}, {b: v[1] for b, v in costed.items()},
                  {b: v[2] for b, v in costed.items()}, noise)


def knee(bits_on_front: list[int]) -> int:
    """The front point nearest the ideal one, each objective scaled to [0, 1] over the
    front (the front's power is all equal: it scales to 0)."""
    assert len({PICKS[b][2] for b in bits_on_front}) == 1
    accuracy = {b: mean(PICKS[b][0]) for b in bits_on_front}
    lut = {b: PICKS[b][1] for b in bits_on_front}

    def scaled(values: dict, b: int, best_is_high: bool) -> float:
        lo, hi = min(values.values()), max(values.values())
        return ((hi - values[b]) if best_is_high else (values[b] - lo)) / (hi - lo)
    return min(bits_on_front, key=lambda b: math.hypot(scaled(accuracy, b, True),
                                                       scaled(lut, b, False)))


def test_the_picks_at_their_thresholds(pick_store):
    """No budget: the most accurate is 6, and 7, exactly at the noise tolerance below it
    (within noise: the gap must exceed it) and the cheapest of those within noise, is the
    pick. A LUT budget equal to 7's count admits 7 (limits are inclusive). The fronts and
    the knee are the loops'; the front is listed cheapest first."""
    groups = group_runs(read_runs(pick_store, "picks"))
    by_bits = {g.config["bits"]: g for g in groups}
    assert pick_fronts(noise=False) == PICK_FRONT
    assert pick_fronts(noise=True) == PICK_FRONT_NOISE
    assert {b: g.front for b, g in by_bits.items()} == {**PICK_FRONT, 12: False}
    assert {b: g.front_noise for b, g in by_bits.items()} == {**PICK_FRONT_NOISE, 12: False}
    plain = recommend(groups)
    assert plain.best.group is by_bits[7] and plain.best.role == "most accurate"
    assert "bits=6 has a higher mean (0.500) but within noise" in plain.best.why
    assert [g.config["bits"] for g in plain.front] == [8, 10, 7, 6, 13]   # under noise
    assert knee([8, 10, 7, 6, 13]) == 10 and plain.knee.group is by_bits[10]
    assert [repeated for _, repeated in plain.picks()] == [False, False]
    budget = recommend(groups, {"LUT": 90.0})
    assert budget.best.group is by_bits[7] and budget.unmet == ""
    assert budget.best.role == "best within the budget"
    tight = recommend(groups, {"LUT": 59.0})
    assert tight.best is None and tight.unmet == "no configuration fits the budget LUT ≤ 59"
    lines = summary_lines(plain)
    assert lines[0] == ("most accurate: bits=7: accuracy 0.375 (1 seeds), 90 LUT, 0.6 W "
                        "(0.59 W static + 0.01 W dynamic)")
    assert lines[-1] == "front under noise: bits=8; bits=10; bits=7; bits=6; bits=13"


def test_a_failed_report_leaves_its_columns_empty(pick_store, tmp_path):
    """A configuration whose report failed: status failed, no hardware, no clock flag, on no
    front, its error beside its run; its accuracy still counted."""
    paths = write_outputs(pick_store, "picks", tmp_path / "out", plots=False)
    rows = [r for r in csv.DictReader(io.StringIO(paths["csv"].read_text()))
            if r["bits"] == "12"]
    configuration, run = rows
    assert configuration["row"] == "configuration" and run["row"] == "run"
    for row in rows:
        assert row["status"] == "failed" and row["over_clock"] == ""
        assert all(row[c] == row[f"{c}_source"] == "" for c in HARDWARE_COLUMNS)
        assert row["power_at_fmax_w"] == ""
    assert (configuration["n"], configuration["accuracy_mean"]) == ("1", "0.4")
    assert configuration["front"] == configuration["front_noise"] == "False"
    assert run["accuracy_after"] == "0.4" and run["error"] == PICKS[12][1]
    assert run["clock_mhz"] == configuration["clock_mhz"] == str(CLOCK_MHZ)
