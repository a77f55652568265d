"""The cycle models, term by term: the ZO layer's (hw/zolayer/cycles.py) and the engine's
(hw/engine/cycles.py), by hand and against the RTL.

Worked examples give every job's CYCLES as a literal derived in the docstring (asymmetric
arrays, branch_lanes 1, 2 and 4, LoRA-FA and full mode, tiles spaced by their k-steps and by
the array; the grid adds the result banks' regime); a grid
compares the models with the second derivation of ``tests/cycle_reference.py``; and two
short Verilator runs check the models against the RTL's own CYCLES / STEP_CYCLES registers
in the default run (the engine on the builds tests/test_engine_cosim.py makes, the ZO layer
with branches side by side, branch_lanes 2).
"""
from __future__ import annotations

import numpy as np
import pytest

from cycle_reference import (engine_bytes, engine_cycles, layer_bytes, layer_cycles,
                             layer_step_cycles)
from zoforge.golden.zolayer import layer_config
from zoforge.hw.engine.config import EngineConfig
from zoforge.hw.engine.cycles import engine_job_bytes, engine_job_cycles
from zoforge.hw.zolayer.cycles import (bank_free, compute_extra, floor_cycles, job_cycles,
                                       step_cycles)
from zoforge.reports.unit_calls import zo_job_bytes

WALK_JOBS = ("load_master", "accumulate", "apply", "read_master")
LORA_JOBS = ("load_x", "load_w", "load_a", "frozen_w", "frozen_a", "branch") + WALK_JOBS
FULL_JOBS = ("load_x", "branch") + WALK_JOBS


def _layer(rows, cols, mode, branch_lanes=1):
    return layer_config("onthefly", rows=rows, cols=cols, mode=mode, max_m=32, max_k=32,
                        max_n=16, max_r=8, branch_lanes=branch_lanes)


# -- the ZO layer, worked by hand ------------------------------------------------------------

def test_layer_lora_jobs_on_a_4x2_array_by_hand():
    """LoRA-FA, R 4, C 2 (lanes 4, a load_x beat 16/2 = 8 k-steps), M 6, K 16, N 8, r 4; every
    job + 1 (FINISH); loads + 1: load_x 3 tiles x 2 beats = 8, load_w 2 panels x 16 + 2 = 34,
    load_a 16 + 2 = 18, load_master (T: r N / R = 8 words) 10; read_master 8 + 3 + 1 = 12,
    apply 8 + 11 + 2 = 21, accumulate 7 + 7 + 2 + 1 = 17. Compute tiles max(depth, the
    skewed drain's 2R - 2 = 6, (depth + 4.5 + 3R + C = 18.5) / 8 banks) apart (at K 16: 16,
    the k-steps), fill and drain 27 + 3R + C = 41: frozen_w 6 tiles: 5 x 16 + 16 + 41 = 137
    + 1 = 138; frozen_a 3 tiles: 2 x 16 + 57 = 89 + 1 = 90; a branch, depth r = 4 and tiles
    6 apart (the array), 6 tiles, its bias hidden: 30 + 4 + 41 = 75 + 1 = 76."""
    config = _layer(4, 2, "lora-fa")
    expected = {"load_x": 8, "load_w": 34, "load_a": 18, "frozen_w": 138, "frozen_a": 90,
                "branch": 76, "load_master": 10, "accumulate": 17, "apply": 21,
                "read_master": 12}
    assert {job: job_cycles(config, job, 6, 16, 8, 4) for job in LORA_JOBS} == expected
    # a step, q 2: the batch (load_x, frozen_w, frozen_a) once, 4 branch jobs, 2 accumulates
    assert step_cycles(config, 6, 16, 8, 4, 2) == 236 + 4 * 76 + 2 * 17 + 21 == 595
    assert step_cycles(config, 6, 16, 8, 4, 2, sequential=True) == 4 * 236 + 304 + 55 == 1303


@pytest.mark.parametrize("rows, cols, branch_lanes, m, n, q, jobs, step, sequential", [
    # B 1, R 4, C 2, N 4 (one panel of 4 features): load_x 3 x 2 + 2 = 8; a branch 3 tiles
    # 16 apart (K; 2R - 2 = 6, (16 + 18.5) / 8 banks = 4.3): 32 + 16 + 41 = 89 + 1 = 90; T 16 x 4 / 4 = 16 words:
    # accumulate 15 + 7 + 3 = 25, apply 16 + 13 = 29, load_master 18, read_master 20;
    # q 2: 2q = 4 branch jobs, q accumulates
    (4, 2, 1, 6, 4, 2, {"load_x": 8, "branch": 90, "load_master": 18, "accumulate": [25],
                        "apply": 29, "read_master": 20}, 8 + 4 * 90 + 2 * 25 + 29,
     4 * 8 + 4 * 90 + 2 * 25 + 29),
    # B 2 (F = 2 features a word, Q = 1 query a job), R 4, C 2: a branch 3 tiles x 2 panels,
    # 5 x 16 + 16 + 41 + 2 (spread) = 139 + 1 = 140; q 2: q / Q = 2 branch jobs
    (4, 2, 2, 6, 4, 2, {"load_x": 8, "branch": 140, "load_master": 18, "accumulate": [25],
                        "apply": 29, "read_master": 20}, 8 + 2 * 140 + 2 * 25 + 29,
     2 * 8 + 2 * 140 + 2 * 25 + 29),
    # B 4 (F 2, Q 2), R 8, C 4 (lanes 8, a load_x beat 8 k-steps): load_x 2 x 2 + 2 = 6; a
    # branch 2 tiles x 2 panels (16 apart: K; 2R - 2 = 14, (16 + 4.5 + 24 + 4) / 4 banks =
    # 12.1), fill 27 + 24 + 4: 48 + 16 + 55 + 2 = 121 + 1 = 122; T 16 x 4 / 8 = 8 words: accumulate of query
    # j: 7 x 2 + j + 7 + 3 = 24 + j, apply 8 + 13, load_master 10, read_master 12; q 4:
    # q / Q = 2 branch jobs, each followed by Q accumulates
    (8, 4, 4, 8, 4, 4, {"load_x": 6, "branch": 122, "load_master": 10, "accumulate": [24, 25],
                        "apply": 21, "read_master": 12}, 6 + 2 * 122 + 2 * (24 + 25) + 21,
     2 * 6 + 2 * 122 + 2 * (24 + 25) + 21)])
def test_layer_branch_lanes_by_hand(rows, cols, branch_lanes, m, n, q, jobs, step,
                                    sequential):
    """Full mode, K 16: every job's CYCLES and a step's (both schedules) at branch_lanes 1,
    2 and 4, worked in the parameters' comments."""
    config = _layer(rows, cols, "full", branch_lanes)
    for job, cycles in jobs.items():
        if job == "accumulate":
            got = [job_cycles(config, job, m, 16, n, query=j) for j in range(len(cycles))]
        else:
            got = job_cycles(config, job, m, 16, n)
        assert got == cycles, job
    assert step_cycles(config, m, 16, n, 0, q) == step
    assert step_cycles(config, m, 16, n, 0, q, sequential=True) == sequential


def test_layer_pipeline_terms_by_hand():
    """The fill and drain 27 + 3R + C (+ 2 for a branch with B > 1; a LoRA-FA branch's
    bias read hides behind the eight result banks), the bank turnaround 4.5 + 3R + C, and
    the useful-MAC floor 2q M K_t N / (R C), on arrays where R and C differ."""
    lora, full2 = _layer(4, 2, "lora-fa"), _layer(8, 4, "full", 2)
    assert [compute_extra(lora, False), compute_extra(lora, True)] == [41, 41]
    assert [compute_extra(full2, False), compute_extra(full2, True)] == [55, 57]
    assert compute_extra(_layer(8, 4, "full"), True) == 55
    assert (bank_free(lora), bank_free(full2)) == (18.5, 32.5)
    assert floor_cycles(lora, 6, 16, 8, 4, 3) == 2 * 3 * 6 * 4 * 8 / 8        # K_t = r
    assert floor_cycles(full2, 8, 16, 4, 0, 2) == 2 * 2 * 8 * 16 * 4 / 32     # K_t = K


# -- the ZO layer against the second derivation, on a grid ----------------------------------

LAYER_GRID = [  # rows, cols, mode, branch_lanes, m, k, n, r, q
    (4, 2, "lora-fa", 1, 6, 16, 8, 4, 2), (2, 4, "lora-fa", 1, 8, 12, 6, 4, 3),
    (4, 4, "lora-fa", 1, 8, 32, 12, 8, 1), (8, 4, "lora-fa", 1, 12, 20, 16, 8, 2),
    (4, 2, "full", 1, 6, 32, 8, 0, 2), (4, 4, "full", 2, 8, 2, 4, 0, 2),
    (4, 2, "full", 2, 10, 24, 6, 0, 4), (8, 4, "full", 4, 8, 16, 6, 0, 4),
    (4, 4, "full", 4, 12, 8, 3, 0, 6), (8, 8, "full", 8, 16, 24, 2, 0, 8),
    (2, 8, "full", 1, 16, 2, 4, 0, 2)]      # K 2: the banks' turnaround, (2 + 18.5) / 8


def _spacing_regime(rows, cols, depth):
    banks = max(2, min(8, 32 // (1 << max(1, (rows - 1).bit_length()))))
    terms = {"depth": depth, "array": max(2 * rows - 2, rows),
             "banks": (depth + 4.5 + 3 * rows + cols) / banks}
    return max(terms, key=terms.get)


@pytest.mark.parametrize("rows, cols, mode, branch_lanes, m, k, n, r, q", LAYER_GRID)
def test_layer_jobs_and_steps_match_the_second_derivation(rows, cols, mode, branch_lanes,
                                                          m, k, n, r, q):
    """Every job (each accumulate query) and both step schedules equal
    tests/cycle_reference.py's timeline."""
    config = _layer(rows, cols, mode, branch_lanes)
    lora = mode == "lora-fa"
    for job in LORA_JOBS if lora else FULL_JOBS:
        for query in range(max(1, branch_lanes // 2) if job == "accumulate" else 1):
            assert job_cycles(config, job, m, k, n, r, query=query) == layer_cycles(
                rows, cols, lora, branch_lanes, job, m, k, n, r, query), (job, query)
    for sequential in (False, True):
        assert step_cycles(config, m, k, n, r, q, sequential) == layer_step_cycles(
            rows, cols, lora, branch_lanes, m, k, n, r, q, sequential)


def test_layer_grid_reaches_every_tile_spacing_regime():
    """The grid's compute jobs are spaced by their k-steps, by the array (the skewed
    drain's max(2R - 2, R)) and by the result banks, so each term of the spacing's max
    decides some case."""
    regimes = set()
    for rows, cols, mode, branch_lanes, m, k, n, r, q in LAYER_GRID:
        depths = (k, r if mode == "lora-fa" else k)
        regimes |= {_spacing_regime(rows, cols, depth) for depth in depths}
    assert regimes == {"depth", "array", "banks"}


# -- the engine, by hand -------------------------------------------------------------------

@pytest.mark.parametrize("rows, cols, pack, m, k, n, cycles", [
    # the skewed drain's tile interval max(2R - 2, R) (tests/cycle_reference.py)
    # 4 x 3, pack 3: ceil(10/3) = 4 beats a panel, 12 k-steps a tile (> 2R - 2 = 6); a
    # result bank free 12 + (3R + C + 5 = 20) = 32 after its tile's begin (> 2 x 12): 3 x 3
    # tiles begin at 8, 20, then in pairs 32 apart: 8 + 4 x 32 = 136; + 12 + (3R + C + 21 =
    # 36) = 184
    (4, 3, 3, 9, 10, 7, 184),
    # K 30: 10 beats, 30 k-steps, the bank free after 30 + 20 = 50 (< 2 x 30): the tiles
    # 30 apart, 2 x 10 + 8 x 30 + 30 + 36 = 326
    (4, 3, 3, 9, 30, 7, 326),
    # K 2: 1 beat, 3 k-steps, tiles 6 apart (2R - 2), the bank free after 3 + 20 = 23
    # (> 12); 2 x 2 tiles begin at 2, 8, 25, 31: 31 + 3 + 36 = 70
    (4, 3, 3, 5, 2, 4, 70),
    # 2 x 5, pack 2: 4 beats, 8 k-steps (> max(2R - 2, R) = 2), the bank free after
    # 8 + (6 + 5 + 5 = 16) = 24 (> 16); 2 x 3 tiles begin at 8, 16, 32, 40, 56, 64:
    # 64 + 8 + (6 + 5 + 21 = 32) = 104
    (2, 5, 2, 3, 7, 11, 104),
    # K 1: 2 k-steps (= R), the bank free after 2 + 16 = 18 (> 2 x 2): tiles begin at 2,
    # 4, 20, 22, 38, 40: 40 + 2 + 32 = 74
    (2, 5, 2, 3, 1, 11, 74),
    (2, 5, 2, 1, 1, 1, 2 + 2 + 32),                   # one tile, one beat
    # the model's 8 x 8, pack 2: 15 beats, 30 k-steps (> 2R - 2 = 14), the bank free after
    # 30 + (24 + 8 + 5 = 37) = 67 (> 60); 3 x 2 tiles begin at 30, 60, 97, 127, 164, 194:
    # 194 + 30 + (24 + 8 + 21 = 53) = 277
    (8, 8, 2, 20, 30, 12, 277)])
def test_engine_job_cycles_by_hand(rows, cols, pack, m, k, n, cycles):
    """CYCLES of engine jobs with M, K, N all different, on three array sizes (R > C, R < C,
    square), worked in the parameters' comments; raw or not is the same. Every value is
    also the RTL's (2026-11-28, the skewed drain: Verilator job server, raw and int8 jobs
    alike, bit-exact)."""
    config = EngineConfig(rows=rows, cols=cols, pack=pack, max_m=32, max_k=32, max_n=32)
    assert engine_job_cycles(config, m, k, n) == cycles
    assert engine_cycles(rows, cols, pack, m, k, n) == cycles


def test_engine_job_bytes_by_hand():
    """4 x 3, pack 3, (M, K, N) = (9, 10, 7): beats of 3 x 4 = 12 bytes (a W beat one word
    of 3 x 3), 3 X and 3 W panels of 4 beats = 288 bytes in; 3 x 3 tiles of 4 rows: raw a
    row a beat of 3 lanes x 4 bytes = 432 out, int8 four rows a beat = 108; the tables a row
    of 4 (2^ceil(log2 3)) words per column tile: int8 per-channel 3 tables x 3 tiles x 4 =
    36 words (144 bytes), raw the bias alone, 12 words; payload X 90 + W 70 + Y 63 (raw:
    4 x 63) + 4 bytes per table entry per column."""
    config = EngineConfig(rows=4, cols=3, pack=3, max_m=32, max_k=32, max_n=32)
    assert engine_job_bytes(config, 9, 10, 7) == {
        "stream_bytes": 288 + 108 + 144, "payload_bytes": 90 + 70 + 63 + 3 * 4 * 7,
        "table_words": 36}
    assert engine_job_bytes(config, 9, 10, 7, raw=True, per_channel=False) == {
        "stream_bytes": 288 + 432 + 48, "payload_bytes": 90 + 70 + 4 * 63 + 4 * 7,
        "table_words": 12}
    # per tensor (no per-column multiplier and shift), without bias: no tables
    assert engine_job_bytes(config, 9, 10, 7, per_channel=False, bias=False) == {
        "stream_bytes": 288 + 108, "payload_bytes": 90 + 70 + 63, "table_words": 0}


@pytest.mark.parametrize("rows, cols, pack", [(4, 3, 3), (2, 5, 2), (8, 8, 2), (3, 2, 1)])
def test_engine_jobs_match_the_second_derivation(rows, cols, pack):
    """Cycles and bytes of every (M, K, N) in a small asymmetric grid equal
    tests/cycle_reference.py's."""
    config = EngineConfig(rows=rows, cols=cols, pack=pack, max_m=64, max_k=64, max_n=64)
    for m, k, n in ((1, 1, 1), (7, 3, 11), (13, 29, 5), (rows + 1, 64, cols - 1 or 1),
                    (64, 17, 40)):
        assert engine_job_cycles(config, m, k, n) == engine_cycles(rows, cols, pack, m, k, n)
        for raw in (False, True):
            assert engine_job_bytes(config, m, k, n, raw=raw, per_channel=not raw) == \
                engine_bytes(rows, cols, pack, m, k, n, raw), (m, k, n, raw)


def test_layer_job_bytes_match_the_second_derivation():
    """Every job's stream and payload bytes, LoRA-FA on 4 x 2 and 2 x 4 (words of
    4 max(R, C) bytes; load_x 4 int8 a lane), and one worked: 4 x 2, M 6, K 16, N 8, r 4:
    load_x 3 tiles x ceil(16/8) beats of 16 bytes, 6 x 16 int8."""
    for rows, cols, m in ((4, 2, 6), (2, 4, 8)):
        config = _layer(rows, cols, "lora-fa")
        for job in LORA_JOBS:
            assert zo_job_bytes(config, job, m, 16, 8, 4) == layer_bytes(
                rows, cols, job, m, 16, 8, 4), (rows, cols, job)
    config = _layer(4, 2, "lora-fa")
    assert zo_job_bytes(config, "load_x", 6, 16, 8, 4) == (3 * 2 * 16, 6 * 16)
    assert zo_job_bytes(config, "load_w", 6, 16, 8, 4) == (2 * 16 * 16, 16 * 8)
    assert zo_job_bytes(config, "load_a", 6, 16, 8, 4) == (16 * 16, 16 * 4)
    assert zo_job_bytes(config, "read_master", 6, 16, 8, 4) == (2 * 4 * 16, 3 * 4 * 8)
    assert zo_job_bytes(config, "branch", 6, 16, 8, 4) == (3 * 2 * 4 * 16, 4 * 6 * 8)
    assert zo_job_bytes(config, "apply", 6, 16, 8, 4) == (0, 0)


# -- against the RTL, in the default run --------------------------------------------------

# the engines tests/test_engine_cosim.py builds (CONFIG_A, CONFIG_B), cached: (M, K, N, raw)
# jobs of several tiles, long ones (spaced by their k-steps) and short ones (by the array's
# max(2R - 2, R): two tiles of K 1, 3 x 1 x 4 on 3 x 2 and 2 x 1 x 6 on 2 x 3, or by their
# result banks: 12 x 8 x 8 on 3 x 2, 8 x 3 x 12 on 2 x 3)
ENGINE_RTL = {(3, 2, 2): [(5, 20, 9, False), (11, 32, 3, False), (6, 30, 4, True),
                          (3, 1, 2, True), (2, 5, 1, True), (12, 8, 8, True),
                          (3, 1, 4, True)],
              (2, 3, 1): [(5, 16, 7, False), (3, 16, 4, True), (1, 1, 1, True),
                          (8, 3, 12, False), (2, 1, 6, True)]}


@pytest.mark.parametrize("rows, cols, pack", list(ENGINE_RTL))
def test_engine_cycle_model_equals_the_rtl(rows, cols, pack):
    """Each job's CYCLES register on the RTL (cocotb, Verilator) equals the cycle model and
    the hand timeline exactly, every result bit-exact."""
    from zoforge.sim.engine_cosim import EngineCosim, random_job
    limit = 32 if rows == 3 else 16
    cosim = EngineCosim(rows=rows, cols=cols, pack=pack, max_m=limit, max_k=limit,
                        max_n=limit)
    rng = np.random.default_rng(17)
    shapes = ENGINE_RTL[rows, cols, pack]
    jobs = [random_job(rng, m, k, n, raw=raw, per_channel=not raw) for m, k, n, raw in shapes]
    results, _ = cosim.run(jobs)
    config = EngineConfig(rows=rows, cols=cols, pack=pack, max_m=limit, max_k=limit,
                          max_n=limit)
    for (m, k, n, _), result in zip(shapes, results):
        assert result.bit_exact, (m, k, n)
        assert result.cycles == engine_job_cycles(config, m, k, n) == \
            engine_cycles(rows, cols, pack, m, k, n), (m, k, n)


def test_layer_cycle_model_equals_the_rtl_with_branches_side_by_side():
    """branch_lanes 2 (full mode, 4 x 4: the + and - branch of a query side by side on the
    rows), M 8, K 24 (past the result banks' turnaround, where the model is exact), N 4,
    q 2: one P-RGE step and one sequential step on the Verilator job server, bit-exact
    against the golden model; every job's CYCLES, and both steps' STEP_CYCLES, equal the
    cycle model and the hand timeline."""
    from zoforge.sim.zolayer_cosim import ZoCosimOptions
    from zolayer_checks import run_bit_exact
    config = layer_config("onthefly", mode="full", rows=4, cols=4, max_m=16, max_k=32,
                          max_n=8, branch_lanes=2)
    m, k, n, q = 8, 24, 4, 2
    options = ZoCosimOptions(steps=1, q=q, seed=6, m=m, k=k, n=n, grad_shift=30,
                             backend="jobserver")
    results = run_bit_exact(config, options)
    jobs = results["jobs"]
    # q branch jobs (one query each) in each of the 2 steps, then the plain branch
    assert [j["job"] for j in jobs].count("branch") == 2 * q + 1
    for job in jobs:
        model = job_cycles(config, job["job"], m, k, n)
        assert job["cycles"] == model == layer_cycles(4, 4, False, 2, job["job"], m, k, n, 0), \
            job
    assert results["step_cycles"] == [
        step_cycles(config, m, k, n, 0, q), step_cycles(config, m, k, n, 0, q, True)] == [
        layer_step_cycles(4, 4, False, 2, m, k, n, 0, q, sequential) for sequential in
        (False, True)]
