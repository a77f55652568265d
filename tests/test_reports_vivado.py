"""Vivado report parsers, on report files in Vivado's text format (tests/data/vivado)."""
from pathlib import Path

import pytest

from zoforge.errors import ConfigError
from zoforge.reports.vivado import (parse_hierarchical_utilization, parse_power,
                                    parse_timing_summary, parse_utilization,
                                    read_vivado_reports, tables)

DATA = Path(__file__).parent / "data" / "vivado"


def test_utilization_reads_used_column_by_name():
    got = parse_utilization((DATA / "top_utilization_place.rpt").read_text())
    # RAMB36 counts as two BRAM18 equivalents; the "Prohibited" column must not shift values
    assert got == {"LUT": 45, "LUTRAM": 4, "FF": 466, "CARRY": 3, "BRAM18": 2 * 4 + 1,
                   "DSP": 2, "URAM": 0}


def test_hierarchical_utilization_keeps_instance_paths():
    got = parse_hierarchical_utilization(
        (DATA / "top_utilization_hierarchical_place.rpt").read_text())
    assert list(got) == ["top", "top/dut", "top/dut/core", "top/dut/shift"]
    assert got["top/dut/core"] == {"LUT": 30, "FF": 434, "BRAM18": 1, "DSP": 0, "URAM": 0,
                                   "LUTRAM": 0}
    assert got["top/dut/shift"]["BRAM18"] == 8


def test_timing_summary_gives_fmax_from_period_and_wns():
    got = parse_timing_summary((DATA / "top_timing.rpt").read_text())
    assert got["wns_ns"] == 0.229 and got["tns_ns"] == 0.0 and got["whs_ns"] == 0.031
    assert got["clock"] == "clk_user" and got["period_ns"] == 1.429
    assert got["met"] is True
    assert got["fmax_mhz"] == pytest.approx(1000 / (1.429 - 0.229))


def test_timing_summary_with_negative_slack_is_not_met():
    text = (DATA / "top_timing.rpt").read_text()
    text = text.replace("      0.229        0.000   ", "     -0.412      -12.345   ", 1)
    text = text.replace("All user specified timing constraints are met.",
                        "Timing constraints are not met.")
    got = parse_timing_summary(text)
    assert got["wns_ns"] == -0.412 and got["met"] is False
    assert got["fmax_mhz"] == pytest.approx(1000 / (1.429 + 0.412))


def test_power_summary_components_and_saif_match():
    got = parse_power((DATA / "top_power.rpt").read_text())
    assert got["total_w"] == 0.611 and got["dynamic_w"] == 0.020 and got["static_w"] == 0.591
    assert got["components_w"]["Block RAM"] == 0.005
    assert got["components_w"]["LUT as Logic"] == 0.001          # "<0.001" reads as its bound
    assert got["nets_matched"] == [420, 461]
    assert got["activity_file"] == "activity.saif"


def test_read_vivado_reports_picks_post_place_files(tmp_path):
    for path in DATA.glob("*.rpt"):
        (tmp_path / path.name).write_text(path.read_text())
    synth = (DATA / "top_utilization_place.rpt").read_text().replace("|  466 |", "|  999 |")
    (tmp_path / "top_utilization_synth.rpt").write_text(synth)
    reports = read_vivado_reports(tmp_path)
    assert reports.files["utilization"] == "top_utilization_place.rpt"
    assert reports.utilization["FF"] == 466
    assert reports.source == "vivado"


@pytest.mark.parametrize("parser", [parse_utilization, parse_hierarchical_utilization,
                                    parse_timing_summary, parse_power])
def test_parsers_reject_other_text(parser):
    with pytest.raises(ValueError):
        parser("Copyright 1986-2020 Xilinx, Inc.\nnothing here\n")


def test_missing_or_empty_folder_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="vivado_reports"):
        read_vivado_reports(tmp_path / "missing")
    with pytest.raises(ConfigError, match="vivado_reports"):
        read_vivado_reports(tmp_path)


def test_tables_splits_bordered_tables():
    text = "+---+---+\n| a | b |\n+---+---+\n| 1 | 2 |\n+---+---+\n\n+---+\n| c |\n+---+\n"
    assert tables(text) == [[[" a", " b"], [" 1", " 2"]], [[" c"]]]
