"""Panel fetch: a compute job's weight panels, word by word, through the perturbation unit
into the two staging banks the feeder reads (:class:`~zoforge.hw.pe.feeder.Feeder`).

The words are walked in :class:`~.walk.PanelWalk` order (``outer`` features in panels of R,
``inner`` k-steps): the trained matrix's master copy in a branch, the frozen W or A
(sign-extended int8 in the master's format) in ``frozen_w`` / ``frozen_a``. Every word
passes :class:`~.perturb.PerturbUnit` (in a branch without ``plain``, joined with one
generator transfer ``z``; otherwise unchanged but for ``>> 8``) and lands at ``Cat(k, bank)`` of the
staging memory, panel p in bank ``p % 2``. With ``branch_lanes`` B > 1 a word holds B
k-steps of R/B features, and :class:`~.spread.BranchSpread` turns it (with the branch job's
Q transfers) into B k-steps of every branch's rows before the unit. A panel starts only
while a bank is free (at most two panels staged or being staged); ``panels.w_banks`` counts
the ones the feeder may start: a panel counts (a cycle later) once its k-step :data:`LEAD`
is staged (the rest arrive one per cycle, ahead of the feeder's reads, so the first tile of
a panel computes while the panel is fetched), the feeder releases them (``panels.w_release``;
the fetch's own count of banks in use, which gates its issue, takes the release a cycle
later, from a register: the feeder's tile-start logic behind ``w_release`` is then not in
front of the fetch's issue, and a bank is only ever freed late, never early). A
word is read in two stages, the memory and a register behind it (the block RAM's output
register; the master copy's is :class:`~.share.MasterPorts`'), which move together with the
read ports' ``en``: both wait while the unit does not take the word. The ``job``
(:class:`~.control.LayerJobSignature`): ``launch`` clears all state, ``active`` during a
compute job enables the walk.
"""
from __future__ import annotations

from amaranth import Cat, Module, Mux, ResetInserter, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.zolayer.config import Formats
from zoforge.hw.pe.signatures import PanelSignature
from zoforge.hw.pe.tiles import Buffer, Tiling

from .buffers import Memory
from .control import LayerJobSignature
from .perturb import PerturbUnit
from .registers import DIM_BITS
from .spread import BranchSpread, minus_lanes
from .walk import PanelWalk

__all__ = ["PanelFetch", "LEAD"]

#: A panel goes to the feeder once this many of its k-steps (and one more) are staged.
LEAD = 2


class PanelFetch(wiring.Component):
    """``buffers``: the layer's memories (:func:`~.buffers.layer_buffers`), of which it reads
    ``master`` and, when present, ``w_frozen`` and ``a_frozen``, and writes ``stage``."""

    def __init__(self, tiling: Tiling, buffers: dict[str, Buffer], z_lanes: int,
                 z_width: int, branch_lanes: int = 1):
        self.tiling, self.z_lanes, self.z_width = tiling, z_lanes, z_width
        self.branch_lanes = branch_lanes
        self.frozen = Memory.W_FROZEN in buffers
        sources = ((Memory.MASTER, Memory.W_FROZEN, Memory.A_FROZEN) if self.frozen
                   else (Memory.MASTER,))
        self.flat_bits = max(buffers[name].addr_bits for name in sources)
        self.master_shape = buffers[Memory.MASTER].shape
        super().__init__({
            "job": In(LayerJobSignature()),
            "eps_shift": In(range(Formats.EPS_SHIFT_MAX + 1)),
            "t_rd": In(buffers[Memory.MASTER].read_port()),
            **({"w_rd": In(buffers[Memory.W_FROZEN].read_port()),
                "a_rd": In(buffers[Memory.A_FROZEN].read_port())} if self.frozen else {}),
            "z": In(stream.Signature(z_lanes * z_width)),
            "stage_wr": In(buffers[Memory.STAGE].write_port()),
            "panels": Out(PanelSignature(tiling)),
        })

    def elaborate(self, platform):
        m = Module()
        R, B, word_bits = self.tiling.rows, self.branch_lanes, self.tiling.word_bits
        F, shift = R // B, B.bit_length() - 1
        m.submodules.perturb = perturb = PerturbUnit(R, self.z_lanes, self.z_width)
        # the read side walks the words; the write side counts the k-steps out of the unit
        # the walks' end tests against one step are the job's flags (with B > 1 the write
        # side's inner is B times the job's: it compares its own)
        m.submodules.walk = walk = PanelWalk(F, DIM_BITS, self.flat_bits, given_ends=True)
        m.submodules.written = written = PanelWalk(F, DIM_BITS, 1, given_ends=B == 1)
        panels, job = self.panels, self.job
        active = job.computing
        occupied = Signal(2)                 # banks holding a panel, complete or being filled
        released = Signal()                  # w_release, a cycle later (for ``occupied``)
        fetched_all, pending = Signal(), Signal()
        if B > 1:      # a word of B k-steps to the rows' B branches, k-step by k-step
            m.submodules.spread = spread = BranchSpread(R, B, self.z_lanes, self.z_width)
            words, z_in = spread.words, spread.z
            m.d.comb += [spread.restart.eq(job.launch), spread.perturb.eq(perturb.perturb)]
            wiring.connect(m, spread.words_out, perturb.words)
            wiring.connect(m, spread.z_out, perturb.z)
            m.d.comb += perturb.minus.eq(minus_lanes(R, B))
        else:
            words, z_in = perturb.words, perturb.z
            m.d.comb += perturb.minus.eq(job.minus.replicate(R))
        # the words' two stages: ``read`` (in the memory), ``pending`` (in the register
        # behind it, offered to the unit); both move on ``advance``. Straight to the unit
        # (B = 1), whose output is never stalled here (``out.ready`` is 1), its
        # ``words.ready`` is ``z.valid | ~perturb`` (:class:`~.perturb.PerturbUnit`), taken
        # from the generator's valid and the job's register, not through the unit's port
        # (a level of logic less between the generator and the walk)
        read = Signal()
        takes = words.ready if B > 1 else self.z.valid | ~job.perturbing
        advance = ~pending | takes
        # mid-panel (the walk's register, not a compare of k), or a bank to start one in:
        # issue is one LUT of registers and the unit's ready
        bank_free = walk.mid | ~occupied[1]
        issue = active & ~fetched_all & bank_free & advance
        out = perturb.out.valid & perturb.out.ready
        m.d.comb += [walk.inner.eq(job.inner), written.inner.eq(job.inner << shift)]
        for w in (walk, written):
            m.d.comb += [w.restart.eq(job.launch), w.outer.eq(job.outer)]
            if w.given_ends:
                m.d.comb += [w.one_word.eq(job.one_word), w.one_panel.eq(job.one_panel)]
        m.d.comb += [walk.advance.eq(issue), written.advance.eq(out)]
        with m.If(advance):
            m.d.sync += [read.eq(issue), pending.eq(read)]
        with m.If(issue & walk.last):
            m.d.sync += fetched_all.eq(1)
        # a panel is the feeder's once its k-step LEAD is staged (the rest follow one per
        # cycle, ahead of the feeder's reads), or when it is complete if shorter; counted a
        # cycle later (a register between the walk's end test and the feeder's count)
        # (k-step LEAD comes only in a panel longer than LEAD, and a shorter one ends
        # before it: the panel's end counts below LEAD, k-step LEAD above; no test of the
        # job's inner, which every unit's logic reads)
        ready = Signal()
        m.d.sync += ready.eq(out & ((written.k == LEAD)
                                    | (written.panel_end & (written.k < LEAD))))
        m.d.sync += [
            panels.w_banks.eq(panels.w_banks + ready - panels.w_release),
            released.eq(panels.w_release),
            occupied.eq(occupied + (issue & ~walk.mid) - released)]

        # the word: read in the issue cycle, in the register behind the memory two
        # advances later (top: the registers behind the block RAMs have no reset)
        top = Module()
        m.d.comb += [self.t_rd.addr.eq(walk.flat), self.t_rd.en.eq(advance)]
        word = self.t_rd.data
        if self.frozen:
            m.d.comb += [self.w_rd.addr.eq(walk.flat), self.w_rd.en.eq(advance),
                         self.a_rd.addr.eq(self.w_rd.addr), self.a_rd.en.eq(advance)]
            behind = []
            for port, name in ((self.w_rd, "w_word"), (self.a_rd, "a_word")):
                reg = Signal.like(port.data, name=name)
                with top.If(advance):
                    top.d.sync += reg.eq(port.data)
                behind.append(reg)
            weights = Mux(job.frozen_a, behind[1].as_value(), behind[0].as_value())
            weights = data.View(self.w_rd.data.shape(), weights)
            frozen = Signal(self.master_shape)
            for i in range(R):
                m.d.comb += frozen[i].eq(weights[i] << Formats.MASTER_FRAC)
            word = Mux(job.branch, self.t_rd.data.as_value(), frozen.as_value())
        m.d.comb += [words.valid.eq(pending), words.payload.eq(word),
                     perturb.perturb.eq(job.perturbing),
                     perturb.eps_shift.eq(self.eps_shift), perturb.out.ready.eq(1)]
        wiring.connect(m, wiring.flipped(self.z), z_in)
        m.d.comb += [self.stage_wr.addr.eq(Cat(written.k[:word_bits], written.panel[0])),
                     self.stage_wr.data.eq(perturb.out.payload), self.stage_wr.en.eq(out)]
        top.submodules.core = ResetInserter(job.launch)(m)
        return top
