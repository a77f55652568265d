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
