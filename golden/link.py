"""The attention link's golden models: the scores reorder buffer's
(:class:`zoforge.hw.link.reorder.ScoresReorder`: a GEMM engine's raw ``scores = Q·K^T``
stream in, a softmax unit's rows out) and the routing of an engine's frames
(:class:`zoforge.hw.link.path.ScoresLink`, :func:`route_frames`, below) and an
accelerator's links and softmax input selectors together
(:class:`zoforge.hw.link.links.AttentionLinks`, :func:`link_frames`).

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

The link on an engine's output (:func:`route_frames`): the engine gives frames in order
(frame k: its beats of C int32, ``tlast`` on its last beat alone), the host one entry a
frame, entry k ``(route, m, length)`` for frame k. Route 0: frame k goes to the
pass-through side unchanged (every beat's C words as they came, ``tlast`` on its last
beat). Route 1: frame k is a scores job of ``m`` x ``length`` on the engine's R x C tiles
(``in_beats(m, length, R, C)`` beats) and goes to the softmax side as
``reorder_scores(frame, m, length, R, C, lanes)``, ``tlast`` on its last beat. Each side
keeps the frames' order; nothing else is on either side.
"""
from __future__ import annotations

import numpy as np

from zoforge.errors import ConfigError, check_int_range
from zoforge.golden.link_select import select_frames

__all__ = ["engine_order", "softmax_order", "reorder_scores", "in_beats", "out_beats",
           "route_frames", "link_frames"]


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


def route_frames(frames, jobs, rows: int, cols: int, lanes: int
                 ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The link's two outputs for the engine's ``frames`` (each ``[beats, C]`` int32) and
    the host's ``jobs`` (one ``(route, m, length)`` a frame): the pass-through side's
    frames (route 0, unchanged) and the softmax side's (route 1, :func:`reorder_scores`),
    each side in the frames' order (module docstring). A ConfigError names the entry or
    frame that does not fit (a route not 0 or 1, a route-1 frame of another length)."""
    frames, jobs = list(frames), list(jobs)
    if len(jobs) != len(frames):
        raise ConfigError("jobs", f"one entry a frame ({len(frames)})", len(jobs))
    passed, routed = [], []
    for k, (frame, (route, m, length)) in enumerate(zip(frames, jobs)):
        beats = np.asarray(frame, np.int32)
        if beats.ndim != 2 or beats.shape[1] != cols or not len(beats):
            raise ConfigError(f"frame {k}", f"an array of shape (beats >= 1, {cols})",
                              beats.shape)
        if route == 0:
            passed.append(np.array(beats))
        elif route == 1:
            routed.append(reorder_scores(beats, m, length, rows, cols, lanes))
        else:
            raise ConfigError(f"jobs[{k}].route", "0 or 1", route)
    return passed, routed


def link_frames(engine_frames, engine_jobs, ddr_frames, selects, rows: int, cols: int,
                lanes: int) -> tuple[list[list[np.ndarray]], list[list[np.ndarray]]]:
    """The outputs of an accelerator's attention links and input selectors
    (:class:`zoforge.hw.link.links.AttentionLinks`): E engines, S = ``len(ddr_frames)``
    softmax units, engine e's link feeding unit ``e mod S``.

    ``engine_frames[e]`` and ``engine_jobs[e]``: engine e's frames (``[beats, C]`` int32)
    and the host's entries for them, as :func:`route_frames` takes them;
    ``ddr_frames[u]``: the DDR's frames for unit u (``[beats, lanes]`` int32, unlinked
    softmax jobs' rows); ``selects[u]``: the host's source indices for unit u, one a frame
    of its input: 0 the DDR's next frame, ``1 + j`` the next routed frame of the j-th
    engine linked to u (engines ``u, u + S, u + 2 S, ...`` in that order).

    Returns ``(ddr, softmax)``: ``ddr[e]`` engine e's route-0 frames unchanged (in order,
    for the DDR's writer), ``softmax[u]`` unit u's input frames: for each entry of
    ``selects[u]`` in turn the named source's next frame, every int32 unchanged
    (:func:`zoforge.golden.link_select.select_frames` over the DDR's frames and the routed
    frames of :func:`route_frames`). A ConfigError names what does not fit (entries and
    frames of different counts, an index naming no source or a source with no frame left).
    """
    engine_frames, engine_jobs = list(engine_frames), list(engine_jobs)
    units = len(ddr_frames)
    check_int_range("softmax units", units, 1)
    if len(engine_jobs) != len(engine_frames):
        raise ConfigError("engine_jobs", f"one list an engine ({len(engine_frames)})",
                          len(engine_jobs))
    if len(selects) != units:
        raise ConfigError("selects", f"one list a softmax unit ({units})", len(selects))
    ddr, routed = [], []
    for frames, jobs in zip(engine_frames, engine_jobs):
        passed, linked = route_frames(frames, jobs, rows, cols, lanes)
        ddr.append(passed)
        routed.append(linked)
    softmax = []
    for u in range(units):
        sources = [[np.asarray(f, np.int32) for f in ddr_frames[u]]]
        sources += [routed[e] for e in range(u, len(engine_frames), units)]
        softmax.append([np.array(f, np.int32).reshape(-1, lanes)
                        for f in select_frames(sources, list(selects[u]))])
    return ddr, softmax
