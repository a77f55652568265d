"""The engine's cycle model where tiles are short (hw/engine/cycles.py): a tile waits for its
result bank (the tile two before it: its k-steps and ``engine_bank_turnaround``, 3R + C + 5,
after that tile's begin) and, with one row panel at pack 1, for its W panel's refill. By
hand, against the tile timeline (the closed form's second derivation) and against the RTL
(Verilator job server; the builds are the ones tests/test_engine_gelu.py and
tests/test_engine_cosim.py use, cached)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from cycle_reference import engine_cycles
from zoforge.hw.engine.config import EngineConfig
from zoforge.hw.engine.cycles import (engine_bank_turnaround, engine_job_cycles,
                                      engine_job_extra, engine_tile_begins)

#: tests/test_engine_gelu.py's engine (4 x 4, pack 2, the GELU job mode)
GELU_CONFIG = EngineConfig(rows=4, cols=4, pack=2, max_m=24, max_k=40, max_n=24, gelu=True)
#: tests/test_engine_cosim.py's CONFIG_A, CONFIG_B, CONFIG_P
CONFIGS = {"3x2": EngineConfig(rows=3, cols=2, pack=2, max_m=32, max_k=32, max_n=32),
           "2x3 pack 1": EngineConfig(rows=2, cols=3, pack=1, max_m=16, max_k=16, max_n=16),
           "4x3 paired": EngineConfig(rows=4, cols=3, pack=2, max_m=32, max_k=32, max_n=32,
                                      paired=True)}


def _end(config: EngineConfig, m: int, k: int, n: int) -> int:
    """The job's cycles from its tile timeline."""
    steps = config.pack * -(-k // config.pack)
    return (engine_tile_begins(config, m, k, n)[-1] + steps
            + engine_job_extra(config.rows, config.cols, config.paired))


def test_bank_turnarounds_are_the_measured_ones():
    """3R + C + 5 (R / 2 less paired), as read off the co-simulations (2x3: 14, 3x2: 16,
    4x4: 21, paired 4x3: 18)."""
    assert [engine_bank_turnaround(r, c) for r, c in ((2, 3), (3, 2), (4, 4))] == [14, 16, 21]
    assert engine_bank_turnaround(4, 3, paired=True) == 18


def test_tile_begins_by_hand():
    # 4 x 4, pack 2, 8 x 16 x 16 (the tiny step's key map): 16 k-steps, tiles 16 apart, a
    # bank free 16 + 21 = 37 after its tile's begin: pairs 37 apart; ends 143 + 16 + 37
    four = EngineConfig(rows=4, cols=4, pack=2, max_m=32, max_k=32, max_n=32)
    assert engine_tile_begins(four, 8, 16, 16) == [16, 32, 53, 69, 90, 106, 127, 143]
    assert engine_job_cycles(four, 8, 16, 16) == 196
    # K 32: a bank free after 32 + 21 = 53 < 2 x 32: tiles 32 apart
    assert engine_tile_begins(four, 8, 32, 8) == [32, 64, 96, 128]
    # 2 x 3, pack 1, 2 x 14 x 15: one row panel, 5 column panels of 14 k-steps (tiles 14
    # apart; a bank free 14 + 14 = 28 after: never later); W panel p in once panel p - 2
    # has ended (+ 14) and its 14 words are written (+ 14) and one cycle: 28 + 29 = 57,
    # 42 + 29 = 71, 57 + 29 = 86; ends 86 + 14 + (3R + C + 21 = 30) = 130, the RTL's
    two = CONFIGS["2x3 pack 1"]
    assert engine_tile_begins(two, 2, 14, 15) == [28, 42, 57, 71, 86]
    assert engine_job_cycles(two, 2, 14, 15) == 130
    # two row panels: panel 1 between takes 3 tile intervals, the refill never waits
    assert engine_tile_begins(two, 4, 14, 15) == [28 + 14 * i for i in range(10)]


@pytest.mark.parametrize("fields", [
    dict(rows=3, cols=2, pack=2), dict(rows=2, cols=3, pack=1), dict(rows=4, cols=2, pack=1),
    dict(rows=4, cols=3, pack=2, paired=True), dict(rows=4, cols=4, pack=2),
    dict(rows=8, cols=8, pack=2), dict(rows=8, cols=4, pack=3), dict(rows=1, cols=1, pack=1)])
def test_closed_form_is_the_tile_timeline(fields):
    """engine_job_cycles' closed form equals the tile timeline over M, K, N from one tile
    to many, K from one beat to well past every bound; where pack > 1 (no W refill wait)
    it equals tests/cycle_reference.py's hand timeline too, paired or not."""
    config = EngineConfig(max_m=64, max_k=64, max_n=64, **fields)
    for m, k, n in itertools.product((1, 2, 5, 9, 17, 40), range(1, 64, 4), (1, 3, 8, 13, 33)):
        assert engine_job_cycles(config, m, k, n) == _end(config, m, k, n), (m, k, n)
        if config.pack > 1:
            assert engine_job_cycles(config, m, k, n) == engine_cycles(
                config.rows, config.cols, config.pack, m, k, n, config.paired), (m, k, n)


def _run(config: EngineConfig, shapes, seed: int = 3):
    """``shapes`` (M, K, N, kind: raw, int8 or gelu) on the RTL: each job's CYCLES."""
    from zoforge.sim.engine_cosim import EngineCosim, random_gelu_job, random_job
    rng = np.random.default_rng(seed)
    jobs = [random_gelu_job(rng, m, k, n, per_column=True) if kind == "gelu" else
            random_job(rng, m, k, n, raw=kind == "raw", per_channel=kind == "int8")
            for m, k, n, kind in shapes]
    results, _ = EngineCosim(config).run(jobs, backend="jobserver")
    assert all(r.bit_exact for r in results)
    return [r.cycles for r in results]


def test_short_tiles_on_the_rtl():
    """The tiny fine-tuning step's attention jobs (Q·K^T 8 x 16 x 8, P·V 8 x 8 x 16), a
    GELU job and an int8 job of short tiles (the bank binds), and 36 tiles of 2 k-steps (K
    2: pairs of tiles spaced by the bank, 2 + 21 = 23, a pair's tiles and the odd last one
    by the array's 2R - 2 = 6): each job's CYCLES is the model's. By hand (4 x 4, pack 2:
    the drain 3R + C + 21 = 37, the bank free 3R + C + 5 = 21 after a tile's k-steps):
    Q·K^T 8 beats, 2 x 2 tiles of 16 k-steps, pairs 16 + 21 = 37 apart: 16 + 37 + 16 =
    69, + 16 + 37 = 122; P·V 4 beats, 2 x 4 tiles of 8 k-steps (> 6), pairs 8 + 21 = 29
    apart: 8 + 3 x 29 + 8 = 103, + 8 + 37 = 148; K 2: 1 beat, 2 + 17 x 23 + 6 = 399,
    + 2 + 37 = 438."""
    shapes = [(8, 16, 8, "raw"), (8, 8, 16, "raw"), (16, 8, 16, "gelu"), (16, 4, 16, "int8"),
              (24, 2, 24, "raw")]
    cycles = _run(GELU_CONFIG, shapes)
    assert cycles == [engine_job_cycles(GELU_CONFIG, m, k, n, gelu=kind == "gelu")
                      for m, k, n, kind in shapes]
    assert cycles[:2] + cycles[4:] == [122, 148, 438]


@pytest.mark.slow
@pytest.mark.ci
@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_depth_on_the_rtl(name):
    """K from 1 to max_k at 16 tiles a job (where the bank binds, where the tile interval
    does, where the k-steps do), and at pack 1 one row panel of 5 column panels (the W
    refill): every job's CYCLES is the model's."""
    config = CONFIGS[name]
    m, n = 4 * config.rows, 4 * config.cols
    shapes = [(m, k, n, "raw" if k % 2 else "int8") for k in range(1, config.max_k + 1)]
    if config.pack == 1:
        shapes += [(config.rows, k, 5 * config.cols, "raw") for k in range(1, config.max_k + 1)]
    cycles = _run(config, shapes, seed=len(name))
    assert cycles == [engine_job_cycles(config, m_, k, n_) for m_, k, n_, _ in shapes]
