"""Result packer: requantized (int8) output rows, ``ROWS_PER_BEAT`` to an output beat.

The output stage's beats (``i``) carry one result row of C lanes, 32 bits a lane (the int8
result sign-extended in lane j's low byte). With ``raw`` low (requantized job) the packer
sends ``o`` one beat per ``ROWS_PER_BEAT`` = 4 rows: row r of the group in bytes ``r*C ..
r*C + C-1`` (column j at byte ``r*C + j``, bits ``8*(r*C + j)``), the rows in stream order
(across tiles); the job's last row (``tlast``) ends its beat, whose missing rows are zero.
With ``raw`` high (int32 results) ``o`` is ``i``. No latency: a group's last row leaves with
the beat, the others are held in registers (taken at once, ``i.tready`` high), so the job's
last beat leaves when its last row would. ``start`` (the job's) clears the group.
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
        })

    def elaborate(self, platform):
        m = Module()
        i, o, cols = self.i, self.o, self.cols
        row = Cat(i.tdata[ACC_BITS * j:ACC_BITS * j + OPERAND_BITS] for j in range(cols))
        count = Signal(range(ROWS_PER_BEAT))          # rows held for the current beat
        held = [Signal(len(row), name=f"held{r}") for r in range(ROWS_PER_BEAT - 1)]
        complete = (count == ROWS_PER_BEAT - 1) | i.tlast
        slots = [Mux(count == r, row, Mux(count > r, held[r], Const(0, len(row))))
                 for r in range(ROWS_PER_BEAT - 1)] + [Mux(count == ROWS_PER_BEAT - 1, row, 0)]
        with m.If(self.raw):
            m.d.comb += [o.tdata.eq(i.tdata), o.tvalid.eq(i.tvalid), o.tlast.eq(i.tlast),
                         i.tready.eq(o.tready)]
        with m.Else():
            m.d.comb += [o.tdata.eq(Cat(*slots)), o.tvalid.eq(i.tvalid & complete),
                         o.tlast.eq(i.tlast), i.tready.eq(~complete | o.tready)]
            with m.If(i.tvalid & i.tready):
                m.d.sync += count.eq(Mux(complete, 0, count + 1))
        data = Module()      # the held rows: not cleared by start
        for r, reg in enumerate(held):
            with data.If(~self.raw & i.tvalid & i.tready & (count == r)):
                data.d.sync += reg.eq(row)
        top = Module()
        top.submodules.sequencer = ResetInserter(self.start)(m)
        top.submodules.data = data
        return top
