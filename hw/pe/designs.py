"""Design ``engine``: the tiled INT8 GEMM engine, elaborated from an :class:`EngineConfig`."""
from __future__ import annotations

from zoforge.hw.designs import Design, Elaborated, register_design

from .buffers import engine_buffers
from .config import EngineConfig
from .engine import GemmEngine

__all__ = ["elaborate_engine", "engine_name", "DESIGN"]

BLOCKS = {
    "array": "R x C output-stationary systolic array of INT8 MAC processing elements",
    "loader": "input stream -> X buffer and W banks",
    "feeder": "X buffer and W banks -> array, one k-step per cycle (weights as a stream)",
    "drain": "array shift chains -> result banks",
    "output": "result banks and column parameters -> rows for the requantizer; its rows "
              "-> output stream",
    "requant": "bias add, requantization (multiplier, shift, round, saturate), ReLU",
    "regs": "control/status register file, per-column table writes",
    "axil": "AXI4-Lite target",
    **{str(name): buffer.doc for name, buffer in engine_buffers(EngineConfig()).items()},
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
