"""The packed token buffer X: ``load_x`` writes it a whole stream beat per cycle, the feeder
reads it one k-step at a time.

A word is P k-steps of C tokens (P = :func:`~.layouts.token_pack`, the bytes of a beat over
C), element ``[kk][j]`` = X[tile*C + j, word*P + kk], exactly the beat's bytes
(:func:`~.layouts.token_words`); addresses ``Cat(word, tile)`` (:func:`token_buffer`).

* :class:`TokenWalk`: the ``load_x`` beats' order, token tile (outer, steps of C up to
  ``outer`` = M) by word (inner, steps of P k-steps up to ``inner`` = K): ``word``,
  ``tile``, ``last``; ``restart`` goes back to the first beat, ``advance`` to the next.
* :class:`TokenReader`: the feeder's activation read port ``x_rd`` (one k-step of C tokens,
  address ``Cat(k, tile)``, :meth:`~zoforge.hw.pe.tiles.Tiling.act_buffer`) on the
  packed memory's port ``packed_rd``: word k // P, and the k-step k % P of it picked from
  the read data by a register that lines up with it (the same 1-cycle read latency).
"""
from __future__ import annotations

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from zoforge.hw.pe.tiles import Buffer, Tiling, address_bits

from .layouts import token_pack

__all__ = ["token_buffer", "token_words_per_tile", "TokenWalk", "TokenReader"]


def token_words_per_tile(max_k: int, pack: int) -> int:
    """Words of one token tile at the largest K (``pack`` k-steps each)."""
    return -(-max_k // pack)


def token_buffer(tiling: Tiling, max_k: int, lanes: int, doc: str = "") -> Buffer:
    """The packed token memory of ``tiling.tiles`` token tiles, ``lanes``-lane beats."""
    pack = token_pack(tiling.cols, lanes)
    word_bits = address_bits(token_words_per_tile(max_k, pack))
    return Buffer(data.ArrayLayout(tiling.acts(), pack), tiling.tiles << word_bits, doc)


def divide(value, divisor: int):
    """(value // divisor, value % divisor) for an unsigned ``value`` and a constant
    ``divisor``: bit slices for a power of two, else a multiplication by the rounded-up
    reciprocal ``ceil(2^s / divisor)``, s = width + ceil(log2 divisor), exact for every
    value below 2^width."""
    width = len(value)
    shift = (divisor - 1).bit_length()
    if divisor == 1 << shift:
        return value[shift:], value[:shift] if shift else Const(0, 1)
    s = width + shift
    quotient = ((value * Const(-(-(1 << s) // divisor))) >> s)[:width]
    return quotient, (value - quotient * divisor)[:shift]


class TokenWalk(wiring.Component):
    """``load_x``'s beats (module docstring), for K up to ``max_k``."""

    def __init__(self, tiling: Tiling, max_k: int, lanes: int):
        self.tiling = tiling
        self.pack = token_pack(tiling.cols, lanes)
        super().__init__({
            "restart": In(1), "advance": In(1),
            "inner": In(tiling.dim_bits), "outer": In(tiling.dim_bits),
            "word": Out(address_bits(token_words_per_tile(max_k, self.pack))),
            "tile": Out(tiling.tile_bits), "last": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        t, P = self.tiling, self.pack
        # the first k-step of the word after the next and the first token of the tile after
        # the next are registers of their own, and so are the end tests, set with the
        # registers from comparisons of registers with ``inner`` / ``outer`` (as in
        # :class:`~.walk.PanelWalk`: both hold from ``restart`` to the walk's end)
        k_after = Signal(range((1 << t.dim_bits) + 2 * P + 1), init=2 * P)
        m_after = Signal(t.dim_bits + 2, init=2 * t.cols)
        word_end, tiles_end = Signal(), Signal()     # this word ends its tile; the last tile
        m.d.comb += self.last.eq(word_end & tiles_end)
        first_word_end = P >= self.inner
        with m.If(self.restart):
            m.d.sync += [self.word.eq(0), k_after.eq(2 * P), word_end.eq(first_word_end),
                         self.tile.eq(0), m_after.eq(2 * t.cols),
                         tiles_end.eq(t.cols >= self.outer)]
        with m.Elif(self.advance):
            m.d.sync += [self.word.eq(self.word + 1), k_after.eq(k_after + P),
                         word_end.eq(k_after >= self.inner)]
            with m.If(word_end):
                m.d.sync += [self.word.eq(0), k_after.eq(2 * P), word_end.eq(first_word_end),
                             self.tile.eq(self.tile + 1), m_after.eq(m_after + t.cols),
                             tiles_end.eq(m_after >= self.outer)]
        return m


class TokenReader(wiring.Component):
    """The feeder's ``x_rd`` (k-steps up to ``max_k``) on the packed memory's ``packed_rd``
    (module docstring), its data two cycles after the read (a register behind the block
    RAM, then the k-step picked): the feeder's ``registered`` port."""

    def __init__(self, tiling: Tiling, max_k: int, lanes: int):
        self.tiling, self.max_k = tiling, max_k
        self.pack = token_pack(tiling.cols, lanes)
        packed = token_buffer(tiling, max_k, lanes)
        super().__init__({
            "x_rd": Out(tiling.act_buffer(max_k).read_port()),
            "packed_rd": In(packed.read_port()),
        })

    def elaborate(self, platform):
        m = Module()
        k_bits = address_bits(self.max_k)
        k, tile = self.x_rd.addr[:k_bits], self.x_rd.addr[k_bits:]
        word, step = divide(k, self.pack)
        word_bits = address_bits(token_words_per_tile(self.max_k, self.pack))
        # the word in the register behind the block RAM (its output register), then the
        # k-step picked from it: x_rd's data two cycles after the read (the feeder's
        # ``registered`` port)
        selected = Signal(range(self.pack))         # k % P of the word being read
        picked = Signal(range(self.pack))           # ... of the word in the register
        word_reg = Signal.like(self.packed_rd.data, name="packed_word")
        # the word's address field is word_bits wide even where k // P has no bits at all
        # (max_k <= P: one word a tile, k[log2 P:] is empty), so a tile's words are at
        # Cat(word, tile) as TokenWalk writes them
        word_field = Signal(word_bits)
        m.d.comb += [word_field.eq(word),
                     self.packed_rd.addr.eq(Cat(word_field, tile)),
                     self.packed_rd.en.eq(self.x_rd.en),
                     self.x_rd.data[0].eq(word_reg[picked])]
        with m.If(self.x_rd.en):
            m.d.sync += selected.eq(step)
        m.d.sync += [word_reg.eq(self.packed_rd.data), picked.eq(selected)]
        return m
