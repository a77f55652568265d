"""The cycle and traffic models of the engine and the ZO layer, worked out again by hand.

Written from the architecture's description (docs/finetune-cost.md "The cycle model",
docs/zo-layer.md "Keeping the array busy, and the cycle model", the docstrings of
``hw/zolayer/cycles.py``, ``hw/engine/cycles.py`` and ``reports/unit_calls.py``), without
importing any of zoforge's cycle or traffic helpers: a job is walked as a timeline (first
beats, one tile start after the other, the last tile's k-steps, the drain) and every
constant is a literal here, with where it comes from. The tests (``tests/test_cycle_models.py``,
``tests/test_finetune_cost.py``) compare the models with these values, so a changed
constant, term or count in a model disagrees with a second route to the same number.
"""
from __future__ import annotations

from math import ceil

# -- the engine (docs/finetune-cost.md, docs/engine.md) ----------------------------------

#: Cycles after the last tile's k-steps: 3R + C + 21 (skew, drain, result banks, the
#: requantizer's stages, the last tile's R output rows; measured on the RTL); a paired
#: array (two rows a multiplier) skews its rows in pairs, R / 2 fewer.
ENGINE_DRAIN_PER_ROW, ENGINE_DRAIN_PER_COL, ENGINE_DRAIN = 3, 1, 21
#: Two result banks: a tile takes the bank of the tile two before it, free once that
#: tile's results have left it, 3R + C + 5 cycles after that tile's last k-step (the drain's
#: 3R + C + 21 less the 16 cycles from its last row's read to the job's end; measured on
#: the RTL, 2x3 to 4x4 and 8x8; R / 2 fewer paired, as the drain).
ENGINE_RESULT_BANKS = 2
ENGINE_BANK_PER_ROW, ENGINE_BANK_PER_COL, ENGINE_BANK = 3, 1, 5


def engine_tile_spacing(rows: int, paired: bool = False) -> int:
    """The fewest cycles from one of the engine's tiles' first k-step to the next one's:
    its array drains skewed (column j read j cycles after column 0, right after its own
    last capture: no C term), and the feeder keeps the bound of the skewed shift chains
    that read-out replaced (hw/pe/array.py): a column's R rows leave in R - 1 shifts after
    its bottom unit row's capture, and the next tile's top unit row, U - 1 cycles ahead of
    its bottom one (U = R unit rows, R / 2 paired), captures after the last shift: U + R - 2;
    and never under the drain's R reads a tile."""
    units = rows // 2 if paired else rows
    return max(units + rows - 2, rows)


def engine_cycles(rows: int, cols: int, pack: int, m: int, k: int, n: int,
                  paired: bool = False) -> int:
    """An engine job's CYCLES: W panel 0 and X panel 0 stream in (ceil(K/pack) beats each),
    then ceil(M/R) x ceil(N/C) tiles of pack x ceil(K/pack) k-steps, at least
    :func:`engine_tile_spacing` apart and each once its result bank is free, then the
    drain (pack > 1: a W panel's refill never waits, tests/test_engine_bank_cycles.py)."""
    beats = ceil(k / pack)
    k_steps = pack * beats
    spacing = max(k_steps, engine_tile_spacing(rows, paired))
    pairs = rows // 2 if paired else 0                  # the paired skew's saving
    bank_free = (k_steps + ENGINE_BANK_PER_ROW * rows + ENGINE_BANK_PER_COL * cols
                 + ENGINE_BANK - pairs)
    t = beats + beats                          # W panel 0, X panel 0
    starts = []
    for _ in range(ceil(m / rows)):
        for _ in range(ceil(n / cols)):
            if len(starts) >= ENGINE_RESULT_BANKS:
                t = max(t, starts[-ENGINE_RESULT_BANKS] + bank_free)
            starts.append(t)
            t += spacing
    last_end = starts[-1] + k_steps
    return (last_end + ENGINE_DRAIN_PER_ROW * rows + ENGINE_DRAIN_PER_COL * cols
            + ENGINE_DRAIN - pairs)


def engine_bytes(rows: int, cols: int, pack: int, m: int, k: int, n: int,
                 raw: bool) -> dict[str, int]:
    """What an engine job streams (``stream_bytes``: beats of pack x max(R, C) bytes in, an
    X beat pack k-steps of R rows, a W beat as many whole words of pack k-steps of C columns
    as fit; R result rows of C per tile, one row of 32-bit lanes a beat raw, else four int8
    rows a beat of C 32-bit lanes; 4 bytes per table word), the values at their width
    (``payload_bytes``) and the AXI4-Lite ``table_words``: a raw job writes the bias table
    only, an int8 job bias, multiplier and shift per column, each table a row of
    2^ceil(log2 C) words per column tile."""
    m_tiles, n_tiles, beats = ceil(m / rows), ceil(n / cols), ceil(k / pack)
    beat = pack * max(rows, cols)
    words_per_w_beat = beat // (pack * cols)                # pack * C bytes a word
    w_beats = ceil(beats / words_per_w_beat)
    stream_in = m_tiles * beats * beat + n_tiles * w_beats * beat        # X panels, W panels
    result_rows = m_tiles * n_tiles * rows
    stream_out = (result_rows if raw else ceil(result_rows / 4)) * cols * 4
    tables = 1 if raw else 3
    row = 1
    while row < cols:
        row *= 2
    table_words = tables * n_tiles * row
    payload = m * k + k * n + (4 * m * n if raw else m * n) + tables * 4 * n
    return {"stream_bytes": stream_in + stream_out + 4 * table_words,
            "payload_bytes": payload, "table_words": table_words}


# -- the ZO layer (hw/zolayer/cycles.py's docstring, docs/zo-layer.md) --------------------

FINISH = 1                        # every job: the layer's register before the control's finish
LOAD_EXTRA = 1                    # a load: the CTRL write to its first beat
READ_EXTRA = 3                    # read_master beyond its words
#: the update unit's pipelines: accumulate 1 (z a cycle after the issue) + 3 (multiply) +
#: 2 (sums) + 1 (D + prod); apply 3 (D's read) + 3 + 2 + 3 (t, 2T - t, n)
ACCUMULATE_LATENCY, APPLY_LATENCY = 1 + 3 + 2 + 1, 3 + 3 + 2 + 3
FILL, FILL_PER_ROW, FILL_PER_COL = 27, 3, 1           # a compute job's fill and drain
FREE, FREE_PER_ROW, FREE_PER_COL = 4.5, 3, 1          # a result bank read out
SPREAD_EXTRA = 2                  # a branch: side by side (B > 1)
#: a LoRA-FA branch's bias read beside its results: hidden behind the result banks (0 since
#: the eight banks of d0bcc60)
BIAS_EXTRA = 0


def _result_banks(rows: int) -> int:
    """The layer's result banks: as many 2^ceil(log2 R)-row banks as one 32-deep LUT RAM
    (RAM32M16) holds, at least 2 and at most 8."""
    bank_rows = 1 << max(1, (rows - 1).bit_length())
    return max(2, min(8, 32 // bank_rows))


def _array_interval(rows: int) -> int:
    """The skewed drain's tile interval for single PEs: the next tile's top capture after
    the column's last shift (2R - 2), its bottom capture after the last read (R)."""
    return max(2 * rows - 2, rows)


def layer_cycles(rows: int, cols: int, lora: bool, branch_lanes: int, job: str, m: int,
                 k: int, n: int, r: int, query: int = 0) -> int:
    """A ZO-layer job's CYCLES (tokens m a multiple of C; n, r multiples of R)."""
    lanes = max(rows, cols)
    trained_k = r if lora else k
    words = trained_k * n // rows                     # words of the trained T
    queries = max(1, branch_lanes // 2)
    if job == "load_x":
        per_beat = 4 * lanes // cols                  # int8 k-steps of C tokens per beat
        work = (m // cols) * ceil(k / per_beat) + LOAD_EXTRA
    elif job == "load_w":
        work = (n // rows) * k + LOAD_EXTRA
    elif job == "load_a":
        work = (r // rows) * k + LOAD_EXTRA
    elif job == "load_master":
        work = words + LOAD_EXTRA
    elif job == "read_master":
        work = words + READ_EXTRA
    elif job == "apply":
        work = words + APPLY_LATENCY + 1
    elif job == "accumulate":
        # Q generator transfers a word: query's last word is issued (W - 1) Q + query cycles
        # after the first; the first issue's cycle, the pipeline and one cycle to finish
        work = (words - 1) * queries + query + 1 + ACCUMULATE_LATENCY + 1
    else:
        work = _compute_cycles(rows, cols, lora, branch_lanes, job, m, k, n, r)
    return work + FINISH


def _compute_cycles(rows, cols, lora, branch_lanes, job, m, k, n, r):
    """Tiles back to back, each max(depth, the skewed drain's interval, (depth + bank free)
    / banks) after the one before, the last ending after its depth k-steps, plus the fill
    and drain."""
    features = rows // branch_lanes
    depth, panels = {"frozen_w": (k, n // rows), "frozen_a": (k, r // rows),
                     "branch": (r if lora else k, n // features)}[job]
    bank_free = FREE + FREE_PER_ROW * rows + FREE_PER_COL * cols
    spacing = max(depth, _array_interval(rows), (depth + bank_free) / _result_banks(rows))
    t = 0.0
    for _ in range((m // cols) * panels - 1):
        t += spacing
    t += depth
    t += FILL + FILL_PER_ROW * rows + FILL_PER_COL * cols
    if job == "branch":
        t += (SPREAD_EXTRA if branch_lanes > 1 else 0) + (BIAS_EXTRA if lora else 0)
    return round(t)


def layer_step_cycles(rows, cols, lora, branch_lanes, m, k, n, r, q,
                      sequential=False) -> int:
    """STEP_CYCLES of one ZO step (docs/zo-layer.md's host schedule): the batch (load_x and,
    LoRA-FA, the frozen products), its branch jobs (2q of one branch each, or q / Q of Q
    queries' + and - branches side by side), each query's accumulate, one apply;
    ``sequential``: every branch job reloads the batch."""
    def job(name, query=0):
        return layer_cycles(rows, cols, lora, branch_lanes, name, m, k, n, r, query)

    queries = max(1, branch_lanes // 2)
    batch = job("load_x") + (job("frozen_w") + job("frozen_a") if lora else 0)
    branch_jobs = 2 * q if branch_lanes == 1 else q // queries
    total = batch * (branch_jobs if sequential else 1) + branch_jobs * job("branch")
    for _ in range(q // queries):
        for query in range(queries):
            total += job("accumulate", query)
    return total + job("apply")


def layer_bytes(rows: int, cols: int, job: str, m: int, k: int, n: int, r: int
                ) -> tuple[int, int]:
    """(stream bytes, payload bytes) of a ZO-layer job: words of max(R, C) 32-bit lanes, one
    value a lane (load_x: four int8 a lane), against int8 X, W, A, 3-byte masters, int32 Y."""
    lanes = max(rows, cols)
    word = 4 * lanes
    per_beat = 4 * lanes // cols
    master_words = ceil(n / rows) * r
    words, payload = {
        "load_x": (ceil(m / cols) * ceil(k / per_beat), m * k),
        "load_w": (ceil(n / rows) * k, k * n),
        "load_a": (ceil(r / rows) * k, k * r),
        "load_master": (master_words, 3 * r * n),
        "read_master": (master_words, 3 * r * n),
        "branch": (ceil(m / cols) * ceil(n / rows) * rows, 4 * m * n),
    }.get(job, (0, 0))
    return words * word, payload
