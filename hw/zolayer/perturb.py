"""The weight-operand stream's transform: a master word in, the operand the array sees out.

Per lane (R lanes, see :mod:`zoforge.golden.zolayer.model`)::

    operand = master >> 8                                   # perturb = 0
    operand = clamp((master >> 8) + sign * (z >> eps_shift), -2^15, 2^15 - 1)   # perturb = 1

``sign`` is +1 (``minus[i]`` = 0) or -1 (``minus[i]`` = 1), per lane (the rows of the
array can hold several branches, :class:`~.spread.BranchSpread`); ``z`` is the first R
values of one transfer (lane i in bits ``[i*W, (i+1)*W)``), taken together with the word: with
``perturb`` a word moves only with a transfer (a join of the two input streams), without it
the ``z`` stream is left alone. ``perturb``, ``minus`` and ``eps_shift`` are taken with
each word.

Pipeline (:data:`LATENCY` register stages, one word per cycle; back-pressure on ``out``
stalls every stage, so ``words.ready`` is ``~out.valid | out.ready`` and the join)::

    1  base = (master >> 8) + (1 if perturb and minus);
       step = perturb ? (minus ? ~(z >> eps_shift) : z >> eps_shift) : 0
                                     (-(z >> e) = ~(z >> e) + 1; the shift is arithmetic)
    2  sum = base + step (18 bits and more), saturated to int16 from its upper bits
"""
from __future__ import annotations

from amaranth import EnableInserter, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.zolayer.config import Formats

__all__ = ["PerturbUnit", "LATENCY"]

#: Register stages: a word taken at a clock edge is on ``out`` LATENCY edges later.
LATENCY = 2


class PerturbUnit(wiring.Component):
    """``rows`` lanes; ``z_lanes`` x ``z_width``-bit generator transfers."""

    def __init__(self, rows: int, z_lanes: int, z_width: int):
        self.rows, self.z_lanes, self.z_width = rows, z_lanes, z_width
        super().__init__({
            "words": In(stream.Signature(data.ArrayLayout(signed(Formats.MASTER_BITS), rows))),
            "z": In(stream.Signature(z_lanes * z_width)),
            "out": Out(stream.Signature(data.ArrayLayout(signed(Formats.WEIGHT_BITS), rows))),
            "perturb": In(1), "minus": In(rows),
            "eps_shift": In(range(Formats.EPS_SHIFT_MAX + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        adv = ~self.out.valid | self.out.ready
        z_ok = self.z.valid | ~self.perturb
        m.d.comb += [self.words.ready.eq(adv & z_ok),
                     self.z.ready.eq(self.perturb & self.words.valid & adv)]
        m.submodules.pipeline = EnableInserter(adv)(self._pipeline(self.words.valid & z_ok))
        return m

    def _pipeline(self, take) -> Module:
        """The stages, without their common enable (``take``: a word enters)."""
        m = Module()
        valid1 = Signal()
        m.d.sync += [valid1.eq(take), self.out.valid.eq(valid1)]
        base_bits = Formats.MASTER_BITS - Formats.MASTER_FRAC        # = WEIGHT_BITS
        width = max(base_bits, self.z_width) + 2                    # base + step is exact
        top = (1 << (Formats.WEIGHT_BITS - 1)) - 1
        for i in range(self.rows):
            negate = self.perturb & self.minus[i]
            z = self.z.payload[i * self.z_width:(i + 1) * self.z_width].as_signed()
            # -(z >> e) = ~(z >> e) + 1: the complement after the shift (the generator's
            # lanes straight into the shifter), the 1 in base
            base = Signal(signed(base_bits + 1), name=f"base_{i}")
            step = Signal(signed(self.z_width), name=f"step_{i}")
            shifted = z >> self.eps_shift
            m.d.sync += [base.eq((self.words.payload[i] >> Formats.MASTER_FRAC) + negate),
                         step.eq(Mux(self.perturb,
                                     Mux(self.minus[i], ~shifted, shifted).as_signed(), 0))]
            total = Signal(signed(width), name=f"sum_{i}")
            m.d.comb += total.eq(base + step)
            # int16 iff the bits from 15 up are all equal (all 0s or all 1s)
            upper = total[Formats.WEIGHT_BITS - 1:]
            inside = (upper == 0) | (upper == (1 << len(upper)) - 1)
            m.d.sync += self.out.payload[i].eq(
                Mux(inside, total[:Formats.WEIGHT_BITS], Mux(total[-1], -top - 1, top)))
        return m
