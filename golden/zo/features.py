"""Model, data and cached frozen-prefix inputs for a :class:`TrainConfig`.

The frozen encoder layers below the trainable part run once per split; their output (the
pooled features for ``head``, the hidden states entering the first adapted layer for
``lora-fa``) is cached in memory and on disk under ``cache_dir`` (default
``~/.cache/zoforge/zo-features``), keyed by a hash of everything that determines it (the data by its contents, not its path).
An entry is written under a temporary name and renamed when complete; one that cannot be read
back whole is discarded with a one-line notice and rebuilt. A key's entry is computed by one
process at a time (a file lock beside it): parallel trainings (sweep workers) wait for it and
read it, instead of computing the same features at once.
"""
from __future__ import annotations

import io
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
from zoforge.config import data_hash
from zoforge.files import atomic_write_bytes, cache_dir, content_key, file_lock
from zoforge.outputs import make_out_dir

__all__ = ["load_model", "build_trainable", "default_cache_dir", "check_model_limits",
           "pooled_shape"]

PROMPT = "a {label} review"
POOLED = ("head", "hw-mlp")
SPLITS = ("train", "val", "test")      # trainables on the pooled final hidden states


def default_cache_dir() -> Path:
    return cache_dir() / "zo-features"


def load_model(cfg):
    if cfg.model == "tiny":
        return models.tiny_encoder(seed=cfg.split_seed)
    return models.load_encoder(cfg.model, cfg.num_layers)


#: The ``tiny`` model's encoder layers, positions and width (:func:`models.tiny_encoder`).
TINY_LAYERS, TINY_POSITIONS, TINY_HIDDEN = 2, 128, 32


def check_model_limits(cfg) -> None:
    """Before the model is loaded: ``num_layers`` (and LoRA-FA's ``lora_layers``) at most
    the model's encoder layers, ``max_len`` at most its positions (from its config.json);
    one-line errors."""
    if cfg.model == "tiny":
        layers, positions, name = TINY_LAYERS, TINY_POSITIONS, "tiny"
    else:
        source = _model_source(cfg)
        shape = _model_shape(source)
        layers, positions = shape.num_hidden_layers, shape.max_position_embeddings
        name = Path(source).name
    if cfg.model == "tiny" and cfg.num_layers not in (None, layers):
        raise ConfigError("num_layers", f"left out with model tiny (it has {layers} "
                          "layers)", cfg.num_layers)
    if layers is not None and cfg.num_layers is not None and cfg.num_layers > layers:
        raise ConfigError("num_layers", f"an integer with 1 <= value <= {layers} (the "
                          f"layers of {name})", cfg.num_layers)
    kept = layers if cfg.num_layers is None else cfg.num_layers
    if cfg.trainable == "lora-fa" and kept is not None and cfg.lora_layers > kept:
        raise ConfigError("lora_layers", f"an integer with 1 <= value <= {kept} (the "
                          "encoder layers kept)", cfg.lora_layers)
    if positions is not None and cfg.max_len > positions:
        raise ConfigError("max_len", f"an integer with 2 <= value <= {positions} (the "
                          f"positions of {name})", cfg.max_len)


def _model_source(cfg) -> str:
    return str(models.default_model_path() if cfg.model is None else cfg.model)


def _model_shape(source: str):
    # the guarded reader and checks of every model folder (one line naming --model)
    from zoforge.golden.model_folder import read_config
    return read_config(source)


def pooled_shape(cfg) -> tuple[int, int]:
    """``(features, classes)`` of the pooled trainables' input (``head``, ``hw-mlp``): the
    encoder's hidden width (its config.json) and the data's classes, without loading the
    encoder."""
    classes = data_mod.load_dataset(cfg.data).num_classes
    if cfg.model == "tiny":
        return TINY_HIDDEN, classes
    return _model_shape(_model_source(cfg)).hidden_size, classes


def _cache_key(cfg, model, splits, prefix_layers: int) -> str:
    """Hash of everything the cached inputs depend on, the data by content (not by path)."""
    fields = {k: getattr(cfg, k) for k in ("model", "num_layers", "max_len")}
    fields["data"] = content_key(*(json.dumps([list(part.texts), part.labels.tolist()])
                                   for part in (getattr(splits, name) for name in SPLITS)))
    fields["prefix_layers"] = prefix_layers
    fields["pooled"] = cfg.trainable in POOLED
    fields["model_config"] = model.config.to_json_string(use_diff=True)
    return data_hash(fields)


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
    parameter = "cache_dir" if cfg.cache_dir else "ZOFORGE_CACHE"
    make_out_dir(parameter, path.parent)
    # one process computes a key's features; others (sweep workers) wait, then read them
    with file_lock(path.with_name(f"{path.name}.lock")):
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
        buffer = io.BytesIO()        # in memory first: a failed write is then one line
        torch.save(inputs, buffer)
        atomic_write_bytes(path, buffer.getvalue(), parameter)
    return inputs


def _prompt_head(model, tokenizer, label_names, max_len) -> torch.Tensor:
    prompts = [PROMPT.format(label=name) for name in label_names]
    ids, mask = models.tokenize(tokenizer, prompts, max_len)
    hidden = models.hidden_states(model, ids, mask, model.config.num_hidden_layers)
    return models.mean_pool(hidden, mask)


def build_trainable(cfg):
    """``(trainable, info)`` for ``cfg``: loads model and data, caches the frozen prefix.
    The data and the model's limits are checked first (one-line errors), before the model is
    loaded."""
    dataset = data_mod.load_dataset(cfg.data)
    splits = data_mod.split(dataset, cfg.split_seed, cfg.n_train, cfg.n_val, cfg.n_test)
    check_model_limits(cfg)
    model, tokenizer = load_model(cfg)
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
            raise ConfigError("lora_layers", f"an integer with 1 <= value <= {n_layers}",
                              cfg.lora_layers)
        prefix = n_layers if cfg.trainable in POOLED else n_layers - cfg.lora_layers
        inputs = _prefix_inputs(cfg, model, tokenizer, splits, prefix)
        data = {name: SplitData(*inputs[name], labels[name]) for name in labels}
        if cfg.trainable == "head":
            trainable = HeadTrainable(data, classes, cfg.hw_arith, head_init)
        elif cfg.trainable == "hw-mlp":
            trainable = HwMlpTrainable(data, classes, cfg.hidden, cfg.rows, cfg.seed,
                                       cfg.branch_lanes)
        else:
            trainable = LoraFATrainable(data, classes, model.encoder.layer[prefix:],
                                        cfg.rank, cfg.alpha, cfg.seed, cfg.hw_arith,
                                        head_init)
    info = {"d": trainable.d, "encoder_layers": n_layers, "num_classes": classes,
            "label_names": dataset.label_names,
            "layers": [[name, block.start, block.stop] for name, block in trainable.layers]}
    return trainable, info
