"""i-GELU on a stream: ``lanes`` values a beat, bit for bit
:func:`zoforge.golden.finetune.integer_ops.int_gelu` (I-BERT's integer GELU; its module
docstring states the integer semantics this unit keeps).

Per lane, for the input ``q`` (int16: the golden's ``|q| < 2^15``, and ``-2^15`` too, where
the same formula holds) and the constants of :class:`~zoforge.golden.finetune.integer_ops.
GeluParams` (``beta``, ``gamma``, ``shift`` = the golden's ``k``, ``one``)::

    a   = min(|q|, beta)                         (16 bits; t = a - beta)
    c   = 2 beta - a                             (beta's width + 1 bits)
    sum = offset + a c     = gamma - t^2         (offset = gamma - beta^2 >= 0, a register;
                                                  0 <= sum <= gamma, exact)
    e   = sum >> shift     = |erf|               (<= one < 2^ERF_BITS: floor, as the golden)
    m   = one + e if q > 0 else one - e          (= erf + one; 0 <= m <= 2 one; q = 0: y = 0)
    y   = q m                                    (int32 lane; |y| <= 2^15 2 one < 2^30)

``gamma - t^2 = (gamma - beta^2) + a (2 beta - a)`` is an identity of integers, so ``e`` is
the golden's ``(gamma - t^2) >> k`` exactly; the product ``a c`` (16 x 27 bits at the
finest scale) is narrower than ``t^2`` (26 x 26) and splits into two 18 x 18 multiplier
blocks, and the constant ``beta^2`` is the host's (:func:`gelu_registers`). Lane ``l`` of the output is the GELU of
lane ``l`` of the input; ``last`` travels with its beat. The output's scale is
:attr:`GeluParams.out_scale`.

The constants are the inputs of :attr:`GeluUnit.config` (:func:`config_signature`), written
from :func:`gelu_registers` before a job and held while values are in flight. Their widths
(:class:`GeluWidths`) are the golden's bounds over the scales the unit is made for,
``min_scale`` to ``MAX_SCALE`` (each constant is largest at the finest scale; by default
``MIN_SCALE``, every scale the golden makes constants for; a unit made for a coarser
``min_scale`` is narrower), checked in :func:`gelu_registers`.

Pipeline (:data:`LATENCY` stages, one beat per cycle; each stage one adder, one compare
and mux, or one multiplier register)::

    1      |q|, q > 0
    2      a = min(|q|, beta), c = 2 beta - a            (the compare and the subtraction
                                                          side by side)
    3-5    a c[0:17], a c[17:]                           two PipelinedMultipliers (one
                                                          18 x 18 block each; one where
                                                          c has at most 17 bits)
    6      a c                                           their sum
    7      sum = offset + a c
    8      sum >> (shift & ~7), ERF_BITS + 7 bits        (the coarse shift)
    9      e = that >> (shift & 7)                       (the fine shift)
    10     m = one +- e
    11-13  y = q m                                       a PipelinedMultiplier

The stages never stall; back-pressure is taken by credits and an output buffer
(:mod:`zoforge.hw.pe.credits`, shared with :class:`~zoforge.hw.pe.requant.RequantStream`):
with ``o.ready`` high every beat leaves LATENCY cycles after it came.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from amaranth import C, Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.finetune.integer_params import (ERF_BITS, INPUT_BITS, MIN_SCALE,
                                                    GeluParams)

from ..pe import multiply
from ..pe.credits import add_credits, buffer_depth, output_buffer
from ..pe.multiply import ECP5_OPERAND_BITS, PipelinedMultiplier
from .stages import lane_stages

__all__ = ["GeluUnit", "GeluWidths", "LATENCY", "BUFFER_BEATS", "BETA_BITS", "GAMMA_BITS",
           "SHIFT_BITS", "Y_BITS", "config_signature", "input_layout", "output_layout",
           "gelu_registers", "gelu_cycles"]



@dataclass(frozen=True)
class GeluWidths:
    """The widths of a unit's constants, for the scales ``min_scale`` to ``MAX_SCALE``:
    ``beta``, ``gamma`` (and ``offset = gamma - beta^2 <= gamma``, and the sum
    ``offset + a c <= gamma``), ``shift``."""

    min_scale: float
    beta: int
    gamma: int
    shift: int

    @classmethod
    def of(cls, min_scale: float = MIN_SCALE) -> "GeluWidths":
        finest = GeluParams.of(min_scale)         # each constant's largest value
        return cls(min_scale, finest.beta.bit_length(), finest.gamma.bit_length(),
                   max(1, finest.shift.bit_length()))

    @property
    def c(self) -> int:
        """Bits of ``c = 2 beta - a <= 2 beta``."""
        return self.beta + 1


_WIDEST = GeluWidths.of()
#: The widths of the default unit (every scale the golden makes constants for).
BETA_BITS, GAMMA_BITS, SHIFT_BITS = _WIDEST.beta, _WIDEST.gamma, _WIDEST.shift
#: The output lane: the golden's ``|y| < 2^31``.
Y_BITS = 32
_A_BITS = INPUT_BITS                         # a = min(|q|, beta) <= 2^15
_C_LOW = ECP5_OPERAND_BITS - 1               # c's low part: unsigned, an 18-bit operand
_M_BITS = ERF_BITS + 1                       # m = erf + one <= 2 one
_FINE = 8                                    # the fine shift's range (shift & 7)
_WINDOW = ERF_BITS + _FINE - 1               # the coarse shift's bits

#: Register stages: a beat taken at a clock edge is on ``o`` after LATENCY edges.
LATENCY = 10 + multiply.LATENCY
#: Beats the output buffer holds, and so the most beats in flight.
BUFFER_BEATS = buffer_depth(LATENCY)


def config_signature(min_scale: float = MIN_SCALE) -> wiring.Signature:
    """The constants of a unit made for ``min_scale`` (the driver's view): ``beta``,
    ``offset`` (= gamma - beta^2), ``shift`` (the golden's ``k``) and ``one``, as
    :func:`gelu_registers` gives them."""
    widths = GeluWidths.of(min_scale)
    return wiring.Signature({"beta": Out(unsigned(widths.beta)),
                             "offset": Out(unsigned(widths.gamma)),
                             "shift": Out(unsigned(widths.shift)),
                             "one": Out(unsigned(ERF_BITS))})


def gelu_registers(p: GeluParams, min_scale: float = MIN_SCALE) -> dict[str, int]:
    """The values of :attr:`GeluUnit.config` for the constants ``p`` (made by
    ``GeluParams.of``) on a unit made for ``min_scale``; raises ValueError where one does
    not fit the unit (a scale finer than the unit's) or the constants break what the unit
    relies on."""
    values = {"beta": p.beta, "offset": p.gamma - p.beta * p.beta, "shift": p.shift,
              "one": p.one}
    unit = GeluWidths.of(min_scale)
    widths = {"beta": unit.beta, "offset": unit.gamma, "shift": unit.shift, "one": ERF_BITS}
    for name, value in values.items():
        if not 0 <= value < 1 << widths[name]:
            raise ValueError(f"i-GELU constant {name} = {value} does not fit the unit's "
                             f"{widths[name]} bits (scale {p.scale:g}, the unit's finest "
                             f"{min_scale:g})")
    if p.gamma >= 1 << unit.gamma or p.one != p.gamma >> p.shift:
        raise ValueError(f"i-GELU constants not made by GeluParams.of: {p}")
    return values


def input_layout(lanes: int) -> data.StructLayout:
    """The payload of :attr:`GeluUnit.i`: ``lanes`` int16 inputs and the beat's ``last``."""
    return data.StructLayout({"q": data.ArrayLayout(signed(INPUT_BITS), lanes), "last": 1})


def output_layout(lanes: int) -> data.StructLayout:
    """The payload of :attr:`GeluUnit.o`: ``lanes`` int32 outputs and the beat's ``last``."""
    return data.StructLayout({"y": data.ArrayLayout(signed(Y_BITS), lanes), "last": 1})


def gelu_cycles(n_values: int, lanes: int) -> int:
    """Cycles from the first input beat's transfer to the last output beat's, both counted,
    for ``n_values`` values (``lanes`` a beat, the last beat padded), input always valid and
    output always ready: one beat a cycle, then LATENCY (exact; 0 for no value)."""
    beats = math.ceil(n_values / lanes)
    return beats + LATENCY if beats else 0


class GeluUnit(wiring.Component):
    """i-GELU of a stream of ``lanes``-value beats (module docstring), for input scales
    ``min_scale`` to ``MAX_SCALE`` (the constants' widths, :class:`GeluWidths`)."""

    def __init__(self, lanes: int, min_scale: float = MIN_SCALE):
        if lanes < 1:
            raise ValueError(f"GeluUnit needs at least one lane (got {lanes})")
        self.lanes, self.min_scale = lanes, min_scale
        self.widths = GeluWidths.of(min_scale)
        super().__init__({
            "i": In(stream.Signature(input_layout(lanes))),
            "o": Out(stream.Signature(output_layout(lanes))),
            "config": In(config_signature(min_scale)),
        })

    def elaborate(self, platform):
        m = Module()
        taken = add_credits(m, self.i, self.o, BUFFER_BEATS)
        row = Signal(output_layout(self.lanes), name="row")
        valid = [Signal(name=f"valid_s{n}") for n in range(1, LATENCY + 1)]
        last = [Signal(name=f"last_s{n}") for n in range(1, LATENCY + 1)]
        m.d.comb += row.last.eq(last[-1])
        m.d.sync += [valid[0].eq(taken), last[0].eq(self.i.payload.last)]
        m.d.sync += [dst.eq(src) for dst, src in zip(valid[1:] + last[1:],
                                                     valid[:-1] + last[:-1])]
        for lane in range(self.lanes):
            self._lane(m, lane, row.y[lane])
        m.submodules.buffer = output_buffer(self.o, row, valid[-1], BUFFER_BEATS)
        return m

    def _lane(self, m: Module, lane: int, y) -> None:
        """The stages of lane ``lane``, its output register ``y``."""
        cfg, widths = self.config, self.widths

        reg, delayed = lane_stages(m, lane)

        # 1: |q| and q's sign
        q = self.i.payload.q[lane]
        absq = reg(unsigned(_A_BITS), 1, "absq")
        m.d.sync += absq.eq(Mux(q[-1], -q, q))
        # 2: a = min(|q|, beta), c = 2 beta - a
        below = absq < cfg.beta
        a, c = reg(unsigned(_A_BITS), 2, "a"), reg(unsigned(widths.c), 2, "c")
        m.d.sync += [a.eq(Mux(below, absq, cfg.beta)),
                     c.eq(Mux(below, (cfg.beta << 1) - absq, cfg.beta))]
        # 3 to 5: a c in one product, or two where c is wider than an 18-bit operand, one
        # multiplier block each
        low = PipelinedMultiplier(unsigned(_A_BITS), unsigned(min(widths.c, _C_LOW)))
        m.submodules[f"erf_low_{lane}"] = low
        m.d.comb += [low.a.eq(a), low.b.eq(c[:_C_LOW])]
        # 6: a c (their sum); 7: sum = offset + a c = gamma - t^2 (<= gamma)
        prod = reg(unsigned(_A_BITS + widths.c), 6, "prod")
        if widths.c > _C_LOW:
            high = PipelinedMultiplier(unsigned(_A_BITS), unsigned(widths.c - _C_LOW))
            m.submodules[f"erf_high_{lane}"] = high
            m.d.comb += [high.a.eq(a), high.b.eq(c[_C_LOW:])]
            m.d.sync += prod.eq(Cat(low.p[:_C_LOW], low.p[_C_LOW:] + high.p))
        else:
            m.d.sync += prod.eq(low.p)
        total = reg(unsigned(widths.gamma), 7, "sum")
        m.d.sync += total.eq(cfg.offset + prod)
        # 8, 9: e = sum >> shift, the coarse shift (multiples of 8) then the fine one
        coarse = reg(unsigned(_WINDOW), 8, "coarse")
        m.d.sync += coarse.eq(total >> Cat(C(0, 3), cfg.shift[3:]))
        e = reg(unsigned(ERF_BITS), 9, "e")
        m.d.sync += e.eq(coarse >> cfg.shift[:3])
        # 10: m = erf + one (q = 0: any m, y = 0)
        positive = delayed(~q[-1] & (q != 0), 1, 9, "positive")
        mult = reg(unsigned(_M_BITS), 10, "m")
        m.d.sync += mult.eq(Mux(positive, cfg.one + e, cfg.one - e))
        # 11 to 13: y = q m
        out = PipelinedMultiplier(signed(INPUT_BITS), unsigned(_M_BITS))
        m.submodules[f"gelu_{lane}"] = out
        m.d.comb += [out.a.eq(delayed(q, 1, 10, "q")), out.b.eq(mult)]
        m.d.comb += y.eq(out.p)
