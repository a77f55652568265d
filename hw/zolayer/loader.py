"""Loader: the load jobs' words from the input stream into the layer's memories.

One word per beat, in the word orders of :mod:`.layer`: ``load_x`` a beat of P k-steps of C
tokens (packed bytes, :func:`~.layouts.token_words`), token tiles (outer) by blocks of P
k-steps (inner, :class:`~.token_buffer.TokenWalk`), written whole into a word of the packed
token buffer; ``load_w`` / ``load_a`` / ``load_master`` panels of R features by k-steps
(``load_master`` with ``word_features`` F < R: panels of F features by blocks of R/F
k-steps; :class:`~.walk.PanelWalk` order, ``inner`` x ``outer`` of the ``job``,
:class:`~.control.LayerJobSignature`; lane l in bits ``[32l, 32l+32)``, values in the low
bits) into the frozen W, A or the master copy, where
``load_master`` also clears the update accumulator D. X, W and A are written a cycle after
their beat (from registers), T and D through the shared ports (registered there). ``tready`` is high from the cycle
after ``launch`` (while ``active``) to the job's last word (``done``). The master and
accumulator ports are shared with the update unit (:class:`~.share.MasterPorts`).
"""
from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.zolayer.config import Formats
from zoforge.hw.pe.bus import AxiStreamSignature
from zoforge.hw.pe.tiles import Buffer, Tiling

from .buffers import Memory
from .control import LayerJobSignature
from .registers import DIM_BITS
from .token_buffer import TokenWalk
from .walk import PanelWalk

__all__ = ["LayerLoader", "LOAD_JOBS"]

LOAD_JOBS = ("load_x", "load_w", "load_a", "load_master")


class LayerLoader(wiring.Component):
    """``buffers``: the layer's memories (:func:`~.buffers.layer_buffers`); ``max_k``: the
    token buffer's k-steps per token tile."""

    def __init__(self, tiling: Tiling, buffers: dict[str, Buffer], lanes: int, max_k: int,
                 word_features: int | None = None):
        self.tiling, self.lanes, self.max_k = tiling, lanes, max_k
        self.word_features = word_features or tiling.rows
        self.frozen = Memory.W_FROZEN in buffers
        written = [Memory.X, Memory.MASTER, Memory.ACCUMULATOR]
        written += [Memory.W_FROZEN, Memory.A_FROZEN] if self.frozen else []
        self.ports = {name: buffers[name] for name in written}
        self.flat_bits = max(buffers[name].addr_bits for name in written[1:])
        super().__init__({
            "job": In(LayerJobSignature()),
            "s_axis": In(AxiStreamSignature(32 * lanes)),
            **{f"{name}_wr": In(buffer.write_port()) for name, buffer in self.ports.items()},
            "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        t, job = self.tiling, self.job
        R = t.rows
        # words of R features (W, A; T with one branch per job, else R / branch_lanes
        # features of branch_lanes k-steps), and token tiles of C by words of P k-steps (X)
        m.submodules.walk = walk = PanelWalk(self.word_features, DIM_BITS, self.flat_bits,
                                             given_ends=True)
        m.submodules.x_walk = x_walk = TokenWalk(t, self.max_k, self.lanes)
        # a load job's words still to come (``armed``; ``armed_x`` in ``load_x``): registers
        # set at the launch (the job's flags are set by then) and cleared with the last word,
        # so a beat and each walk's advance are one LUT of registers and ``tvalid``
        armed, armed_x = Signal(), Signal()
        loading = Cat(getattr(job, name) for name in LOAD_JOBS).any()
        with m.If(job.launch):
            m.d.sync += [armed.eq(loading), armed_x.eq(job.load_x)]
        m.d.comb += self.s_axis.tready.eq(job.active & armed)
        beat = self.s_axis.tvalid & job.active & armed
        lane = [self.s_axis.tdata[32 * l:32 * (l + 1)] for l in range(self.lanes)]
        for w in (walk, x_walk):
            m.d.comb += [w.restart.eq(job.launch), w.inner.eq(job.inner),
                         w.outer.eq(job.outer)]
        m.d.comb += [walk.one_word.eq(job.one_word), walk.one_panel.eq(job.one_panel)]
        m.d.comb += [walk.advance.eq(beat),
                     x_walk.advance.eq(self.s_axis.tvalid & job.active & armed_x)]
        # one expression, not an assignment under m.If (X on Icarus until the first beat):
        # see tile_done in zoforge.hw.pe.output
        m.d.comb += self.done.eq(beat & Mux(job.load_x, x_walk.last, walk.last))
        with m.If(self.done):
            m.d.sync += [armed.eq(0), armed_x.eq(0)]

        # X, W and A are written a cycle after the beat, from registers (nothing between the
        # stream's handshake and a block RAM's inputs; no job reads them before its own
        # start); T and D go through :class:`~.share.MasterPorts`, which registers them
        x_wr, t_wr, d_wr = self.x_buffer_wr, self.master_wr, self.update_accumulator_wr
        m.d.sync += [x_wr.addr.eq(Cat(x_walk.word, x_walk.tile)),
                     x_wr.data.eq(self.s_axis.tdata[:len(x_wr.data.as_value())]),
                     x_wr.en.eq(beat & job.load_x)]
        m.d.comb += [t_wr.addr.eq(walk.flat),
                     t_wr.data.eq(Cat(l[:Formats.MASTER_BITS] for l in lane[:R])),
                     t_wr.en.eq(beat & job.load_master),
                     d_wr.addr.eq(walk.flat), d_wr.data.eq(0),
                     d_wr.en.eq(beat & job.load_master)]
        if self.frozen:
            for port, name in ((self.w_frozen_wr, "load_w"), (self.a_frozen_wr, "load_a")):
                m.d.sync += [port.addr.eq(walk.flat),
                             port.data.eq(Cat(l[:Formats.ACT_BITS] for l in lane[:R])),
                             port.en.eq(beat & getattr(job, name))]
        return m
