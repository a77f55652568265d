"""Tiles on an R x C systolic array: the geometry every design on the array shares.

A job multiplies *activations* by *weights* over K k-steps, one k-step per cycle. Weights
come in **panels** (the outer loop): one weight operand per array lane on the weights'
side, all k-steps, held in one of two banks (double-buffered: the next panel arrives while
the current one is computed). Activations come in **tiles** (the inner loop): every tile
is multiplied with every panel, so a tile of results is (activation tile, weight panel),
tiles in the order panel outer, activation tile inner. A :class:`Tiling` says which side
of the array each operand feeds and how wide it is:

* the GEMM engine (:mod:`zoforge.hw.engine.engine`): activations X on the array's rows (``a``,
  M tiled by R), weight panels W on its columns (``b``, N tiled by C), INT8 both, ``pack``
  k-steps per buffer word, X panels arriving while the job runs
  (:attr:`Tiling.acts_arrive`);
* the ZO layer (:mod:`zoforge.hw.zolayer.layer`): transposed products, weight panels (16-bit
  features) on the rows, activation tiles (int8 tokens) on the columns (M tiled by C, N by
  R), every activation resident before the job starts.

The blocks of this package built from a tiling, shared by both designs:
:class:`~.feeder.Feeder` (banks and activation buffers -> array), :class:`~.drain.Drain`
(array -> result banks), :class:`~.output.OutputStage` (result banks -> rows for the
requantizer, its rows -> a stream) and :func:`tile_order` (the result rows' order, for
the output stage and the ZO layer's result sink).

Memory addresses: weight bank word ``Cat(word, bank)``, activation word ``Cat(word,
tile)`` (``word`` counts ``pack`` k-steps), result row ``Cat(row, bank)``.
"""
from __future__ import annotations

from dataclasses import dataclass

from amaranth import Module, Signal, Value, signed
from amaranth.hdl import Shape, ShapeLike
from amaranth.lib import data
from amaranth.lib.memory import Memory, ReadPort, WritePort

from zoforge.golden.engine_widths import ACC_BITS, OPERAND_BITS

__all__ = ["Buffer", "Tiling", "TileOrder", "tile_order", "address_bits", "WEIGHT_SIDES",
           "COLLISIONS_UNUSED", "lut_ram_result_banks", "MAX_RESULT_BANKS", "LUT_RAM_DEPTH"]

WEIGHT_SIDES = ("a", "b")
#: Attribute of a memory whose read-during-write results are never used (see
#: :meth:`Buffer.memory`); ``zoforge.reports.nextpnr`` lets synthesis leave them undefined.
COLLISIONS_UNUSED = "zoforge_collisions_unused"


#: Most result banks a tiling may have.
MAX_RESULT_BANKS = 16
#: Words of the shallowest LUT RAM that costs the same LUTs as any shallower one (the
#: XCZU9EG's RAM32M16: 32 words x 14 bits in 8 LUTs).
LUT_RAM_DEPTH = 32


def address_bits(count: int) -> int:
    """Address bits for ``count`` entries (at least 1)."""
    return max(1, (count - 1).bit_length())


def lut_ram_result_banks(rows: int) -> int:
    """The most result banks (a power of two, 2 to 8) whose rows, ``2^address_bits(rows)``
    a bank, fit :data:`LUT_RAM_DEPTH` words: as many LUTs as two banks, so free on the
    XCZU9EG (R 1 to 4: 8 banks, R 5 to 8: 4, more: 2)."""
    banks = LUT_RAM_DEPTH >> address_bits(rows)
    return max(2, min(8, banks))


@dataclass(frozen=True)
class Buffer:
    """An on-chip memory (``amaranth.lib.memory``): shape, depth, its ports' signatures."""

    shape: ShapeLike
    depth: int
    doc: str = ""
    granularity: int | None = None     # lanes per write enable (per-column tables: 1)

    @property
    def addr_bits(self) -> int:
        return address_bits(self.depth)

    @property
    def bits(self) -> int:
        """Its size in bits (words x word width)."""
        return Shape.cast(self.shape).width * self.depth

    def memory(self, collisions_unused: bool = False) -> Memory:
        """The memory itself, with 2^addr_bits >= depth words (a one-word buffer gets two:
        Amaranth gives a one-word memory a 0-bit address, the ports here have 1 bit).

        ``collisions_unused``: the design never uses what a read port returns for a word
        written in the same cycle; the memory carries :data:`COLLISIONS_UNUSED`, so that
        synthesis may leave such a read undefined instead of adding the logic that returns
        the old word (Amaranth's semantics, emulated in fabric behind every ECP5 block RAM).
        Simulation is unchanged."""
        attrs = {COLLISIONS_UNUSED: "1"} if collisions_unused else None
        return Memory(shape=self.shape, depth=max(self.depth, 2), init=[], attrs=attrs)

    def read_port(self) -> ReadPort.Signature:
        return ReadPort.Signature(addr_width=self.addr_bits, shape=self.shape)

    def write_port(self) -> WritePort.Signature:
        return WritePort.Signature(addr_width=self.addr_bits, shape=self.shape,
                                   granularity=self.granularity)


@dataclass(frozen=True)
class Tiling:
    """The geometry of a tiled job on a ``rows`` x ``cols`` array (see the module docstring).

    ``weights_on``: the array input the weight panels feed, ``"b"`` (columns: the engine) or
    ``"a"`` (rows: the ZO layer); the activations feed the other. ``panel_words``: buffer
    words of one panel at the largest K (the depth of a weight bank); ``tiles``: activation
    tiles that fit an activation buffer; ``dim_bits``: width of the job's dimensions M, K,
    N (the design's registers, :class:`~.signatures.JobSignature`); ``acts_arrive``:
    activation tiles arrive while the job runs (the feeder waits for them,
    :class:`~.signatures.PanelSignature` counts them); ``result_bank_count``: result banks
    of R rows (a power of two, 2 to :data:`MAX_RESULT_BANKS`): the tiles that may be in
    flight between the feeder's begin and the output stage's last read of their bank (the
    feeder begins a tile only when fewer are).
    """

    rows: int
    cols: int
    weights_on: str
    panel_words: int
    tiles: int
    dim_bits: int
    weight_bits: int = OPERAND_BITS
    act_bits: int = OPERAND_BITS
    pack: int = 1
    acts_arrive: bool = False
    result_bank_count: int = 2

    def __post_init__(self):
        if self.weights_on not in WEIGHT_SIDES:
            raise ValueError(f"weights_on must be one of {WEIGHT_SIDES}, not "
                             f"{self.weights_on!r}")
        banks = self.result_bank_count
        if not (isinstance(banks, int) and 2 <= banks <= MAX_RESULT_BANKS
                and banks & (banks - 1) == 0):
            raise ValueError(f"result_bank_count must be a power of two from 2 to "
                             f"{MAX_RESULT_BANKS}, not {banks!r}")

    @property
    def weight_lanes(self) -> int:
        """Weight operands per k-step (lanes of a panel), also the panel's step in N."""
        return self.cols if self.weights_on == "b" else self.rows

    @property
    def act_lanes(self) -> int:
        """Activation operands per k-step (lanes of a tile), also the tile's step in M."""
        return self.rows if self.weights_on == "b" else self.cols

    @property
    def word_bits(self) -> int:
        """Address bits of a word within a panel."""
        return address_bits(self.panel_words)

    @property
    def tile_bits(self) -> int:
        return address_bits(self.tiles)

    def weights(self) -> data.ArrayLayout:
        """One k-step of weights (a payload of the feeder's weight stream)."""
        return data.ArrayLayout(signed(self.weight_bits), self.weight_lanes)

    def acts(self) -> data.ArrayLayout:
        """One k-step of activations."""
        return data.ArrayLayout(signed(self.act_bits), self.act_lanes)

    def weight_banks(self, doc: str = "") -> Buffer:
        """The two weight banks: ``pack`` k-steps per word, ``Cat(word, bank)``."""
        return Buffer(data.ArrayLayout(self.weights(), self.pack), 2 << self.word_bits, doc)

    def act_buffer(self, words: int | None = None, doc: str = "") -> Buffer:
        """An activation buffer of ``tiles`` tiles, ``words`` words each (default: a panel's),
        ``Cat(word, tile)``."""
        word_bits = address_bits(words) if words is not None else self.word_bits
        return Buffer(data.ArrayLayout(self.acts(), self.pack), self.tiles << word_bits, doc)

    def result_row(self) -> data.ArrayLayout:
        """One drained row of a tile: ``cols`` int32 sums."""
        return data.ArrayLayout(signed(ACC_BITS), self.cols)

    @property
    def bank_bits(self) -> int:
        """Bits of a result bank's index (a counter that wraps at the bank count)."""
        return address_bits(self.result_bank_count)

    def result_banks(self, doc: str = "") -> Buffer:
        """The ``result_bank_count`` result banks of R rows each, ``Cat(row, bank)``."""
        return Buffer(self.result_row(), self.result_bank_count << address_bits(self.rows),
                      doc)


@dataclass(frozen=True)
class TileOrder:
    """The position of a result row (see :func:`tile_order`)."""

    row: Signal            # 0 .. R-1 within the tile, top row first
    tile: Signal           # activation tile (inner)
    panel: Signal          # weight panel (outer), modulo 2^dim_bits
    first_weight: Signal   # the panel's first weight
    tile_end: Value        # the row is its tile's last
    job_end: Value         # the row is the job's last


def tile_order(m: Module, tiling: Tiling, advance, m_dim, n_dim) -> TileOrder:
    """Adds to ``m`` the counters of the result rows' order and returns them: rows within a
    tile, activation tiles (inner, steps of :attr:`Tiling.act_lanes` up to ``m_dim``),
    weight panels (outer, steps of :attr:`Tiling.weight_lanes` up to ``n_dim``); ``advance``
    moves to the next row. The registers start at row 0 of the first tile; the block that
    holds them clears them (``ResetInserter``) at a job's start. Logic inside the block
    (the output stage, the ZO layer's result sink), not a block of its own, so that
    synthesis trims the counters to the bits the block uses."""
    t = tiling
    row = Signal(address_bits(t.rows), name="row")
    tile = Signal(t.tile_bits, name="tile")
    panel = Signal(t.dim_bits, name="panel")
    # the next tile's first activation and the next panel's first weight, in registers of
    # their own: each end test is one comparison (a dimension plus a step fits
    # dim_bits + 1 bits)
    m1 = Signal(t.dim_bits + 1, init=t.act_lanes, name="next_act")
    n0 = Signal(t.dim_bits + 1, name="first_weight")
    n1 = Signal(t.dim_bits + 1, init=t.weight_lanes, name="next_weight")
    if t.rows > 1:
        # the tile's last row a register of its own (the row counter drives the result
        # banks' read addresses, hundreds of loads: no comparison of it behind ``advance``);
        # set with the advance to row R - 1, the same value as ``row == R - 1``
        tile_end = Signal(name="tile_end")
        with m.If(advance):
            m.d.sync += tile_end.eq(row == t.rows - 2)         # (0 after the last)
    else:
        tile_end = row == t.rows - 1
    if t.rows > 1:
        # the comparisons in registers (no carry chain behind ``advance``): m1 and n1 change
        # at a tile's first row, their tests are read at its last, a cycle later at least
        tiles_end, panels_end = Signal(name="tiles_end"), Signal(name="panels_end")
        m.d.sync += [tiles_end.eq(m1 >= m_dim), panels_end.eq(n1 >= n_dim)]
    else:
        tiles_end, panels_end = m1 >= m_dim, n1 >= n_dim
    with m.If(advance):
        m.d.sync += row.eq(row + 1)
        with m.If(tile_end):
            m.d.sync += [row.eq(0), tile.eq(tile + 1), m1.eq(m1 + t.act_lanes)]
            with m.If(tiles_end):
                m.d.sync += [tile.eq(0), m1.eq(t.act_lanes), panel.eq(panel + 1), n0.eq(n1),
                             n1.eq(n1 + t.weight_lanes)]
    return TileOrder(row, tile, panel, n0, tile_end, tile_end & tiles_end & panels_end)
