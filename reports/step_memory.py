"""Memory of one ZO fine-tuning step (issue 20): the on-chip memory bits of today's two
units (:func:`memory_bits`) and the peak memory, ZO against backprop LoRA
(:func:`zo_peak_memory`, :func:`backprop_peak_memory`), with the accounting in their
docstrings."""
from __future__ import annotations

from zoforge.golden.zolayer import Formats, ZoLayerConfig
from zoforge.hw.engine.config import EngineConfig
from zoforge.reports.model_shape import ModelShape
from zoforge.reports.unit_calls import model_layer_config

__all__ = ["memory_bits", "zo_peak_memory", "backprop_peak_memory"]


def _bytes_of(bits: int) -> int:
    """Whole bytes holding ``bits``."""
    return -(-bits // 8)


def memory_bits(engine: EngineConfig, layer: ZoLayerConfig) -> dict[str, int]:
    """On-chip memory bits of each unit (its memories' ``bits``, sized from the
    configuration) and their sum."""
    # the designs' modules import the generators and blocks (~80 ms): only when used
    from zoforge.hw.engine.designs import engine_memories
    from zoforge.hw.zolayer.designs import layer_memories
    engine_bits = sum(size.bits for size in engine_memories(engine).values())
    layer_bits = sum(size.bits for size in layer_memories(layer).values())
    return {"engine": engine_bits, "zo-layer": layer_bits, "total": engine_bits + layer_bits}


def _linear_params(shape: ModelShape) -> tuple[int, int]:
    """(weights, output channels) of every linear map of the model (blocks and head)."""
    h, f = shape.hidden, shape.ffn
    weights = shape.blocks * (4 * h * h + 2 * h * f) + h * shape.classes
    channels = shape.blocks * (4 * h + f + h) + shape.classes
    return weights, channels


def zo_peak_memory(shape: ModelShape, layer: ZoLayerConfig | None = None) -> dict[str, int]:
    """Bytes held at the peak of a ZO step (host DRAM and the accelerator together).

    * ``weights``: every linear's weights as int8 (blocks and head; the embedding tables
      are not counted, in neither accounting);
    * ``channel_params``: per output channel an int32 bias, multiplier and shift (12 bytes);
    * ``adapters_a``: each adapter's frozen A (K x r, int8);
    * ``masters``: the trained B masters, 24 bits (3 bytes) each, twice (the step's start
      and the work copy);
    * ``accumulator``: the update accumulator D of the one adapter in the ZO layer
      (r x N of :meth:`Formats.accumulator_bits`);
    * ``activations``: the largest live set of one forward, nothing kept for a backward:
      in attention the block input, q, k, v and the context (int8, M x H each) and one
      head's scores for all sequences (int32, batch x seq^2); in the FFN the block input,
      the FFN hidden (int8, M x F) and an adapter/engine output (int32, M x H);
    * ``generator``: the perturbation generator's state and its saved copy (on chip).
    """
    layer = layer or model_layer_config(shape)
    m, h, f, r, J = shape.tokens, shape.hidden, shape.ffn, shape.rank, shape.adapters
    weights, channels = _linear_params(shape)
    golden = layer.generator().golden()
    z_bits = golden.width
    attention = 5 * m * h + 4 * shape.batch * shape.seq_len ** 2
    ffn = m * h + m * f + 4 * m * h
    state_bits = golden.n_rng * golden.bits if hasattr(golden, "n_rng") else 64
    parts = {"weights": weights, "channel_params": 12 * channels, "adapters_a": J * h * r,
             "masters": 2 * J * r * h * 3,
             "accumulator": _bytes_of(r * h * Formats.accumulator_bits(z_bits)),
             "activations": max(attention, ffn), "generator": _bytes_of(2 * state_bits)}
    parts["total"] = sum(parts.values())
    return parts


#: Tensors a float32 backward keeps per block (name, elements as a function of the shape,
#: whether it is needed only for a frozen weight's gradient, i.e. an autograd that saves
#: only what the trained parameters need can drop it).
def _block_saved(shape: ModelShape) -> list[tuple[str, int, bool]]:
    m, h, f, r = shape.tokens, shape.hidden, shape.ffn, shape.rank
    scores = shape.batch * shape.heads * shape.seq_len ** 2
    return [
        ("block input (LN-free: q/k/v input)", m * h, True),
        ("LoRA U = X·A per adapter (dB = U^T dY)", shape.adapted * m * r, False),
        ("q, k, v", 3 * m * h, False),
        ("attention probabilities", scores, False),
        ("context = attn_out input", m * h, True),
        ("LN1 input and its mean/rstd", m * h + 2 * m, False),
        ("ffn_in input (LN1 output)", m * h, True),
        ("GELU input", m * f, False),
        ("ffn_out input (GELU output)", m * f, True),
        ("LN2 input and its mean/rstd", m * h + 2 * m, False),
    ]


def backprop_peak_memory(shape: ModelShape, frozen_aware: bool = False) -> dict[str, int]:
    """Bytes of LoRA-FA fine-tuning of the same model by backpropagation, float32
    training with Adam (the usual setup), at its peak (the end of the forward):

    * ``weights``: every linear's weights and biases, and the LayerNorm scales and shifts,
      float32 (frozen; embeddings not counted, as in :func:`zo_peak_memory`);
    * ``adapters_a``: each adapter's frozen A, float32;
    * ``masters``: the trained B (r x N per adapter), float32; ``gradients``: their
      gradients; ``adam``: Adam's two moments (2 x B);
    * ``activations``: per block what the backward reads, float32 (list in
      :func:`_block_saved`: the block input, U = X·A per adapter, q, k, v, the attention
      probabilities, the context (= attn_out's input), each LayerNorm's input with its
      mean and rstd, ffn_in's input, the GELU input and ffn_out's input), plus the pooled
      head input (batch x H). ``frozen_aware``: drop the tensors needed only for frozen
      weights' gradients (an autograd that saves only what the trained parameters need).
    """
    h, J, r = shape.hidden, shape.adapters, shape.rank
    weights, channels = _linear_params(shape)
    layer_norms = shape.blocks * 2 * 2 * h
    saved = sum(n for _, n, frozen_only in _block_saved(shape)
                if not (frozen_aware and frozen_only))
    b = J * r * h
    parts = {"weights": 4 * (weights + channels + layer_norms), "adapters_a": 4 * J * h * r,
             "masters": 4 * b, "gradients": 4 * b, "adam": 8 * b,
             "activations": 4 * (shape.blocks * saved + shape.batch * h)}
    parts["total"] = sum(parts.values())
    return parts
