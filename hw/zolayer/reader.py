"""Master reader (``read_master``): the trained matrix's master copy out on the output
stream, one word per beat in :class:`~.walk.PanelWalk` order (``inner`` x ``outer``), lane i
the 24-bit value sign-extended to 32 bits, ``tlast`` on the last word. The read port is the
parent's to share (:class:`~.share.MasterPorts`: the data T_READ_LATENCY = 2 cycles after
the read, a pipeline of the memory and a register that move on the port's ``en``); the
reader drives ``en`` with the stream's advance, so a word read waits in that pipeline while
the stream is stalled. The ``job``
(:class:`~.control.LayerJobSignature`): ``launch`` clears the walk, ``active`` in a
``read_master`` job enables it; ``done`` pulses with the last beat.
"""
from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.hw.pe.bus import AxiStreamSignature
from zoforge.hw.pe.tiles import Buffer

from .control import LayerJobSignature
from .registers import DIM_BITS
from .walk import PanelWalk

__all__ = ["MasterReader"]


class MasterReader(wiring.Component):
    def __init__(self, master: Buffer, rows: int, lanes: int, word_features: int | None = None):
        self.rows, self.lanes = rows, lanes
        self.word_features = word_features or rows      # the walk's step in features
        self.addr_bits = master.addr_bits
        super().__init__({
            "job": In(LayerJobSignature()),
            "t_rd": In(master.read_port()),
            "m_axis": Out(AxiStreamSignature(32 * lanes)),
            "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        axis, job = self.m_axis, self.job
        m.submodules.walk = walk = PanelWalk(self.word_features, DIM_BITS, self.addr_bits,
                                             given_ends=True)
        # reading: ``active & read_master`` until the last word's issue, a register of its
        # own (set at a read_master job's launch: active from the next cycle on; cleared by
        # the last word's issue), so the issue is one LUT of it and the stream's advance in
        # front of the walk's enables (not a read_all and the job's flags: two LUT levels)
        reading = Signal()
        adv = ~axis.tvalid | axis.tready
        issue = reading & adv
        m.d.comb += [walk.restart.eq(job.launch), walk.advance.eq(issue),
                     walk.inner.eq(job.inner), walk.outer.eq(job.outer),
                     walk.one_word.eq(job.one_word), walk.one_panel.eq(job.one_panel),
                     self.t_rd.addr.eq(walk.flat), self.t_rd.en.eq(adv)]
        # a word is read with ``issue``, in the memory one cycle (valid_1, last_1), then in
        # the port's register on the stream
        valid_1, last_1 = Signal(), Signal()
        with m.If(job.launch):
            m.d.sync += [valid_1.eq(0), axis.tvalid.eq(0)]
        with m.Elif(adv):
            m.d.sync += [valid_1.eq(issue), last_1.eq(issue & walk.last),
                         axis.tvalid.eq(valid_1), axis.tlast.eq(last_1)]
        with m.If(job.launch):
            m.d.sync += reading.eq(job.read_master)
        with m.Elif(adv & walk.last):
            m.d.sync += reading.eq(0)
        m.d.comb += self.done.eq(axis.tvalid & axis.tlast & axis.tready)
        for i in range(self.rows):
            m.d.comb += axis.tdata[32 * i:32 * (i + 1)].eq(self.t_rd.data[i])
        return m
