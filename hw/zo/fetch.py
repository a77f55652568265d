"""Panel fetch: a compute job's weight panels, word by word, through the perturbation unit
into the two staging banks the feeder reads (:class:`~zoforge.hw.pe.feeder.Feeder`).

The words are walked in :class:`~.walk.PanelWalk` order (``outer`` features in panels of R,
``inner`` k-steps): the trained matrix's master copy in a branch, the frozen W or A
(sign-extended int8 in the master's format) in ``frozen_w`` / ``frozen_a``. Every word
passes :class:`~.perturb.PerturbUnit` (with ``perturb``, joined with one generator
transfer ``z``; otherwise unchanged but for ``>> 8``) and lands at ``Cat(k, bank)`` of the
staging memory, panel p in bank ``p % 2``. A panel starts only while a bank is free (at
most two panels staged or being staged); ``panels.w_banks`` counts the complete ones, the
feeder releases them (``panels.w_release``). The memory reads stall with the join (a word
read waits in the read port until the unit takes it). ``start`` clears all state;
``active`` enables the walk.
"""
from __future__ import annotations

from amaranth import Cat, Module, Mux, ResetInserter, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.zolayer.config import Formats
from zoforge.hw.pe.tiles import DIM_BITS, Buffer, PanelSignature, Tiling

from .perturb import PerturbUnit
from .walk import PanelWalk

__all__ = ["PanelFetch"]


class PanelFetch(wiring.Component):
    """``buffers``: the layer's memories (:func:`~.buffers.layer_buffers`), of which it reads
    ``master`` and, when present, ``w_frozen`` and ``a_frozen``, and writes ``stage``."""

    def __init__(self, tiling: Tiling, buffers: dict[str, Buffer], z_lanes: int,
                 z_width: int):
        self.tiling, self.z_lanes, self.z_width = tiling, z_lanes, z_width
        self.frozen = "w_frozen" in buffers
        sources = ("master", "w_frozen", "a_frozen") if self.frozen else ("master",)
        self.flat_bits = max(buffers[name].addr_bits for name in sources)
        self.master_shape = buffers["master"].shape
        super().__init__({
            "start": In(1), "active": In(1),
            "inner": In(DIM_BITS), "outer": In(DIM_BITS),
            "branch": In(1), "frozen_a": In(1),
            "perturb": In(1), "minus": In(1),
            "eps_shift": In(range(Formats.EPS_SHIFT_MAX + 1)),
            "t_rd": In(buffers["master"].read_port()),
            **({"w_rd": In(buffers["w_frozen"].read_port()),
                "a_rd": In(buffers["a_frozen"].read_port())} if self.frozen else {}),
            "z": In(stream.Signature(z_lanes * z_width)),
            "stage_wr": In(buffers["stage"].write_port()),
            "panels": Out(PanelSignature(tiling)),
        })

    def elaborate(self, platform):
        m = Module()
        R, word_bits = self.tiling.rows, self.tiling.word_bits
        m.submodules.perturb = perturb = PerturbUnit(R, self.z_lanes, self.z_width)
        # the read side walks the words; the write side counts them out of the unit
        m.submodules.walk = walk = PanelWalk(R, DIM_BITS, self.flat_bits)
        m.submodules.written = written = PanelWalk(R, DIM_BITS, 1)
        panels = self.panels
        occupied = Signal(2)                 # banks holding a panel, complete or being filled
        fetched_all, pending = Signal(), Signal()
        transfer = pending & perturb.words.ready
        bank_free = (walk.k != 0) | (occupied < 2)   # mid-panel, or a bank to start one in
        issue = self.active & ~fetched_all & bank_free & (~pending | transfer)
        out = perturb.out.valid & perturb.out.ready
        for w in (walk, written):
            m.d.comb += [w.restart.eq(self.start), w.inner.eq(self.inner),
                         w.outer.eq(self.outer)]
        m.d.comb += [walk.advance.eq(issue), written.advance.eq(out)]
        m.d.sync += pending.eq(issue | (pending & ~transfer))
        with m.If(issue & walk.last):
            m.d.sync += fetched_all.eq(1)
        m.d.sync += [
            panels.w_banks.eq(panels.w_banks + (out & written.panel_end) - panels.w_release),
            occupied.eq(occupied + (issue & (walk.k == 0)) - panels.w_release)]

        # the word: read in the issue cycle, in the read port's data from the next
        m.d.comb += [self.t_rd.addr.eq(walk.flat), self.t_rd.en.eq(issue)]
        word = self.t_rd.data
        if self.frozen:
            m.d.comb += [self.w_rd.addr.eq(walk.flat), self.w_rd.en.eq(issue),
                         self.a_rd.addr.eq(self.w_rd.addr), self.a_rd.en.eq(issue)]
            weights = Mux(self.frozen_a, self.a_rd.data.as_value(), self.w_rd.data.as_value())
            weights = data.View(self.w_rd.data.shape(), weights)
            frozen = Signal(self.master_shape)
            for i in range(R):
                m.d.comb += frozen[i].eq(weights[i] << Formats.MASTER_FRAC)
            word = Mux(self.branch, self.t_rd.data.as_value(), frozen.as_value())
        m.d.comb += [perturb.words.valid.eq(pending), perturb.words.payload.eq(word),
                     perturb.perturb.eq(self.perturb), perturb.minus.eq(self.minus),
                     perturb.eps_shift.eq(self.eps_shift), perturb.out.ready.eq(1)]
        wiring.connect(m, wiring.flipped(self.z), perturb.z)
        m.d.comb += [self.stage_wr.addr.eq(Cat(written.k[:word_bits], written.panel[0])),
                     self.stage_wr.data.eq(perturb.out.payload), self.stage_wr.en.eq(out)]
        return ResetInserter(self.start)(m)
