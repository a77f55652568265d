"""The quantized attention: Q·K^T and P·V as raw GEMM-engine jobs (issue 32; ``attention``
``engines`` of :class:`~.config.FinetuneConfig`).

Per block, per-tensor int8 scales ``s_q``, ``s_k``, ``s_v`` (:class:`AttentionScales`,
calibrated like every activation scale: ``percentile(|t|, ACT_PERCENTILE) / 127`` of the
float model's query, key and value outputs). For one forward, the heads split
(``(..., B, heads, L, d)``, float32 q, k, v from the maps) and J = B x heads (the leading
axes flattened, sequence-major)::

    q8 = clamp(round_half_even(q / s_q), -127, 127)       (k8, v8 alike)      int8
                                                  (:func:`quantize_activation`)
    S[j]  = engine raw job (x = q8[j] (L, d), w = k8[j]^T (d, L), bias 0)
          = wrap32(q8[j] · k8[j]^T)                                         int32 (L, L)
    scores = float32(float64(S) * (s_q * s_k / sqrt(d))) + mask bias       float32
    P      = softmax(scores, last axis)                                     float32
    p8     = clamp(round_half_even(float64(P) * 127), 0, 127)               int8 (scale 1/127)
    C[j]  = engine raw job (x = p8[j] (L, L), w = v8[j] (L, d), bias 0)
          = wrap32(p8[j] · v8[j])                                           int32 (L, d)
    context = float32(float64(C) * (s_v / 127))

(round half to even as ``torch.round``; the mask bias is :func:`~zoforge.golden.models.
attention_bias`, the float path's.) The jobs are named ``block<b>.scores`` and
``block<b>.context`` (:data:`~.config.ATTENTION_PRODUCTS`), one
:class:`~.calls.EngineCall` per sequence and head in ``j`` order (:func:`~.calls.raw_jobs`):
the golden units compute each stack as one exact batched product, the RTL's run every call
(:func:`~.calls.run_raw_jobs`). No wrap occurs: ``|S| <= 127^2 d``, ``|C| <= 127^2 L``.

With ``nonlinear`` ``integer`` (``softmax``: the blocks' :class:`~.integer_ops.
SoftmaxParams`, for the scale ``s_q s_k / sqrt(d)``) the three float lines are the integer
softmax of S itself (:func:`~.integer_ops.int_softmax`, masked keys left out, ``levels``
127): ``p8`` with no float between, one :class:`~.calls.SoftmaxCall` to the units per block
and forward (``block<b>.softmax``: the J jobs' scores ``(J, L, L)``, each job's key mask
``(J, L)``, the block's constants), between the two products' calls, so a co-simulation
runs it on the softmax unit. :class:`HostIntegerAttention` (``attention`` ``host``
with ``nonlinear`` ``integer``): the float32 scores ``q·k^T / sqrt(d)``, int16 in the
block's calibrated scale (:func:`quantize_wide`), the integer softmax to ``p8``, then
``float32(p8) / 127 · v`` in float32.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from zoforge.golden.finetune.calls import SoftmaxCall, run_raw_jobs
from zoforge.golden.finetune.config import ATTENTION_PRODUCTS
from zoforge.golden.finetune.integer_ops import INPUT_BITS, SoftmaxParams, int_softmax
from zoforge.golden.finetune.integer_params import P_LEVELS
from zoforge.golden.models import attention_bias

__all__ = ["AttentionScales", "EngineAttention", "HostIntegerAttention",
           "quantize_activation", "quantize_probabilities", "quantize_wide", "P_LEVELS",
           "WIDE_LEVELS", "SOFTMAX_CALL"]

#: The softmax's call name in a block: ``block<b>.softmax``.
SOFTMAX_CALL = "softmax"
#: The integer units' wide inputs (:func:`quantize_wide`): ``|q| <= 2^15 - 1``.
WIDE_LEVELS = 2 ** (INPUT_BITS - 1) - 1


@dataclass(frozen=True)
class AttentionScales:
    """One block's per-tensor int8 scales of q, k and v."""

    q: float
    k: float
    v: float

    def scores(self, d: int) -> float:
        """The raw scores' scale, ``s_q s_k / sqrt(d)`` for heads of width ``d``."""
        return self.q * self.k / math.sqrt(d)


def quantize_probabilities(p: torch.Tensor) -> torch.Tensor:
    """``clamp(round_half_even(float64(p) * 127), 0, 127)`` as int8 (clamped as ``p`` in
    [0, 1] first: the same values, rounding being monotone; float64(p) * 127 is exact)."""
    return p.clamp(0, 1).double().mul_(P_LEVELS).round_().to(torch.int8)


def quantize_activation(x: torch.Tensor, scale: float) -> torch.Tensor:
    """``clamp(round_half_even(x / scale), -127, 127)`` as int8 (float64 division): the
    host's int8 activations, q, k, v here and every map's input
    (:meth:`~.model.QuantLinear.quantize_input`)."""
    return torch.round(x.double() / scale).clamp(-127, 127).to(torch.int8)


def quantize_wide(x: torch.Tensor, scale: float) -> torch.Tensor:
    """``clamp(round_half_even(x / scale), -WIDE_LEVELS, WIDE_LEVELS)`` as int64 (float64
    division): an integer unit's 16-bit input."""
    return torch.round(x.double() / scale).clamp(-WIDE_LEVELS, WIDE_LEVELS).to(torch.int64)


def _keep(mask: torch.Tensor) -> torch.Tensor:
    """The kept keys of ``mask`` (``(B, L)``) as the scores' bool ``(B, 1, 1, L)``."""
    return (mask != 0)[..., None, None, :]


class EngineAttention:
    """The attention of the module docstring with ``scales`` (block name -> its
    :class:`AttentionScales`) on ``units`` (anything ``units(call)``; golden units with a
    ``raw_batch`` compute each product stack at once); ``softmax`` (block name -> its
    :class:`~.integer_ops.SoftmaxParams`): the integer softmax, None: the float one."""

    def __init__(self, scales: dict[str, AttentionScales], units,
                 softmax: dict[str, SoftmaxParams] | None = None):
        self.scales, self.units, self.softmax = scales, units, softmax

    def __call__(self, block: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                 mask: torch.Tensor) -> torch.Tensor:
        """The context (float32, ``q``'s shape) of block ``block`` (e.g. ``block0``)."""
        s = self.scales[block]
        lead, (length, d) = q.shape[:-2], q.shape[-2:]
        q8, k8, v8 = (quantize_activation(t, scale).reshape(-1, length, d)
                      for t, scale in ((q, s.q), (k, s.k), (v, s.v)))
        scores_name, context_name = (f"{block}.{p}" for p in ATTENTION_PRODUCTS)
        raw = run_raw_jobs(self.units, scores_name, q8, k8.transpose(-1, -2))
        if self.softmax is not None:
            keep = (mask != 0)[..., None, :].expand(*lead, length).reshape(-1, length)
            p8 = self.units(SoftmaxCall(f"{block}.{SOFTMAX_CALL}", raw.to(torch.int64), keep,
                                        self.softmax[block], P_LEVELS)).to(torch.int8)
        else:
            scores = (raw.double() * s.scores(d)).float().reshape(*lead, length, length)
            p8 = quantize_probabilities(torch.softmax(
                scores + attention_bias(mask, torch.float32), dim=-1))
        p8 = p8.reshape(-1, length, length)
        context = run_raw_jobs(self.units, context_name, p8, v8)
        return (context.double() * (s.v / P_LEVELS)).float().reshape(*lead, length, d)


class HostIntegerAttention:
    """The host's float32 attention with the integer softmax (module docstring): ``softmax``,
    block name -> its :class:`~.integer_ops.SoftmaxParams` (their ``scale``: the scores'
    int16 scale)."""

    def __init__(self, softmax: dict[str, SoftmaxParams]):
        self.softmax = softmax

    def __call__(self, block: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                 mask: torch.Tensor) -> torch.Tensor:
        """The context (float32, ``q``'s shape) of block ``block``."""
        p = self.softmax[block]
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        p8 = int_softmax(quantize_wide(scores, p.scale), _keep(mask), p, P_LEVELS)
        return (p8.to(torch.float32) / P_LEVELS) @ v
