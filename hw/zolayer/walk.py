"""A walk over a trained or frozen matrix in word order: panels (outer), k-steps (inner).

Word ``w`` is (panel ``panel``, k-step ``k``): panels start at features 0, step, 2*step, ...
while below ``outer``, ``k`` runs 0 .. ``inner - 1``, and ``flat`` counts the words (the
address of word-ordered memories). ``restart`` (one cycle) goes back to word 0; ``advance``
moves to the next word; ``last`` says the current word is the walk's last, ``panel_end``
that it is its panel's last, ``mid`` that it is not its panel's first (``k != 0``, a
register of its own). Loads, panel fetches, the reader and the update unit all walk
this way, which is what makes the perturbation order the same everywhere.

The k-step of the word after the next and the first feature of the panel after the next
are registers of their own, and so are the end tests: they are set with the registers, from comparisons of registers with
``inner`` / ``outer`` (no comparison behind ``advance``), so ``inner`` and ``outer`` must
hold from ``restart`` to the walk's end (the job's walk is set with its flags,
:mod:`.control`).

Every register is reset-less: ``restart`` alone sets the walk's state. The end tests at
word 0 depend on ``inner`` and ``outer`` (a one-word panel ends at its first word, a
one-panel walk at its first panel), which no init value can hold, so a reset (or a parent's
``ResetInserter``, e.g. :class:`~.fetch.PanelFetch`'s on ``launch``) must not reach them:
it would leave a one-word panel two words long. The walk is undefined until the first
``restart``.

With ``given_ends`` the two tests against one step (``inner <= 1``: a panel of one word;
``outer <= step``: a walk of one panel) are not compared here but given as the inputs
``one_word`` and ``one_panel``, registers of the owner's that hold with ``inner`` and
``outer`` (the ZO layer's job flags, :mod:`.control`): then no comparison of ``inner`` /
``outer`` with a constant is in front of the restart, and synthesis cannot share one
between walks placed apart.
"""
from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["PanelWalk"]


class PanelWalk(wiring.Component):
    def __init__(self, step: int, dim_bits: int, flat_bits: int, given_ends: bool = False):
        self.step, self.dim_bits, self.given_ends = step, dim_bits, given_ends
        super().__init__({
            **({"one_word": In(1), "one_panel": In(1)} if given_ends else {}),
            "restart": In(1), "advance": In(1),
            "inner": In(dim_bits), "outer": In(dim_bits + 1),
            "k": Out(dim_bits), "panel": Out(dim_bits + 1),
            "flat": Out(flat_bits), "panel_end": Out(1), "last": Out(1), "mid": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        k_next = Signal(self.dim_bits + 1, init=1, reset_less=True)      # k + 1
        k_after = Signal(self.dim_bits + 2, init=2, reset_less=True)     # k + 2 (no adder in
                                                                # front of the end test)
        # the first feature of the panel after the next (the next one's + step: no adder in
        # front of the end test's comparison)
        p_after = Signal(self.dim_bits + 3, init=2 * self.step, reset_less=True)
        panels_end = Signal(reset_less=True)                     # the next panel's >= outer
        # the outputs' registers, reset-less (the ports are plain signals)
        k, panel, flat, panel_end, mid = (
            Signal.like(getattr(self, name), name=f"{name}_reg", reset_less=True)
            for name in ("k", "panel", "flat", "panel_end", "mid"))
        m.d.comb += [self.k.eq(k), self.panel.eq(panel), self.flat.eq(flat),
                     self.panel_end.eq(panel_end), self.mid.eq(mid),
                     self.last.eq(panel_end & panels_end)]
        # the end tests for each way the registers can move, compared on registers only;
        # ``restart`` and ``advance`` just pick one
        first_end = self.one_word if self.given_ends else 1 >= self.inner
        one_panel = self.one_panel if self.given_ends else self.step >= self.outer
        with m.If(self.restart):
            m.d.sync += [k.eq(0), k_next.eq(1), k_after.eq(2), p_after.eq(2 * self.step),
                         panel.eq(0), flat.eq(0), panel_end.eq(first_end),
                         panels_end.eq(one_panel), mid.eq(0)]
        with m.Elif(self.advance):
            m.d.sync += [k.eq(k_next), k_next.eq(k_next + 1), k_after.eq(k_after + 1),
                         flat.eq(flat + 1), panel_end.eq(k_after >= self.inner),
                         mid.eq(1)]
            with m.If(panel_end):
                m.d.sync += [k.eq(0), k_next.eq(1), k_after.eq(2), mid.eq(0),
                             p_after.eq(p_after + self.step),
                             panel.eq(panel + 1), panel_end.eq(first_end),
                             panels_end.eq(p_after >= self.outer)]
        return m
