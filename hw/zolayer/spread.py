"""Branch spread: a word of T and its queries' perturbations in, one k-step of every branch's
row lanes out (a ZO layer with ``branch_lanes`` B > 1, :mod:`zoforge.golden.zolayer.model`).

A word holds B k-steps of F = R/B features (lane ``kk*F + f``); the Q = max(1, B/2) queries
of a branch job each give it one generator transfer (their word of z, lanes alike). The
spread emits the word's B k-steps in order, kk = 0 .. B-1, each as R row lanes: lane
``b*F + f`` (branch ``b = 2j + s``, query j, s = 1 for the minus branch) carries
``T[kk*F + f]`` on ``words_out`` and query j's ``z[kk*F + f]`` on ``z_out`` (to
:class:`~.perturb.PerturbUnit`, whose per-lane ``minus`` is :attr:`minus_lanes`). Without
``perturb`` (a plain branch) no transfer is taken and ``z_out`` stays invalid.

Two registers deep: the next word and its transfers are taken while the current one's B
k-steps go out (Q < B transfers and one word fit in B cycles), so once started it gives one
k-step per cycle for as long as its inputs keep up. ``restart`` empties it.
"""
from __future__ import annotations

from amaranth import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.zolayer.config import Formats

__all__ = ["BranchSpread", "minus_lanes"]


def minus_lanes(rows: int, branch_lanes: int) -> int:
    """The row lanes of minus branches (odd branch groups), as a mask."""
    features = rows // branch_lanes
    return sum(((b % 2) << (b * features + f)) for b in range(branch_lanes)
               for f in range(features))


class BranchSpread(wiring.Component):
    def __init__(self, rows: int, branch_lanes: int, z_lanes: int, z_width: int):
        if branch_lanes < 2 or rows % branch_lanes:
            raise ValueError("a branch spread needs branch_lanes >= 2 dividing rows")
        self.rows, self.branch_lanes, self.z_lanes, self.z_width = (rows, branch_lanes,
                                                                    z_lanes, z_width)
        self.features = rows // branch_lanes
        self.queries = branch_lanes // 2
        words = data.ArrayLayout(signed(Formats.MASTER_BITS), rows)
        z_bits = z_lanes * z_width
        super().__init__({
            "restart": In(1), "perturb": In(1),
            "words": In(stream.Signature(words)),
            "z": In(stream.Signature(z_bits)),
            "words_out": Out(stream.Signature(words)),
            "z_out": Out(stream.Signature(z_bits)),
        })

    def elaborate(self, platform):
        m = Module()
        R, B, F, Q, W = self.rows, self.branch_lanes, self.features, self.queries, self.z_width
        word_bits = Formats.MASTER_BITS * R
        # the next word and its transfers
        next_word = Signal(word_bits)
        next_z = [Signal(R * W, name=f"next_z{j}") for j in range(Q)]
        has_word, taken = Signal(), Signal(range(Q + 1))
        next_full = has_word & ((taken == Q) | ~self.perturb)
        # the word going out, k-step kk
        word = Signal(word_bits)
        z = [Signal(R * W, name=f"z{j}") for j in range(Q)]
        current, kk = Signal(), Signal(range(B))
        out_ready = self.words_out.ready & (self.z_out.ready | ~self.perturb)
        sent = current & out_ready
        move = next_full & (~current | (sent & (kk == B - 1)))

        m.d.comb += [self.words.ready.eq(~has_word & ~self.restart),
                     self.z.ready.eq(self.perturb & (taken < Q) & ~self.restart)]
        with m.If(self.words.valid & self.words.ready):
            m.d.sync += [next_word.eq(self.words.payload.as_value()), has_word.eq(1)]
        with m.If(self.z.valid & self.z.ready):
            m.d.sync += taken.eq(taken + 1)
            with m.Switch(taken):
                for j in range(Q):
                    with m.Case(j):
                        m.d.sync += next_z[j].eq(self.z.payload[:R * W])
        with m.If(sent):
            m.d.sync += kk.eq(Mux(kk == B - 1, 0, kk + 1))
            with m.If(kk == B - 1):
                m.d.sync += current.eq(0)
        with m.If(move):
            m.d.sync += [word.eq(next_word), current.eq(1), kk.eq(0), has_word.eq(0),
                         taken.eq(0)]
            m.d.sync += [dst.eq(src) for dst, src in zip(z, next_z)]
        with m.If(self.restart):
            m.d.sync += [has_word.eq(0), taken.eq(0), current.eq(0), kk.eq(0)]

        # k-step kk of the word to every branch's lanes
        master_lanes, z_lanes = [], []
        for b in range(B):
            for f in range(F):
                lanes = [word.word_select(k * F + f, Formats.MASTER_BITS) for k in range(B)]
                zs = [z[b // 2].word_select(k * F + f, W) for k in range(B)]
                master_lanes.append(Array(lanes)[kk])
                z_lanes.append(Array(zs)[kk])
        m.d.comb += [self.words_out.valid.eq(current),
                     self.words_out.payload.eq(Cat(*master_lanes)),
                     self.z_out.valid.eq(current & self.perturb),
                     self.z_out.payload.eq(Cat(*z_lanes, Const(0, (self.z_lanes - R) * W)))]
        return m

