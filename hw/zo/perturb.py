"""The weight-operand stream's transform: a master word in, the operand the array sees out.

Per lane (R lanes, see :mod:`zoforge.golden.zolayer.model`)::

    operand = master >> 8                                   # perturb = 0
    operand = clamp((master >> 8) + sign * (z >> eps_shift), -2^15, 2^15 - 1)   # perturb = 1

``sign`` is +1 (``minus`` = 0) or -1 (``minus`` = 1); ``z`` is the first R values of one
generator transfer (lane i in bits ``[i*W, (i+1)*W)``), taken together with the word: with
``perturb`` the word, the transfer and the result move in the same cycle (a join of the two
input streams, combinational), without it the ``z`` stream is left alone.
"""
from __future__ import annotations

from amaranth import Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.zolayer.config import Formats

__all__ = ["PerturbUnit"]


class PerturbUnit(wiring.Component):
    """``rows`` lanes; ``z_lanes`` x ``z_width``-bit generator transfers."""

    def __init__(self, rows: int, z_lanes: int, z_width: int):
        self.rows, self.z_lanes, self.z_width = rows, z_lanes, z_width
        super().__init__({
            "words": In(stream.Signature(data.ArrayLayout(signed(Formats.MASTER_BITS), rows))),
            "z": In(stream.Signature(z_lanes * z_width)),
            "out": Out(stream.Signature(data.ArrayLayout(signed(Formats.WEIGHT_BITS), rows))),
            "perturb": In(1), "minus": In(1),
            "eps_shift": In(range(Formats.EPS_SHIFT_MAX + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        z_ok = self.z.valid | ~self.perturb
        m.d.comb += [self.out.valid.eq(self.words.valid & z_ok),
                     self.words.ready.eq(self.out.ready & z_ok),
                     self.z.ready.eq(self.perturb & self.words.valid & self.out.ready)]
        top = (1 << (Formats.WEIGHT_BITS - 1)) - 1
        for i in range(self.rows):
            z = self.z.payload[i * self.z_width:(i + 1) * self.z_width].as_signed()
            step = Signal(signed(self.z_width), name=f"step_{i}")
            base = Signal(signed(Formats.MASTER_BITS - Formats.MASTER_FRAC), name=f"base_{i}")
            total = Signal(signed(max(len(base), self.z_width) + 1), name=f"sum_{i}")
            m.d.comb += [step.eq(z >> self.eps_shift),
                         base.eq(self.words.payload[i] >> Formats.MASTER_FRAC),
                         total.eq(Mux(self.minus, base - step, base + step))]
            clamped = Mux(total > top, top, Mux(total < -top - 1, -top - 1, total))
            m.d.comb += self.out.payload[i].eq(Mux(self.perturb, clamped, base))
        return m
