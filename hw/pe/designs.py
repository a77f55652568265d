"""The ``engine`` design: the tiled INT8 GEMM engine (``zoforge generate engine``)."""
from __future__ import annotations

import argparse

from zoforge.hw.designs import Elaborated, register_design

from .engine import GemmEngine

__all__ = ["EngineDesign", "add_engine_arguments", "engine_from_args"]

BLOCKS = {
    "array": "R x C output-stationary systolic array of INT8 MAC processing elements",
    "x_buffer": "activation (X) buffer, max_m x max_k bytes",
    "w_buffer": "double-buffered weight (W) panel buffer, 2 x max_k x C bytes",
    "result_buffer": "double-buffered result tile buffer, 2 x R rows of C int32",
    "requant": "bias add, requantization (multiplier, shift, round, saturate), ReLU",
    "bias_table": "per-column bias table",
    "mult_table": "per-column requantization multiplier table",
    "shift_table": "per-column requantization shift table",
    "regs": "AXI4-Lite control/status registers",
}


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """The engine's build parameters (shared by ``generate engine`` and ``cosim gemm``)."""
    parser.add_argument("--rows", type=int, default=8, help="array rows R (1..64)")
    parser.add_argument("--cols", type=int, default=8, help="array columns C (1..64)")
    parser.add_argument("--pack", type=int, default=2,
                        help="k-steps per input-stream beat (1..8); the stream is "
                             "8*pack*max(R,C) bits wide")
    parser.add_argument("--max-m", type=int, default=256, help="X buffer rows (M limit)")
    parser.add_argument("--max-k", type=int, default=256, help="K limit (buffer depth)")
    parser.add_argument("--max-n", type=int, default=256,
                        help="N limit (per-column parameter tables)")


def engine_from_args(args: argparse.Namespace) -> GemmEngine:
    return GemmEngine(rows=args.rows, cols=args.cols, pack=args.pack, max_m=args.max_m,
                      max_k=args.max_k, max_n=args.max_n)


@register_design("engine", help="tiled INT8 GEMM engine (systolic array, AXI4-Lite/Stream)")
class EngineDesign:
    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        add_engine_arguments(parser)

    @staticmethod
    def elaborate(args: argparse.Namespace) -> Elaborated:
        engine = engine_from_args(args)
        name = f"gemm_engine_{engine.rows}x{engine.cols}"
        return Elaborated(top=engine, name=name, config=dict(engine.config, design="engine"),
                          blocks=dict(BLOCKS))
