"""A tiny design for testing the co-simulation harness and the lint set-up."""
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Counter"]


class Counter(wiring.Component):
    """8-bit counter: ``count`` increments (mod 256) on every cycle with ``en`` high."""

    en: In(1)
    count: Out(8)

    def elaborate(self, platform):
        m = Module()
        with m.If(self.en):
            m.d.sync += self.count.eq(self.count + 1)
        return m
