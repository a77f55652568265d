"""Result packer: requantized (int8) output rows, ``ROWS_PER_BEAT`` to an output beat.

The output stage's beats (``i``) carry one result row of C lanes, 32 bits a lane (the int8
result sign-extended in lane j's low byte). With ``raw`` low (requantized job) the packer
sends ``o`` one beat per ``ROWS_PER_BEAT`` = 4 rows: row r of the group in bytes ``r*C ..
r*C + C-1`` (column j at byte ``r*C + j``, bits ``8*(r*C + j)``), the rows in stream order
(across tiles); the job's last row (``tlast``) ends its beat, whose missing rows are zero.
With ``raw`` high (int32 results) ``o`` is ``i``. No latency: a group's first rows are held
in registers, its last leaves with the beat in the cycle it is taken; only a job's last
row that ends a short group while ``o`` is stalled is held too (the beat leaves from the
registers, ``i.tready`` low meanwhile). ``i.tready`` follows registers and ``o.tready``
only (not ``i``'s data or ``tlast``): two registers of the next state (the group has room;
its last row is next) and ``o.tready`` in one LUT. ``job_end``: the job's last beat
leaves (``o.tready`` and i's last beat offered, or a held short group's beat: not through
``o.tvalid``'s and ``o.tlast``'s muxes). ``start`` (the job's) clears the group.
"""
from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, ResetInserter, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.engine_widths import ACC_BITS, OPERAND_BITS
from zoforge.hw.pe.bus import AxiStreamSignature

__all__ = ["ResultPacker", "ROWS_PER_BEAT"]

#: int8 result rows per output beat (a 32-bit lane holds four int8)
ROWS_PER_BEAT = ACC_BITS // OPERAND_BITS


class ResultPacker(wiring.Component):
    def __init__(self, cols: int):
        self.cols = cols
        super().__init__({
            "i": In(AxiStreamSignature(ACC_BITS * cols)),
            "o": Out(AxiStreamSignature(ACC_BITS * cols)),
            "raw": In(1),
            "start": In(1),
            "job_end": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        i, o, cols = self.i, self.o, self.cols
        row = Cat(i.tdata[ACC_BITS * j:ACC_BITS * j + OPERAND_BITS] for j in range(cols))
        count = Signal(range(ROWS_PER_BEAT))          # rows held for the current beat
        flush = Signal()        # a short last group held, its beat waiting for ``o.tready``
        held = [Signal(len(row), name=f"held{r}") for r in range(ROWS_PER_BEAT - 1)]
        live = ~flush
        complete = (count == ROWS_PER_BEAT - 1) | i.tlast
        slots = [Mux(live & (count == r), row, Mux(count > r, held[r], Const(0, len(row))))
                 for r in range(ROWS_PER_BEAT - 1)]
        slots.append(Mux(live & (count == ROWS_PER_BEAT - 1), row, 0))
        # i.tready: raw, o.tready; else live & ((count != ROWS_PER_BEAT - 1) | o.tready).
        # Both from two registers made from the next state and the mode (``free``: packing,
        # live, the group not at its last row; ``closing``: raw, or live at the group's last
        # row) and o.tready, one LUT: no logic between count, flush or raw (the register
        # file's, placed with it) and the ready's fan-out (the requantizer's buffer, the held
        # rows' enables). The registers follow ``raw`` a cycle late: it changes only with a
        # CTRL write while idle, when no beat is offered (the cycle after it, ``i.tready``
        # may differ from raw's, with nothing to take)
        free = Signal(init=1)
        closing = Signal()
        m.d.comb += i.tready.eq(free | (closing & o.tready))
        next_count, next_flush = Signal.like(count), Signal()
        with m.If(self.raw):
            m.d.comb += [o.tdata.eq(i.tdata), o.tvalid.eq(i.tvalid), o.tlast.eq(i.tlast)]
        with m.Else():
            m.d.comb += [o.tdata.eq(Cat(*slots)), o.tvalid.eq(flush | (i.tvalid & complete)),
                         o.tlast.eq(flush | i.tlast),
                         next_count.eq(count), next_flush.eq(flush)]
            with m.If(flush & o.tready):
                m.d.comb += [next_flush.eq(0), next_count.eq(0)]
            with m.If(i.tvalid & i.tready):
                m.d.comb += next_count.eq(count + 1)
                with m.If(complete & o.tready):
                    m.d.comb += next_count.eq(0)
                with m.Elif(complete):        # a short last group, its beat stalled
                    m.d.comb += next_flush.eq(1)
            m.d.sync += [count.eq(next_count), flush.eq(next_flush)]
        # job_end = o.tvalid & o.tready & o.tlast, written as the same value from the fewest
        # inputs (both modes: o.tvalid & o.tlast is i's last beat offered, or, packing, a
        # held short group's beat), so that the requantizer buffer's registers reach the
        # register file's busy through two LUTs, not through the packer's muxes by count
        m.d.comb += self.job_end.eq(o.tready & ((i.tvalid & i.tlast) | (~self.raw & flush)))
        # free and closing: set by start as the sequencer's reset sets count and flush, and
        # outside that reset (in raw mode closing is set then)
        # (each from count, flush and the cycle's inputs in one expression of its own, the
        # same values as ``next_count`` and ``next_flush`` give: no logic shared with the
        # count's next value or the held rows' decode, whose nets reach every held bit)
        last = ROWS_PER_BEAT - 1
        take = i.tvalid & i.tready
        at_last, before_last = count == last, count == last - 1
        # the next state live at the group's last row: a row taken at the one before
        # (not the job's last), or none taken there
        last_next = ~flush & ((take & ~i.tlast & before_last) | (~take & at_last))
        # the next state live before the group's last row: a held group's beat taken; a
        # complete group's beat taken with its row; a row taken short of the last but one;
        # none taken short of the last
        free_next = ((flush & o.tready)
                     | (~flush & ((take & (at_last | i.tlast) & o.tready)
                                  | (take & ~at_last & ~i.tlast & ~before_last)
                                  | (~take & ~at_last))))
        ready = Module()
        ready.d.sync += [free.eq(~self.raw & (self.start | free_next)),
                         closing.eq(self.raw | (~self.start & last_next))]
        data = Module()      # the held rows: not cleared by start
        for r, reg in enumerate(held):
            with data.If(~self.raw & i.tvalid & i.tready & (count == r)):
                data.d.sync += reg.eq(row)
        top = Module()
        top.submodules.sequencer = ResetInserter(self.start)(m)
        top.submodules.data = data
        top.submodules.ready = ready
        return top
