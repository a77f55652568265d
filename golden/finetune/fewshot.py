"""The few-shot training set of ``zoforge finetune --k-shot K`` (issue 33).

The head is a probe fitted on the training split's ``n_train`` examples; a ZO run that
trains on those examples starts where the probe already fits them, with no headroom to show
learning (``docs/finetune-accuracy.md``). The few-shot mode trains on ``k`` examples per
class that neither the head nor the test split has seen: :func:`draw` takes them, per class
in class order, uniformly without replacement from the data set's examples outside the
excluded ones, with ``numpy.random.default_rng(SeedSequence([seed, DRAW_STREAM]))``; the
same seed draws the same set, another seed another one.
"""
from __future__ import annotations

import numpy as np

from zoforge.errors import ConfigError

__all__ = ["DRAW_STREAM", "draw", "fewshot_index"]

#: The draw's second seed word: its stream differs from every batch's
#: (:func:`zoforge.golden.zo.train.batch_index` seeds ``[seed, step]`` with a step < 2^32).
DRAW_STREAM = 2**32 + 33


def draw(labels, excluded, k: int, seed: int) -> np.ndarray:
    """Indices (into ``labels``) of ``k`` examples of every class ``0..max(labels)``, none in
    ``excluded`` (indices); class 0's ``k`` first, then class 1's, ... A class with fewer
    than ``k`` eligible examples is a one-line error naming ``k_shot``."""
    labels = np.asarray(labels, dtype=np.int64)
    eligible = np.ones(len(labels), dtype=bool)
    eligible[np.asarray(excluded, dtype=np.int64)] = False
    classes = int(labels.max()) + 1 if len(labels) else 0
    pools = [np.flatnonzero(eligible & (labels == c)) for c in range(classes)]
    fewest = min((len(pool) for pool in pools), default=0)
    if k > fewest:
        raise ConfigError("k_shot", f"at most {fewest} (the examples per class outside the "
                          "head's n_train and the test split)", k)
    rng = np.random.default_rng(np.random.SeedSequence([seed, DRAW_STREAM]))
    return np.concatenate([rng.choice(pool, k, replace=False) for pool in pools]
                          ).astype(np.int64)


def fewshot_index(texts: list[str], labels, used: list[str], k: int, seed: int) -> np.ndarray:
    """:func:`draw` on a data set of unique ``texts``, excluding the examples whose text is
    in ``used`` (the head's training examples and the test split)."""
    position = {text: i for i, text in enumerate(texts)}
    return draw(labels, [position[text] for text in used], k, seed)
