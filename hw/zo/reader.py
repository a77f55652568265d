"""Master reader (``read_master``): the trained matrix's master copy out on the output
stream, one word per beat in :class:`~.walk.PanelWalk` order (``inner`` x ``outer``), lane i
the 24-bit value sign-extended to 32 bits, ``tlast`` on the last word. The read port is the
parent's to share; a word read waits in it while the stream is stalled. ``start`` clears
the walk, ``active`` enables it, ``done`` pulses with the last beat.
"""
from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.hw.bus import AxiStreamSignature
from zoforge.hw.pe.tiles import DIM_BITS, Buffer

from .walk import PanelWalk

__all__ = ["MasterReader"]


class MasterReader(wiring.Component):
    def __init__(self, master: Buffer, rows: int, lanes: int):
        self.rows, self.lanes = rows, lanes
        self.addr_bits = master.addr_bits
        super().__init__({
            "start": In(1), "active": In(1), "inner": In(DIM_BITS), "outer": In(DIM_BITS),
            "t_rd": In(master.read_port()),
            "m_axis": Out(AxiStreamSignature(32 * lanes)),
            "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        axis = self.m_axis
        m.submodules.walk = walk = PanelWalk(self.rows, DIM_BITS, self.addr_bits)
        read_all = Signal()
        adv = ~axis.tvalid | axis.tready
        issue = self.active & ~read_all & adv
        m.d.comb += [walk.restart.eq(self.start), walk.advance.eq(issue),
                     walk.inner.eq(self.inner), walk.outer.eq(self.outer),
                     self.t_rd.addr.eq(walk.flat), self.t_rd.en.eq(adv)]
        with m.If(self.start):
            m.d.sync += [read_all.eq(0), axis.tvalid.eq(0)]
        with m.Elif(adv):
            m.d.sync += [axis.tvalid.eq(issue), axis.tlast.eq(issue & walk.last)]
        with m.If(issue & walk.last):
            m.d.sync += read_all.eq(1)
        m.d.comb += self.done.eq(axis.tvalid & axis.tlast & axis.tready)
        for i in range(self.rows):
            m.d.comb += axis.tdata[32 * i:32 * (i + 1)].eq(self.t_rd.data[i])
        return m
