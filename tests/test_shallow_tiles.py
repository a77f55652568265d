"""Shallow tiles on the ZO layer: a tile of K = r = 8 k-steps costs its depth.

The layer's array drains each column right after its own captures (``skewed_drain``,
:func:`zoforge.hw.pe.array.min_tile_interval`: ``max(2R - 2, R)`` instead of ``2R + C``) and
holds up to eight result tiles (:func:`zoforge.hw.pe.tiles.lut_ram_result_banks`), so the
narrow LoRA-FA adapter's branch tiles follow each other every K_t cycles. By hand here (the
cycle model), on the RTL (Verilator, slow): the tile spacing itself, read off two compute
jobs of one run that differ only in their tile count, every job's CYCLES equal to the
model, and the results bit-exact at that spacing with back-pressure on the output stream.
"""
from __future__ import annotations

import pytest

from zoforge.golden.zolayer import layer_config
from zoforge.hw.pe.array import min_tile_interval
from zoforge.hw.pe.tiles import lut_ram_result_banks
from zoforge.hw.zolayer.cycles import bank_free, job_cycles, tile_spacing

# the board's ZO layer (4 x 16, LoRA-FA, r = 8) and a shape of its qkv branch jobs' kind,
# small enough to co-simulate: M = 64 tokens (4 token tiles), K = r = 8, N = 16 (4 panels)
ROWS, COLS, M, K, N, R = 4, 16, 64, 8, 16, 8


def _config(**fields):
    return layer_config("onthefly", rows=ROWS, cols=COLS, mode="lora-fa", max_m=M, max_k=K,
                        max_n=N, max_r=R, **fields)


def test_shallow_tiles_spacing_by_hand():
    """4 x 16: the array's interval max(2R - 2, R) = 6 (2R + C = 24 with the plain drain),
    eight result banks (R 4: 8 banks of 4 rows fill a 32-word LUT RAM) turning over in
    (8 + 4.5 + 3R + C = 40.5) / 8 = 5.06 cycles, so a tile of depth 8 is 8 cycles apart:
    a branch of 4 x 4 = 16 tiles 15 x 8 + 8 + (27 + 3R + C = 55) + 1 = 184 cycles."""
    config = _config()
    assert min_tile_interval(ROWS, COLS, skewed_drain=True) == 6
    assert min_tile_interval(ROWS, COLS) == 24
    assert lut_ram_result_banks(ROWS) == 8
    assert bank_free(config) == 32.5
    assert tile_spacing(config, 8) == 8
    assert job_cycles(config, "branch", M, K, N, R) == 184
    # deeper tiles are their depth apart too; depth 4 waits for the array (6)
    assert [tile_spacing(config, d) for d in (4, 5, 6, 7, 16)] == [6, 6, 6, 7, 16]


@pytest.mark.parametrize("rows, banks", [(1, 8), (2, 8), (3, 8), (4, 8), (5, 4), (8, 4),
                                         (9, 2), (16, 2), (32, 2)])
def test_result_banks_fill_a_32_word_lut_ram(rows, banks):
    """Banks of 2^ceil(log2 R) rows: as many as fit 32 words, from 2 to 8."""
    assert lut_ram_result_banks(rows) == banks
    assert banks * (1 << max(1, (rows - 1).bit_length())) <= 32 or banks == 2


def _run(config, **options):
    from zoforge.sim.zolayer_cosim import ZoCosimOptions
    from zolayer_checks import run_bit_exact
    options = ZoCosimOptions(steps=1, q=1, seed=11, m=M, k=K, n=N, r=R, grad_shift=30,
                             backend="jobserver", **options)
    return run_bit_exact(config, options)


@pytest.mark.slow
def test_rtl_shallow_tiles_are_their_depth_apart():
    """One P-RGE step (and a sequential one) on the RTL, bit-exact: frozen_w (N / R = 4
    panels) and frozen_a (r / R = 2 panels), both of depth K = 8, differ by 2 x 4 = 8 tiles
    and by 8 x 8 = 64 cycles, so the tiles are 8 cycles apart (24 with the plain drain, 20.25
    with two result banks); every job's CYCLES equals the cycle model."""
    config = _config()
    results = _run(config)
    cycles = {}
    for job in results["jobs"]:
        assert job["cycles"] == job_cycles(config, job["job"], M, K, N, R), job
        cycles.setdefault(job["job"], set()).add(job["cycles"])
    (frozen_w,), (frozen_a,) = cycles["frozen_w"], cycles["frozen_a"]
    tiles = M // COLS * (N - R) // ROWS
    assert frozen_w - frozen_a == 8 * tiles
    assert cycles["branch"] == {184}


@pytest.mark.slow
def test_rtl_shallow_tiles_bit_exact_with_backpressure():
    """The same step with the output stream's ready low 40 % of the cycles (and the input
    stream idle 20 %): every branch, g and master bit-exact, the tiles held back by the
    result banks (more cycles than the model's back-to-back branch)."""
    config = _config()
    results = _run(config, sink_backpressure=0.4, source_idle=0.2)
    branches = [job["cycles"] for job in results["jobs"] if job["job"] == "branch"]
    assert min(branches) > job_cycles(config, "branch", M, K, N, R)
