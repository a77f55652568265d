"""The activity-model power estimate and the netlist Fmax model, on hand-made inputs."""
from dataclasses import replace

import pytest

from zoforge.boards.registry import get_board
from zoforge.reports.power import (COEFFICIENTS, NO_STATIC, dynamic_at, estimate_power,
                                   step_energy)


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


def test_step_energy_keeps_static_and_dynamic_apart_at_one_clock():
    zcu102 = get_board("zcu102")
    est = estimate_power({"LUT": 1000, "FF": 800}, 300, 0.2, board=zcu102)
    # the same design's estimate at 330 MHz is what step_energy takes the 300 MHz one to
    direct = estimate_power({"LUT": 1000, "FF": 800}, 330, 0.2, board=zcu102)
    assert dynamic_at(est.dynamic_w, 300, 330) == pytest.approx(direct.dynamic_w)
    step = step_energy(19_230, 330, est.static_w, est.dynamic_w, 300, est.static_source)
    assert step.seconds == pytest.approx(19_230 / 330e6)
    assert step.dynamic_w == pytest.approx(direct.dynamic_w)
    assert step.static_w == 0.59 and step.static_source == zcu102.static_power_source
    assert step.static_j == pytest.approx(0.59 * step.seconds)
    assert step.dynamic_j == pytest.approx(direct.dynamic_w * step.seconds)
    assert step.total_j == pytest.approx(step.static_j + step.dynamic_j)
    assert "estimated at 300 MHz, scaled to 330 MHz" in step.dynamic_source
    data = step.to_json()
    assert data["static_j"] == step.static_j and data["dynamic_j"] == step.dynamic_j
