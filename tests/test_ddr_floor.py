"""The DDR floor ``benchmarks/bench_board_step.py`` prints beside the step's bytes (issue 32,
item 5: within 2x of it), pinned to a count by hand: tensor by tensor, not the function's
formula."""
from __future__ import annotations

from benchmark_scripts import benchmark_script
from zoforge.reports.model_shape import ModelShape


def test_the_floor_counts_each_tensor_once_by_hand():
    with benchmark_script("bench_board_step") as bench:
        floor = bench.ddr_floor_bytes
    # MiniLM's shapes: T = 4 x 128 tokens, H 384, F 1536, 12 heads of L = 128 keys
    T, H, F, L, heads, blocks, forwards = 512, 384, 1536, 128, 12, 6, 4
    weights = blocks * (H * H * 4 + H * F + F * H)          # q, k, v, out; ffn in, out
    per_block = (T * H                                       # qkv reads x
                 + 3 * T * H                                 # writes q, k, v
                 + 2 * T * H                                 # scores read q, k
                 + 4 * T * L * heads + 4 * T * L * heads     # int32 S written, read
                 + T * L * heads + T * L * heads             # int8 P written, read
                 + T * H + T * H                             # context reads v, writes
                 + T * H + T * H                             # attn_out reads, writes
                 + T * H + T * F                             # ffn_in reads, writes
                 + T * F + T * H)                            # ffn_out reads, writes
    assert floor(ModelShape(blocks=6, batch=4, seq_len=128, queries=2)) == \
        weights + forwards * blocks * per_block == 293_732_352
    # two blocks, one query (2 forwards): the terms scale apart
    small = ModelShape(blocks=2, batch=2, seq_len=16, queries=1, hidden=32, ffn=64, heads=2)
    t, h, f, l, n = 32, 32, 64, 16, 2
    assert floor(small) == 2 * (4 * h * h + 2 * h * f) + 2 * 2 * (
        12 * t * h + 2 * t * f + 10 * t * l * n)


def test_attention_s_round_trip_counts_by_hand():
    """The bytes ``bench_board_step.py`` prints as attention's DDR round trip: per batch
    row, head and run of a block (one run below ``first_adapted``, 2q above), Q·K^T writes
    L x L int32 scores, the softmax reads them and writes L x L int8 P, P·V reads P: 10 L^2.
    MiniLM's priced shape gives docs/accelerator.md's 189 MB (1,152 x 160 KiB)."""
    from zoforge.hw.accel.config import AcceleratorConfig
    from zoforge.hw.accel.schedule import step_schedule
    with benchmark_script("bench_board_step") as bench:
        round_trip = bench.attention_round_trip_bytes
    small = ModelShape(blocks=2, batch=3, seq_len=16, queries=2, hidden=32, ffn=64, heads=2)
    accel = AcceleratorConfig(softmax_units=1)
    for first_adapted, runs in ((0, 4 + 4), (1, 1 + 4)):
        schedule = step_schedule(small, accel, first_adapted, attention="engines",
                                 nonlinear="integer")
        assert round_trip(schedule) == runs * 3 * 2 * (4 + 4 + 1 + 1) * 16 * 16, first_adapted
    minilm = step_schedule(ModelShape(blocks=6, batch=4, seq_len=128, queries=2),
                           AcceleratorConfig(softmax_units=2, softmax_lanes=10,
                                             engine_max_m=128, engine_max_k=1536,
                                             engine_max_n=256),
                           0, attention="engines", nonlinear="integer")
    assert round_trip(minilm) == 1_152 * 160 * 1024 == 188_743_680


def test_the_attention_link_s_counts_in_the_docs():
    """docs/accelerator.md's count of what an engine -> softmax link would need and save,
    derived by hand: each scores job's int32 Y written and its softmax job's X read (2 x 4
    L^2 of the 10 L^2 round trip), 1,152 x 128 KiB for MiniLM; the reorder buffer of a job's
    L x L int32 in 1K x 32 BRAM36, doubled, for six engines, beside the composed design's
    BRAM18 before the links (its table's design row) out of the XCZU9EG's 1,824."""
    import re
    from pathlib import Path

    from zoforge.boards.registry import get_board
    from zoforge.hw.accel.config import AcceleratorConfig
    from zoforge.hw.accel.schedule import step_schedule
    minilm = step_schedule(ModelShape(blocks=6, batch=4, seq_len=128, queries=2),
                           AcceleratorConfig(softmax_units=2, softmax_lanes=10,
                                             engine_max_m=128, engine_max_k=1536,
                                             engine_max_n=256),
                           0, attention="engines", nonlinear="integer")
    linked = sum(t.payload_bytes for t in minilm.transfers
                 if (t.name.endswith(".scores.y") and t.write)
                 or (t.unit == "softmax" and t.role == "x"))
    assert linked == 1_152 * 2 * 4 * 128 * 128 == 150_994_944
    text = " ".join((Path(__file__).parent.parent / "docs" / "accelerator.md").read_text()
                    .split())
    assert f"{linked / 1e6:.0f} MB a step" in text                       # 151 MB
    buffer = 128 * 128 * 4                                               # 64 KiB a job
    bram36 = buffer // (1024 * 4)                                        # 16
    added = 6 * 2 * bram36 * 2                                           # BRAM18, doubled
    assert f"64 KiB, {bram36} BRAM36" in text and f"{added} BRAM18 for six engines" in text
    # the composed design before the links (its table's design row: the count was made
    # for it; the linked design's table holds the links' BRAM already)
    design = int(re.search(r"\| the design \| \| [\d,]+ \([\d.]+ %\) \| [\d,]+ \([\d.]+ %\) "
                           r"\| ([\d,]+) \(", text).group(1).replace(",", ""))
    capacity = get_board("zcu102").capacities["BRAM18"]
    assert f"design's {design:,} of {capacity:,} then {100 * (design + added) / capacity:.0f} %" \
        in text
