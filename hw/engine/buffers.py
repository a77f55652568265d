"""The engine's on-chip memories (``amaranth.lib.memory``): shape, depth and port signatures
of each, in one place for the top (which holds them) and the blocks that use their ports.

The engine's :class:`~zoforge.hw.pe.tiles.Tiling` (:func:`engine_tiling`): X rows on
the array's rows, W panels on its columns, ``pack`` k-steps per word. Addresses: X word
``Cat(word, mt)``, W word ``Cat(word, bank)`` (``word`` counts ``pack`` k-steps), result
row ``Cat(row, bank)``, parameter row ``nt`` (one column tile per row).
"""
from __future__ import annotations

from enum import StrEnum

from amaranth.lib import data

from zoforge.hw.pe.tiles import Buffer, Tiling

from .config import DIM_BITS, EngineConfig
from .regmap import param_tables

__all__ = ["Memory", "engine_buffers", "engine_tiling"]


class Memory(StrEnum):
    """The engine's operand and result memories (the value is the submodule's name); the
    per-column tables are named by :func:`~.regmap.param_tables`."""

    X = "x_buffer"
    W = "w_buffer"
    RESULT = "result_buffer"


def engine_tiling(config: EngineConfig) -> Tiling:
    """X (M x K) tiled by R on the rows, W (K x N) in panels of C on the columns."""
    return Tiling(rows=config.rows, cols=config.cols, weights_on="b",
                  panel_words=config.panel_words, tiles=config.m_tiles, dim_bits=DIM_BITS,
                  pack=config.pack,
                  acts_arrive=True)


def engine_buffers(config: EngineConfig) -> dict[str, Buffer]:
    """The memories of an engine, by submodule name."""
    tiling = engine_tiling(config)
    buffers = {
        Memory.X: tiling.act_buffer(doc="activation (X) buffer, max_m x max_k bytes"),
        Memory.W: tiling.weight_banks(
            doc="double-buffered weight (W) panel buffer, 2 x max_k x C bytes"),
        Memory.RESULT: tiling.result_banks(
            doc="double-buffered result tile buffer, 2 x R rows of C int32"),
    }
    for table in param_tables(config.gelu).values():
        buffers[table.memory] = Buffer(data.ArrayLayout(table.shape, config.cols),
                                       config.n_tiles, table.doc + " table", granularity=1)
    return buffers
