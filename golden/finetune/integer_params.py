"""The integer kernels' constants (:mod:`.integer_ops` states the kernels): the widths and
fits, and the per-scale constants of i-GELU (:class:`GeluParams`) and the integer softmax
(:class:`SoftmaxParams`), in plain Python (no torch), so the RTL units that hold them
(``hw/nonlinear``, the engine's GELU job, ``hw/softmax``) import them without the golden
kernels' tensors. One source: :mod:`.integer_ops` re-exports every name.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from zoforge.errors import ConfigError

__all__ = ["GeluParams", "SoftmaxParams", "check_scale", "ERF_A", "ERF_B", "ERF_BITS",
           "EXP_COEFFS", "EXP_BITS", "EXP_SHIFTS", "P_LEVELS", "SOFTMAX_FRAC", "LN_FRAC", "LN_RECIP",
           "LN_WEIGHT_BITS", "ISQRT_STEPS", "INPUT_BITS", "MIN_SCALE", "MAX_SCALE"]

#: I-BERT's erf fit on [0, B]: ``erf(u) ~ 1 - A (u - B)^2``.
ERF_A, ERF_B = 0.2888, 1.769
#: Bits of the erf's "1" (``one`` of :class:`GeluParams`).
ERF_BITS = 14
#: I-BERT's exp fit on (-ln 2, 0]: ``exp(p) ~ a p^2 + b p + c``.
EXP_COEFFS = (0.35815147, 0.96963238, 1.0)
#: Bits of i-exp's ``exp(0)``; ``e`` is 0 past EXP_SHIFTS halvings.
EXP_BITS = 15
EXP_SHIFTS = EXP_BITS
#: The softmax's output levels, P's int8 (the engine's P·V input): ``p8 = round(P *
#: P_LEVELS)``, scale ``1 / P_LEVELS``.
P_LEVELS = 127
#: Fraction bits of the softmax's row reciprocal.
SOFTMAX_FRAC = 30
#: LayerNorm: fraction bits of the normalized value ``z``, of its row reciprocal ``f``, and
#: the width of the quantized weight ``w_i``.
LN_FRAC, LN_RECIP, LN_WEIGHT_BITS = 10, 42, 16
#: Newton steps of :func:`isqrt`: exact below 2^62 (from a start at most twice the root,
#: the relative error is at most 1, 1/4, 1/40, 3e-4, 5e-8, 1e-15, 6e-31: the last below
#: half the gap 1/2^32 between a root below 2^31 and the next integer, over the root).
ISQRT_STEPS = 6
#: The width of i-GELU's and LayerNorm's input ``q`` (``|q| < 2^(INPUT_BITS-1)``).
INPUT_BITS = 16
#: The input scales i-GELU's and i-exp's constants are made for: finer ones need wider
#: registers; coarser ones cost accuracy (``L = floor(ln 2 / s)`` is ln 2 to 1 %).
MIN_SCALE, MAX_SCALE = 2.0 ** -24, 2.0 ** -7


def check_scale(scale: float, high: float = MAX_SCALE) -> None:
    if not (isinstance(scale, (int, float)) and MIN_SCALE <= scale <= high):
        raise ConfigError("scale", f"a number with {MIN_SCALE:g} <= value <= {high:g} "
                          "(an integer unit's input scale)", scale)


@dataclass(frozen=True)
class GeluParams:
    """i-GELU's constants for inputs of scale ``scale`` (module docstring)."""

    scale: float
    beta: int
    gamma: int
    shift: int
    one: int

    @classmethod
    def of(cls, scale: float) -> "GeluParams":
        check_scale(scale)
        s_e = scale / math.sqrt(2)
        beta = math.floor(ERF_B / s_e)
        gamma = math.floor(1 / (ERF_A * s_e * s_e))
        shift = max(0, gamma.bit_length() - ERF_BITS)
        return cls(scale, beta, gamma, shift, gamma >> shift)

    @property
    def out_scale(self) -> float:
        """The scale of :func:`int_gelu`'s output, ``s / (2 one)``."""
        return self.scale / (2 * self.one)


@dataclass(frozen=True)
class SoftmaxParams:
    """The integer softmax's constants for inputs of scale ``scale`` (module docstring)."""

    scale: float
    ln2: int
    b: int
    c: int
    shift: int

    @classmethod
    def of(cls, scale: float) -> "SoftmaxParams":
        check_scale(scale)
        a, b, c = EXP_COEFFS
        c_int = math.floor(c / (a * scale * scale))
        return cls(scale, math.floor(math.log(2) / scale), math.floor(b / (a * scale)),
                   c_int, max(0, c_int.bit_length() - EXP_BITS))
