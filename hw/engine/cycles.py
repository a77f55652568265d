"""The GEMM engine's cycle model: the CYCLES register of one job, and what its streams move.

Beside the unit (issue 32, item 7); ``zoforge.reports.unit_calls`` prices the fine-tuning step with it.

* :func:`engine_job_cycles`: W panel 0 and X panel 0 arrive first (``2 * ceil(K/pack)``
  words of ``pack`` k-steps, one a cycle: a W beat of ``max(1, R // C)`` words takes as
  many cycles), then the ``ceil(M/R) * ceil(N/C)`` tiles run back to back, each ``pack *
  ceil(K/pack)`` k-steps but at least :func:`engine_tile_interval` apart (the skewed
  drain's ``max(U + R - 2, R)``, U = R or R / 2 paired; the later panels stream in
  meanwhile: a word carries ``pack`` k-steps, the array takes one per cycle) and a tile
  begins only once the tile two before it has left its result bank (its k-steps and
  :func:`engine_bank_turnaround` after its begin: binding where two short tiles compute
  faster than one tile's results leave), then the last tile drains and leaves
  (:func:`engine_job_extra`); a GELU job (``gelu``, a ``gelu``
  build's CTRL bit) leaves ``GELU_EXTRA_LATENCY`` = 23 cycles later (the i-GELU's 13
  stages, a register slice's 1 and the second requantizer's 9:
  :mod:`~zoforge.hw.engine.gelu_path`), the rest the same;
* :func:`engine_stream_parts` / :func:`engine_job_bytes`: the bytes of its streams as the
  RTL builds them (input beats of ``pack * max(R, C)`` int8: an X beat ``pack`` k-steps of
  R rows, a W beat ``max(1, R // C)`` times ``pack`` k-steps of C columns; output beats of
  C 32-bit lanes: a row of int32 results, or four rows of int8) and as packed values.
"""
from __future__ import annotations

from zoforge.hw.engine.buffers import engine_tiling
from zoforge.hw.engine.config import EngineConfig
from zoforge.hw.engine.gelu_path import GELU_EXTRA_LATENCY
from zoforge.hw.engine.packer import ROWS_PER_BEAT
from zoforge.hw.pe.array import min_tile_interval

__all__ = ["engine_tile_interval", "engine_job_extra", "engine_bank_turnaround", "engine_tile_begins",
           "BANK_FREE_TO_END", "W_BANK_REFILL_EXTRA", "engine_job_cycles", "engine_stream_parts", "engine_job_bytes",
           "GELU_EXTRA_LATENCY"]


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def engine_tile_interval(config: EngineConfig) -> int:
    """Fewest cycles between two of the engine's tiles: its array reads out with the skewed
    drain (a ``sel`` register a column: each fans out to one column's read-out, not to all
    of them), :func:`~zoforge.hw.pe.array.min_tile_interval`: ``max(U + R - 2, R)``, U = R
    (R / 2 paired) unit rows (2R - 2 for single PEs, 3R / 2 - 2 paired, at least R)."""
    return min_tile_interval(config.rows, config.cols, config.paired, skewed_drain=True)


def engine_job_extra(rows: int, cols: int, paired: bool = False) -> int:
    """Engine: cycles of a job after its last tile's k-steps (the array's skew and drain,
    the result banks, the requantizer's stages, the last tile's R output rows, a row a cycle):
    ``3R + C + 21``, read off co-simulations of 4x4, 8x4 and 4x8 engines (jobs 5x7x3 to
    64x128x64, exact) and the 8x8 (the recorded model shapes, exact). (``3R + C + 7``
    before the timing pipeline, docs/engine.md: loader writes +1, the first tile's load
    test +1, feeder reads +2, PE +2, output stage reads +3, requantizer +5.) Jobs of short
    tiles whose results leave slower than the tiles compute are spaced by
    :func:`engine_bank_turnaround` (:func:`engine_tile_begins`). A paired array (two rows
    per packed multiplier) skews its rows in pairs: R / 2 cycles less
    (``tests/test_engine_cosim.py``, measured exact)."""
    return 3 * rows + cols + 21 - (rows // 2 if paired else 0)


#: Cycles of :func:`engine_job_extra` after a result bank is free again (the output
#: stage's ``tile_done``, at its last row's issue): that row's way out and the job's end
#: (read off co-simulations, :func:`engine_bank_turnaround`).
BANK_FREE_TO_END = 16


def engine_bank_turnaround(rows: int, cols: int, paired: bool = False) -> int:
    """Engine: cycles from a tile's end (its begin plus its k-steps) to the earliest begin
    of the tile that takes its result bank next (``result_bank_count`` = 2 tiles later:
    the output stage frees a bank when it issues the bank's last row, the feeder begins a
    tile only while a bank is free): ``engine_job_extra - BANK_FREE_TO_END`` = ``3R + C +
    5`` (R / 2 less paired). Read off co-simulations of 2x3 (pack 1), 3x2, 4x4 and paired
    4x3 engines at K = 1 to 32, 16 tiles a job, and checked on 2x5, 4x3 (pack 3) and 8x8,
    exact (``tests/test_cycle_models.py``, ``tests/test_engine_bank_cycles.py``). It binds
    where two tile intervals are shorter than a tile's k-steps plus it (4x4, pack 2: K
    from 3 to 20; the 8x8: K from 11 to 36)."""
    return engine_job_extra(rows, cols, paired) - BANK_FREE_TO_END


#: Cycles from the end of a column panel's last tile (its W bank free) to the first tile of
#: the panel loaded into that bank next, beyond the panel's ``ceil(K/pack)`` words, one a
#: cycle (read off co-simulations, :func:`engine_tile_begins`).
W_BANK_REFILL_EXTRA = 1


def engine_tile_begins(config: EngineConfig, m: int, k: int, n: int) -> list[int]:
    """The cycle each tile of a job begins (its first k-step), counted as
    :func:`engine_job_cycles` counts: W panel 0 and X panel 0 take the first ``2 *
    ceil(K/pack)`` cycles; then each tile (column panel outer, row panel inner) begins a
    tile interval (its k-steps, at least :func:`engine_tile_interval`) after the one
    before, not before the tile ``result_bank_count`` before it has left its result bank
    (that tile's begin + k-steps + :func:`engine_bank_turnaround`), and the first tile of
    column panel p >= 2 not
    before its W panel is in: the two W banks take panel p once panel p - 2's last tile
    has ended, ``ceil(K/pack)`` words one a cycle, and :data:`W_BANK_REFILL_EXTRA` (this
    binds only with one row panel at pack 1: 2x3, M <= 2, K >= 14, one cycle a panel
    pair). The job's last tile ends k-steps after its begin. (The second derivation of
    :func:`engine_job_cycles`' closed form.)"""
    rows, cols, pack = config.rows, config.cols, config.pack
    panel = _ceil(k, pack)
    steps = pack * panel
    tile = max(steps, engine_tile_interval(config))
    bank_free = steps + engine_bank_turnaround(rows, cols, config.paired)
    banks = engine_tiling(config).result_bank_count
    m_tiles = _ceil(m, rows)
    begins: list[int] = []
    for index in range(m_tiles * _ceil(n, cols)):
        begin = begins[-1] + tile if begins else 2 * panel
        if index >= banks:
            begin = max(begin, begins[index - banks] + bank_free)
        if index >= 2 * m_tiles and index % m_tiles == 0:       # panel p's first tile
            w_in = begins[index - m_tiles - 1] + steps + panel + W_BANK_REFILL_EXTRA
            begin = max(begin, w_in)
        begins.append(begin)
    return begins


def engine_job_cycles(config: EngineConfig, m: int, k: int, n: int,
                      gelu: bool = False) -> int:
    """Cycles of one engine job (CYCLES register: start to done), from the stream format
    (module docstring). Raw or requantized, per-channel or not: the same; a GELU job
    (``gelu``, on an engine built with it) ``GELU_EXTRA_LATENCY`` more."""
    rows, cols, pack = config.rows, config.cols, config.pack
    panel = _ceil(k, pack)
    m_tiles = _ceil(m, rows)
    tiles = m_tiles * _ceil(n, cols)
    steps = pack * panel
    tile = max(steps, engine_tile_interval(config))
    # engine_tile_begins' last begin in closed form (two result banks, the engine's): pairs
    # of tiles a tile interval apart, a pair two intervals after the one before or once
    # the first tile's bank is free; with one row panel a tile is its column panel, and
    # its W bank's refill is the same pairwise bound (with more, it never binds: the
    # panel between takes at least three tile intervals)
    pair = steps + engine_bank_turnaround(rows, cols, config.paired)
    if m_tiles == 1:
        pair = max(pair, steps + panel + W_BANK_REFILL_EXTRA)
    rounds, rest = divmod(tiles - 1, 2)
    last_begin = 2 * panel + rounds * max(2 * tile, pair) + rest * tile
    return (last_begin + steps + engine_job_extra(rows, cols, config.paired)
            + (GELU_EXTRA_LATENCY if gelu else 0))


def _tables(raw: bool, per_channel: bool, bias: bool, gelu: bool) -> int:
    """Per-column tables a job writes: bias, COL_MULT/COL_SHIFT, a GELU job's OUT_*."""
    return int(bias) + (2 if per_channel and not raw else 0) + (2 if gelu else 0)


def engine_stream_parts(config: EngineConfig, m: int, k: int, n: int, raw: bool = False,
                        per_channel: bool = True, bias: bool = True,
                        gelu: bool = False) -> dict[str, int]:
    """Stream bytes of one job by operand, as the RTL builds them: ``x`` and ``w`` (input
    beats of ``pack * max(R, C)`` bytes; ``ceil(K/pack)`` beats per X panel of R rows,
    ``ceil(ceil(K/pack) / max(1, R // C))`` per W panel of C columns), ``y`` (C 32-bit lanes
    per beat; R rows per tile, one a beat raw, else ``ROWS_PER_BEAT`` int8 rows a beat
    across tiles) and ``tables`` (per-column bias, multiplier, shift, and a GELU job's
    OUT_MULT, OUT_SHIFT: ``table_words`` 32-bit AXI4-Lite writes)."""
    rows, cols, pack = config.rows, config.cols, config.pack
    mt, nt, panel = _ceil(m, rows), _ceil(n, cols), _ceil(k, pack)
    w_panel = _ceil(panel, config.w_beat_words)
    y_beats = mt * nt * rows if raw else _ceil(mt * nt * rows, ROWS_PER_BEAT)
    table_words = _tables(raw, per_channel, bias, gelu) * nt * (1 << (cols - 1).bit_length())
    return {"x": mt * panel * config.in_bytes, "w": nt * w_panel * config.in_bytes,
            "y": y_beats * cols * 4, "tables": 4 * table_words,
            "table_words": table_words}


def engine_job_bytes(config: EngineConfig, m: int, k: int, n: int, raw: bool = False,
                     per_channel: bool = True, bias: bool = True,
                     gelu: bool = False) -> dict[str, int]:
    """What one engine job moves: ``stream_bytes`` (:func:`engine_stream_parts` summed),
    ``payload_bytes`` (X, W int8; Y int8, or int32 raw; 4 bytes per table entry) and
    ``table_words`` (per-column bias, multiplier, shift over AXI4-Lite)."""
    parts = engine_stream_parts(config, m, k, n, raw, per_channel, bias, gelu)
    tables = _tables(raw, per_channel, bias, gelu)
    payload = m * k + k * n + m * n * (4 if raw else 1) + 4 * tables * n
    return {"stream_bytes": parts["x"] + parts["w"] + parts["y"] + parts["tables"],
            "payload_bytes": payload, "table_words": parts["table_words"]}
