"""Output stage: drained tiles from the result banks, with what is read beside each row, as
a stream of rows for the requantizer (:class:`~.requant.RequantStream`), and its rows on as
an AXI4-Stream (any :class:`~.tiles.Tiling`).

Each tile leaves as R rows (top row first), tiles in the order of :func:`~.tiles.tile_order`
(weight panel outer, activation tile inner); the job's last row carries ``last``
(``tlast``). A result bank is free again (``tile_done``) when its last row has been read;
the banks (:attr:`~.tiles.Tiling.result_bank_count`) are read in turn.
Beside each row the stage reads the memories of ``side_reads`` (:class:`SideRead`: the
engine's per-column parameter tables, the ZO layer's init buffer) into their fields of the
row. A row is issued (its memory reads) only when a place is reserved for it in a
:data:`FIFO_DEPTH`-row FIFO in front of ``rows`` (a credit count: rows issued and not yet
taken), so the :data:`READ_LATENCY` stages never stall: the memory reads, a register of the
whole row right behind the memories, then the FIFO (a buffered one: its memory is read
into a register, no memory output in front of the requantizer). The issue logic reads only
registers (the credit count, the drained tiles, the tile order's end tests), not ``rows.ready``:
the stream's back-pressure reaches it a cycle late, through the count. ``job.start`` clears
all state but the rows' data.
"""
from __future__ import annotations

from dataclasses import dataclass

from amaranth import Cat, Module, Mux, ResetInserter, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from zoforge.golden.engine_widths import ACC_BITS

from .bus import AxiStreamSignature
from .credits import up_down
from .requant import input_layout, output_layout
from .signatures import JobSignature
from .tiles import Buffer, Tiling, tile_order

__all__ = ["OutputStage", "SideRead", "SIDE_ADDRESSES", "READ_LATENCY", "FIFO_DEPTH"]

#: Register stages from a row's issue (its memory reads) to the row on ``rows``: the read,
#: the register behind the memories, the FIFO's memory and its output register.
READ_LATENCY = 4
#: Rows the output FIFO holds: the stages in flight, and a credit's way back, so that a
#: stream that is always ready takes a row every cycle.
FIFO_DEPTH = READ_LATENCY + 2

SIDE_ADDRESSES = ("panel", "row")


@dataclass(frozen=True)
class SideRead:
    """A memory read beside each result row, into field ``field`` of the row (the
    requantizer's input layout). ``per``: ``"panel"``, one word per weight panel (address:
    the panel's index) or ``"row"``, one word per result row (``Cat(row, tile, panel)``)."""

    field: str
    buffer: Buffer
    per: str

    def __post_init__(self):
        if self.per not in SIDE_ADDRESSES:
            raise ValueError(f"per must be one of {SIDE_ADDRESSES}, not {self.per!r}")


class OutputStage(wiring.Component):
    """``row_layout``: the rows' layout (default the requantizer's :func:`~.requant.
    input_layout`; a wider one carries more side reads, the engine's GELU path's)."""

    def __init__(self, tiling: Tiling, side_reads: dict[str, SideRead] | None = None,
                 row_layout: data.StructLayout | None = None):
        self.tiling = tiling
        self.side_reads = dict(side_reads or {})
        cols = tiling.cols
        self.row_layout = row_layout if row_layout is not None else input_layout(cols)
        super().__init__({
            "job": In(JobSignature(tiling.dim_bits)),
            "drained": In(1),        # a result bank has been filled
            "tile_done": Out(1),     # a result bank has been read out
            "res_rd": In(tiling.result_banks().read_port()),
            **{name: In(side.buffer.read_port()) for name, side in self.side_reads.items()},
            "rows": Out(stream.Signature(self.row_layout)),
            "results": In(stream.Signature(output_layout(cols))),
            "m_axis": Out(AxiStreamSignature(ACC_BITS * cols)),
            "job_end": Out(1),       # the job's last beat leaves
        })

    def elaborate(self, platform):
        m = Module()
        job, rows = self.job, self.rows
        bank = Signal(self.tiling.bank_bits)       # wraps at the (power of two) bank count
        # drained tiles not yet read out
        tiles_ready = Signal(range(self.tiling.result_bank_count + 1))

        width = len(Signal(self.row_layout).as_value())
        m.submodules.fifo = fifo = SyncFIFOBuffered(width=width, depth=FIFO_DEPTH)
        taken = rows.valid & rows.ready
        credits = Signal(range(FIFO_DEPTH + 1))     # rows issued and not yet taken
        room = Signal(init=1)                       # credits < FIFO_DEPTH, a register
        # ``tiles_ready != 0`` a register of its own, set from the count's inputs (the
        # issue is two registers, not a comparison of the count behind them)
        any_ready = Signal()
        issue = room & any_ready
        cursor = tile_order(m, self.tiling, issue, job.m, job.n)
        after = up_down(credits, issue, taken)
        m.d.sync += [credits.eq(after), room.eq(after < FIFO_DEPTH)]
        # the stages never stall: the memory reads, a register of the whole row right behind
        # the memories (its only load: placed beside them), then the FIFO's write
        read = Signal(self.row_layout)
        m.d.comb += [self.res_rd.addr.eq(Cat(cursor.row, bank)), self.res_rd.en.eq(1),
                     read.acc.eq(self.res_rd.data)]
        for name, side in self.side_reads.items():
            port = getattr(self, name)
            address = (cursor.panel if side.per == "panel"
                       else Cat(cursor.row, cursor.tile, cursor.panel))
            m.d.comb += [port.addr.eq(address), port.en.eq(1), read[side.field].eq(port.data)]
        read_valid, read_last, behind_valid = Signal(), Signal(), Signal()
        behind = Signal(self.row_layout, name="behind")
        m.d.comb += read.last.eq(read_last)
        m.d.sync += [read_valid.eq(issue), read_last.eq(issue & cursor.job_end),
                     behind_valid.eq(read_valid)]
        rows_reg = Module()
        rows_reg.d.sync += behind.eq(read)
        m.d.comb += [fifo.w_en.eq(behind_valid), fifo.w_data.eq(behind),
                     rows.valid.eq(fifo.r_rdy), rows.payload.eq(fifo.r_data),
                     fifo.r_en.eq(rows.ready)]
        # one expression (a Verilog ``assign``), not a conditional assignment: Icarus never
        # runs the ``always @*`` of one whose only input keeps its time-zero value, and the
        # counters that subtract tile_done would keep the X it leaves
        # (the tile's last row a register of :func:`~.tiles.tile_order`: the row counter
        # drives the result banks' read address, far from the bank counts)
        m.d.comb += self.tile_done.eq(issue & cursor.tile_end)
        with m.If(self.tile_done):
            m.d.sync += bank.eq(bank + 1)
        m.d.sync += [tiles_ready.eq(up_down(tiles_ready, self.drained, self.tile_done)),
                     any_ready.eq(self.drained | Mux(self.tile_done, tiles_ready >= 2,
                                                     any_ready))]

        results, axis = self.results, self.m_axis
        m.d.comb += [axis.tdata.eq(results.payload.data), axis.tlast.eq(results.payload.last),
                     axis.tvalid.eq(results.valid), results.ready.eq(axis.tready),
                     self.job_end.eq(axis.tvalid & axis.tready & axis.tlast)]
        top = Module()
        top.submodules.sequencer = ResetInserter(job.start)(m)
        top.submodules.row = rows_reg       # data, not cleared by job.start
        return top
