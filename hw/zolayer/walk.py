"""A walk over a trained or frozen matrix in word order: panels (outer), k-steps (inner).

Word ``w`` is (panel ``panel``, k-step ``k``): panels start at features 0, step, 2*step, ...
while below ``outer``, ``k`` runs 0 .. ``inner - 1``, and ``flat`` counts the words (the
address of word-ordered memories). ``restart`` (one cycle) goes back to word 0; ``advance``
moves to the next word; ``last`` says the current word is the walk's last, ``panel_end``
that it is its panel's last. Loads, panel fetches, the reader and the update unit all walk
this way, which is what makes the perturbation order the same everywhere.

The next word's k-step and the next panel's first feature are registers of their own, and
so are the end tests: each cycle they compare the values those registers take at the edge
with ``inner`` / ``outer`` (no comparison behind ``advance``). ``inner`` and ``outer`` must
hold from the cycle before ``restart`` to the walk's end (the job's walk is set with its
flags, :mod:`.control`), and ``advance`` must not come with ``restart``.
"""
from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["PanelWalk"]


class PanelWalk(wiring.Component):
    def __init__(self, step: int, dim_bits: int, flat_bits: int):
        self.step, self.dim_bits = step, dim_bits
        super().__init__({
            "restart": In(1), "advance": In(1),
            "inner": In(dim_bits), "outer": In(dim_bits + 1),
            "k": Out(dim_bits), "panel": Out(dim_bits + 1),
            "flat": Out(flat_bits), "panel_end": Out(1), "last": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        k_next = Signal(self.dim_bits + 1, init=1)              # k + 1
        p_next = Signal(self.dim_bits + 2, init=self.step)      # the next panel's feature
        # the registers' values after this edge, and the end tests on them, registered
        k_after, p_after = Signal.like(k_next), Signal.like(p_next)
        panels_end = Signal()                                    # p_next >= outer
        m.d.comb += [k_after.eq(k_next), p_after.eq(p_next)]
        with m.If(self.restart):
            m.d.sync += [self.k.eq(0), self.panel.eq(0), self.flat.eq(0)]
            m.d.comb += [k_after.eq(1), p_after.eq(self.step)]
        with m.Elif(self.advance):
            m.d.sync += [self.k.eq(k_next), self.flat.eq(self.flat + 1)]
            m.d.comb += k_after.eq(k_next + 1)
            with m.If(self.panel_end):
                m.d.sync += [self.k.eq(0), self.panel.eq(self.panel + 1)]
                m.d.comb += [k_after.eq(1), p_after.eq(p_next + self.step)]
        m.d.sync += [k_next.eq(k_after), p_next.eq(p_after),
                     self.panel_end.eq(k_after >= self.inner),
                     panels_end.eq(p_after >= self.outer)]
        m.d.comb += self.last.eq(self.panel_end & panels_end)
        return m
