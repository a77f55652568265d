"""Loader: the input stream into the X buffer and the two W banks.

The stream carries W panel 0, X panels 0 .. ceil(M/R)-1, W panels 1 .. ceil(N/C)-1 (formats
in :mod:`.engine`): an X panel as ``ceil(K / pack)`` beats of one word (``pack`` k-steps),
a W panel as ``ceil(ceil(K / pack) / G)`` beats of ``G = w_beat_words`` words. One word is
written a cycle: a W beat's later words from the held beat, ``tready`` low meanwhile (so a
panel takes one cycle a word, as with one word a beat); the last beat's words past the
panel's end are not written. X panels stay for the whole job; W panel nt goes to bank
``nt % 2``, taken only while a bank is free (``tready`` low otherwise). The memories are
written one cycle after each word's issue, from registers; its
:class:`~zoforge.hw.pe.signatures.PanelSignature` tells the feeder what is written.
``job.start`` clears all state.
"""
from __future__ import annotations

from amaranth import C as C_, Cat, Module, Mux, ResetInserter, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.hw.pe.bus import AxiStreamSignature
from zoforge.hw.pe.signatures import JobSignature, PanelSignature
from zoforge.hw.pe.tiles import address_bits

from .buffers import Memory, engine_buffers, engine_tiling
from .config import DIM_BITS, EngineConfig

__all__ = ["Loader"]


class Loader(wiring.Component):
    def __init__(self, config: EngineConfig):
        self.config = config
        buffers = engine_buffers(config)
        super().__init__({
            "job": In(JobSignature(DIM_BITS)),
            "s_axis": In(AxiStreamSignature(8 * config.in_bytes)),
            "panels": Out(PanelSignature(engine_tiling(config))),
            "x_wr": In(buffers[Memory.X].write_port()),
            "w_wr": In(buffers[Memory.W].write_port()),
        })

    def elaborate(self, platform):
        m = Module()
        config, job, beat_in, panels = self.config, self.job, self.s_axis, self.panels
        R, C, P, G = config.rows, config.cols, config.pack, config.w_beat_words
        W_FIRST, X, W_REST, DONE = range(4)
        # the phase rests in DONE from the reset to the first start and from a job's last
        # panel to the next start (the job's ``start`` sets W_FIRST: a register outside the
        # sequencer's reset), so that a phase that takes beats is the job's ``busy`` too:
        # ``tready`` is one LUT of the loader's own registers, not of the far-away,
        # high-fan-out ``busy``
        phase = Signal(2, init=DONE)
        word = Signal(address_bits(config.panel_words))
        # the panel's last word, from registers: ``k2`` is the first k-step two words on;
        # a panel's first word is its last when K <= pack
        k2 = Signal(DIM_BITS + 4, init=2 * P)
        fresh, later_last, short = Signal(init=1), Signal(), Signal()
        last_word = Mux(fresh, short, later_last)
        # the same for the last X panel and the last W panel: ``m2`` / ``n2``, the first
        # row / column two panels on, and the first one's test against the job
        mt = Signal(address_bits(config.m_tiles))
        nt = Signal(DIM_BITS)
        m2 = Signal(DIM_BITS + 7, init=2 * R)
        n2 = Signal(DIM_BITS + 7, init=3 * C)
        first_x, first_w = Signal(init=1), Signal(init=1)
        later_m, later_n, short_m, short_n, short_n2 = (Signal() for _ in range(5))
        last_x = Mux(first_x, short_m, later_m)
        last_w = Mux(first_w, short_n2, later_n)
        w_loaded, x_loaded = Signal(), Signal()
        held = Signal(2)        # W banks holding a panel (this side: a bank is free for the
                                # next beat at once)

        # the held W beat's words still to write (its first is issued with the beat), and
        # ``more``, ``pending != 0`` as a register of its own, set with ``pending``: it
        # selects the held beat's shift for every bit of the data (419 loads in a 32 x 8),
        # which a LUT of ``pending``'s bits put a level further from the clock
        if G > 1:
            pending, more = Signal(range(G)), Signal()
        else:
            pending, more = None, C_(0, 1)
        in_w = (phase == W_FIRST) | (phase == W_REST)
        m.d.comb += beat_in.tready.eq(~more & ((phase == X) | (in_w & (held < 2))))
        beat = beat_in.tvalid & beat_in.tready
        issue = beat | more     # a word goes to a memory (written in the next cycle)
        # the writes one cycle after the issue, from registers (the beat's decision drives
        # no block RAM enable); the panel counts the feeder sees follow them
        x_en, w_en = Signal(), Signal()
        x_addr, w_addr = Signal.like(self.x_wr.addr), Signal.like(self.w_wr.addr)
        # the X panel count advances one cycle after its last beat, from a register
        # (``x_next``): the beat's decision then ends at one flip-flop beside it, not at
        # every bit of the count next to the X buffer (on the ECP5 that route crossed the
        # chip: docs/accelerator.md); the address adds the pending step, so it is the same
        x_next = Signal()
        m.d.sync += [x_en.eq(issue & (phase == X)), w_en.eq(issue & in_w),
                     x_addr.eq(Cat(word, (mt + x_next)[:len(mt)])), w_addr.eq(Cat(word, nt[0])),
                     mt.eq(mt + x_next), x_next.eq(0)]
        m.d.comb += [self.x_wr.addr.eq(x_addr), self.x_wr.en.eq(x_en),
                     self.w_wr.addr.eq(w_addr), self.w_wr.en.eq(w_en)]
        with m.If(issue):
            m.d.sync += [word.eq(word + 1), k2.eq(k2 + P), later_last.eq(k2 >= job.k),
                         fresh.eq(0)]
            if G > 1:
                with m.If(beat):
                    m.d.sync += [pending.eq(Mux(in_w, G - 1, 0)), more.eq(in_w)]
                with m.Else():
                    m.d.sync += [pending.eq(pending - 1), more.eq(pending != 1)]
            with m.If(last_word):
                # (a last beat's words past the panel's end are dropped)
                m.d.sync += [word.eq(0), k2.eq(2 * P), fresh.eq(1)]
                if G > 1:
                    m.d.sync += [pending.eq(0), more.eq(0)]
                with m.Switch(phase):
                    with m.Case(W_FIRST):
                        m.d.comb += w_loaded.eq(1)
                        m.d.sync += nt.eq(1)
                    with m.Case(X):
                        m.d.comb += x_loaded.eq(1)
                        with m.If(~last_x):
                            m.d.sync += [x_next.eq(1), m2.eq(m2 + R),
                                         later_m.eq(m2 >= job.m), first_x.eq(0)]
                    with m.Case(W_REST):
                        m.d.comb += w_loaded.eq(1)
                        m.d.sync += [nt.eq(nt + 1), n2.eq(n2 + C), later_n.eq(n2 >= job.n),
                                     first_w.eq(0)]
        w_written, x_written = Signal(), Signal()
        m.d.sync += [held.eq(held + w_loaded - panels.w_release),
                     w_written.eq(w_loaded), x_written.eq(x_loaded),
                     panels.w_banks.eq(panels.w_banks + w_written - panels.w_release),
                     panels.x_panels.eq(panels.x_panels + x_written)]
        top = Module()
        top.submodules.sequencer = ResetInserter(job.start)(m)
        # the phase after a panel's last word
        with top.If(job.start):
            top.d.sync += phase.eq(W_FIRST)
        with top.Elif(issue & last_word):
            top.d.sync += phase.eq(Mux(phase == W_FIRST, X,
                                       Mux(phase == X, Mux(last_x, Mux(short_n, DONE, W_REST), X),
                                           Mux(last_w | (phase == DONE), DONE, W_REST))))
        # the data are not cleared by job.start: no reset logic in front of the memories;
        # taken every cycle (the handshake decides only the enables), but a held W beat's,
        # which moves down one word a cycle (its next word at the bottom)
        data = Signal(len(beat_in.tdata))
        top.d.sync += data.eq(Mux(more, data >> len(self.w_wr.data.as_value()),
                                  beat_in.tdata))
        # the job's dimensions are set (and stay) before the start
        top.d.sync += [short.eq(job.k <= P), short_m.eq(job.m <= R),
                       short_n.eq(job.n <= C), short_n2.eq(job.n <= 2 * C)]
        top.d.comb += [self.x_wr.data.eq(data[:len(self.x_wr.data.as_value())]),
                       self.w_wr.data.eq(data[:len(self.w_wr.data.as_value())])]
        return top
