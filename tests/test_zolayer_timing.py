"""Timing closure of the ZO layer (slow): the demo's layer (``zoforge demo``'s defaults: full
weights, 4 x 4 array, M 16, K 384, N 4) placed and routed on the ECP5 (nextpnr, the board
harness included) meets 150 MHz (``docs/zo-layer.md``, "ECP5 timing closure")."""
import pytest

from zoforge.boards.registry import get_board
from zoforge.golden.zo.config import TrainConfig
from zoforge.hw.designs import get_design
from zoforge.reports.nextpnr import place_and_route

GOAL_MHZ = 150.0


def demo_layer():
    """The layer configuration ``zoforge demo`` builds with its default flags (MiniLM's 384
    features, 2 classes)."""
    train = TrainConfig(method="hw-prge", trainable="hw-mlp", hidden=0,
                        perturbation="pezo-onthefly", queries=4, batch=16, rows=4, cols=4)
    return train.layer_design(features=384, classes=2)


def test_demo_layer_is_the_full_4x4_layer():
    config = demo_layer()
    assert (config.mode, config.rows, config.cols, config.max_m, config.max_k,
            config.max_n) == ("full", 4, 4, 16, 384, 4)


@pytest.mark.slow
def test_demo_layer_meets_150_mhz_after_place_and_route_on_ecp5():
    """Constrained at the goal (the placer and router work towards the clock asked for)."""
    board = get_board("ulx3s-85f")
    top = get_design("zo-layer").elaborate(demo_layer()).top
    result = place_and_route(board, top, GOAL_MHZ)
    (fmax,) = result.fmax_mhz.values()
    assert fmax >= GOAL_MHZ, f"{fmax:.1f} MHz (log: {result.log_path})"
