"""The engine's on-chip memories (``amaranth.lib.memory``): shape, depth and port signatures
of each, in one place for the top (which holds them) and the blocks that use their ports.

Addresses: X word ``Cat(word, mt)``, W word ``Cat(word, bank)`` (``word`` counts ``pack``
k-steps), result row ``Cat(row, bank)``, parameter row ``nt`` (one column tile per row).
"""
from __future__ import annotations

from dataclasses import dataclass

from amaranth import signed
from amaranth.hdl import ShapeLike
from amaranth.lib import data
from amaranth.lib.memory import ReadPort, WritePort

from zoforge.golden.gemm_widths import ACC_BITS, OPERAND_BITS

from .config import EngineConfig
from .regmap import PARAM_TABLES

__all__ = ["Buffer", "engine_buffers", "address_bits", "operands"]


def address_bits(count: int) -> int:
    """Address bits for ``count`` entries (at least 1)."""
    return max(1, (count - 1).bit_length())


def operands(count: int) -> data.ArrayLayout:
    """``count`` INT8 operands (one byte each in the streams and buffers)."""
    return data.ArrayLayout(signed(OPERAND_BITS), count)


@dataclass(frozen=True)
class Buffer:
    shape: ShapeLike
    depth: int
    doc: str
    granularity: int | None = None     # lanes per write enable (per-column tables: 1)

    @property
    def addr_bits(self) -> int:
        return address_bits(self.depth)

    def read_port(self) -> ReadPort.Signature:
        return ReadPort.Signature(addr_width=self.addr_bits, shape=self.shape)

    def write_port(self) -> WritePort.Signature:
        return WritePort.Signature(addr_width=self.addr_bits, shape=self.shape,
                                   granularity=self.granularity)


def engine_buffers(config: EngineConfig) -> dict[str, Buffer]:
    """The memories of an engine, by submodule name."""
    R, C, P = config.rows, config.cols, config.pack
    word_bits = address_bits(config.panel_words)
    buffers = {
        "x_buffer": Buffer(data.ArrayLayout(operands(R), P), config.m_tiles << word_bits,
                           "activation (X) buffer, max_m x max_k bytes"),
        "w_buffer": Buffer(data.ArrayLayout(operands(C), P), 2 << word_bits,
                           "double-buffered weight (W) panel buffer, 2 x max_k x C bytes"),
        "result_buffer": Buffer(data.ArrayLayout(signed(ACC_BITS), C), 2 << address_bits(R),
                                "double-buffered result tile buffer, 2 x R rows of C int32"),
    }
    for table in PARAM_TABLES.values():
        buffers[table.memory] = Buffer(data.ArrayLayout(table.shape, C), config.n_tiles,
                                       table.doc + " table", granularity=1)
    return buffers
