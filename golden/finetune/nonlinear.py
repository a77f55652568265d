"""The host's GELU and LayerNorms as integer units (``nonlinear`` ``integer``): the boundary a
fabric unit would see (issue 32, item 4; the softmax is in :mod:`.attention`).

Per block, per-tensor 16-bit input scales ``s = peak / WIDE_LEVELS``, ``peak`` the
calibration examples' largest ``|x|`` through the float model (percentile 100: 16 bits leave
room, and a saturated LayerNorm input would move its row's mean and variance): the GELU's
input (``ffn_in``'s output), the two LayerNorms' inputs (the residual sums), and with
``attention`` ``host`` the scores ``q·k^T / sqrt(d)``. A function's float32 input ``x``::

    q = quantize_wide(x, s)                                   int64, |q| <= 2^15 - 1
    y = int_gelu(q, GeluParams.of(s))                         (or int_layernorm, with the
                                                               LayerNorm's weight, bias, eps)
    float32(float64(y) * out_scale)

(:mod:`.integer_ops` states the kernels.) :meth:`IntegerNonlinear.layer` is the view of a
``BertLayer`` that :func:`zoforge.golden.models.bert_layer` takes with the two LayerNorms
so replaced. ``bert_layer`` applies torch's GELU to ``ffn_in``'s output itself, so the GELU
unit sits in :class:`~.model.IntegerLinears`: ``ffn_in``'s call keeps the unit's output
and ``ffn_out``'s call takes it in place of its float-GELU input (the fabric's order: the
unit streams on ``ffn_in``'s output; the float GELU ``bert_layer`` computes is unused).
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import torch

from zoforge.golden.finetune.attention import quantize_wide
from zoforge.golden.finetune.integer_ops import (GeluParams, LayerNormParams, SoftmaxParams,
                                                 int_gelu, int_layernorm)

__all__ = ["BlockNonlinear", "IntegerNonlinear", "NORMS", "NONLINEAR_PERCENTILE"]

#: The percentile of ``|x|`` over the calibration examples that sets a 16-bit scale.
NONLINEAR_PERCENTILE = 100.0
#: A block's LayerNorms, by the names of their calibration records: after the attention
#: (``layer.attention.output.LayerNorm``) and after the FFN (``layer.output.LayerNorm``).
NORMS = ("attn_norm", "out_norm")


@dataclass(frozen=True)
class BlockNonlinear:
    """One block's integer units: i-GELU's, the LayerNorms' (:data:`NORMS` order) and the
    softmax's constants (the softmax's scale: with engine attention the raw scores'
    ``s_q s_k / sqrt(d)``, with host attention the calibrated int16 one); ``host_scores``:
    the latter."""

    gelu: GeluParams
    norms: tuple[LayerNormParams, LayerNormParams]
    softmax: SoftmaxParams
    host_scores: bool


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
    """The integer GELU and LayerNorms of the module docstring; ``blocks``: block name
    (``block0``) -> its :class:`BlockNonlinear`."""

    def __init__(self, blocks: dict[str, BlockNonlinear]):
        self.blocks = blocks

    def gelu(self, block: str, x: torch.Tensor) -> torch.Tensor:
        p = self.blocks[block].gelu
        return (int_gelu(quantize_wide(x, p.scale), p).double() * p.out_scale).float()

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
