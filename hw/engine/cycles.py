"""The GEMM engine's cycle model: the CYCLES register of one job, and what its streams move.

Beside the unit (issue 32, item 7); ``zoforge.reports.unit_calls`` prices the fine-tuning step with it.

* :func:`engine_job_cycles`: W panel 0 and X panel 0 arrive first (``2 * ceil(K/pack)``
  words of ``pack`` k-steps, one a cycle: a W beat of ``max(1, R // C)`` words takes as
  many cycles), then the ``ceil(M/R) * ceil(N/C)`` tiles run back to back, each ``pack *
  ceil(K/pack)`` k-steps but at least ``2R + C`` apart (the later panels stream in
  meanwhile: a word carries ``pack`` k-steps, the array takes one per cycle), then the last
  tile drains and leaves (:func:`engine_job_extra`); a GELU job (``gelu``, a ``gelu``
  build's CTRL bit) leaves ``GELU_EXTRA_LATENCY`` = 23 cycles later (the i-GELU's 13
  stages, a register slice's 1 and the second requantizer's 9:
  :mod:`~zoforge.hw.engine.gelu_path`), the rest the same;
* :func:`engine_stream_parts` / :func:`engine_job_bytes`: the bytes of its streams as the
  RTL builds them (input beats of ``pack * max(R, C)`` int8: an X beat ``pack`` k-steps of
  R rows, a W beat ``max(1, R // C)`` times ``pack`` k-steps of C columns; output beats of
  C 32-bit lanes: a row of int32 results, or four rows of int8) and as packed values.
"""
from __future__ import annotations

from zoforge.hw.engine.config import EngineConfig
from zoforge.hw.engine.gelu_path import GELU_EXTRA_LATENCY
from zoforge.hw.engine.packer import ROWS_PER_BEAT
from zoforge.hw.pe.array import min_tile_interval

__all__ = ["engine_job_extra", "engine_job_cycles", "engine_stream_parts", "engine_job_bytes",
           "GELU_EXTRA_LATENCY"]


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def engine_job_extra(rows: int, cols: int, paired: bool = False) -> int:
    """Engine: cycles of a job after its last tile's k-steps (the array's skew and drain,
    the result banks, the requantizer's stages, the last tile's R output rows, a row a cycle):
    ``3R + C + 21``, read off co-simulations of 4x4, 8x4 and 4x8 engines (jobs 5x7x3 to
    64x128x64, exact) and the 8x8 (the recorded model shapes, exact). (``3R + C + 7``
    before the timing pipeline, docs/engine.md: loader writes +1, the first tile's load
    test +1, feeder reads +2, PE +2, output stage reads +3, requantizer +5.) Jobs of short
    tiles whose results leave slower than the tiles compute (4x4 8x16x16: 15 cycles more)
    are not modelled. A paired array (two rows per packed multiplier) skews its rows in
    pairs: R / 2 cycles less (``tests/test_engine_cosim.py``, measured exact)."""
    return 3 * rows + cols + 21 - (rows // 2 if paired else 0)


def engine_job_cycles(config: EngineConfig, m: int, k: int, n: int,
                      gelu: bool = False) -> int:
    """Cycles of one engine job (CYCLES register: start to done), from the stream format
    (module docstring). Raw or requantized, per-channel or not: the same; a GELU job
    (``gelu``, on an engine built with it) ``GELU_EXTRA_LATENCY`` more."""
    rows, cols, pack = config.rows, config.cols, config.pack
    panel = _ceil(k, pack)
    tiles = _ceil(m, rows) * _ceil(n, cols)
    tile = max(pack * panel, min_tile_interval(rows, cols))
    return (2 * panel + (tiles - 1) * tile + pack * panel
            + engine_job_extra(rows, cols, config.paired)
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
