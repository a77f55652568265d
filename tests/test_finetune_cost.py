"""The whole-step cost model of ZO fine-tuning (reports/model_shape.py, unit_calls.py,
step_price.py, step_memory.py and rtl_jobs.py).

Default run: the model only (figures of a tiny configuration derived by hand below, the
co-simulated cycle counts recorded for the model's shapes, monotonicity, the board facts,
bad input). ``-m slow``: the model against a fresh co-simulation of one engine shape and
one adapter call plus update walk.
"""
from math import ceil
from types import SimpleNamespace as NS

import pytest

from cycle_reference import engine_bytes, engine_cycles, layer_bytes, layer_cycles
from zoforge.boards.registry import Board, get_board
from zoforge.errors import ConfigError
from zoforge.golden.zolayer import Formats, layer_config
from zoforge.hw.engine.config import EngineConfig
from zoforge.hw.engine.cycles import engine_job_bytes, engine_job_cycles
from zoforge.reports.model_shape import ModelShape
from zoforge.reports.rtl_jobs import measure_adapter_jobs, measure_engine_jobs
from zoforge.reports.step_memory import backprop_peak_memory, memory_bits, zo_peak_memory
from zoforge.reports.step_price import roofline, step_time_energy, units_clock_power
from zoforge.reports.unit_calls import (ADAPTER_CALL, UPDATE_WALK, adapter_call,
                                        model_engine_config, model_layer_config,
                                        predicted_step_cycles, update_walk, zo_job_bytes,
                                        zo_job_cycles)

# A tiny model: 1 block, 2 sequences of 4 tokens (M = 8), hidden 16, FFN 32, rank 4, q = 1,
# on a 4 x 4 engine (pack 2) whose max_n of 16 splits ffn_in into 2 chunks, and a 4 x 4 layer.
TINY = ModelShape(blocks=1, seq_len=4, batch=2, rank=4, adapted=2, queries=1, hidden=16,
                  ffn=32, heads=2, classes=2)
TINY_ENGINE = EngineConfig(rows=4, cols=4, pack=2, max_m=8, max_k=32, max_n=16)
TINY_LAYER = layer_config("onthefly", rows=4, cols=4, mode="lora-fa", max_m=8, max_k=16,
                          max_n=16, max_r=4)


def test_tiny_step_cycles_by_hand():
    # engine, 4 x 4: tiles >= 2R - 2 = 6 apart (the skewed drain), and a tile's result bank
    # free for the tile two later 3R + C + 5 = 21 cycles after its k-steps; a job ends
    # 3R + C + 21 = 37 cycles after its last tile. (M, K, N) = (8, 16, 16): 8 beats per
    # panel, 2 x 4 tiles of 16 k-steps, in pairs 16 + 21 = 37 apart (> 2 x 16): the RTL's
    # 196 (2026-11-27, and with the skewed drain: tests/test_engine_bank_cycles.py)
    key = 2 * 8 + 3 * 37 + 16 + 16 + 37                  # 196 (key, attn_out, ffn_in chunk)
    ffn_out = 2 * 16 + 7 * 32 + 32 + 37                  # (8, 32, 16), 32 + 21 < 64: 325
    head = 2 * 8 + 16 + 37                               # (2, 16, 2), one tile: 69
    # ZO layer (hw/zolayer/cycles.py), M = 8, K = N = 16, r = 4; every job + 1 (FINISH):
    # loads one cycle per beat (+1), X packed 4 k-steps a beat; compute tiles max(depth, the
    # skewed drain's 2R - 2 = 6, (depth + 20.5) / 8 banks) apart, the last ends after its
    # k-steps, + 27 + 3R + C = 43 (a branch's bias read hidden behind the banks)
    loads = (4 * 16 + 2) + (1 * 16 + 2) + (4 * 4 + 2) + (2 * 4 + 2)      # w, a, master, x
    frozen = (7 * 16 + 16 + 43) + 1 + (1 * 16 + 16 + 43) + 1     # K-bound: 172 + 76
    branch = 7 * 6 + 4 + 43 + 1                          # r = 4: tiles 6 apart: 90
    call = loads + frozen + branch                       # 450
    # master load; accumulate 15 + 7 (its pipeline) + 2; apply 16 + 11 (t from the
    # registered product a stage of its own) + 1; read 16 + 3
    walk = (16 + 2) + (15 + 7 + 2 + 1) + (16 + 11 + 1 + 1) + (16 + 3 + 1)
    forwards = 2
    total = (forwards * 2 * call + forwards * 2 * key + forwards * 2 * key
             + forwards * ffn_out + forwards * head + 1 * 2 * walk)
    step = predicted_step_cycles(TINY, TINY_ENGINE, TINY_LAYER)
    assert step.cycles == total == 4340
    by_name = {c.name: c for c in step.calls}
    assert by_name["query/value adapter call"].cycles == call
    assert by_name["ffn_in chunk (1/2)"].count == 4 and by_name["ffn_in chunk (1/2)"].shape \
        == (8, 16, 16)
    assert by_name["head"].cycles == head and by_name["update walk"].cycles == walk
    assert [j for j, _ in by_name["query/value adapter call"].jobs] == list(ADAPTER_CALL)
    assert [j for j, _ in by_name["update walk"].jobs] == list(UPDATE_WALK)
    # host: Q·K^T and P·V, 2 * batch * seq^2 * hidden MACs per block and forward
    assert step.host_macs == forwards * 2 * 2 * 16 * 16


def test_tiny_bytes_by_hand():
    # engine (8, 16, 16) int8 per-channel: beats of 2 * 4 = 8 bytes, (2 X + 4 W panels) x 8;
    # out: 2 x 4 tiles x 4 rows, four int8 rows a beat of 4 lanes x 4 bytes; tables: 3 x 4
    # rows x 4 words
    moved = engine_job_bytes(TINY_ENGINE, 8, 16, 16)
    assert moved == {"stream_bytes": 6 * 8 * 8 + 2 * 4 * 16 + 4 * 48,
                     "payload_bytes": 8 * 16 + 16 * 16 + 8 * 16 + 12 * 16,
                     "table_words": 48}
    raw = engine_job_bytes(TINY_ENGINE, 2, 16, 2, raw=True)
    assert raw["table_words"] == 4 and raw["payload_bytes"] == 32 + 32 + 16 + 8
    # ZO layer: words of 4 lanes x 4 bytes
    assert zo_job_bytes(TINY_LAYER, "load_w", 8, 16, 16, 4) == (64 * 16, 256)
    assert zo_job_bytes(TINY_LAYER, "load_master", 8, 16, 16, 4) == (16 * 16, 3 * 64)
    assert zo_job_bytes(TINY_LAYER, "branch", 8, 16, 16, 4) == (32 * 16, 4 * 128)
    assert zo_job_bytes(TINY_LAYER, "frozen_w", 8, 16, 16, 4) == (0, 0)
    call = adapter_call(TINY_LAYER, 8, 16, 16, 4)
    assert call.stream_bytes == 16 * (64 + 16 + 16 + 8 + 32)
    assert call.payload_bytes == 256 + 64 + 192 + 128 + 512
    walk = update_walk(TINY_LAYER, 16, 16, 4)
    assert walk.stream_bytes == 2 * 16 * 16 and walk.payload_bytes == 2 * 192


# CYCLES measured on the RTL (job server; docs/finetune-cost.md, benchmarks/
# bench_finetune_cost.py --check-batch 4 --check-seq-len 128 / 16 --check-rank 8 / 16, at
# be2917b: the ZO layer's skewed drain and eight result banks): the model's shapes at M = 512
# (r = 8) and M = 64 (r = 16) tokens, 8 x 8 engine and 4 x 4 layer sized for the tokens;
# the model equals every one (predicted / measured 1.0000).
ENGINE_MEASURED = {(512, 384, 384): 1180085, (512, 384, 768): 2359733,
                   (512, 1536, 384): 4720181, (4, 384, 2): 821, (64, 384, 384): 147893,
                   (64, 384, 768): 295349, (64, 1536, 384): 591413}
LAYER_MEASURED = {     # the job server's CYCLES
    (512, 8): {"load_w": 36866, "load_a": 770, "load_master": 770, "load_x": 12290,
               "frozen_w": 4718636, "frozen_a": 98348, "branch": 98348, "accumulate": 777,
               "apply": 780, "read_master": 772},
    (64, 16): {"load_w": 36866, "load_a": 1538, "load_master": 1538, "load_x": 1538,
               "frozen_w": 589868, "frozen_a": 24620, "branch": 24620, "accumulate": 1545,
               "apply": 1548, "read_master": 1540}}


# Several blocks, queries and sequences, every dimension different, so that the counts per
# forward, per step, per block and per model differ (at one block and q = 1 they coincide).
# TWO: 2 blocks, q 3, batch 3 x seq 5 = 15 tokens, hidden 24, FFN 56, rank 3, 4 heads,
# 5 classes, query and value adapted; a 4 x 3 engine, pack 3, whose max_n 24 cuts ffn_in
# into 3 chunks of 19 columns; a 4 x 2 layer, to which the host pads 15 tokens to 16 and
# the rank 3 to 4.
TWO = ModelShape(blocks=2, seq_len=5, batch=3, rank=3, adapted=2, queries=3, hidden=24,
                 ffn=56, heads=4, classes=5)
TWO_ENGINE = EngineConfig(rows=4, cols=3, pack=3, max_m=16, max_k=56, max_n=24)
TWO_LAYER = layer_config("onthefly", rows=4, cols=2, mode="lora-fa", max_m=16, max_k=24,
                         max_n=24, max_r=4)
# THREE: 3 blocks, q 2, batch 2 x seq 3 = 6 tokens, hidden 16, FFN 40, rank 5, 2 heads,
# 3 classes, query, value and key adapted (attn_out alone on the engine); a 2 x 5 engine,
# pack 2, max_n 20: ffn_in in 2 chunks of 20; a 2 x 4 layer: tokens padded to 8, rank to 6.
THREE = ModelShape(blocks=3, seq_len=3, batch=2, rank=5, adapted=3, queries=2, hidden=16,
                   ffn=40, heads=2, classes=3)
THREE_ENGINE = EngineConfig(rows=2, cols=5, pack=2, max_m=8, max_k=40, max_n=20)
THREE_LAYER = layer_config("onthefly", rows=2, cols=4, mode="lora-fa", max_m=8, max_k=16,
                           max_n=16, max_r=6)

#: per call kind: (name, unit, shape, count per step), counted from the schedule (per query
#: a + and a - forward of every block and the head, then one update walk per adapter)
STEP_CALLS = {
    # TWO: 2q = 6 forwards x 2 blocks = 12 block passes: 2 adapter calls each (24), key and
    # attn_out (24), 3 ffn_in chunks (36), ffn_out (12); the head once a forward (6); q x
    # J = 3 x 4 walks (12)
    "TWO": [("query/value adapter call", "zo-layer", (16, 24, 24, 4), 24),
            ("key/attn_out", "engine", (15, 24, 24), 24),
            ("ffn_in chunk (1/3)", "engine", (15, 24, 19), 36),
            ("ffn_out", "engine", (15, 56, 24), 12),
            ("head", "engine", (3, 24, 5), 6),
            ("update walk", "zo-layer", (24, 24, 4), 12)],
    # THREE: 2q = 4 forwards x 3 blocks = 12 block passes: 3 adapter calls each (36),
    # attn_out (12), 2 ffn_in chunks (24), ffn_out (12); the head 4; q x J = 2 x 9 walks
    "THREE": [("adapter call (query, value, key)", "zo-layer", (8, 16, 16, 6), 36),
              ("attn_out", "engine", (6, 16, 16), 12),
              ("ffn_in chunk (1/2)", "engine", (6, 16, 20), 24),
              ("ffn_out", "engine", (6, 40, 16), 12),
              ("head", "engine", (2, 16, 3), 4),
              ("update walk", "zo-layer", (16, 16, 6), 18)]}
MODELS = {"TWO": (TWO, TWO_ENGINE, TWO_LAYER), "THREE": (THREE, THREE_ENGINE, THREE_LAYER)}


def _jobs_by_hand(name, unit, shape, engine, layer):
    """(job, cycles, stream bytes, payload bytes) of one call, from tests/cycle_reference.py:
    an engine call is one job (the head raw, every other int8 per-channel); an adapter call
    the loads of W, A, master and X, the frozen products and a branch; a walk the master's
    load, accumulate, apply and read back (on C tokens: it has none)."""
    if unit == "engine":
        moved = engine_bytes(engine.rows, engine.cols, engine.pack, *shape, raw=name == "head")
        return [(name, engine_cycles(engine.rows, engine.cols, engine.pack, *shape),
                 moved["stream_bytes"], moved["payload_bytes"])]
    if len(shape) == 4:
        (m, k, n, r), jobs = shape, ADAPTER_CALL
    else:
        (k, n, r), m, jobs = shape, layer.cols, UPDATE_WALK
    return [(job, layer_cycles(layer.rows, layer.cols, True, 1, job, m, k, n, r),
             *layer_bytes(layer.rows, layer.cols, job, m, k, n, r)) for job in jobs]


@pytest.mark.parametrize("model", list(MODELS))
def test_multi_block_step_calls_by_hand(model):
    """Every call kind of a step of several blocks: its name, unit, shape, count per step,
    each job's cycles and bytes, its cycles, stream and payload bytes and table words, and the
    step's totals per unit and in all, each against the schedule counted by hand and the
    jobs worked out again (tests/cycle_reference.py)."""
    shape, engine, layer = MODELS[model]
    step = predicted_step_cycles(shape, engine, layer)
    expected = STEP_CALLS[model]
    assert [(c.name, c.unit, c.shape, c.count) for c in step.calls] == expected
    totals = {"engine": 0, "zo-layer": 0, "stream": 0, "payload": 0}
    for call, (name, unit, call_shape, count) in zip(step.calls, expected):
        jobs = _jobs_by_hand(name, unit, call_shape, engine, layer)
        assert call.jobs == tuple((job, cycles) for job, cycles, _, _ in jobs), name
        assert call.job_stream_bytes == tuple(s for _, _, s, _ in jobs), name
        assert call.job_payload_bytes == tuple(p for _, _, _, p in jobs), name
        cycles = sum(c for _, c, _, _ in jobs)
        stream, payload = sum(s for _, _, s, _ in jobs), sum(p for _, _, _, p in jobs)
        assert (call.cycles, call.stream_bytes, call.payload_bytes) == (cycles, stream,
                                                                        payload), name
        assert call.total_cycles == count * cycles, name
        if unit == "engine":       # per column tile a row of 2^ceil(log2 C) words a table
            tables, row = (1 if name == "head" else 3), 1 << (engine.cols - 1).bit_length()
            assert call.table_words == tables * ceil(call_shape[2] / engine.cols) * row
        else:
            assert call.table_words == 0
        totals[unit] += count * cycles
        totals["stream"] += count * stream
        totals["payload"] += count * payload
    assert step.unit_cycles("engine") == totals["engine"]
    assert step.unit_cycles("zo-layer") == totals["zo-layer"]
    assert step.cycles == totals["engine"] + totals["zo-layer"]
    assert (step.stream_bytes, step.payload_bytes) == (totals["stream"], totals["payload"])


def test_multi_block_calls_worked_by_hand():
    """TWO's engine calls and update walk with every term written out. 4 x 3, pack 3,
    drain 3R + C + 21 = 36: key/attn_out (15, 24, 24): 8 beats a panel, 24 k-steps (> 2R +
    C = 11), 4 x 8 tiles: 16 + 31 x 24 + 24 + 36 = 820; the head (3, 24, 5): 2 tiles:
    16 + 24 + 24 + 36 = 100, raw (the bias table alone: 2 tiles x 4 words). The walk on
    the 4 x 2 layer (T: r 4 x N 24 / R = 24 words): load_master 24 + 2, accumulate
    23 + 7 + 3, apply 24 + 13, read_master 24 + 4; its streams 24 words of 16 bytes each
    way, its payload the 3-byte master each way (3 x 4 x 24). The host's attention MACs:
    per head (d = 24 / 4 = 6) and sequence Q·K^T and P·V, 2 x 5 x 5 x 6, for 4 heads,
    3 sequences, 2 blocks and 6 forwards."""
    step = predicted_step_cycles(TWO, TWO_ENGINE, TWO_LAYER)
    calls = {c.name: c for c in step.calls}
    assert calls["key/attn_out"].cycles == 820
    head = calls["head"]
    assert (head.cycles, head.table_words) == (100, 8)
    walk = calls["update walk"]
    assert walk.jobs == (("load_master", 26), ("accumulate", 33), ("apply", 37),
                         ("read_master", 28))
    assert (walk.stream_bytes, walk.payload_bytes) == (2 * 24 * 16, 2 * 3 * 4 * 24)
    assert step.host_macs == 6 * 2 * 3 * 4 * (2 * 5 * 5 * 6)


@pytest.mark.parametrize("model", list(MODELS))
def test_multi_block_roofline_and_energy_by_hand(model):
    """At 100 MHz and 4 bytes a cycle (4e8 B/s) some jobs wait on DDR and some compute: per
    call kind compute_s (its cycles / f), memory_s (its bytes / bandwidth), time_s (per job
    the larger, summed), the bound (all, some or none of its jobs memory-bound) and bytes
    per cycle; then the step's time and energy from the rows, each weighted by its count,
    static and dynamic apart, the dynamic power estimated at 40 MHz taken to 100."""
    shape, engine, layer = MODELS[model]
    step = predicted_step_cycles(shape, engine, layer)
    hz, bandwidth = 100e6, 4e8
    rows = roofline(step, 100.0, bandwidth)
    bounds = set()
    compute_total = roofline_total = 0.0
    for row, (name, unit, call_shape, count) in zip(rows, STEP_CALLS[model]):
        jobs = _jobs_by_hand(name, unit, call_shape, engine, layer)
        compute = [cycles / hz for _, cycles, _, _ in jobs]
        memory = [stream / bandwidth for _, _, stream, _ in jobs]
        slow = [mem > comp for comp, mem in zip(compute, memory)]
        bound = "memory" if all(slow) else "compute" if not any(slow) else "mixed"
        assert (row.name, row.unit, row.count, row.bound) == (name, unit, count, bound)
        assert row.compute_s == pytest.approx(sum(compute), rel=1e-12)
        assert row.memory_s == pytest.approx(sum(memory), rel=1e-12)
        assert row.time_s == pytest.approx(sum(max(c, m) for c, m in zip(compute, memory)),
                                           rel=1e-12)
        assert row.bytes_per_cycle == pytest.approx(
            sum(s for _, _, s, _ in jobs) / sum(c for _, c, _, _ in jobs), rel=1e-12)
        bounds.add(bound)
        compute_total += count * sum(compute)
        roofline_total += count * sum(max(c, m) for c, m in zip(compute, memory))
    assert bounds == {"compute", "memory", "mixed"}
    assert roofline_total > compute_total
    static_w, dynamic_w = 0.4, 0.3
    dynamic_100 = dynamic_w * 100 / 40
    timing = step_time_energy(step, 100.0, static_w, dynamic_w, power_mhz=40.0,
                              ddr_bytes_per_s=bandwidth)
    expected = {}
    for kind, seconds in (("compute", compute_total), ("roofline", roofline_total)):
        expected.update({f"{kind}_s": seconds, f"{kind}_static_j": seconds * static_w,
                         f"{kind}_dynamic_j": seconds * dynamic_100,
                         f"{kind}_j": seconds * (static_w + dynamic_100)})
    assert timing == pytest.approx(expected, rel=1e-12)
    assert step_time_energy(step, 100.0, static_w, dynamic_w, power_mhz=40.0).keys() == {
        "compute_s", "compute_static_j", "compute_dynamic_j", "compute_j"}


def test_roofline_payload_bytes_and_bounds_at_both_ends():
    """With ``payload`` the rows count the packed values; at an unlimited DDR every call is
    compute-bound (time = compute), at 1 byte a second every job that moves a byte is
    memory-bound (the engine's and the loads), those that move none stay compute; a job
    whose bytes take exactly its cycles' time is compute-bound."""
    step = predicted_step_cycles(TWO, TWO_ENGINE, TWO_LAYER)
    packed = roofline(step, 100.0, 4e8, payload=True)
    for row, call in zip(packed, step.calls):
        assert row.memory_s == pytest.approx(call.payload_bytes / 4e8, rel=1e-12)
        assert row.bytes_per_cycle == pytest.approx(call.payload_bytes / call.cycles)
    fast = roofline(step, 100.0, 1e18)
    assert all(row.bound == "compute" and row.time_s == row.compute_s for row in fast)
    slow = {row.name: row.bound for row in roofline(step, 100.0, 1.0)}
    assert slow == {"query/value adapter call": "mixed", "key/attn_out": "memory",
                    "ffn_in chunk (1/3)": "memory", "ffn_out": "memory", "head": "memory",
                    "update walk": "mixed"}
    # the head's 416 bytes at 4.16e8 B/s take exactly its 100 cycles at 100 MHz: a tie is
    # not waiting on DDR
    (head,) = [row for row in roofline(step, 100.0, 4.16e8) if row.name == "head"]
    assert head.compute_s == head.memory_s == head.time_s == 1e-6 and head.bound == "compute"


def test_multi_block_peak_memory_by_hand():
    """TWO (M 15, H 24, F 56, r 3, J 4, batch 3 x seq 5, 4 heads, 5 classes), every part.
    ZO: weights int8 2 blocks x (4 H^2 + 2 H F) + the head H x 5 once; 12 bytes per output
    channel (2 x (4 H + F + H) + 5); A J H r; masters 3 bytes, twice; D r x H of 16 + 8 + 4
    = 28 bits; the larger of attention's 5 M H + 4 batch seq^2 and the FFN's M H + M F +
    4 M H; the generator's 31 x 8 bits, twice. Backprop: float32 weights, biases and 2
    LayerNorms a block; A; B, its gradient and Adam's 2 moments; per block the saved
    tensors (frozen-aware: without the block input, the context and ffn_in's and ffn_out's
    inputs), plus the pooled head input."""
    weights = 2 * (4 * 24 * 24 + 2 * 24 * 56) + 24 * 5
    channels = 2 * (4 * 24 + 56 + 24) + 5
    zo = zo_peak_memory(TWO, TWO_LAYER)
    parts = {"weights": weights, "channel_params": 12 * channels, "adapters_a": 4 * 24 * 3,
             "masters": 2 * 4 * 3 * 24 * 3, "accumulator": ceil(3 * 24 * 28 / 8),
             "activations": max(5 * 15 * 24 + 4 * 3 * 25, 15 * 24 + 15 * 56 + 4 * 15 * 24),
             "generator": 2 * 31 * 8 // 8}
    assert zo == {**parts, "total": sum(parts.values())}
    frozen_only = 15 * 24 + 15 * 24 + 15 * 24 + 15 * 56
    per_block = (15 * 24 + 2 * 15 * 3 + 3 * 15 * 24 + 3 * 4 * 25 + 15 * 24
                 + 2 * (15 * 24 + 2 * 15) + 15 * 24 + 2 * 15 * 56)
    b = 4 * 3 * 24
    for frozen_aware, saved in ((False, per_block), (True, per_block - frozen_only)):
        bp = {"weights": 4 * (weights + channels + 2 * 2 * 2 * 24), "adapters_a": 4 * 4 * 24 * 3,
              "masters": 4 * b, "gradients": 4 * b, "adam": 8 * b,
              "activations": 4 * (2 * saved + 3 * 24)}
        assert backprop_peak_memory(TWO, frozen_aware) == {**bp, "total": sum(bp.values())}


def test_memory_bits_are_each_units_own():
    """Each unit's part is the sum of its own memories' bits (an engine and a layer of
    different sizes, so a swap shows), the total their sum."""
    from zoforge.hw.engine.designs import engine_memories
    from zoforge.hw.zolayer.designs import layer_memories
    bits = memory_bits(TWO_ENGINE, TWO_LAYER)
    engine = sum(size.bits for size in engine_memories(TWO_ENGINE).values())
    layer = sum(size.bits for size in layer_memories(TWO_LAYER).values())
    assert engine != layer
    assert bits == {"engine": engine, "zo-layer": layer, "total": engine + layer}


def test_model_reproduces_recorded_cosimulation():
    for (m, k, n), cycles in ENGINE_MEASURED.items():
        engine = model_engine_config(ModelShape(batch=max(m // 16, 1), seq_len=16))
        assert abs(engine_job_cycles(engine, m, k, n) / cycles - 1) <= 0.01, (m, k, n)
    for (m, r), jobs in LAYER_MEASURED.items():
        layer = model_layer_config(ModelShape(batch=m // 16, seq_len=16, rank=r))
        for job, cycles in jobs.items():
            predicted = zo_job_cycles(layer, job, m, 384, 384, r)
            assert abs(predicted / cycles - 1) <= 0.03, (m, r, job, predicted)   # issue 21


def test_step_grows_with_work():
    base = dict(seq_len=16, batch=2, blocks=3)

    def cycles(**fields):
        return predicted_step_cycles(ModelShape(**{**base, **fields})).cycles

    reference = cycles()
    for more in (dict(blocks=4), dict(seq_len=32), dict(batch=4), dict(rank=16),
                 dict(queries=3), dict(adapted=3)):
        assert cycles(**more) > reference, more
    # 2q forwards and q walks: linear in q
    one = cycles(queries=1)
    assert cycles(queries=2) == 2 * one and cycles(queries=3) == 3 * one


def test_roofline_and_time():
    step = predicted_step_cycles(TINY, TINY_ENGINE, TINY_LAYER)
    slow = roofline(step, 100.0, 1.0)                       # 1 byte/s
    fast = roofline(step, 100.0, 1e15)
    assert {row.name: row.bound for row in slow} == {
        "query/value adapter call": "mixed",                # the frozen jobs stream nothing
        "key/attn_out": "memory", "ffn_in chunk (1/2)": "memory", "ffn_out": "memory",
        "head": "memory", "update walk": "mixed"}           # accumulate, apply: on chip
    assert all(row.bound == "compute" for row in fast)
    call = slow[0]            # per job max(compute, memory): frozen_w, frozen_a compute
    assert call.memory_s == 16 * (64 + 16 + 16 + 8 + 32)
    assert call.time_s - call.memory_s == pytest.approx((172 + 76) / 100e6, rel=1e-6)
    walk = slow[-1]           # load_master and read_master stream; accumulate, apply not
    assert walk.time_s - walk.memory_s == pytest.approx((25 + 29) / 100e6, rel=1e-6)
    row = next(r for r in slow if r.name == "head")
    assert row.time_s == row.memory_s == next(c for c in step.calls
                                              if c.name == "head").stream_bytes
    timing = step_time_energy(step, 100.0, 0.5, 1.5, ddr_bytes_per_s=1e15)
    assert timing["compute_s"] == pytest.approx(4340 / 100e6)
    assert timing["compute_static_j"] == pytest.approx(0.5 * 4340 / 100e6)
    assert timing["compute_dynamic_j"] == pytest.approx(1.5 * 4340 / 100e6)
    assert timing["compute_j"] == pytest.approx(2 * 4340 / 100e6)
    # dynamic power estimated at 50 MHz is taken to the step's 100 MHz; static stays
    scaled = step_time_energy(step, 100.0, 0.5, 0.75, power_mhz=50.0)
    assert scaled["compute_dynamic_j"] == pytest.approx(timing["compute_dynamic_j"])
    assert scaled["compute_static_j"] == pytest.approx(timing["compute_static_j"])
    with pytest.raises(ConfigError, match="dynamic_w"):
        step_time_energy(step, 100.0, 0.5, -1.0)
    assert timing["roofline_s"] == pytest.approx(timing["compute_s"])
    with pytest.raises(ConfigError, match="mhz"):
        roofline(step, 0.0, 1.0)


def test_peak_memory_by_hand():
    zo = zo_peak_memory(TINY, TINY_LAYER)
    z_width = TINY_LAYER.generator().golden().width
    assert zo["weights"] == 4 * 16 * 16 + 2 * 16 * 32 + 16 * 2
    assert zo["channel_params"] == 12 * (4 * 16 + 32 + 16 + 2)
    assert zo["adapters_a"] == 2 * 16 * 4 and zo["masters"] == 2 * 2 * 4 * 16 * 3
    assert zo["accumulator"] == 4 * 16 * Formats.accumulator_bits(z_width) // 8
    assert zo["activations"] == max(5 * 8 * 16 + 4 * 2 * 4 * 4, 8 * 16 + 8 * 32 + 4 * 8 * 16)
    assert zo["total"] == sum(v for k, v in zo.items() if k != "total")
    bp = backprop_peak_memory(TINY)
    per_block = (128 + 2 * 8 * 4 + 3 * 128 + 2 * 2 * 16 + 128 + (128 + 16) + 128 + 256 + 256
                 + (128 + 16))
    assert bp["activations"] == 4 * (per_block + 2 * 16)
    assert bp["weights"] == 4 * (2080 + 114 + 2 * 2 * 16)
    assert bp["masters"] == bp["gradients"] == 4 * 2 * 4 * 16 and bp["adam"] == 2 * bp["masters"]
    lean = backprop_peak_memory(TINY, frozen_aware=True)
    assert lean["activations"] == 4 * (per_block - (128 + 128 + 128 + 256) + 2 * 16)
    # the full model: backprop keeps activations, ZO does not
    full = ModelShape()
    assert backprop_peak_memory(full, True)["total"] > 5 * zo_peak_memory(full)["total"]


def test_memory_bits_add_up_and_grow():
    small = memory_bits(TINY_ENGINE, TINY_LAYER)
    assert small["total"] == small["engine"] + small["zo-layer"] > 0
    shape = ModelShape(seq_len=16, batch=2)
    big = memory_bits(model_engine_config(shape), model_layer_config(shape))
    assert big["engine"] > small["engine"] and big["zo-layer"] > small["zo-layer"]


def test_board_ddr_facts_have_sources():
    for name, width_clock in (("zcu102", 8 * 2666e6), ("ulx3s-85f", 2 * 166e6)):
        board = get_board(name)
        assert board.ddr_bytes_per_s == width_clock
        assert "theoretical peak" in board.ddr_source
    facts = {f: getattr(get_board("zcu102"), f) for f in (
        "name", "description", "make_platform", "part", "family", "toolchain", "capacities",
        "capacity_source", "default_mhz")}
    with pytest.raises(RuntimeError, match="DDR"):
        Board(**{**facts, "ddr_bytes_per_s": 1e9})
    with pytest.raises(RuntimeError, match="DDR"):
        Board(**{**facts, "ddr_bytes_per_s": -1.0, "ddr_source": "x"})


@pytest.mark.parametrize("fields, parameter", [
    (dict(batch=-1), "batch"), (dict(blocks=0), "blocks"), (dict(blocks=7), "blocks"),
    (dict(seq_len=0), "seq_len"), (dict(rank=0), "rank"), (dict(queries=17), "queries"),
    (dict(adapted=5), "adapted"), (dict(heads=5), "heads"), (dict(batch=64, seq_len=128),
                                                             "batch")])
def test_bad_shapes_are_one_line_errors(fields, parameter):
    with pytest.raises(ConfigError) as error:
        ModelShape(**fields)
    assert error.value.parameter == parameter and "\n" not in str(error.value)


def test_shape_from_fields():
    assert predicted_step_cycles(blocks=1, seq_len=16, batch=2).shape == \
        ModelShape(blocks=1, seq_len=16, batch=2)
    with pytest.raises(ConfigError, match="model shape field"):
        predicted_step_cycles(block=1)
    with pytest.raises(ConfigError, match="shape"):
        predicted_step_cycles(TINY, blocks=1)


def test_units_too_small_for_the_model():
    with pytest.raises(ConfigError, match="engine max_k"):
        predicted_step_cycles(ModelShape(seq_len=16, batch=2), EngineConfig())
    with pytest.raises(ConfigError, match="layer max_r"):
        predicted_step_cycles(ModelShape(seq_len=16, batch=2, rank=32), None,
                              model_layer_config(ModelShape(seq_len=16, batch=2)))
    with pytest.raises(ConfigError, match="job"):
        zo_job_cycles(TINY_LAYER, "nope", 8, 16, 16, 4)


@pytest.mark.slow
def test_model_within_ten_percent_of_cosimulation():
    shape = ModelShape(seq_len=16, batch=2)
    engine, layer = model_engine_config(shape), model_layer_config(shape)
    m, h = shape.tokens, shape.hidden
    (measured,) = measure_engine_jobs(engine, [(m, h, h, False)])
    assert abs(engine_job_cycles(engine, m, h, h) / measured - 1) <= 0.10
    jobs = measure_adapter_jobs(layer, m, h, h, shape.rank)
    call = adapter_call(layer, m, h, h, shape.rank)
    walk = update_walk(layer, h, h, shape.rank)
    assert [j for j, _ in jobs] == list(ADAPTER_CALL + UPDATE_WALK)
    measured_call = sum(c for _, c in jobs[:len(ADAPTER_CALL)])
    measured_walk = sum(c for _, c in jobs[len(ADAPTER_CALL):])
    assert abs(call.cycles / measured_call - 1) <= 0.10
    assert abs(walk.cycles / measured_walk - 1) <= 0.10


def _report(design, board, fmax, static, dynamic, mhz=300.0):
    """What units_clock_power reads of a zoforge build Report."""
    return NS(design=design, board=NS(name=board),
              fmax=NS(fmax_mhz=fmax, source="yosys-estimate") if fmax else None,
              power=NS(static_w=static, dynamic_w=dynamic, frequency_mhz=mhz,
                       source="activity-model", static_source="test: the board's"))


def test_units_clock_power_takes_the_lower_fmax_and_static_once():
    units = units_clock_power(_report("engine", "zcu102", 330.0, 0.59, 0.17),
                              _report("layer", "zcu102", 307.7, 0.59, 0.10))
    assert (units.fmax_mhz, units.fmax_source) == (307.7, "yosys-estimate")
    assert units.static_w == 0.59 and units.dynamic_w == pytest.approx(0.17 + 0.10)
    assert units.static_source == "test: the board's"
    assert (units.power_source, units.power_at_mhz) == ("activity-model", 300.0)
    with pytest.raises(ConfigError, match="layer report"):
        units_clock_power(_report("engine", "zcu102", 330.0, 0.59, 0.17),
                          _report("layer", "zcu102", 307.7, 0.59, 0.10, mhz=100.0))
    with pytest.raises(ConfigError, match="engine report"):
        units_clock_power(_report("engine", "zcu102", None, 0.59, 0.17),
                          _report("layer", "zcu102", 307.7, 0.59, 0.10))


def test_tokens_at_most_4096_exactly_at_the_limit():
    """batch x seq_len = 4096 is a shape (the units' token buffers); one example more is
    the one-line error naming batch."""
    assert ModelShape(batch=32, seq_len=128).tokens == 4096
    assert ModelShape(batch=4096, seq_len=1).tokens == 4096
    with pytest.raises(ConfigError, match="batch must be at most 32 with seq_len 128"):
        ModelShape(batch=33, seq_len=128)
    with pytest.raises(ConfigError, match="batch must be at most 16 with seq_len 241"):
        ModelShape(batch=17, seq_len=241)                       # exactly 4097 tokens
    assert ModelShape(batch=16, seq_len=256).tokens == 4096


def test_engine_attention_adds_the_products_as_engine_calls():
    """``attention="engines"``: the step's calls are host attention's plus Q·K^T (L x d x L)
    and P·V (L x L x d), raw, one per sequence, head, block and forward; the host keeps no
    attention MACs; every other call is unchanged. TINY: L = 4, d = 16 / 2 = 8, 2 forwards
    x 1 block x 2 sequences x 2 heads = 8 jobs of each."""
    host = predicted_step_cycles(TINY, TINY_ENGINE, TINY_LAYER)
    engines = predicted_step_cycles(TINY, TINY_ENGINE, TINY_LAYER, attention="engines")
    assert engines.calls[:len(host.calls)] == host.calls
    scores, context = engines.calls[len(host.calls):]
    assert (scores.unit, scores.shape, scores.count) == ("engine", (4, 8, 4), 8)
    assert (context.unit, context.shape, context.count) == ("engine", (4, 4, 8), 8)
    assert scores.cycles == engine_cycles(4, 4, 2, 4, 8, 4)
    assert context.cycles == engine_cycles(4, 4, 2, 4, 4, 8)
    # raw: int32 out, X and W int8, a bias table of one column tile per job
    assert scores.payload_bytes == 4 * 8 + 8 * 4 + 4 * 4 * 4 + 4 * 4
    assert engines.cycles == host.cycles + 8 * (scores.cycles + context.cycles)
    assert (host.host_macs, engines.host_macs) == (2 * 2 * 2 * 16 * 16, 0)


def test_engine_attention_bad_input_is_one_line():
    with pytest.raises(ConfigError, match=r"attention must be one of host, engines"):
        predicted_step_cycles(TINY, TINY_ENGINE, TINY_LAYER, attention="gpu")
    # the boundary: P·V's K is seq_len, so seq_len = max_k = 32 fits and 33 does not
    layer = layer_config("onthefly", rows=4, cols=4, mode="lora-fa", max_m=36, max_k=16,
                         max_n=16, max_r=4)
    engine = EngineConfig(rows=4, cols=4, pack=2, max_m=36, max_k=32, max_n=40)
    fits = ModelShape(**{**TINY.__dict__, "seq_len": 32, "batch": 1})
    assert predicted_step_cycles(fits, engine, layer, attention="engines").calls[-1].shape \
        == (32, 32, 8)
    long = ModelShape(**{**TINY.__dict__, "seq_len": 33, "batch": 1})
    with pytest.raises(ConfigError, match=r"^engine max_k must be at least seq_len = 33 "
                                          r"\(the attention jobs\) \(got 32\)$"):
        predicted_step_cycles(long, engine, layer, attention="engines")
    predicted_step_cycles(long, engine, layer)           # host attention needs no such K
