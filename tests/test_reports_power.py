"""The activity-model power estimate and the netlist Fmax model, on hand-made inputs."""
import json
from dataclasses import replace

import pytest

from zoforge.boards.registry import get_board
from zoforge.reports.fmax import DELAYS, estimate_fmax
from zoforge.reports.power import COEFFICIENTS, NO_STATIC, estimate_power


def _c(symbol):
    return COEFFICIENTS[symbol].value


def test_dynamic_power_follows_the_documented_formula():
    resources = {"LUT": 1000, "FF": 2000, "CARRY": 50, "DSP": 4, "BRAM18": 8}
    zcu102 = get_board("zcu102")
    est = estimate_power(resources, frequency_mhz=500, toggle_rate=0.25, board=zcu102)
    f, a, pj = 500e6, 0.25, 1e-12
    expected = f * pj * (a * (1000 * _c("E_lut") + 2000 * _c("E_ff") + 50 * _c("E_carry")
                              + 4 * _c("E_dsp")) + 2000 * _c("E_clk_ff")
                         + 8 * _c("E_bram") + _c("E_clk_tree"))
    assert est.dynamic_w == pytest.approx(expected)
    assert est.static_w == zcu102.static_power_w
    assert est.total_w == pytest.approx(est.static_w + expected)
    assert est.source == "activity-model"


def test_static_power_is_the_boards():
    resources = {"LUT": 10, "FF": 10}
    zcu102 = get_board("zcu102")
    est = estimate_power(resources, 100, 0.1, board=zcu102)
    assert (est.static_w, est.static_source) == (0.59, zcu102.static_power_source)
    other = replace(zcu102, name="zcu102-hot", static_power_w=1.25,
                    static_power_source="test: a hotter device")
    hot = estimate_power(resources, 100, 0.1, board=other)
    assert hot.static_w == 1.25 and hot.static_source == "test: a hotter device"
    assert hot.dynamic_w == est.dynamic_w
    # a board that states none, or no board: dynamic power only, and said so
    for board in (get_board("ulx3s-85f"), None):
        none = estimate_power(resources, 100, 0.1, board=board)
        assert none.static_w == 0.0 and none.static_source == NO_STATIC
    assert "P_static" not in COEFFICIENTS       # a board's fact, not a model coefficient


def test_dynamic_power_scales_with_frequency_and_activity():
    resources = {"LUT": 500, "FF": 300}
    low = estimate_power(resources, 100, 0.1)
    high = estimate_power(resources, 200, 0.1)
    assert high.dynamic_w == pytest.approx(2 * low.dynamic_w)
    idle = estimate_power(resources, 100, 0.0)
    assert idle.breakdown_w["LUT"] == 0 and idle.breakdown_w["clock (FF pins)"] > 0
    assert estimate_power(resources, 100, 0.5).dynamic_w > low.dynamic_w


def test_block_power_uses_each_blocks_own_toggle_rate():
    blocks = {"busy": {"LUT": 100}, "quiet": {"LUT": 100}}
    est = estimate_power({"LUT": 200}, 100, 0.3, block_resources=blocks,
                         block_rates={"busy": 0.5, "quiet": 0.1})
    assert est.block_dynamic_w["busy"] == pytest.approx(5 * est.block_dynamic_w["quiet"])


def test_every_coefficient_names_a_source():
    for coefficient in COEFFICIENTS.values():
        assert coefficient.source and coefficient.unit and coefficient.value > 0


# -- Fmax ------------------------------------------------------------------------------------

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


def _d(symbol):
    return DELAYS[symbol].ns


def test_two_luts_between_registers(tmp_path):
    cells = [
        _cell("FDRE", {"C": [1], "D": [10], "CE": ["1"], "R": ["0"]}, {"Q": [2]}),
        _cell("LUT2", {"I0": [2], "I1": [2]}, {"O": [3]}),
        _cell("LUT3", {"I0": [3], "I1": [2], "I2": [3]}, {"O": [4]}),
        _cell("FDRE", {"C": [1], "D": [4], "CE": ["1"], "R": ["0"]}, {"Q": [10]}),
    ]
    est = estimate_fmax(_netlist(tmp_path, cells))
    path = (_d("T_cko") + 2 * (_d("T_net") + _d("T_lut")) + _d("T_net") + _d("T_setup")
            + _d("T_margin"))
    assert est.critical_ns == pytest.approx(path)
    assert est.logic_levels == 2
    assert est.path == ["FDRE", "LUT2", "LUT3"]
    assert est.fmax_mhz == pytest.approx(min(1000 / path, _d("F_clock_max")))


def test_carry_chain_hops_have_no_net_delay(tmp_path):
    cells = [_cell("FDRE", {"C": [1], "D": [30]}, {"Q": [2]}),
             _cell("CARRY4", {"CI": ["0"], "S": [2, 2, 2, 2]}, {"CO": [5, 6, 7, 8]}),
             _cell("CARRY4", {"CI": [8], "S": [2, 2, 2, 2]}, {"CO": [9, 10, 11, 12]}),
             _cell("CARRY4", {"CI": [12], "S": [2, 2, 2, 2]}, {"CO": [13, 14, 15, 30]})]
    est = estimate_fmax(_netlist(tmp_path, cells))
    path = (_d("T_cko") + _d("T_net") + _d("T_carry") + 2 * _d("T_chain") + _d("T_net")
            + _d("T_setup") + _d("T_margin"))
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
