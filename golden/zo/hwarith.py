"""Hardware arithmetic for the trainable layers: the GEMM engine's integer semantics.

``int8_linear(x, w, b)`` replaces ``x @ w.T + b`` (float) by what the engine computes:

* activations ``x`` and weights ``w`` are quantized to int8, symmetric, per tensor (per
  copy when a copy axis is present): ``scale = max|t| / 127`` (1 if t is all zero),
  ``q = clamp(round_half_even(t / scale), -127, 127)``;
* the bias becomes int32 in the accumulator's scale: ``round_half_even(b / (sx * sw))``;
* :func:`zoforge.golden.engine.gemm_int32` accumulates exactly in 32 bits (bias included);
* the accumulators are dequantized for the float parts of the model (LayerNorm, softmax,
  GELU, the loss): ``y = acc * sx * sw``.

``x`` is ``(..., in)`` shared by all copies, or ``(K, ..., in)`` when ``w`` is ``(K, out, in)``
and each copy has its own activations.
"""
from __future__ import annotations

import torch

from zoforge.golden.engine import gemm_int32

__all__ = ["quantize_symmetric", "int8_linear"]


def quantize_symmetric(t: torch.Tensor) -> tuple[torch.Tensor, float]:
    """``(int8 tensor, scale)`` with ``t ≈ q * scale`` (see the module docstring)."""
    peak = float(t.abs().max()) if t.numel() else 0.0
    scale = peak / 127.0 if peak > 0 else 1.0
    return torch.round(t / scale).clamp_(-127, 127).to(torch.int8), scale


def _one(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    xq, sx = quantize_symmetric(x)
    wq, sw = quantize_symmetric(w)
    bias = None if b is None else torch.round(b.double() / (sx * sw)).to(torch.int64)
    acc = gemm_int32(xq.reshape(-1, x.shape[-1]), wq.T, bias)
    return (acc.double() * (sx * sw)).to(x.dtype).reshape(*x.shape[:-1], w.shape[0])


def int8_linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None,
                per_copy_x: bool = False) -> torch.Tensor:
    """The engine's version of ``F.linear(x, w, b)``; ``w`` 2-D, or ``(K, out, in)`` with
    ``b`` ``(K, out)``. ``per_copy_x``: ``x``'s first axis is the copy axis."""
    if w.dim() == 2:
        return _one(x, w, b)
    return torch.stack([_one(x[k] if per_copy_x else x, w[k], None if b is None else b[k])
                        for k in range(w.shape[0])])
