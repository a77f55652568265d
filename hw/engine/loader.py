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
        # the panel's last word, a register of its own (``last_word``): ``k2`` is the first
        # k-step two words on; a panel's first word is its last when K <= pack (``short``).
        # The panel ends' kinds likewise, each set with ``last_word`` (``last_word`` and the
        # phase): ``end_x`` an X panel's, ``end_x_on`` one with another X panel after it,
        # ``end_w`` a W panel's, ``end_w_rest`` a W panel's past the first. So each panel
        # end's enables are the issue and one register: in the engine ABC maps the loader
        # for area beside the 1,024-bit held-beat multiplexer, and the issue ANDed with
        # ``last_word`` and the phase's bits one at a time took them 5-6 LUT levels deep
        k2 = Signal(DIM_BITS + 4, init=2 * P)
        last_word, end_x, end_x_on, end_w, end_w_rest = (Signal() for _ in range(5))
        # the same for the last X panel and the last W panel: ``m2`` / ``n2``, the first
        # row / column two panels on, and the first one's test against the job (``short_m``,
        # ``short_n2``), loaded by ``start``
        mt = Signal(address_bits(config.m_tiles))
        nt = Signal(DIM_BITS)
        m2 = Signal(DIM_BITS + 7, init=2 * R)
        n2 = Signal(DIM_BITS + 7, init=3 * C)
        last_x, last_w = Signal(), Signal()
        short, short_m, short_n, short_n2 = (Signal() for _ in range(4))
        w_loaded, x_loaded = Signal(), Signal()
        held = Signal(2)        # W banks holding a panel (this side: a bank is free for the
                                # next beat at once)

        # the held W beat's words still to write (its first is issued with the beat), and
        # ``more``, ``pending != 0`` as a register of its own, set with ``pending``; the
        # held beat's shift for every bit of the data is selected by ``hold_n``, ``~more``
        # as a register of its own (a copy that differs, so not merged with ``more``): the
        # issue's and the enables' ``more`` drives a few dozen loads, not 932 (the 64 x 8)
        if G > 1:
            pending, more, hold_n = Signal(range(G)), Signal(), Signal(init=1)
        else:
            pending, more, hold_n = None, C_(0, 1), C_(1, 1)
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
            m.d.sync += [word.eq(word + 1), k2.eq(k2 + P)]
            if G > 1:
                with m.If(beat):
                    m.d.sync += [pending.eq(Mux(in_w, G - 1, 0)), more.eq(in_w),
                                 hold_n.eq(~in_w)]
                with m.Else():
                    m.d.sync += [pending.eq(pending - 1), more.eq(pending != 1),
                                 hold_n.eq(pending == 1)]
            with m.If(last_word):
                # (a last beat's words past the panel's end are dropped)
                m.d.sync += [word.eq(0), k2.eq(2 * P)]
                if G > 1:
                    m.d.sync += [pending.eq(0), more.eq(0), hold_n.eq(1)]
        # the panel ends (a W panel's count: 0 from the start, so the first's end sets 1)
        m.d.comb += [x_loaded.eq(issue & end_x), w_loaded.eq(issue & end_w)]
        with m.If(issue & end_x_on):
            m.d.sync += [x_next.eq(1), m2.eq(m2 + R)]
        with m.If(w_loaded):
            m.d.sync += nt.eq(nt + 1)
        with m.If(issue & end_w_rest):
            m.d.sync += n2.eq(n2 + C)
        w_written, x_written = Signal(), Signal()
        m.d.sync += [held.eq(held + w_loaded - panels.w_release),
                     w_written.eq(w_loaded), x_written.eq(x_loaded),
                     panels.w_banks.eq(panels.w_banks + w_written - panels.w_release),
                     panels.x_panels.eq(panels.x_panels + x_written)]
        top = Module()
        top.submodules.sequencer = ResetInserter(job.start)(m)
        # the phase after a panel's last word; the last-word, panel-end and last-panel
        # registers, set by ``start`` from the job's first tests (the dimensions are set
        # before the start; the first panel is W_FIRST's)
        next_phase = Mux(phase == W_FIRST, X,
                         Mux(phase == X, Mux(last_x, Mux(short_n, DONE, W_REST), X),
                             Mux(last_w | (phase == DONE), DONE, W_REST)))
        next_last_x = Mux(phase == X, m2 >= job.m, last_x)     # an X panel's end tests the next
        later = k2 >= job.k         # the word after the issued one is its panel's last
        with top.If(job.start):
            top.d.sync += [phase.eq(W_FIRST), last_word.eq(short), last_x.eq(short_m),
                           last_w.eq(short_n2), end_x.eq(0), end_x_on.eq(0),
                           end_w.eq(short), end_w_rest.eq(0)]
        with top.Elif(issue):
            with top.If(last_word):
                top.d.sync += [phase.eq(next_phase), last_word.eq(short),
                               last_x.eq(next_last_x),
                               end_x.eq(short & (next_phase == X)),
                               end_x_on.eq(short & (next_phase == X) & ~next_last_x),
                               end_w.eq(short & (next_phase == W_REST)),
                               end_w_rest.eq(short & (next_phase == W_REST))]
                with top.If(phase == W_REST):
                    top.d.sync += last_w.eq(n2 >= job.n)
            with top.Else():
                top.d.sync += [last_word.eq(later), end_x.eq(later & (phase == X)),
                               end_x_on.eq(later & (phase == X) & ~last_x),
                               end_w.eq(later & in_w), end_w_rest.eq(later & (phase == W_REST))]
        # the data are not cleared by job.start: no reset logic in front of the memories;
        # taken every cycle (the handshake decides only the enables), but a held W beat's,
        # which moves down one word a cycle (its next word at the bottom)
        data = Signal(len(beat_in.tdata))
        top.d.sync += data.eq(Mux(hold_n, beat_in.tdata,
                                  data >> len(self.w_wr.data.as_value())))
        # the job's dimensions are set (and stay) before the start
        top.d.sync += [short.eq(job.k <= P), short_m.eq(job.m <= R),
                       short_n.eq(job.n <= C), short_n2.eq(job.n <= 2 * C)]
        top.d.comb += [self.x_wr.data.eq(data[:len(self.x_wr.data.as_value())]),
                       self.w_wr.data.eq(data[:len(self.w_wr.data.as_value())])]
        return top
