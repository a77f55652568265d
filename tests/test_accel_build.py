"""`zoforge build` of a design made of replicated units (reports/compose.py,
reports/pipeline.build_design): composed from one build of each distinct unit on a Xilinx
board, count x unit, with the design's margins; the whole top on an ECP5 board.

Every expected figure is derived here by a second route: the units' counts by hand (an
N-bit accumulator is N flip-flops), the units' own builds run separately, the margins from
the data sheets' capacities typed in below.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import ClassVar

import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.boards.registry import get_board
from zoforge.cli import main
from zoforge.config import Config, IntRange, dump_config, load_config, param
from zoforge.hw.accel.config import AcceleratorConfig
from zoforge.hw.accel.plan import MARGINS, RESOURCE_SOURCE
from zoforge.hw.accel.top import accelerator_units
from zoforge.hw.designs import Design, Elaborated, Unit, Units, get_design, registered_designs
from zoforge.reports.compose import UnitReport, compose, margins_of
from zoforge.reports.model import (ACTIVITY, LABELS, PER_UNIT, YOSYS, BoardFacts, Fmax, Power,
                                   Report, ReportFiles, Resources, SwitchingActivity,
                                   per_unit)
from zoforge.reports.pipeline import Progress, build_design, build_report
from zoforge.reports.render import render_markdown, summary_lines

# the data sheets' capacities (XCZU9EG: DS891; LFE5U-85F: the ECP5 family data sheet)
ZCU102 = {"LUT": 274_080, "FF": 548_160, "BRAM18": 1_824, "DSP": 2_520}
ULX3S = {"LUT": 83_640, "FF": 83_640}
PLANNER = {"DSP": 0.80, "BRAM18": 0.80, "LUT": 0.70, "FF": 0.70}   # docs/accelerator.md


# -- a tiny design made of units: two 8-bit accumulators and one 6-bit shift register ----

class Acc(wiring.Component):
    """acc <= acc + a every cycle: ``width`` flip-flops."""

    def __init__(self, width):
        super().__init__({"a": In(width), "acc": Out(width)})

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.acc.eq(self.acc + self.a)
        return m


class Shift(wiring.Component):
    """A ``width``-bit shift register: ``width`` flip-flops, no logic."""

    def __init__(self, width):
        super().__init__({"d": In(1), "q": Out(width)})

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.q.eq((self.q << 1) | self.d)
        return m


@dataclass(frozen=True)
class AccConfig(Config):
    kind: ClassVar[str] = "compose-acc"
    width: int = param(8, "width", IntRange(2, 32))


@dataclass(frozen=True)
class ShiftConfig(Config):
    kind: ClassVar[str] = "compose-shift"
    width: int = param(6, "width", IntRange(2, 32))


@dataclass(frozen=True)
class PairConfig(Config):
    kind: ClassVar[str] = "compose-pair"
    accs: int = param(2, "accumulators", IntRange(1, 4))


class Pair(wiring.Component):
    """``accs`` accumulators and one shift register, ports passed through."""

    def __init__(self, accs):
        self.accs = [Acc(8) for _ in range(accs)]
        self.shifter = Shift(6)
        super().__init__({"acc": Out(self.accs[0].signature).array(accs),
                          "shift": Out(self.shifter.signature)})

    def elaborate(self, platform):
        m = Module()
        for index, (port, unit) in enumerate(zip(self.acc, self.accs)):
            m.submodules[f"acc_{index}"] = unit
            wiring.connect(m, wiring.flipped(port), unit)
        m.submodules.shift = self.shifter
        wiring.connect(m, wiring.flipped(self.shift), self.shifter)
        return m


def pair_units(config: PairConfig) -> Units:
    # the shift register listed twice: one build, the counts added
    return Units((Unit("compose-acc", AccConfig(8), config.accs),
                  Unit("compose-shift", ShiftConfig(6), 1),
                  Unit("compose-shift", ShiftConfig(6), 0)), margins=PLANNER)


DESIGNS = (
    Design("compose-acc", "test unit", configs=(AccConfig,),
           elaborate=lambda c: Elaborated(Acc(c.width), f"acc{c.width}", c)),
    Design("compose-shift", "test unit", configs=(ShiftConfig,),
           elaborate=lambda c: Elaborated(Shift(c.width), f"shift{c.width}", c)),
    Design("compose-pair", "test design made of units", configs=(PairConfig,),
           elaborate=lambda c: Elaborated(Pair(c.accs), f"pair{c.accs}", c,
                                          blocks={"shift": "shift register"}),
           units=pair_units),
)


@pytest.fixture(autouse=True, scope="module")
def _designs():
    with registered_designs(*DESIGNS):
        yield


QUIET = Progress(quiet=True)
NO_POWER = dict(measure_power=False, run_pnr=False)


@pytest.fixture(scope="module")
def composed(tmp_path_factory):
    """The tiny design composed on zcu102, and its units built alone elsewhere."""
    board = get_board("zcu102")
    out = tmp_path_factory.mktemp("composed")
    report = build_design(board, get_design("compose-pair"), PairConfig(accs=2), out, 300.0,
                          progress=QUIET, **NO_POWER)
    alone = {name: build_report(board, get_design(name).elaborate(config),
                                tmp_path_factory.mktemp(name), 300.0, progress=QUIET,
                                **NO_POWER)
             for name, config in (("compose-acc", AccConfig(8)),
                                  ("compose-shift", ShiftConfig(6)))}
    return report, alone, out


@pytest.mark.slow        # the composed build (~15 CPU-s): CI's -m ci runs it
@pytest.mark.ci
def test_composed_resources_are_count_times_each_units_own_build(composed):
    report, alone, out = composed
    acc, shift = alone["compose-acc"].resources.total, alone["compose-shift"].resources.total
    assert acc["FF"] == 8 and shift["FF"] == 6                # by hand: one FF per bit
    total = report.resources.total
    for key in ("LUT", "FF", "CARRY", "BRAM18", "DSP"):
        assert total[key] == 2 * acc.get(key, 0) + shift.get(key, 0), key
    assert total["FF"] == 2 * 8 + 6
    assert report.resources.blocks["2 x acc8"]["FF"] == 16
    assert report.resources.blocks["1 x shift6"]["FF"] == 6
    assert set(report.resources.blocks["(top)"].values()) == {0}     # pass-through top
    assert report.resources.percent["FF"] == pytest.approx(100 * 22 / ZCU102["FF"])
    assert [(u.name, u.count) for u in report.composition.units] == [("acc8", 2),
                                                                       ("shift6", 1)]
    # each unit's own report on disk, the whole top's Verilog and Vivado project
    for unit in report.composition.units:
        assert json.loads((out / unit.folder / "report.json").read_text())["design"] \
            == unit.name
    assert (out / "pair2.v").exists() and "vivado/top.tcl" in report.files.vivado


@pytest.mark.slow        # the composed build (~15 CPU-s): CI's -m ci runs it
@pytest.mark.ci
def test_composed_fmax_is_the_slowest_units_and_every_figure_is_labelled(composed):
    report, alone, _ = composed
    slowest = min(alone.values(), key=lambda r: r.fmax.fmax_mhz)
    assert report.fmax.fmax_mhz == slowest.fmax.fmax_mhz
    assert report.fmax.fmax_mhz < max(r.fmax.fmax_mhz for r in alone.values())
    assert report.fmax.source == YOSYS and report.fmax.error is not None
    assert slowest.design in report.fmax.method
    assert report.resources.source == "yosys-estimate (per unit x count)"
    for figure in report.figures():
        assert figure.source.removesuffix(" " + PER_UNIT) in LABELS, figure
    markdown = render_markdown(report)
    assert "## Composition (per unit x count)" in markdown
    assert "Every resource within its margin" in markdown
    lines = "\n".join(summary_lines(report))
    assert "resources (yosys-estimate (per unit x count))" in lines
    assert "FF 22 / 548,160 = 0.0 % (<= 70 %)" in lines
    again = Report.from_json(json.loads(json.dumps(report.to_json(), default=str)))
    assert again.composition == report.composition


@pytest.mark.slow        # the composed build (~15 CPU-s): CI's -m ci runs it
@pytest.mark.ci
def test_composed_margins_by_hand(composed):
    report = composed[0]
    margins = report.composition.margins
    assert set(margins) == set(PLANNER)
    for key, share in PLANNER.items():
        margin = margins[key]
        assert margin.available == ZCU102[key]
        assert margin.used == report.resources.total[key]
        assert margin.margin_pct == 100 * share
    assert margins["LUT"].budget == 191_856       # 274,080 x 0.7
    assert margins["DSP"].budget == 2_016         # 2,520 x 0.8
    assert report.composition.over == []


def test_margins_flag_a_resource_over_its_budget_at_the_boundary():
    board = get_board("ulx3s-85f")
    budget = ULX3S["LUT"] * 7 // 10                 # 58,548 (0.7 x 83,640 in floats: 58,547)
    at = margins_of(board, {"LUT": budget, "FF": 0}, {"LUT": 0.7, "FF": 0.7, "URAM": 0.5})
    assert at["LUT"].budget == 58_548 and not at["LUT"].over
    assert "URAM" not in at                         # the device has none
    over = margins_of(board, {"LUT": budget + 1}, {"LUT": 0.7})
    assert over["LUT"].over and over["LUT"].percent == pytest.approx(
        100 * 58_549 / 83_640)


def _unit_report(name, total, fmax_mhz, dynamic_w, rate, nets, breakdown):
    board = BoardFacts.of(get_board("zcu102"))
    return Report(
        design=name, board=board, clock_mhz=300.0, files=ReportFiles(verilog=f"{name}.v"),
        resources=Resources(total=total, blocks={}, cells={"LUT6": total["LUT"]}),
        fmax=Fmax(fmax_mhz=fmax_mhz, critical_ns=1000 / fmax_mhz, logic_levels=3, path=[],
                  limited_by="logic"),
        activity=SwitchingActivity(toggle_rate=rate, cycles=100, nets=nets),
        power=Power(frequency_mhz=300.0, toggle_rate=rate, static_w=0.59, dynamic_w=dynamic_w,
                    breakdown_w=breakdown, static_source="the board's"))


def test_compose_power_and_over_margin_by_hand():
    engine = _unit_report("e", {"LUT": 60_000, "FF": 1, "DSP": 300, "BRAM18": 10}, 250.0,
                          0.5, 0.2, 1_000, {"logic": 0.3, "clock": 0.2})
    layer = _unit_report("l", {"LUT": 12_000, "FF": 2, "DSP": 40, "BRAM18": 25}, 240.0,
                         0.25, 0.1, 3_000, {"logic": 0.25})
    sections = compose(get_board("zcu102"), [UnitReport(engine, "engine", 3, "units/e"),
                                             UnitReport(layer, "zo-layer", 1, "units/l")],
                       PLANNER)
    power = sections["power"]
    assert power.dynamic_w == pytest.approx(3 * 0.5 + 0.25)
    assert power.static_w == 0.59                                 # once, not x 4
    assert power.breakdown_w == pytest.approx({"logic": 3 * 0.3 + 0.25, "clock": 3 * 0.2})
    assert power.toggle_rate == pytest.approx((3 * 1_000 * 0.2 + 3_000 * 0.1) / 6_000)
    assert power.source == per_unit(ACTIVITY) == "activity-model (per unit x count)"
    assert sections["fmax"].fmax_mhz == 240.0 and "l" in sections["fmax"].method
    assert sections["resources"].total["LUT"] == 192_000
    assert sections["resources"].cells == {"LUT6": 192_000}
    composition = sections["composition"]
    assert composition.over == ["LUT"]                # 192,000 > 191,856
    assert composition.margins["LUT"].over and not composition.margins["DSP"].over
    assert "**over its margin**" in "\n".join(
        render_markdown(Report(design="top", board=engine.board, clock_mhz=300.0,
                               files=ReportFiles(verilog="top.v"), **sections)).splitlines())


def test_an_ecp5_board_builds_the_whole_top(tmp_path):
    report = build_design(get_board("ulx3s-85f"), get_design("compose-pair"),
                          PairConfig(accs=1), tmp_path, 100.0, progress=QUIET, **NO_POWER)
    assert report.composition is None and report.design == "pair1"
    assert not (tmp_path / "units").exists()


def test_the_accelerator_declares_its_units_and_the_planners_margins():
    config = AcceleratorConfig(engines=3, engine_rows=8, engine_cols=8, layers=2)
    units = accelerator_units(config)
    assert [(u.design, u.config, u.count) for u in units.units] == [
        ("engine", config.engine_config(), 3), ("zo-layer", config.layer_config(), 2)]
    assert units.margins == MARGINS == PLANNER
    assert get_design("accelerator").units is accelerator_units
    assert RESOURCE_SOURCE == per_unit(YOSYS)                  # one label, two layers
    softmax = accelerator_units(config.replace(softmax_units=2)).units[-1]
    assert (softmax.design, softmax.count, softmax.domain) == ("softmax", 2, "softmax")
    assert {u.domain for u in units.units} == {"sync"}


def test_a_unit_on_a_clock_of_its_own_sets_only_that_clock():
    """The design's Fmax is the lowest unit's in ``sync``; a slower unit in a domain of its
    own is named beside it, and each unit's domain is in the composition."""
    engine = _unit_report("e", {"LUT": 1, "FF": 1, "DSP": 1, "BRAM18": 1}, 280.0,
                          0.5, 0.2, 1_000, {"logic": 0.3})
    layer = _unit_report("l", {"LUT": 1, "FF": 1, "DSP": 1, "BRAM18": 1}, 290.0,
                         0.5, 0.2, 1_000, {"logic": 0.3})
    softmax = _unit_report("s", {"LUT": 1, "FF": 1, "DSP": 1, "BRAM18": 1}, 259.0,
                           0.5, 0.2, 1_000, {"logic": 0.3})
    units = [UnitReport(engine, "engine", 8, "units/e"), UnitReport(layer, "zo-layer", 1, "u/l"),
             UnitReport(softmax, "softmax", 3, "units/s", "softmax")]
    sections = compose(get_board("zcu102"), units, PLANNER)
    fmax = sections["fmax"]
    assert fmax.fmax_mhz == 280.0 and fmax.method.startswith("the lowest of the units' "
                                                             "estimates: e (")
    assert fmax.method.endswith("; the softmax domain, a clock of its own: s 259 MHz")
    assert [u.domain for u in sections["composition"].units] == ["sync", "sync", "softmax"]
    alone = compose(get_board("zcu102"), units[2:], PLANNER)["fmax"]   # no sync unit
    assert alone.fmax_mhz == 259.0 and "a clock of its own" not in alone.method
    text = render_markdown(Report(design="top", board=engine.board, clock_mhz=300.0,
                                  files=ReportFiles(verilog="top.v"), **sections))
    assert "| clock |" in text and "| softmax |" in text


@pytest.mark.slow
@pytest.mark.ci
def test_accelerator_build_is_two_engines_plus_a_layer_from_their_own_builds(tmp_path):
    """2 engines 4 x 4 (paired) + 1 ZO layer 4 x 4 on zcu102: the report's resources are
    2 x the engine's + the layer's, each from `zoforge build --design engine/zo-layer`."""
    common = ["--board", "zcu102", "--no-power", "--quiet"]
    assert main(["build", "--design", "accelerator", "--engines", "2", "--engine-rows", "4",
                 "--engine-cols", "4", "--out", str(tmp_path / "accel"), *common]) == 0
    report = Report.read(tmp_path / "accel" / "report.json")
    config = load_config(tmp_path / "accel" / "design.toml", [AcceleratorConfig])
    assert (config.engines, config.engine_rows, config.layers) == (2, 4, 1)
    for name, unit in (("engine", config.engine_config()), ("layer", config.layer_config())):
        dump_config(unit, tmp_path / f"{name}.toml")       # the unit alone, as a user builds it
        assert main(["build", "--config", str(tmp_path / f"{name}.toml"), "--out",
                     str(tmp_path / name), *common]) == 0
    alone_engine = Report.read(tmp_path / "engine" / "report.json")
    alone_layer = Report.read(tmp_path / "layer" / "report.json")
    for key in ("LUT", "FF", "CARRY", "BRAM18", "DSP"):
        assert report.resources.total[key] == (2 * alone_engine.resources.total[key]
                                               + alone_layer.resources.total[key]), key
    assert report.resources.total["DSP"] == config.dsp       # the config's own count
    assert report.fmax.fmax_mhz == min(alone_engine.fmax.fmax_mhz, alone_layer.fmax.fmax_mhz)
    assert report.resources.source == "yosys-estimate (per unit x count)"
    assert report.fmax.source == "yosys-estimate" and report.fmax.error is not None
    for key, share in PLANNER.items():
        margin = report.composition.margins[key]
        used = report.resources.total[key]
        assert (margin.used, margin.available) == (used, ZCU102[key])
        assert margin.budget == ZCU102[key] * round(share * 100) // 100
        assert margin.over == (used * 100 > ZCU102[key] * round(share * 100))
    assert (tmp_path / "accel" / "vivado" / "top.tcl").exists()


def test_a_unit_of_two_clocks_bounds_each_by_its_own_paths():
    """A unit with two clocks (a link: ``clk`` 349.3, ``softmax_clk`` 318.7, its whole
    netlist 318.7) beside an engine at 355.9 and a layer at 349.3 in ``sync`` and a softmax
    unit at 249 in ``softmax``: the design's clock is the layer's 349.3 (the link's ``clk``
    paths 349.34 are above it, its crossing-mixed 318.7 not a sync figure); the softmax
    domain's the unit's 249 (the link's softmax_clk paths are faster); the link's clk paths
    named when they are the lowest."""
    def unit(name, mhz, by_clock=None):
        report = _unit_report(name, {"LUT": 1, "FF": 1, "DSP": 1, "BRAM18": 1}, mhz, 0.5,
                              0.2, 1_000, {"logic": 0.3})
        return replace(report, fmax=replace(report.fmax, by_clock=by_clock or {}))
    link = unit("k", 318.7, {"clk": 349.34, "softmax_clk": 318.7})
    units = [UnitReport(unit("e", 355.9), "engine", 6, "u/e"),
             UnitReport(unit("l", 349.3), "zo-layer", 1, "u/l"),
             UnitReport(unit("s", 249.0), "softmax", 2, "u/s", "softmax"),
             UnitReport(link, "link", 6, "u/k")]
    fmax = compose(get_board("zcu102"), units, PLANNER)["fmax"]
    assert fmax.fmax_mhz == 349.3 and "estimates: l (" in fmax.method
    assert fmax.method.endswith("; the softmax domain, a clock of its own: s 249 MHz")
    slow = [units[0], UnitReport(replace(link, fmax=replace(link.fmax, by_clock={
        "clk": 300.0, "softmax_clk": 318.7})), "link", 6, "u/k")]
    fmax = compose(get_board("zcu102"), slow, PLANNER)["fmax"]
    assert fmax.fmax_mhz == 300.0 and "estimates: k (its clk paths)" in fmax.method
    assert fmax.by_clock == {}
    assert fmax.method.endswith("; the softmax domain, a clock of its own: k 319 MHz")
