"""The scores reorder buffer's golden model (:class:`zoforge.hw.link.reorder.ScoresReorder`):
a GEMM engine's raw ``scores = Q·K^T`` stream in, a softmax unit's rows out.

Integer semantics, beat by beat and value by value, for a job of M query rows x L keys on
an engine of R x C tiles and a softmax unit of ``lanes`` lanes:

* in (:func:`engine_order`): ``ceil(L / C) * ceil(M / R) * R`` beats of C int32, column
  panels outer, row panels inner, a row a beat: beat ``(nt * ceil(M / R) + mt) * R + r``
  lane ``c`` is ``S[mt R + r, nt C + c]``; the beats of rows ``>= M`` and the lanes of keys
  ``>= L`` (the engine's padding) are read and dropped, whatever they hold;
* out (:func:`softmax_order`): ``M * ceil(L / lanes)`` beats of ``lanes`` int32, row after
  row: beat ``i * ceil(L / lanes) + j`` lane ``t`` is ``S[i, j lanes + t]`` for
  ``j lanes + t < L`` and **0** past L (the softmax unit ignores those lanes).

So out beat ``(i, j)`` lane ``t`` with ``k = j lanes + t < L`` is in beat
``((k div C) ceil(M / R) + i div R) R + i mod R`` lane ``k mod C`` (:func:`reorder_scores`;
the values are moved as 32-bit words, unchanged).
"""
from __future__ import annotations

import numpy as np

from zoforge.errors import ConfigError, check_int_range

__all__ = ["engine_order", "softmax_order", "reorder_scores", "in_beats", "out_beats"]


def in_beats(m: int, length: int, rows: int, cols: int) -> int:
    """Beats of the engine's raw stream of an M x L scores job."""
    return -(-length // cols) * -(-m // rows) * rows


def out_beats(m: int, length: int, lanes: int) -> int:
    """Beats of the softmax unit's input stream of M rows of L keys."""
    return m * -(-length // lanes)


def engine_order(scores, rows: int, cols: int, pad=None) -> np.ndarray:
    """``[beats, C]`` int32: the engine's raw beats of ``scores`` (M x L); the padding
    (rows past M, keys past L) from ``pad`` (a matrix of at least the padded shape) or 0."""
    s = np.asarray(scores, np.int32)
    m, length = s.shape
    mt, nt = -(-m // rows), -(-length // cols)
    full = (np.zeros((mt * rows, nt * cols), np.int32) if pad is None
            else np.array(np.asarray(pad, np.int32)[:mt * rows, :nt * cols]))
    full[:m, :length] = s
    beats = np.empty((nt, mt * rows, cols), np.int32)
    for n in range(nt):
        beats[n] = full[:, n * cols:(n + 1) * cols]
    return beats.reshape(-1, cols)


def softmax_order(scores, lanes: int) -> np.ndarray:
    """``[beats, lanes]`` int32: the softmax unit's beats of ``scores`` (M x L), 0 past L."""
    s = np.asarray(scores, np.int32)
    m, length = s.shape
    per_row = -(-length // lanes)
    out = np.zeros((m, per_row * lanes), np.int32)
    out[:, :length] = s
    return out.reshape(m * per_row, lanes)


def reorder_scores(beats, m: int, length: int, rows: int, cols: int,
                   lanes: int) -> np.ndarray:
    """The buffer's output beats (``[M ceil(L / lanes), lanes]`` int32) for its input
    ``beats`` (``[ceil(L / C) ceil(M / R) R, C]``) of an M x L job: the module docstring's
    index map, applied lane by lane."""
    for name, value in (("m", m), ("length", length), ("rows", rows), ("cols", cols),
                        ("lanes", lanes)):
        check_int_range(name, value, 1)
    beats = np.asarray(beats)
    expected = (in_beats(m, length, rows, cols), cols)
    if beats.shape != expected:
        raise ConfigError("beats", f"an array of shape {expected}", beats.shape)
    per_row = -(-length // lanes)
    i = np.arange(m)[:, None, None]
    k = (np.arange(per_row)[:, None] * lanes + np.arange(lanes))[None]
    source = ((k // cols) * -(-m // rows) + i // rows) * rows + i % rows
    inside = np.broadcast_to(k < length, source.shape)
    out = np.zeros(source.shape, np.int32)
    out[inside] = beats.astype(np.int32)[source[inside],
                                         np.broadcast_to(k % cols, source.shape)[inside]]
    return out.reshape(m * per_row, lanes)
