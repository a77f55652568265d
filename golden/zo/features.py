"""Model, data and cached frozen-prefix inputs for a :class:`TrainConfig`.

The frozen encoder layers below the trainable part run once per split; their output (the
pooled features for ``head``, the hidden states entering the first adapted layer for
``lora-fa``) is cached in memory and on disk under ``cache_dir`` (default
``~/.cache/zoforge/zo-features``), keyed by a hash of everything that determines it (the data by its contents, not its path).
An entry is written under a temporary name and renamed when complete; one that cannot be read
back whole is discarded with a one-line notice and rebuilt.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import torch

from zoforge.golden import data as data_mod
from zoforge.golden import models
from zoforge.golden.zo.hwmlp import HwMlpTrainable
from zoforge.golden.zo.trainable import (FullTrainable, HeadTrainable, LoraFATrainable,
                                         SplitData)
from zoforge.errors import ConfigError
from zoforge.files import atomic_path, cache_dir

__all__ = ["load_model", "build_trainable", "default_cache_dir"]

PROMPT = "a {label} review"
POOLED = ("head", "hw-mlp")
SPLITS = ("train", "val", "test")      # trainables on the pooled final hidden states


def default_cache_dir() -> Path:
    return cache_dir() / "zo-features"


def load_model(cfg):
    if cfg.model == "tiny":
        return models.tiny_encoder(seed=cfg.split_seed)
    return models.load_encoder(cfg.model, cfg.num_layers)


def _cache_key(cfg, model, splits, prefix_layers: int) -> str:
    """Hash of everything the cached inputs depend on, the data by content (not by path)."""
    fields = {k: getattr(cfg, k) for k in ("model", "num_layers", "max_len")}
    data = hashlib.sha256()
    for name in SPLITS:
        part = getattr(splits, name)
        data.update(json.dumps([list(part.texts), part.labels.tolist()]).encode())
    fields["data"] = data.hexdigest()
    fields["prefix_layers"] = prefix_layers
    fields["pooled"] = cfg.trainable in POOLED
    fields["model_config"] = model.config.to_json_string(use_diff=True)
    text = json.dumps(fields, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _read_cached(path: Path, splits) -> dict | None:
    """The cached inputs at ``path`` if it holds a complete, well-formed entry; a damaged
    one is deleted with a one-line notice (and rebuilt by the caller)."""
    if not path.is_file():
        return None
    try:
        inputs = torch.load(path, weights_only=True)
        for name in SPLITS:
            x, mask = inputs[name]
            if len(x) != len(getattr(splits, name).texts) or (
                    mask is not None and mask.shape[0] != len(x)):
                raise ValueError(f"split {name} has {len(x)} rows")
        return inputs
    except Exception as error:           # any damage: truncated, wrong shape, not a dict
        print(f"zoforge: discarding a damaged feature cache entry {path.name} "
              f"({type(error).__name__}); rebuilding it", file=sys.stderr)
        path.unlink(missing_ok=True)
        return None


def _prefix_inputs(cfg, model, tokenizer, splits, prefix_layers: int) -> dict:
    cache_dir = Path(cfg.cache_dir) if cfg.cache_dir else default_cache_dir()
    path = cache_dir / f"{_cache_key(cfg, model, splits, prefix_layers)}.pt"
    cached = _read_cached(path, splits)
    if cached is not None:
        return cached
    inputs = {}
    for name in SPLITS:
        ids, mask = models.tokenize(tokenizer, getattr(splits, name).texts, cfg.max_len)
        hidden = models.hidden_states(model, ids, mask, prefix_layers)
        if cfg.trainable in POOLED:
            inputs[name] = (models.mean_pool(hidden, mask), None)
        else:
            inputs[name] = (hidden, mask)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        torch.save(inputs, tmp)
    return inputs


def _prompt_head(model, tokenizer, label_names, max_len) -> torch.Tensor:
    prompts = [PROMPT.format(label=name) for name in label_names]
    ids, mask = models.tokenize(tokenizer, prompts, max_len)
    hidden = models.hidden_states(model, ids, mask, model.config.num_hidden_layers)
    return models.mean_pool(hidden, mask)


def build_trainable(cfg):
    """``(trainable, info)`` for ``cfg``: loads model and data, caches the frozen prefix."""
    model, tokenizer = load_model(cfg)
    dataset = data_mod.load_dataset(cfg.data)
    splits = data_mod.split(dataset, cfg.split_seed, cfg.n_train, cfg.n_val, cfg.n_test)
    n_layers = model.config.num_hidden_layers
    head_init = (_prompt_head(model, tokenizer, dataset.label_names, cfg.max_len)
                 if cfg.head_init == "prompt" else None)
    classes = dataset.num_classes
    labels = {name: getattr(splits, name).labels for name in ("train", "val", "test")}
    if cfg.trainable == "full":
        data = {}
        for name in labels:
            ids, mask = models.tokenize(tokenizer, getattr(splits, name).texts, cfg.max_len)
            data[name] = SplitData(ids, mask, labels[name])
        trainable = FullTrainable(data, classes, model, head_init=head_init)
    else:
        if cfg.lora_layers > n_layers:
            raise ConfigError("--lora-layers", f"an integer with 1 <= value <= {n_layers}",
                              cfg.lora_layers)
        prefix = n_layers if cfg.trainable in POOLED else n_layers - cfg.lora_layers
        inputs = _prefix_inputs(cfg, model, tokenizer, splits, prefix)
        data = {name: SplitData(*inputs[name], labels[name]) for name in labels}
        if cfg.trainable == "head":
            trainable = HeadTrainable(data, classes, cfg.hw_arith, head_init)
        elif cfg.trainable == "hw-mlp":
            trainable = HwMlpTrainable(data, classes, cfg.hidden, cfg.rows, cfg.seed)
        else:
            trainable = LoraFATrainable(data, classes, model.encoder.layer[prefix:],
                                        cfg.rank, cfg.alpha, cfg.seed, cfg.hw_arith,
                                        head_init)
    info = {"d": trainable.d, "encoder_layers": n_layers, "num_classes": classes,
            "label_names": dataset.label_names,
            "layers": [[name, block.start, block.stop] for name, block in trainable.layers]}
    return trainable, info
