"""The netlist Fmax model on hand-made netlists (both families' tables), and its measured
error: the one source every report quotes, and the docs table that states it."""
import json
import math
import re
from pathlib import Path

import pytest

from zoforge.errors import ConfigError
from zoforge.reports import fmax_calibration
from zoforge.reports.fmax import (DELAY_MODELS, DELAYS, error_pct, estimate_fmax,
                                  measured_error, net_delay)

DOC = Path(__file__).resolve().parent.parent / "docs" / "reports.md"
XCUP, ECP5 = DELAY_MODELS["xcup"], DELAY_MODELS["ecp5"]


def _cell(kind, inputs, outputs, **parameters):
    connections = {**inputs, **outputs}
    directions = {**{p: "input" for p in inputs}, **{p: "output" for p in outputs}}
    return {"type": kind, "port_directions": directions, "connections": connections,
            "parameters": parameters}


def _netlist(tmp_path, cells, ports=None):
    module = {"attributes": {"top": "00000000000000000000000000000001"},
              "ports": ports or {}, "cells": dict(enumerate(cells))}
    path = tmp_path / "netlist.json"
    path.write_text(json.dumps({"modules": {"t": module}}))
    return path


def _d(symbol, model=XCUP):
    return model.ns(symbol)


def _ff(d, q, kind="FDRE", clock="C"):
    return _cell(kind, {clock: [1], "D" if kind == "FDRE" else "DI": [d]}, {"Q": [q]})


def test_net_delay_grows_with_the_loads():
    for model in (XCUP, ECP5):
        assert net_delay(model, 1) == model.ns("T_net")
        assert net_delay(model, 64) == pytest.approx(model.ns("T_net")
                                                     + 6 * model.ns("T_fanout"))
        assert model.ns("T_fanout") > 0


def test_two_luts_between_registers(tmp_path):
    cells = [_ff(10, 2),
             _cell("LUT2", {"I0": [2], "I1": [2]}, {"O": [3]}),       # bit 2: 3 loads
             _cell("LUT3", {"I0": [3], "I1": [2], "I2": [3]}, {"O": [4]}),   # bit 3: 2
             _ff(4, 10)]
    est = estimate_fmax(_netlist(tmp_path, cells))
    path = (_d("T_cko") + net_delay(XCUP, 3) + _d("T_lut") + net_delay(XCUP, 2)
            + _d("T_lut") + net_delay(XCUP, 1) + _d("T_setup") + _d("T_margin"))
    assert est.critical_ns == pytest.approx(path)
    assert est.logic_levels == 2 and est.path == ["FDRE", "LUT2", "LUT3"]
    assert est.path_loads == [3, 2, 1]
    assert est.fmax_mhz == pytest.approx(min(1000 / path, _d("F_clock_max")))
    assert est.family == "xcup" and est.delays == {k: v.ns for k, v in DELAYS.items()}


def test_a_high_fanout_enable_is_slower_by_the_fanout_term(tmp_path):
    def critical(loads):
        cells = [_ff(10, 2)] + [_ff(2, 100 + i) for i in range(loads)]
        return estimate_fmax(_netlist(tmp_path, cells)).critical_ns
    assert critical(128) - critical(1) == pytest.approx(7 * _d("T_fanout"))


def test_carry4_of_the_netlist_is_timed_as_half_a_carry8(tmp_path):
    assert (XCUP.carry, XCUP.carry_bits) == ("CARRY8", 8)
    cells = [_ff(30, 2),
             _cell("CARRY4", {"CI": ["0"], "S": [2, 2, 2, 2]}, {"CO": [5, 6, 7, 8]}),
             _cell("CARRY4", {"CI": [8], "S": [2, 2, 2, 2]}, {"CO": [9, 10, 11, 12]}),
             _cell("CARRY4", {"CI": [12], "S": [2, 2, 2, 2]}, {"CO": [13, 14, 15, 30]})]
    est = estimate_fmax(_netlist(tmp_path, cells))
    path = (_d("T_cko") + net_delay(XCUP, 12) + _d("T_carry") + 2 * _d("T_chain") * 4 / 8
            + net_delay(XCUP, 1) + _d("T_setup") + _d("T_margin"))
    assert est.critical_ns == pytest.approx(path)
    assert est.logic_levels == 0


def test_registered_dsp_breaks_paths_and_clock_network_caps_fmax(tmp_path):
    cells = [_cell("DSP48E2", {"CLK": [1], "A": [2]}, {"P": [3]}, AREG=1, PREG=1),
             _cell("FDRE", {"C": [1], "D": [3]}, {"Q": [2]})]
    est = estimate_fmax(_netlist(tmp_path, cells))
    assert est.critical_ns == pytest.approx(_d("T_cko") + _d("T_net") + _d("T_setup")
                                            + _d("T_margin"))
    assert est.fmax_mhz == DELAYS["F_clock_max"].ns and est.limited_by == "clock network"


def test_unregistered_dsp_is_combinational(tmp_path):
    cells = [_cell("FDRE", {"C": [1], "D": [3]}, {"Q": [2]}),
             _cell("DSP48E2", {"CLK": [1], "A": [2]}, {"P": [3]}, AREG=0, PREG=0)]
    est = estimate_fmax(_netlist(tmp_path, cells))
    assert est.critical_ns == pytest.approx(_d("T_cko") + _d("T_net") + _d("T_dsp")
                                            + _d("T_net") + _d("T_setup") + _d("T_margin"))


def test_ecp5_carry_chain_wide_mux_and_block_ram(tmp_path):
    """CCU2C hops use the chain (T_chain per 2-bit cell, no net); a PFUMX's LUT inputs are
    the slice's own wires; an unregistered DP16KD starts a path with its long clock-to-out,
    an OUTREG one with the short one."""
    assert (ECP5.carry, ECP5.carry_bits) == ("CCU2C", 2)
    ccu = [_cell("CCU2C", {"CIN": ["0"], "A0": [2], "A1": [2]}, {"COUT": [5]}),
           _cell("CCU2C", {"CIN": [5], "A0": [2], "A1": [2]}, {"COUT": [6]}),
           _cell("CCU2C", {"CIN": [6], "A0": [2], "A1": [2]}, {"COUT": [7]})]
    cells = [_ff(20, 2, "TRELLIS_FF", "CLK"), *ccu, _ff(7, 20, "TRELLIS_FF", "CLK")]
    est = estimate_fmax(_netlist(tmp_path, cells), family="ecp5")
    path = (_d("T_cko", ECP5) + net_delay(ECP5, 6) + _d("T_carry", ECP5)
            + 2 * _d("T_chain", ECP5) + net_delay(ECP5, 1) + _d("T_setup", ECP5))
    assert est.critical_ns == pytest.approx(path) and est.family == "ecp5"

    for regmode, start in (("NOREG", "T_bram_co"), ("OUTREG", "T_bram_co_reg")):
        cells = [_cell("DP16KD", {"CLKA": [1], "ADA0": [9]}, {"DOA0": [2]},
                       REGMODE_A=regmode, REGMODE_B="NOREG"),
                 _cell("LUT4", {"A": [2]}, {"Z": [3]}),
                 _cell("LUT4", {"A": [2]}, {"Z": [4]}),
                 _cell("PFUMX", {"ALUT": [3], "BLUT": [4], "C0": [2]}, {"Z": [5]}),
                 _ff(5, 9, "TRELLIS_FF", "CLK")]
        est = estimate_fmax(_netlist(tmp_path, cells), family="ecp5")
        path = (_d(start, ECP5) + net_delay(ECP5, 3) + _d("T_lut", ECP5)
                + _d("T_mux", ECP5) + net_delay(ECP5, 1) + _d("T_setup", ECP5))
        assert est.critical_ns == pytest.approx(path), regmode
        assert est.path == ["DP16KD", "LUT4", "PFUMX"] and est.logic_levels == 1


def test_ports_left_out_for_a_harnessed_netlist(tmp_path):
    """A netlist with its board harness: the I/O buffer cells and ports are not timed (as
    nextpnr's clock Fmax leaves out its I/O paths); a design's own netlist times its ports
    as registers outside it."""
    ports = {"i": {"direction": "input", "bits": [2]}, "o": {"direction": "output",
                                                          "bits": [5]}}
    cells = [_cell("TRELLIS_IO", {}, {"O": [2]}), _cell("LUT4", {"A": [2]}, {"Z": [3]}),
             _cell("LUT4", {"A": [3]}, {"Z": [4]}), _cell("LUT4", {"A": [4]}, {"Z": [5]}),
             _ff(10, 11, "TRELLIS_FF", "CLK"), _cell("LUT4", {"A": [11]}, {"Z": [10]})]
    harnessed = estimate_fmax(_netlist(tmp_path, cells, ports), family="ecp5",
                              ports_registered=False)
    assert harnessed.path == ["TRELLIS_FF", "LUT4"]
    own = estimate_fmax(_netlist(tmp_path, cells, ports), family="ecp5")
    assert own.critical_ns > harnessed.critical_ns and own.logic_levels == 3


def test_delay_overrides_and_bad_family(tmp_path):
    cells = [_ff(10, 2), _cell("LUT2", {"I0": [2]}, {"O": [10]})]
    base = estimate_fmax(_netlist(tmp_path, cells))
    slower = estimate_fmax(_netlist(tmp_path, cells), delays={"T_net": _d("T_net") + 1.0})
    assert slower.critical_ns == pytest.approx(base.critical_ns + 2.0)
    with pytest.raises(ConfigError, match="family"):
        estimate_fmax(_netlist(tmp_path, cells), family="stratix")


def test_every_delay_names_its_kind_of_source():
    kinds = ("assumption", "speed file", "calibration fit", "data sheet")
    for model in DELAY_MODELS.values():
        for delay in model.delays.values():
            assert delay.source.startswith(kinds) or "assumption" in delay.source, delay


# -- the measured error ------------------------------------------------------------------

def test_measured_error_is_the_calibration_tables():
    error = measured_error()
    assert error is not None, "run benchmarks/bench_fmax_model.py --write"
    assert len(error.rows) >= 5 and error.family == "ecp5" and error.board == "ulx3s-85f"
    assert error.measured_at and "nextpnr" in error.router
    for (name, model, router, loo), row in zip(fmax_calibration.ROWS, error.rows):
        assert row == [name, model, router, round(error_pct(model, router), 1), loo,
                       round(error_pct(loo, router), 1)]
    assert error.loo_max_abs_pct == max(abs(row[5]) for row in error.rows)
    assert error.mean_abs_pct == pytest.approx(
        sum(abs(row[3]) for row in error.rows) / len(error.rows))
    assert error.max_abs_pct == max(abs(row[3]) for row in error.rows)
    names = {row[0] for row in error.rows}
    assert {"engine 2x2", "engine 4x4", "engine 8x8", "zo-layer 4x4"} <= names
    summary = error.summary()
    assert f"{len(error.rows)} designs" in summary and error.measured_at in summary
    assert "left out of the fit" in summary
    data = error.to_json()
    assert data["mean_abs_pct"] == error.mean_abs_pct and math.isfinite(data["bias_pct"])


def test_docs_table_states_the_measured_error():
    """docs/reports.md quotes every row of the calibration table and its commit."""
    error = measured_error()
    text = DOC.read_text()
    rows = {}
    for line in text.splitlines():
        match = re.match(r"\| ((?:engine|zo-layer)[^|]*?) \| ([\d.]+) \| ([\d.]+) \| "
                         r"([+-][\d.]+) \|", line)
        if match:
            rows[match[1]] = [float(match[2]), float(match[3]), float(match[4])]
    assert rows == {row[0]: row[1:4] for row in error.rows}
    assert error.measured_at.split(",")[0] in text


def test_one_clocks_paths_in_a_design_of_two(tmp_path):
    """Two clock ports (bits 1 and 2, and a reset port no path uses): a long path between
    two registers of clock 2 (three LUTs), a short one between clock 1's (one LUT), and a
    path from a clock-1 register into a clock-2 register (five LUTs: a crossing, not timed
    per clock). Whole netlist: the
    crossing; ``clock="clk"``: the one LUT, ``clock="fast_clk"``: the three; an unknown
    port is a one-line error naming the inputs."""
    def ff(d, q, clock):
        return _cell("FDRE", {"C": [clock], "D": [d]}, {"Q": [q]})

    def chain(start, count, first):
        return [_cell("LUT2", {"I0": [start if i == 0 else first + i - 1], "I1": [start]},
                      {"O": [first + i]}) for i in range(count)]
    cells = [ff(30, 20, 1), *chain(20, 1, 30), ff(30, 21, 1),            # clock 1: 1 LUT
             ff(42, 22, 2), *chain(22, 3, 40), ff(42, 23, 2),            # clock 2: 3 LUTs
             *chain(21, 5, 50), ff(54, 24, 2)]                           # 1 -> 2: 5 LUTs
    ports = {"clk": {"direction": "input", "bits": [1]},
             "fast_clk": {"direction": "input", "bits": [2]},
             "rst": {"direction": "input", "bits": [5]}}
    path = _netlist(tmp_path, cells, ports)
    whole = estimate_fmax(path)
    slow = estimate_fmax(path, clock="clk")
    fast = estimate_fmax(path, clock="fast_clk")
    assert (whole.logic_levels, slow.logic_levels, fast.logic_levels) == (5, 1, 3)
    assert whole.critical_ns > fast.critical_ns > slow.critical_ns
    assert slow.path == ["FDRE", "LUT2"] and fast.path == ["FDRE", "LUT2", "LUT2", "LUT2"]
    # a net's loads are counted whatever clocks them: bit 21 (a clock-1 register's) loads
    # the crossing's first LUT twice and each of the four others once
    assert whole.path_loads[0] == 6
    with pytest.raises(ConfigError) as error:
        estimate_fmax(path, clock="softmax_clk")
    assert error.value.parameter == "clock" and "clk, fast_clk, rst" in str(error.value)
    assert "\n" not in str(error.value)


def test_a_two_clock_designs_report_has_each_clocks_fmax():
    """The build report's Fmax section of a design with clock domains besides sync: the
    clock ports (``clk``, then ``<domain>_clk`` in name order), each estimate kept through
    the JSON; a one-clock design has none (a report written before has none either)."""
    from zoforge.reports.model import Fmax
    from zoforge.reports.pipeline import design_clocks
    from types import SimpleNamespace
    assert design_clocks(SimpleNamespace(clock_domains=("softmax",))) == ("clk", "softmax_clk")
    assert design_clocks(SimpleNamespace(clock_domains=("b", "a", "sync"))) == (
        "clk", "a_clk", "b_clk")
    assert design_clocks(SimpleNamespace()) == ()
    fmax = Fmax(fmax_mhz=300.0, critical_ns=3.3, logic_levels=2, path=["FDRE"],
                limited_by="logic", by_clock={"clk": 349.3, "softmax_clk": 318.7})
    assert Fmax.from_json(fmax.to_json()) == fmax and Fmax.from_json(
        {k: v for k, v in fmax.to_json().items() if k != "by_clock"}).by_clock == {}
