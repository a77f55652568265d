"""The GEMM engine's GELU job (issue 32, item 4): ``ffn_in``'s GELU on the engine's output
path, so the host never sees the FFN's hidden activations.

A GELU job is an engine job ``X·W + bias`` whose int32 accumulators go, per output column
``n``, through three stages in a row, every one of them an existing integer model::

    acc = wrap32(x·w + bias)                         (:func:`~zoforge.golden.engine.gemm_int32`)
    q   = requantize(acc, into, bits=16)             (int16: round half up, saturate to
                                                      [-2^15, 2^15 - 1]; multiplier / 2^shift
                                                      ~ s_x s_w[n] / s, s the GELU's input
                                                      scale)
    y   = int_gelu(q, gelu)                          (I-BERT's i-GELU, |y| < 2^31: scale
                                                      gelu.out_scale = s / (2 one))
    out = requantize(y, out)                         (int8: round half up, saturate to
                                                      [-128, 127]; multiplier / 2^shift ~
                                                      gelu.out_scale / s_out[n])

``into`` and ``out`` are :class:`~zoforge.golden.engine.RequantParams` (a pair per tensor or
one per column: the engine's per-column tables), ``gelu`` a :class:`~zoforge.golden.
finetune.integer_ops.GeluParams` (one per job: the GELU's scale is per tensor). Every stage
is elementwise, so a lane of the output path is a column; the job's int8 result is the next
map's input, its scale (``s_out[n]``, with the next map's per-channel smoothing folded in)
chosen by the caller. :func:`int_gelu` accepts ``q = -2^15`` (the RTL unit too: the same
formula holds there; ``|y| <= 2^15 2 one < 2^30``).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from zoforge.golden.engine import RequantParams, gemm_int32, requantize
from zoforge.golden.finetune.integer_ops import INPUT_BITS, GeluParams, int_gelu

__all__ = ["GeluStage", "gelu_stage", "engine_gemm_gelu"]


@dataclass(frozen=True)
class GeluStage:
    """A GELU job's constants after the GEMM: ``into`` (acc -> int16 ``q``), ``gelu`` (i-GELU's
    constants, per tensor) and ``out`` (``y`` -> int8), as the module docstring states."""

    into: RequantParams
    gelu: GeluParams
    out: RequantParams


def gelu_stage(acc, stage: GeluStage) -> torch.Tensor:
    """The GELU job's output stage on int32 accumulators ``acc [..., N]``: int8 ``[..., N]``."""
    q = requantize(acc, stage.into, bits=INPUT_BITS).to(torch.int64)
    return requantize(int_gelu(q, stage.gelu), stage.out)


def engine_gemm_gelu(x, w, bias, stage: GeluStage) -> torch.Tensor:
    """What the engine returns for a GELU job: int8 ``gelu_stage(wrap32(x·w + bias))``."""
    return gelu_stage(gemm_int32(x, w, bias), stage)
