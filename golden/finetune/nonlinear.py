"""The GELU and the LayerNorms as integer units (``nonlinear`` ``integer``): the boundary a
fabric unit would see (issue 32, item 4; the softmax is in :mod:`.attention`).

**The LayerNorms** (units on the host's float32 values). Per block, per-tensor 16-bit
input scales ``s = peak / WIDE_LEVELS``, ``peak`` the calibration examples' largest ``|x|``
through the float model (percentile 100: 16 bits leave room, and a saturated LayerNorm input
would move its row's mean and variance): the two LayerNorms' inputs (the residual sums); the
GELU's input and, with ``attention`` ``host``, the softmax's scores ``q·k^T / sqrt(d)`` get
their scales the same way. A LayerNorm's float32 input ``x``::

    q = quantize_wide(x, s)                                   int64, |q| <= 2^15 - 1
    y = int_layernorm(q, LayerNormParams)                     (the LayerNorm's weight, bias,
                                                               eps)
    float32(float64(y) * out_scale)

**The GELU: the engine's GELU job** (:mod:`zoforge.golden.engine_gelu`). ``ffn_in``'s call
is a GELU job and the host never sees the FFN's hidden activations: the engine takes
``ffn_in``'s int8 input ``x`` (scale ``s_x``), int8 weights (``s_w[n]`` per column) and
int32 bias, and returns int8 ``x'``, which is ``ffn_out``'s call's input as it is (no host
GELU, no host quantization between). Per output column ``n`` of ``ffn_in`` (input channel
``n`` of ``ffn_out``), :func:`gelu_job`::

    acc = wrap32(x·w + bias)                     scale s_x s_w[n]
    q   = requantize(acc, into, bits=16)         into  = quantize_multiplier(s_x s_w[n] / s)
    y   = int_gelu(q, GeluParams.of(s))          scale g = s / (2 one)
    x'  = requantize(y, out)                     out   = quantize_multiplier(g / (m[n] s'))

with ``s = peak / WIDE_LEVELS`` the calibrated 16-bit GELU input scale (``peak`` the
largest ``|ffn_in output|`` of the float model on the calibration examples, as above), and
``m[n]``, ``s'`` ``ffn_out``'s SmoothQuant factor of channel ``n`` and per-tensor int8 input
scale (its :class:`~.model.QuantLinear` ``smooth``, ``in_scale``, calibrated on the float
model's GELU output as before): the host's ``quantize_activation(gelu / m, s')`` is folded
into the second requantizer. Both requantizers round half up (the host's quantizer: half to
even) and saturate (``q`` to ``[-2^15, 2^15 - 1]``, ``x'`` to ``[-128, 127]``: ``-128`` is
reachable here where the host's quantizer stops at ``-127``, only where GELU's least value,
about -0.17, is below ``-127.5 m[n] s'``); every constant (``into``, ``out``, i-GELU's) is
made once at calibration; a ratio ``quantize_multiplier`` refuses (``2^16 - 1/2`` or more)
is refused there in one line naming ``nonlinear``, as is a scale the units are not made for
(i-GELU takes ``2^-24 <= s <= 2^-7``, GELU inputs up to 256).

(:mod:`.integer_ops` states the kernels.) :meth:`IntegerNonlinear.layer` is the view of a
``BertLayer`` that :func:`zoforge.golden.models.bert_layer` takes with the two LayerNorms
so replaced. The GELU job sits in :class:`~.model.IntegerLinears`: ``ffn_in``'s call keeps
the job's int8 result and ``ffn_out``'s call takes it as its int8 input (the fabric's order),
and ``bert_layer`` runs with the identity for its ``gelu`` (``ffn_in``'s return value, the
job's int8 result, is passed on as ``ffn_out``'s ``x``, unused but for its shape).
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import torch

from zoforge.errors import ConfigError
from zoforge.golden.engine import quantize_multiplier
from zoforge.golden.engine_gelu import GeluStage
from zoforge.golden.finetune.attention import quantize_wide
from zoforge.golden.finetune.integer_ops import (GeluParams, LayerNormParams, SoftmaxParams,
                                                 int_layernorm)

__all__ = ["BlockNonlinear", "IntegerNonlinear", "NORMS", "NONLINEAR_PERCENTILE", "gelu_job"]

#: The percentile of ``|x|`` over the calibration examples that sets a 16-bit scale.
NONLINEAR_PERCENTILE = 100.0
#: A block's LayerNorms, by the names of their calibration records: after the attention
#: (``layer.attention.output.LayerNorm``) and after the FFN (``layer.output.LayerNorm``).
NORMS = ("attn_norm", "out_norm")


@dataclass(frozen=True)
class BlockNonlinear:
    """One block's integer units: ``ffn_in``'s GELU job (:func:`gelu_job`: its two
    requantizers and i-GELU's constants), the LayerNorms' (:data:`NORMS` order) and the
    softmax's constants (the softmax's scale: with engine attention the raw scores'
    ``s_q s_k / sqrt(d)``, with host attention the calibrated int16 one); ``host_scores``:
    the latter."""

    gelu: GeluStage
    norms: tuple[LayerNormParams, LayerNormParams]
    softmax: SoftmaxParams
    host_scores: bool


def gelu_job(gelu: GeluParams, acc_scale: torch.Tensor,
             next_scale: torch.Tensor) -> GeluStage:
    """``ffn_in``'s GELU job (module docstring) for i-GELU's ``gelu`` (input scale ``s``):
    ``into = quantize_multiplier(acc_scale / s)`` (``acc_scale[n] = s_x s_w[n]``) and
    ``out = quantize_multiplier(gelu.out_scale / next_scale)`` (``next_scale[n] = m[n] s'``,
    ``ffn_out``'s smoothing times its input scale), per column. A ratio the engine's
    requantizer cannot hold (2^16 or more): ``ConfigError`` naming the requantizer
    (``gelu_job.into``, ``gelu_job.out``), the largest scale and its column."""
    stages = {}
    for name, ratio in (("into", acc_scale.double() / gelu.scale),
                        ("out", gelu.out_scale / next_scale.double())):
        try:
            stages[name] = quantize_multiplier(ratio)
        except ConfigError as error:
            raise ConfigError(f"gelu_job.{name}", f"{error.allowed} (the engine's "
                              "requantizer)", f"{float(ratio.max()):g} in column "
                              f"{int(ratio.argmax())}") from None
    return GeluStage(stages["into"], gelu, stages["out"])


def layer_view(layer, norm):
    """``layer`` as :func:`~zoforge.golden.models.bert_layer` reads it, with its LayerNorms
    ``norm(name, x)`` (``name`` of :data:`NORMS`)."""
    return SimpleNamespace(
        attention=SimpleNamespace(self=layer.attention.self, output=SimpleNamespace(
            LayerNorm=lambda x: norm(NORMS[0], x))),
        output=SimpleNamespace(LayerNorm=lambda x: norm(NORMS[1], x)))


def norm_modules(layer) -> dict:
    """A ``BertLayer``'s LayerNorm modules by :data:`NORMS` name."""
    return dict(zip(NORMS, (layer.attention.output.LayerNorm, layer.output.LayerNorm)))


class IntegerNonlinear:
    """The integer LayerNorms and GELU jobs of the module docstring; ``blocks``: block name
    (``block0``) -> its :class:`BlockNonlinear`."""

    def __init__(self, blocks: dict[str, BlockNonlinear]):
        self.blocks = blocks

    def norm(self, block: str, name: str, x: torch.Tensor) -> torch.Tensor:
        p = self.blocks[block].norms[NORMS.index(name)]
        return (int_layernorm(quantize_wide(x, p.scale), p).double() * p.out_scale).float()

    def layer(self, block: str, layer):
        """``layer`` with its LayerNorms the integer ones of ``block``."""
        return layer_view(layer, lambda name, x: self.norm(block, name, x))

    @property
    def softmax(self) -> dict[str, SoftmaxParams]:
        """The blocks' softmax constants, by block name."""
        return {name: p.softmax for name, p in self.blocks.items()}
