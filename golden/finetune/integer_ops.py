"""Integer GELU, softmax and LayerNorm (I-BERT's kernels, Kim et al., ICML 2021), as
streaming units an FPGA can build: integer add, multiply, shift and compare, at most one
division per row, no floats inside (issue 32, item 4; ``nonlinear`` ``integer``).

Each kernel takes int64 tensors holding integers of a stated width and a parameter object
of integer constants made once on the host from the input's scale (``GeluParams.of``, ...;
the only float arithmetic, a unit's registers). ``>>`` is an arithmetic shift (floor),
``//`` floor division; nothing saturates unless stated; sums are exact (any order). The formulas are our own, after
I-BERT's ``IntGELU``, ``IntSoftmax`` and ``IntLayerNorm`` (their polynomial coefficients).

**i-GELU** (:func:`int_gelu`; ``x = q s``, ``|q| < 2^15``): ``gelu(x) = x (1 + erf(x /
sqrt 2)) / 2``, erf by I-BERT's ``sign(u) (1 - A (min(|u|, B) - B)^2)``, A = 0.2888,
B = 1.769, on the integer ``q`` in the erf's unit ``s_e = s / sqrt 2``::

    beta = floor(B / s_e); gamma = floor(1 / (A s_e^2)); k = max(0, bits(gamma) - ERF_BITS)
    one  = gamma >> k                               (erf = 1; < 2^ERF_BITS)
    t    = min(|q|, beta) - beta                    (in [-beta, 0])
    erf  = sign(q) ((gamma - t^2) >> k)             (|erf| <= one; gamma >= beta^2)
    y    = q (erf + one)                            (|y| < 2^31; sign(y) = sign(q))

``y`` in scale ``s / (2 one)`` (:attr:`GeluParams.out_scale`: ``erf / one`` is the erf, so a
large positive ``q`` gives ``x`` exactly).

**Integer softmax** (:func:`int_softmax`; ``x = q s`` per row, ``keep`` the unmasked
entries): the row's max over kept entries ``m``; per entry ``d = q - m <= 0``, clamped to
``d >= -EXP_SHIFTS L``; i-exp ``exp(d s) = 2^-z exp(r s)``::

    L = floor(ln2 / s); z = (-d) // L; r = d + z L        (r in (-L, 0]; z <= EXP_SHIFTS:
                                                          by a constant, 15 compares in RTL)
    b = floor(0.96963238 / (0.35815147 s)); c = floor(1 / (0.35815147 s^2))
    poly = (r + b) r + c                                 (~ exp(r s) / (0.358 s^2); in (0, c])
    e = poly >> (k + z), k = max(0, bits(c) - EXP_BITS)  (0 where not kept; e < 2^EXP_BITS)
    sum = sum of e over the row                          (one per row)
    R = floor(levels 2^SOFTMAX_FRAC / sum)               (the row's one division; 0 if sum 0)
    p = (e R + 2^(SOFTMAX_FRAC-1)) >> SOFTMAX_FRAC       (round half up; in [0, levels])

``p`` in scale ``1 / levels`` (the engine's P: ``levels`` 127). A row with no kept entry
gives zeros.

**Integer LayerNorm** (:func:`int_layernorm`; ``x = q s``, ``|q| < 2^15``, rows of ``H``
along the last axis, per-channel ``weight``, ``bias``)::

    sum = sum q;  D = H sum q^2 - sum^2 + eps_i     (= H^2 var / s^2; eps_i = round(H^2 eps / s^2))
    std = isqrt(D)                                  (floor sqrt, Newton: :func:`isqrt`)
    f = floor(2^LN_RECIP / std)                     (the row's one division; 0 if std 0)
    z = ((H q - sum) f + 2^(LN_RECIP-LN_FRAC-1)) >> (LN_RECIP - LN_FRAC)
                                                    ((x - mean) / std in 2^-LN_FRAC;
                                                     |z| <= sqrt(H - 1) 2^LN_FRAC + 1)
    y = z w_i + b_i                                 (w_i = round(weight 2^g), b_i =
                                                     round(bias 2^(LN_FRAC + g)), g <= 24
                                                     the largest with |w_i| < 2^15)

``y`` in scale ``2^-(LN_FRAC + g)`` (:attr:`LayerNormParams.out_scale`); a constant row
(D = 0) gives ``y = b_i``, as the float LayerNorm's ``bias``. (``round``: half to even.)

The constants and the per-scale parameters of i-GELU and the softmax live in
:mod:`.integer_params` (plain Python, for the RTL units), re-exported here.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from zoforge.golden.finetune.integer_params import (ERF_A, ERF_B, ERF_BITS, EXP_BITS,
                                                    EXP_COEFFS, EXP_SHIFTS, INPUT_BITS,
                                                    ISQRT_STEPS, LN_FRAC, LN_RECIP,
                                                    LN_WEIGHT_BITS, MAX_SCALE, MIN_SCALE,
                                                    SOFTMAX_FRAC, GeluParams, SoftmaxParams,
                                                    check_scale)

__all__ = ["GeluParams", "SoftmaxParams", "LayerNormParams", "int_gelu", "int_softmax",
           "int_layernorm", "int_gelu_formula", "int_softmax_formula", "gelu_table", "isqrt",
           "bit_length", "GELU_TABLE_OFFSET", "ERF_A", "ERF_B", "ERF_BITS",
           "EXP_COEFFS", "EXP_BITS", "EXP_SHIFTS", "SOFTMAX_FRAC", "LN_FRAC", "LN_RECIP",
           "LN_WEIGHT_BITS", "ISQRT_STEPS", "INPUT_BITS", "MIN_SCALE", "MAX_SCALE"]


def bit_length(n: torch.Tensor) -> torch.Tensor:
    """``int.bit_length`` of each element of the int64 tensor ``n >= 0``: the exponent of
    ``float64(n)`` (``frexp``), one too large where the rounding reached the next power of
    two (``n >= 2^53``, e.g. ``2^63 - 1``), corrected by ``n >> (b - 1) == 0`` (exact:
    ``float64(n)`` is never below ``2^(bits(n) - 1)``, a power of two it holds)."""
    bits = torch.frexp(n.double()).exponent.to(torch.int64)
    return bits - ((n >> (bits - 1).clamp_min(0)) == 0).to(torch.int64) * (bits > 0)


def isqrt(n: torch.Tensor) -> torch.Tensor:
    """``floor(sqrt(n))`` of each element of the int64 tensor ``0 <= n < 2^62``: Newton's
    ``x <- min(x, (x + n // x) >> 1)`` for :data:`ISQRT_STEPS` steps from
    ``2^ceil(bits(n) / 2)`` (at most twice the root). (An RTL unit may compute the same
    floor root digit by digit, without a division.)"""
    x = torch.ones_like(n) << ((bit_length(n) + 1) >> 1)
    for _ in range(ISQRT_STEPS):
        x = torch.minimum(x, (x + n // x.clamp_min(1)) >> 1)
    return x


def int_gelu(q: torch.Tensor, p: GeluParams) -> torch.Tensor:
    """i-GELU of the int64 tensor ``q`` (elementwise; module docstring). A large ``q``
    within ``[-2^15, 2^15 - 1]`` (a GELU job's int16 input) is looked up in
    :func:`gelu_table`, the same formula's values over that whole range."""
    if q.dtype == torch.int64 and q.numel() >= _TABLE_MIN:
        low, high = torch.aminmax(q)
        if -GELU_TABLE_OFFSET <= int(low) and int(high) < GELU_TABLE_OFFSET:
            index = (q + GELU_TABLE_OFFSET).reshape(-1)
            return torch.index_select(gelu_table(p), 0, index).reshape(q.shape)
    return int_gelu_formula(q, p)


def int_gelu_formula(q: torch.Tensor, p: GeluParams) -> torch.Tensor:
    """i-GELU of the int64 tensor ``q`` by the module docstring's formula, elementwise."""
    t = torch.clamp(q.abs(), max=p.beta) - p.beta
    erf = torch.sign(q) * ((p.gamma - t * t) >> p.shift)
    return q * (erf + p.one)


#: :func:`gelu_table`'s inputs: ``[-GELU_TABLE_OFFSET, GELU_TABLE_OFFSET)`` (16 bits).
GELU_TABLE_OFFSET = 1 << (INPUT_BITS - 1)
#: The least number of elements :func:`int_gelu` looks up rather than computes.
_TABLE_MIN = 1 << 14


@functools.lru_cache(maxsize=64)
def gelu_table(p: GeluParams) -> torch.Tensor:
    """``int_gelu_formula(q, p)`` for every ``q`` in ``[-2^15, 2^15 - 1]``, int64, at index
    ``q + 2^15`` (made once per constants)."""
    q = torch.arange(-GELU_TABLE_OFFSET, GELU_TABLE_OFFSET, dtype=torch.int64)
    return int_gelu_formula(q, p)


def int_softmax(q: torch.Tensor, keep: torch.Tensor, p: SoftmaxParams,
                levels: int) -> torch.Tensor:
    """The integer softmax of the int64 scores ``q`` along the last axis, entries where the
    bool ``keep`` (broadcast to ``q``) is False left out: int64 in ``[0, levels]``, scale
    ``1 / levels`` (module docstring). (A left-out entry's ``d`` is clamped into the kept
    entries' range too, so that every step is defined, and its ``e`` set to 0; the kept
    entries' values are the docstring's. :func:`int_softmax_formula` states it plainly.)"""
    keep = keep.expand(q.shape)
    low = torch.iinfo(torch.int64).min
    top = q.masked_fill(~keep, low).amax(-1, keepdim=True)
    top.masked_fill_(top == low, 0)                       # a row with no kept entry
    d = torch.sub(q, top).clamp_(-EXP_SHIFTS * p.ln2, 0)  # kept entries: d <= 0 already
    z = torch.div(d, -p.ln2, rounding_mode="floor")       # (-d) // ln2
    e = z * p.ln2
    e.add_(d)                                             # r
    e = (e + p.b).mul_(e).add_(p.c)
    e.bitwise_right_shift_(z.add_(p.shift)).masked_fill_(~keep, 0)
    total = e.sum(-1, keepdim=True)
    recip = torch.where(total > 0, (levels << SOFTMAX_FRAC) // total.clamp_min(1), 0)
    return e.mul_(recip).add_(1 << (SOFTMAX_FRAC - 1)).bitwise_right_shift_(SOFTMAX_FRAC)


def int_softmax_formula(q: torch.Tensor, keep: torch.Tensor, p: SoftmaxParams,
                        levels: int) -> torch.Tensor:
    """:func:`int_softmax` as the module docstring writes it, one tensor a line (the
    reference of the faster, in-place :func:`int_softmax`)."""
    keep = keep.expand(q.shape)
    low = torch.iinfo(torch.int64).min
    top = torch.where(keep, q, low).amax(-1, keepdim=True)
    d = torch.clamp(q - torch.where(keep, top, 0), min=-EXP_SHIFTS * p.ln2)
    d = torch.where(keep, d, 0)
    z = (-d) // p.ln2
    r = d + z * p.ln2
    e = torch.where(keep, ((r + p.b) * r + p.c) >> (p.shift + z), 0)
    total = e.sum(-1, keepdim=True)
    recip = torch.where(total > 0, (levels << SOFTMAX_FRAC) // total.clamp_min(1), 0)
    return (e * recip + (1 << (SOFTMAX_FRAC - 1))) >> SOFTMAX_FRAC


@dataclass(frozen=True)
class LayerNormParams:
    """The integer LayerNorm's constants for inputs of scale ``scale`` and a LayerNorm's
    ``weight``, ``bias`` (int64 ``(H,)``) and ``eps`` (module docstring)."""

    scale: float
    weight: torch.Tensor
    bias: torch.Tensor
    weight_shift: int
    eps: int

    @classmethod
    def of(cls, scale: float, weight: torch.Tensor, bias: torch.Tensor,
           eps: float) -> "LayerNormParams":
        check_scale(scale, 2.0 ** 10)      # s only sets eps_i
        w, b = weight.detach().double(), bias.detach().double()
        peak, g = float(w.abs().max()), 0
        limit = 2 ** (LN_WEIGHT_BITS - 1) - 1
        while g < 24 and round(peak * 2.0 ** (g + 1)) <= limit:
            g += 1
        width = w.numel()
        return cls(scale, torch.round(w * 2.0 ** g).to(torch.int64),
                   torch.round(b * 2.0 ** (LN_FRAC + g)).to(torch.int64), g,
                   round(width * width * eps / (scale * scale)))

    @property
    def out_scale(self) -> float:
        """The scale of :func:`int_layernorm`'s output, ``2^-(LN_FRAC + g)``."""
        return 2.0 ** -(LN_FRAC + self.weight_shift)


def int_layernorm(q: torch.Tensor, p: LayerNormParams) -> torch.Tensor:
    """The integer LayerNorm of the int64 tensor ``q`` over its last axis (module
    docstring)."""
    width = q.shape[-1]
    total = q.sum(-1, keepdim=True)
    var = width * (q * q).sum(-1, keepdim=True) - total * total + p.eps
    std = isqrt(var)
    recip = torch.where(std > 0, (1 << LN_RECIP) // std.clamp_min(1), 0)
    cut = LN_RECIP - LN_FRAC
    z = (width * q).sub_(total).mul_(recip).add_(1 << (cut - 1)).bitwise_right_shift_(cut)
    return z.mul_(p.weight).add_(p.bias)
