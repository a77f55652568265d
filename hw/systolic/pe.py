"""One processing element (PE) of the output-stationary systolic array.

Integer semantics (see :mod:`zoforge.golden.engine`): ``a`` and ``b`` are signed integers of
``a_bits`` and ``b_bits`` (INT8 by default; the ZO layer feeds 16-bit weights on ``a``); their
product (exact) is added to a 32-bit signed accumulator that wraps modulo 2^32.

Pipeline, written so that synthesis maps it onto one DSP48E2 (A/B input registers, a
registered multiplier output MREG, the accumulator as PREG)::

    cycle 1:  a, b, flags       <- inputs         (also forwarded to the right / below)
    cycle 2:  prod              <- a * b          (registered multiplier output)
    cycle 3:  acc               <- first ? prod : acc + prod    (when valid)
              res               <- the same value                (when valid and last)

``first`` starts a new dot product, ``last`` ends it and copies the sum into ``res``.
``res`` belongs to a per-column shift chain used to drain finished results: with ``shift``
high (and no capture in that cycle) ``res <- res_in`` (the value of the PE above).
"""
from amaranth import Module, Signal, Mux, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.engine_widths import ACC_BITS, OPERAND_BITS

__all__ = ["ProcessingElement"]


class ProcessingElement(wiring.Component):
    """Signed ``a_bits`` x ``b_bits`` multiply-accumulate into a wrapping 32-bit accumulator."""

    def __init__(self, a_bits: int = OPERAND_BITS, b_bits: int = OPERAND_BITS):
        self.a_bits, self.b_bits = a_bits, b_bits
        super().__init__({
            "a_in": In(signed(a_bits)), "b_in": In(signed(b_bits)),
            "valid_in": In(1), "first_in": In(1), "last_in": In(1),
            "a_out": Out(signed(a_bits)), "b_out": Out(signed(b_bits)),
            "valid_out": Out(1), "first_out": Out(1), "last_out": Out(1),
            "shift": In(1), "res_in": In(signed(ACC_BITS)), "res_out": Out(signed(ACC_BITS)),
        })

    def elaborate(self, platform):
        m = Module()
        # Stage 1: operand and flag registers, forwarded to the neighbours.
        m.d.sync += [self.a_out.eq(self.a_in), self.b_out.eq(self.b_in),
                     self.valid_out.eq(self.valid_in), self.first_out.eq(self.first_in),
                     self.last_out.eq(self.last_in)]
        # Stage 2: registered multiplier output.
        prod = Signal(signed(self.a_bits + self.b_bits))
        valid, first, last = Signal(), Signal(), Signal()
        m.d.sync += [prod.eq(self.a_out * self.b_out), valid.eq(self.valid_out),
                     first.eq(self.first_out), last.eq(self.last_out)]
        # Stage 3: accumulate (wraps modulo 2^32) and capture finished sums.
        acc = Signal(signed(ACC_BITS))
        total = Signal(signed(ACC_BITS))
        m.d.comb += total.eq(Mux(first, prod, acc + prod))
        with m.If(valid):
            m.d.sync += acc.eq(total)
        with m.If(valid & last):
            m.d.sync += self.res_out.eq(total)
        with m.Elif(self.shift):
            m.d.sync += self.res_out.eq(self.res_in)
        return m
