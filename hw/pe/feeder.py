"""Feeder: the X buffer and the W banks into the systolic array, one k-step per cycle.

Tiles run back to back (column panel nt outer, row panel mt inner), each for
``pack * ceil(K / pack)`` cycles, a tile beginning only when its X panel and W bank are
loaded, a result bank is free (at most two tiles in flight between here and the output
stage) and at least ``min_gap`` cycles after the previous tile began
(:attr:`~.array.SystolicArray.min_tile_interval`).

Outputs, one cycle after the buffer reads: the X operands ``a`` with the array's flags
``valid``, ``first`` (k = 0) and ``last`` (k = K-1; both only with ``valid``), and the
weights of the same k-step as the stream ``w`` (one k-step of C weights per payload,
``w.valid`` = ``valid``). The array cannot wait, so ``w`` is always ready: a block that
transforms the weights on their way to the array's ``b`` inputs must take one payload per
cycle and, if it adds latency, ``a`` and the flags need the same delay. ``job.start``
clears all state.
"""
from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, ResetInserter, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .buffers import address_bits, engine_buffers, operands
from .config import DIM_BITS, EngineConfig
from .loader import PanelSignature
from .registers import JobSignature

__all__ = ["Feeder", "weight_stream"]


def weight_stream(cols: int) -> stream.Signature:
    """One k-step of ``cols`` INT8 weights per payload, always ready."""
    return stream.Signature(operands(cols), always_ready=True)


class Feeder(wiring.Component):
    def __init__(self, config: EngineConfig, min_gap: int):
        self.config, self.min_gap = config, min_gap
        buffers = engine_buffers(config)
        super().__init__({
            "job": In(JobSignature()),
            "panels": In(PanelSignature(config)),
            "x_rd": In(buffers["x_buffer"].read_port()),
            "w_rd": In(buffers["w_buffer"].read_port()),
            "tile_done": In(1),      # the output stage has read a result bank out
            "a": Out(operands(config.rows)),
            "valid": Out(1), "first": Out(1), "last": Out(1),
            "w": Out(weight_stream(config.cols)),
        })

    def elaborate(self, platform):
        m = Module()
        config, job, panels, min_gap = self.config, self.job, self.panels, self.min_gap
        R, C, P = config.rows, config.cols, config.pack
        active, finished = Signal(), Signal()
        word = Signal(address_bits(config.panel_words))
        k0 = Signal(DIM_BITS + 4)
        lane = Signal(range(P)) if P > 1 else Const(0, 1)   # k-step within the word
        mt = Signal(address_bits(config.m_tiles))
        m0 = Signal(DIM_BITS + 7)
        nt = Signal(DIM_BITS)
        n0 = Signal(DIM_BITS + 7)
        gap = Signal(range(min_gap + 1), init=min_gap)      # cycles since the last begin
        in_flight = Signal(2)       # tiles begun whose result bank is not yet read out

        begin = (job.busy & ~finished & ~active & (panels.x_panels > mt)
                 & (panels.w_banks != 0) & (in_flight < 2) & (gap >= min_gap))
        step = active | begin
        is_first = (k0 == 0) & (lane == 0)
        is_last = (k0 + P >= job.k) & (lane == P - 1)
        m.d.comb += [self.x_rd.addr.eq(Cat(word, mt)), self.w_rd.addr.eq(Cat(word, nt[0])),
                     self.x_rd.en.eq(step & (lane == 0)), self.w_rd.en.eq(step & (lane == 0))]
        m.d.sync += [gap.eq(Mux(begin, 1, Mux(gap == min_gap, gap, gap + 1))),
                     in_flight.eq(in_flight + begin - self.tile_done)]
        with m.If(step):
            m.d.sync += active.eq(1)
            if P > 1:
                m.d.sync += lane.eq(lane + 1)
            with m.If(lane == P - 1):
                m.d.sync += [word.eq(word + 1), k0.eq(k0 + P)]
                if P > 1:
                    m.d.sync += lane.eq(0)
            with m.If(is_last):
                m.d.sync += [active.eq(0), word.eq(0), k0.eq(0)]
                with m.If(m0 + R >= job.m):
                    m.d.comb += panels.w_release.eq(1)
                    m.d.sync += [mt.eq(0), m0.eq(0), nt.eq(nt + 1), n0.eq(n0 + C)]
                    with m.If(n0 + C >= job.n):
                        m.d.sync += finished.eq(1)
                with m.Else():
                    m.d.sync += [mt.eq(mt + 1), m0.eq(m0 + R)]

        # the buffers' read latency: operands and flags one cycle after the step
        step_lane = Signal.like(lane) if P > 1 else lane
        if P > 1:
            m.d.sync += step_lane.eq(lane)
        m.d.sync += [self.valid.eq(step), self.first.eq(step & is_first),
                     self.last.eq(step & is_last)]
        m.d.comb += [self.a.eq(self.x_rd.data[step_lane]), self.w.valid.eq(self.valid),
                     self.w.payload.eq(self.w_rd.data[step_lane])]
        return ResetInserter(job.start)(m)
