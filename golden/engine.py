"""Golden model of the GEMM engine's integer arithmetic (PyTorch), bit-exact with ``hw/engine``.

The engine computes ``Y = requant(X·W + bias)`` for INT8 operands. Its integer semantics:

* **Operands**: ``x`` int8 ``[M, K]`` (activations), ``w`` int8 ``[K, N]`` (weights), signed
  two's complement, range [-128, 127].
* **Accumulation** (:func:`gemm_int32`): every processing element holds a 32-bit signed
  accumulator; products (exact, 16 bits) are added in 32-bit two's complement and **wrap
  modulo 2^32** on overflow, never saturate. The optional ``bias`` (int32 per output column)
  is added in the output stage, also wrapping modulo 2^32. Because wrap-around addition is
  associative, the result equals ``(x·w + bias) mod 2^32`` mapped to [-2^31, 2^31), whatever
  the summation order. Overflow cannot happen for ``K <= 2^17`` without bias
  (|product| <= 2^14), so for any practical layer the result is the exact integer.
* **Requantization** (:func:`requantize`): with an unsigned ``multiplier`` in
  [0, 2^16) and a ``shift`` in [0, 47] (per tensor, or one pair per output column)::

      prod = acc * multiplier                       # exact, 48-bit signed
      y    = (prod + ((1 << shift) >> 1)) >> shift  # round half up, arithmetic shift
      y    = clamp(y, -128, 127)                    # saturate to int8
      y    = max(y, 0) if relu                      # optional ReLU after saturation

  i.e. ``y = floor(acc * multiplier / 2^shift + 1/2)`` (ties round towards +inf), then
  saturation at both ends. ``shift = 0`` adds no rounding term.
* :func:`quantize_multiplier` turns a real scale ``s`` into ``(multiplier, shift)`` with
  ``multiplier / 2^shift ≈ s`` and 16 significant bits (multiplier in [2^15, 2^16)), except
  for scales below 2^-32 (multiplier < 2^15 at the largest shift, 47) and ``s = 0``.

``torch.matmul`` on int8 tensors wraps at 8 bits, so :func:`gemm_int32` upcasts: float32
matmuls over k-slices of at most 1024 (every partial sum an integer of magnitude at most
2^24, exact in float32), summed in int64 (:func:`exact_int8_matmul`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from zoforge.errors import ConfigError
from zoforge.golden.engine_widths import (ACC_BITS, MULT_BITS, OPERAND_BITS, SHIFT_BITS,
                                        SHIFT_MAX)

__all__ = ["OPERAND_BITS", "ACC_BITS", "MULT_BITS", "SHIFT_BITS", "SHIFT_MAX", "RequantParams",
           "gemm_int32", "exact_int8_matmul", "wrap_signed", "requantize",
           "quantize_multiplier", "engine_gemm", "EngineLinear"]


@dataclass(frozen=True)
class RequantParams:
    """Integer requantization ``y = round(acc * multiplier / 2^shift)``.

    ``multiplier`` and ``shift`` are ints (per tensor) or 1-D int64 tensors of length N (per
    output column); see the module docstring for the exact rounding and saturation.
    """

    multiplier: int | torch.Tensor
    shift: int | torch.Tensor

    def per_column(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(multiplier, shift)`` as int64 tensors of length ``n`` (validated)."""
        mult = torch.as_tensor(self.multiplier, dtype=torch.int64).reshape(-1)
        shift = torch.as_tensor(self.shift, dtype=torch.int64).reshape(-1)
        for name, value, low, high in (("multiplier", mult, 0, (1 << MULT_BITS) - 1),
                                       ("shift", shift, 0, SHIFT_MAX)):
            if value.numel() not in (1, n):
                raise ConfigError(name, f"a scalar or {n} values (one per column)",
                                  f"{value.numel()} values")
            if value.numel() and (int(value.min()) < low or int(value.max()) > high):
                raise ConfigError(name, f"an integer with {low} <= value <= {high}",
                                  f"{int(value.min())}..{int(value.max())}")
        return mult.expand(n).clone(), shift.expand(n).clone()


def wrap_signed(values: torch.Tensor, bits: int = ACC_BITS) -> torch.Tensor:
    """Two's complement wrap of int64 ``values`` to ``bits`` bits (result int64)."""
    half = 1 << (bits - 1)
    return torch.remainder(values + half, 1 << bits) - half


def _int8(name: str, tensor) -> torch.Tensor:
    tensor = torch.as_tensor(tensor)
    if tensor.dtype != torch.int8:
        if tensor.dtype.is_floating_point or tensor.numel() and (
                int(tensor.min()) < -128 or int(tensor.max()) > 127):
            raise ConfigError(name, "an int8 tensor (values in [-128, 127])", tensor.dtype)
        tensor = tensor.to(torch.int8)
    return tensor


def gemm_int32(x, w, bias=None) -> torch.Tensor:
    """``(x @ w + bias)`` exactly, wrapped to int32 like the engine's accumulators.

    x: int8 ``[..., M, K]``; w: int8 ``[K, N]``; bias: int32 ``[N]`` or None. Returns int32
    ``[..., M, N]``.
    """
    x, w = _int8("x", x), _int8("w", w)
    if x.shape[-1] != w.shape[0]:
        raise ConfigError("x/w", "matrices with x.shape[-1] == w.shape[0]",
                          f"{tuple(x.shape)} and {tuple(w.shape)}")
    acc = exact_int8_matmul(x, w)
    if bias is not None:
        acc = acc + torch.as_tensor(bias).to(torch.int64)
    return wrap_signed(acc).to(torch.int32)


#: Depth of one float32 partial product: 1024 int8 products sum to at most 2^24 in
#: magnitude, which float32 holds exactly whatever the summation order.
_F32_EXACT_DEPTH = 1024


def exact_int8_matmul(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x @ w`` of int8 ``[..., M, K]`` and ``[K, N]`` as exact int64: float32 matmuls over
    slices of at most 1024 k-steps (each exact, see ``_F32_EXACT_DEPTH``), summed in int64."""
    out = None
    for start in range(0, max(x.shape[-1], 1), _F32_EXACT_DEPTH):
        part = torch.matmul(x[..., start:start + _F32_EXACT_DEPTH].to(torch.float32),
                            w[start:start + _F32_EXACT_DEPTH].to(torch.float32)).to(torch.int64)
        out = part if out is None else out + part
    return out


def requantize(acc, params: RequantParams, relu: bool = False,
               bits: int = OPERAND_BITS) -> torch.Tensor:
    """int32 ``[..., N]`` accumulators -> int8, rounding half up and saturating (see module).

    ``bits`` 16 saturates to ``[-2^15, 2^15 - 1]`` instead (the GELU job's first
    requantizer, :mod:`zoforge.golden.engine_gelu`) and returns int16."""
    acc = torch.as_tensor(acc).to(torch.int64)
    mult, shift = params.per_column(acc.shape[-1])
    prod = acc * mult
    y = torch.bitwise_right_shift(prod + torch.bitwise_right_shift(
        torch.bitwise_left_shift(torch.ones_like(shift), shift), 1), shift)
    if bits not in _OUT_DTYPES:
        raise ConfigError("bits", f"one of {sorted(_OUT_DTYPES)}", bits)
    y = y.clamp(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if relu:
        y = y.clamp_min(0)
    return y.to(_OUT_DTYPES[bits])


#: A requantizer's output widths and their dtypes.
_OUT_DTYPES = {OPERAND_BITS: torch.int8, 16: torch.int16}


def quantize_multiplier(real_scale) -> RequantParams:
    """Real scale(s) ``s >= 0`` -> :class:`RequantParams` with ``multiplier/2^shift ≈ s``.

    A float gives int fields; a 1-D tensor gives int64 tensors. Scales of 2^16 - 1/2 or
    more would need a negative shift and raise :class:`~zoforge.errors.ConfigError`.
    """
    if isinstance(real_scale, torch.Tensor):
        pairs = [_quantize_one(float(s)) for s in real_scale.reshape(-1).tolist()]
        return RequantParams(torch.tensor([p[0] for p in pairs], dtype=torch.int64),
                             torch.tensor([p[1] for p in pairs], dtype=torch.int64))
    return RequantParams(*_quantize_one(float(real_scale)))


def _quantize_one(scale: float) -> tuple[int, int]:
    limit = (1 << MULT_BITS) - 0.5   # larger scales round to 2^16 at shift 0
    if not math.isfinite(scale) or scale < 0 or scale >= limit:
        raise ConfigError("real_scale", f"a finite value with 0 <= scale < {limit:g}", scale)
    if scale == 0:
        return 0, 0
    fraction, exponent = math.frexp(scale)          # scale = fraction * 2^exponent
    multiplier = round(fraction * (1 << MULT_BITS))  # in [2^15, 2^16]
    shift = MULT_BITS - exponent
    if multiplier == 1 << MULT_BITS:
        multiplier, shift = multiplier >> 1, shift - 1
    if shift < 0:
        raise ConfigError("real_scale", f"a finite value with 0 <= scale < {limit:g}", scale)
    if shift > SHIFT_MAX:
        multiplier, shift = round(scale * (1 << SHIFT_MAX)), SHIFT_MAX
    return int(multiplier), int(shift)


def engine_gemm(x, w, bias=None, params: RequantParams | None = None,
                relu: bool = False) -> torch.Tensor:
    """What the engine returns: int32 accumulators if ``params`` is None (raw mode, ``relu``
    ignored there, as in the RTL), else the requantized int8 result."""
    acc = gemm_int32(x, w, bias)
    return acc if params is None else requantize(acc, params, relu)


class EngineLinear(torch.nn.Module):
    """A quantized linear layer with the engine's exact arithmetic (forward only).

    Holds int8 ``weight [in, out]``, optional int32 ``bias [out]`` and
    :class:`RequantParams`; ``forward(x_int8)`` returns int8 (or int32 if ``params`` is None).
    """

    def __init__(self, weight, bias=None, params: RequantParams | None = None,
                 relu: bool = False):
        super().__init__()
        self.register_buffer("weight", _int8("weight", weight))
        self.register_buffer("bias", None if bias is None else
                             torch.as_tensor(bias).to(torch.int32))
        self.params = params
        self.relu = relu

    def forward(self, x):
        return engine_gemm(x, self.weight, self.bias, self.params, self.relu)
