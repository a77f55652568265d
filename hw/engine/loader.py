"""Loader: the input stream into the X buffer and the two W banks.

The stream carries, each panel as ``ceil(K / pack)`` beats: W panel 0, X panels
0 .. ceil(M/R)-1, W panels 1 .. ceil(N/C)-1 (formats in :mod:`.engine`). X panels stay for
the whole job; W panel nt goes to bank ``nt % 2``, taken only while a bank is free
(``tready`` low otherwise). Its :class:`~zoforge.hw.systolic.signatures.PanelSignature`
tells the feeder what is loaded. ``job.start`` clears all state.
"""
from __future__ import annotations

from amaranth import Cat, Module, Mux, ResetInserter, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.hw.systolic.bus import AxiStreamSignature
from zoforge.hw.systolic.signatures import JobSignature, PanelSignature
from zoforge.hw.systolic.tiles import address_bits

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
        R, C, P = config.rows, config.cols, config.pack
        W_FIRST, X, W_REST, DONE = range(4)
        phase = Signal(2)
        word = Signal(address_bits(config.panel_words))
        k0 = Signal(DIM_BITS + 4)
        mt = Signal(address_bits(config.m_tiles))
        m0 = Signal(DIM_BITS + 7)
        nt = Signal(DIM_BITS)
        n0 = Signal(DIM_BITS + 7)
        w_loaded = Signal()

        in_w = (phase == W_FIRST) | (phase == W_REST)
        m.d.comb += beat_in.tready.eq(job.busy & ((phase == X) | (in_w & (panels.w_banks < 2))))
        beat = beat_in.tvalid & beat_in.tready
        m.d.comb += [
            self.x_wr.addr.eq(Cat(word, mt)), self.x_wr.en.eq(beat & (phase == X)),
            self.x_wr.data.eq(beat_in.tdata[:len(self.x_wr.data.as_value())]),
            self.w_wr.addr.eq(Cat(word, nt[0])), self.w_wr.en.eq(beat & in_w),
            self.w_wr.data.eq(beat_in.tdata[:len(self.w_wr.data.as_value())]),
        ]
        with m.If(beat):
            m.d.sync += [word.eq(word + 1), k0.eq(k0 + P)]
            with m.If(k0 + P >= job.k):                  # the panel's last beat
                m.d.sync += [word.eq(0), k0.eq(0)]
                with m.Switch(phase):
                    with m.Case(W_FIRST):
                        m.d.comb += w_loaded.eq(1)
                        m.d.sync += [phase.eq(X), nt.eq(1), n0.eq(C)]
                    with m.Case(X):
                        m.d.sync += panels.x_panels.eq(panels.x_panels + 1)
                        with m.If(m0 + R >= job.m):
                            m.d.sync += phase.eq(Mux(n0 >= job.n, DONE, W_REST))
                        with m.Else():
                            m.d.sync += [mt.eq(mt + 1), m0.eq(m0 + R)]
                    with m.Case(W_REST):
                        m.d.comb += w_loaded.eq(1)
                        m.d.sync += [nt.eq(nt + 1), n0.eq(n0 + C)]
                        with m.If(n0 + C >= job.n):
                            m.d.sync += phase.eq(DONE)
        m.d.sync += panels.w_banks.eq(panels.w_banks + w_loaded - panels.w_release)
        return ResetInserter(job.start)(m)
