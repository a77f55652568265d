"""The engine's packed streams: W beats of several words (``max(1, R // C)`` words of
``pack`` k-steps of C columns) and requantized results four int8 rows to an output beat.

The host's layouts are pinned to loops written from docs/engine.md; the RTL is run on
engines with R / C = 1, 2, 3 (K = max_k a whole power of two of words: the last beat's
dropped words would wrap into the panel's first ones) and 8, with K not a multiple of a
beat's k-steps, under input and output stall patterns, CYCLES equal to the cycle model.
"""
import numpy as np
import pytest

from cycle_reference import engine_bytes
from engine_checks import assert_jobs_bit_exact
from zoforge.hw.engine.config import EngineConfig
from zoforge.hw.engine.cycles import engine_job_bytes, engine_job_cycles, engine_stream_parts
from zoforge.hw.engine.engine import Engine
from zoforge.hw.export import to_verilog
from zoforge.sim.engine_cosim import (EngineCosim, output_beats, pack_input_stream,
                                      random_job, unpack_output)
from zoforge.sim.lint import lint_verilog

# (rows, cols, pack): W words a beat 1 (C > R), 1 (R = C), 1 (R < 2C), 2, 2 (5 // 2: a
# beat's fifth lane-group unused), 3, 8
LAYOUTS = [(2, 3, 1), (4, 4, 2), (3, 2, 2), (4, 2, 2), (5, 2, 1), (6, 2, 1), (8, 1, 3)]


def _input_by_loops(x, w, rows, cols, pack) -> bytes:
    """docs/engine.md's input stream, one byte at a time."""
    m, k = x.shape
    n = w.shape[1]
    beat = pack * max(rows, cols)
    words = -(-k // pack)
    per_beat = max(rows, cols) // cols
    out = bytearray()

    def w_panel(nt):
        for first in range(0, words, per_beat):
            data = bytearray(beat)
            for slot in range(per_beat):
                for p in range(pack):
                    for j in range(cols):
                        kk, col = (first + slot) * pack + p, nt * cols + j
                        if first + slot < words and kk < k and col < n:
                            data[slot * pack * cols + p * cols + j] = int(w[kk, col]) & 0xFF
            out.extend(data)

    w_panel(0)
    for mt in range(-(-m // rows)):
        for word in range(words):
            data = bytearray(beat)
            for p in range(pack):
                for i in range(rows):
                    row, kk = mt * rows + i, word * pack + p
                    if row < m and kk < k:
                        data[p * rows + i] = int(x[row, kk]) & 0xFF
            out.extend(data)
    for nt in range(1, -(-n // cols)):
        w_panel(nt)
    return bytes(out)


@pytest.mark.parametrize("rows, cols, pack", LAYOUTS)
def test_input_stream_matches_the_layout_written_out(rows, cols, pack):
    """pack_input_stream equals the byte-by-byte layout, and its size the cycle model's
    X + W bytes, for K a multiple of a W beat's k-steps, one more, one less and K = 1."""
    rng = np.random.default_rng(rows * 100 + cols * 10 + pack)
    config = EngineConfig(rows=rows, cols=cols, pack=pack, max_m=64, max_k=64, max_n=64)
    span = pack * config.w_beat_words
    for m, k, n in ((1, 1, 1), (rows + 1, 2 * span, 2 * cols + 1), (5, 2 * span + 1, 7),
                    (2 * rows, max(1, 3 * span - 1), cols)):
        x = rng.integers(-128, 128, size=(m, k), dtype=np.int8)
        w = rng.integers(-128, 128, size=(k, n), dtype=np.int8)
        frame = pack_input_stream(x, w, rows, cols, pack)
        assert frame.tobytes() == _input_by_loops(x, w, rows, cols, pack), (m, k, n)
        parts = engine_stream_parts(config, m, k, n)
        assert frame.size == parts["x"] + parts["w"]


@pytest.mark.parametrize("rows, cols, pack", LAYOUTS)
def test_stream_bytes_match_the_second_derivation(rows, cols, pack):
    config = EngineConfig(rows=rows, cols=cols, pack=pack, max_m=64, max_k=64, max_n=64)
    for m, k, n in ((1, 1, 1), (7, 3, 11), (13, 29, 5), (rows + 1, 64, cols + 1), (64, 17, 40)):
        for raw in (False, True):
            assert engine_job_bytes(config, m, k, n, raw=raw, per_channel=not raw) == \
                engine_bytes(rows, cols, pack, m, k, n, raw), (m, k, n, raw)


def test_w_stream_is_its_payload_on_a_tall_array():
    """64 x 8, pack 2: a W beat is 8 words of 2 k-steps x 8 columns, 128 bytes all used
    (K = 384, N = 1024: no padding), 8x fewer than a word a beat; requantized Y a quarter of
    its 32-bit lanes."""
    config = EngineConfig(rows=64, cols=8, pack=2, max_m=512, max_k=1536, max_n=1024,
                          paired=True)
    parts = engine_stream_parts(config, 512, 384, 1024)
    assert parts["w"] == 384 * 1024 and parts["x"] == 512 * 384
    assert parts["y"] == 512 * 1024
    assert engine_stream_parts(config, 512, 384, 1024, raw=True)["y"] == 4 * 512 * 1024


def test_output_layout_four_int8_rows_a_beat():
    """The packed output written out by hand: 3 x 2 tiles of R = 2 rows (12 rows, C = 2) in
    3 beats of 2 words; a raw job's 12 beats. A stream one word short is refused."""
    rows, cols, m, n = 2, 2, 3, 5
    y = np.arange(m * n, dtype=np.int64).reshape(m, n) - 7
    stream_rows = []                         # tiles nt-major, R rows each, zero padded
    for nt in range(3):
        for mt in range(2):
            for r in range(rows):
                i = mt * rows + r
                stream_rows.append([int(y[i, nt * cols + j]) if i < m and nt * cols + j < n
                                    else 0 for j in range(cols)])
    assert output_beats(m, n, rows, cols, raw=False) == 3
    assert output_beats(m, n, rows, cols, raw=True) == 12
    data = bytes(v & 0xFF for row in stream_rows for v in row)     # row r of a beat at r*C
    words = np.frombuffer(data, "<u4").astype(np.uint32)
    assert np.array_equal(unpack_output(words, m, n, rows, cols, raw=False), y)
    raw_words = np.array([v & 0xFFFFFFFF for row in stream_rows for v in row], np.uint32)
    assert np.array_equal(unpack_output(raw_words, m, n, rows, cols, raw=True), y)
    with pytest.raises(ValueError, match="expected 6"):
        unpack_output(words[:-1], m, n, rows, cols, raw=False)


# (rows, cols, pack, max_k): W words a beat 2, 3 (max_k 32: 32 words a panel, the last
# beat's 2 words of 3 end at the bank's last address) and 8
RTL_ENGINES = [(4, 2, 2, 32), (3, 1, 1, 32), (8, 1, 3, 40)]
# the default run builds two of them (a few CPU-seconds); the others are slow
SLOW = pytest.mark.slow


def _engines(default: int):
    return [engine if n == default else pytest.param(*engine, marks=SLOW)
            for n, engine in enumerate(RTL_ENGINES)]


def _rtl_jobs(rows, cols, pack, max_k, seed):
    rng = np.random.default_rng(seed)
    span = pack * max(1, rows // cols)
    depths = sorted({1, span, span + 1, max_k - 1, max_k})
    shapes = [(2 * rows + 1, k, 3 * cols) for k in depths] + [(rows + 1, max_k, 2 * cols + 1),
                                                                (rows - 1, max_k, 1)]
    flavours = [dict(raw=True), dict(per_channel=True), dict(), dict(relu=True),
                dict(bias=False), dict(extreme=True)]
    return shapes, [random_job(rng, m, k, n, **flavours[i % len(flavours)])
                    for i, (m, k, n) in enumerate(shapes)]


@pytest.mark.parametrize("rows, cols, pack, max_k", _engines(default=1))
def test_packed_streams_are_bit_exact_and_keep_the_cycle_model(rows, cols, pack, max_k):
    """Every job bit-exact; CYCLES equal to the cycle model (a W beat of G words takes G
    cycles), short tiles (waiting for their result banks, hw/engine/cycles.py) and long
    ones alike."""
    config = EngineConfig(rows=rows, cols=cols, pack=pack, max_m=32, max_k=max_k, max_n=24)
    cosim = EngineCosim(config)
    shapes, jobs = _rtl_jobs(rows, cols, pack, max_k, seed=rows)
    results, _ = cosim.run(jobs)
    assert_jobs_bit_exact(cosim, jobs, results)
    for (m, k, n), result in zip(shapes, results):
        assert result.cycles == engine_job_cycles(config, m, k, n), (m, k, n)


# each pattern repeats: 1 = the source (sink) stalls in that cycle
SOURCE_STALLS = [0, 1, 1, 0, 0, 0, 1, 0, 1, 1, 1, 0, 0]
SINK_STALLS = [1, 0, 0, 1, 1, 0, 1, 0, 0]


@pytest.mark.parametrize("rows, cols, pack, max_k", _engines(default=2))
def test_packed_streams_under_stall_patterns(rows, cols, pack, max_k):
    """Idle cycles between input beats (some while a W beat's words are being written, the
    engine's tready low) and output back-pressure on packed beats: the same results."""
    config = EngineConfig(rows=rows, cols=cols, pack=pack, max_m=32, max_k=max_k, max_n=24)
    cosim = EngineCosim(config)
    _, jobs = _rtl_jobs(rows, cols, pack, max_k, seed=rows + 1)
    patterns = {"source": np.array(SOURCE_STALLS, np.uint8),
                "sink": np.array(SINK_STALLS, np.uint8)}
    results, info = cosim.run(jobs, patterns=patterns)
    assert info["stalls"]["in"] > 0 and info["stalls"]["out"] > 0
    assert_jobs_bit_exact(cosim, jobs, results)


@pytest.mark.parametrize("rows, cols, pack", [(8, 1, 3), pytest.param(4, 2, 2, marks=SLOW),
                                               pytest.param(3, 1, 1, marks=SLOW)])
def test_packed_engines_are_lint_clean(rows, cols, pack):
    top = f"engine_{rows}x{cols}"
    result = lint_verilog(to_verilog(Engine(rows=rows, cols=cols, pack=pack), top), top)
    assert result.clean, str(result)
