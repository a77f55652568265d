"""A walk over a trained or frozen matrix in word order: panels (outer), k-steps (inner).

Word ``w`` is (panel offset ``p0``, k-step ``k``): ``p0`` runs 0, step, 2*step, ... while
below ``outer``, ``k`` runs 0 .. ``inner - 1``, and ``flat`` counts the words (the address
of word-ordered memories). ``restart`` (one cycle) goes back to word 0; ``advance`` moves
to the next word; ``last`` says the current word is the walk's last, ``panel_end`` that it
is its panel's last. Loads, panel fetches, the reader and the update unit all walk this way,
which is what makes the perturbation order the same everywhere.
"""
from __future__ import annotations

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["PanelWalk"]


class PanelWalk(wiring.Component):
    def __init__(self, step: int, dim_bits: int, flat_bits: int):
        self.step = step
        super().__init__({
            "restart": In(1), "advance": In(1),
            "inner": In(dim_bits), "outer": In(dim_bits + 1),
            "k": Out(dim_bits), "p0": Out(dim_bits + 1), "panel": Out(dim_bits + 1),
            "flat": Out(flat_bits), "panel_end": Out(1), "last": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [self.panel_end.eq(self.k + 1 >= self.inner),
                     self.last.eq(self.panel_end & (self.p0 + self.step >= self.outer))]
        with m.If(self.restart):
            m.d.sync += [self.k.eq(0), self.p0.eq(0), self.panel.eq(0), self.flat.eq(0)]
        with m.Elif(self.advance):
            m.d.sync += [self.k.eq(self.k + 1), self.flat.eq(self.flat + 1)]
            with m.If(self.panel_end):
                m.d.sync += [self.k.eq(0), self.p0.eq(self.p0 + self.step),
                             self.panel.eq(self.panel + 1)]
        return m
