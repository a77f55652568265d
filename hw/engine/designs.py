# amaranth: UnusedElaboratable=no
"""Design ``engine``: the tiled INT8 GEMM engine, elaborated from an :class:`EngineConfig`
(registered in :data:`zoforge.hw.designs.BUILTIN`).

First line: :mod:`zoforge.hw.verilog_cache`'s hits leave the top unelaborated."""
from __future__ import annotations

from zoforge.hw.designs import Elaborated, MemorySize, memory_sizes

from .buffers import engine_buffers
from .config import EngineConfig
from .engine import Engine
from .regmap import param_tables

__all__ = ["elaborate_engine", "engine_name", "engine_memories"]

BLOCKS = {
    "array": "R x C output-stationary systolic array of INT8 MAC processing elements",
    "loader": "input stream -> X buffer and W banks",
    "feeder": "X buffer and W banks -> array, one k-step per cycle (weights as a stream)",
    "drain": "array read-out (row multiplexers) -> result banks",
    "output": "result banks and column parameters -> rows for the requantizer; its rows "
              "-> output stream",
    "requant": "bias add, requantization (multiplier, shift, round, saturate), ReLU",
    "regs": "control/status register file, per-column table writes",
    "axil": "AXI4-Lite target",
}
#: A gelu build's ``requant`` (:mod:`.gelu_path`).
GELU_REQUANT = ("bias add, requantization to int8 or (GELU job) int16, the GELU job's "
                "i-GELU and per-column requantization to int8")


def engine_name(config: EngineConfig) -> str:
    """The Verilog top name."""
    return f"engine_{config.rows}x{config.cols}"


def elaborate_engine(config: EngineConfig) -> Elaborated:
    engine = Engine(config)
    blocks = dict(BLOCKS, **({"requant": GELU_REQUANT} if config.gelu else {}),
                  **{str(name): buffer.doc for name, buffer in engine_buffers(config).items()})
    return Elaborated(top=engine, name=engine_name(config), config=config,
                      facts=engine.facts, blocks=blocks)


#: The configuration fields each memory's size grows with.
SIZED_BY = {"x_buffer": ("max_m", "max_k"), "w_buffer": ("max_k",),
            "result_buffer": ("rows", "cols"),
            **{table.memory: ("max_n",) for table in param_tables(True).values()}}


def engine_memories(config: EngineConfig) -> dict[str, MemorySize]:
    """The engine's memories, sized from its configuration (no elaboration)."""
    return memory_sizes(engine_buffers(config), SIZED_BY)
