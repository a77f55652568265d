"""Design ``engine``: the tiled INT8 GEMM engine, elaborated from an :class:`EngineConfig`."""
from __future__ import annotations

from zoforge.hw.designs import Design, Elaborated, register_design

from .config import EngineConfig
from .engine import GemmEngine

__all__ = ["elaborate_engine", "engine_name", "DESIGN"]

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


def engine_name(config: EngineConfig) -> str:
    """The Verilog top name."""
    return f"gemm_engine_{config.rows}x{config.cols}"


def elaborate_engine(config: EngineConfig) -> Elaborated:
    engine = GemmEngine(config)
    return Elaborated(top=engine, name=engine_name(config), config=config,
                      facts=engine.facts, blocks=dict(BLOCKS))


DESIGN = register_design(Design(
    "engine", "tiled INT8 GEMM engine (systolic array, AXI4-Lite/Stream)",
    configs=(EngineConfig,), elaborate=elaborate_engine))
