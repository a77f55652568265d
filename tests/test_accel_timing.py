"""Timing closure of the accelerator (slow): the 1 engine + 1 ZO layer top (the 4 x 4
engine, M 64 / K 384 / N 64, and the demo's full-weights 4 x 4 layer, M 16 / K 384 / N 4,
R 4) placed and routed on the ECP5 (nextpnr, the board harness included) meets 150 MHz,
built as ``zoforge build --board ulx3s-85f --design accelerator --no-paired --engines 1
--engine-rows 4 --engine-cols 4 --engine-max-m 64 --engine-max-k 384 --engine-max-n 64
--layer-mode full --layer-max-m 16 --layer-max-k 384 --layer-max-n 4 --layer-max-r 4
--no-power --clock-mhz 150`` builds it (``docs/zo-layer.md``, "ECP5 timing closure")."""
import pytest

from zoforge.boards.registry import get_board
from zoforge.hw.accel.plan import plan_from_fields
from zoforge.hw.designs import get_design
from zoforge.reports.nextpnr import place_and_route

GOAL_MHZ = 150.0
BOARD = "ulx3s-85f"


def one_plus_one():
    """The configuration the command line above builds (the flags given, the rest planned
    for the board, as ``zoforge build`` plans an accelerator)."""
    return plan_from_fields(dict(
        board=BOARD, paired=False, engines=1, engine_rows=4, engine_cols=4,
        engine_max_m=64, engine_max_k=384, engine_max_n=64, layer_mode="full",
        layer_max_m=16, layer_max_k=384, layer_max_n=4, layer_max_r=4))


def test_the_top_is_one_engine_and_one_full_4x4_layer():
    config = one_plus_one()
    assert (config.engines, config.layers, config.engine_rows, config.engine_cols,
            config.paired) == (1, 1, 4, 4, False)
    layer = config.layer_config()
    assert (layer.mode, layer.rows, layer.cols, layer.max_m, layer.max_k, layer.max_n,
            layer.max_r) == ("full", 4, 4, 16, 384, 4, 4)
    assert (config.gelu_engines, config.softmax_units) == (0, 0)


@pytest.mark.slow
def test_one_engine_one_layer_top_meets_150_mhz_after_place_and_route_on_ecp5():
    """Constrained at the goal (the placer and router work towards the clock asked for),
    seed 1."""
    board = get_board(BOARD)
    top = get_design("accelerator").elaborate(one_plus_one()).top
    result = place_and_route(board, top, GOAL_MHZ)
    (fmax,) = result.fmax_mhz.values()
    assert fmax >= GOAL_MHZ, f"{fmax:.1f} MHz (log: {result.log_path})"
