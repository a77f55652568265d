"""The ZO layer's packed ``load_x``: the host layout pinned to a second derivation, the token
buffer's walk and read adapter in simulation, and the RTL bit-exact with K not a multiple
of the k-steps per beat.

The reference packing is written from the layout's definition with plain Python bytes: the
bytes of X in (token tile, k, token) order, P = 4 * max(R, C) // C k-steps per beat, the
last block of a tile zero-padded, each beat zero-padded to 4 * max(R, C) bytes and read as
little-endian 32-bit lanes.
"""
from __future__ import annotations

import numpy as np
import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.sim import Simulator

from zoforge.golden.zolayer import layer_config
from zoforge.hw.pe.tiles import address_bits
from zoforge.hw.zolayer.buffers import layer_tiling
from zoforge.hw.zolayer.layouts import token_words
from zoforge.hw.zolayer.token_buffer import TokenReader, TokenWalk, token_buffer
from zoforge.sim.zolayer_cosim import ZoCosimOptions
from zolayer_checks import run_bit_exact

# (R, C, M, K): R != C both ways, K a multiple of P and not, P not a power of two (3 x 2: 6);
# K within one word (K = P, K < P: k // P has no bits) over several token tiles
SHAPES = [(4, 4, 8, 8), (4, 4, 8, 6), (2, 4, 8, 7), (4, 2, 6, 11), (4, 2, 4, 16),
          (3, 2, 4, 13), (1, 4, 4, 3), (8, 8, 16, 9), (4, 4, 16, 4), (2, 16, 64, 2)]


def reference_beats(x, rows, cols):
    m, k = x.shape
    lanes = max(rows, cols)
    pack = 4 * lanes // cols
    beats = []
    for tile in range(m // cols):
        for first in range(0, k, pack):
            stream = bytearray()
            for kk in range(first, first + pack):
                for j in range(cols):
                    stream.append(int(x[tile * cols + j, kk]) & 0xFF if kk < k else 0)
            stream += bytes(4 * lanes - len(stream))
            beats.append([int.from_bytes(stream[4 * l:4 * l + 4], "little")
                          for l in range(lanes)])
    return np.array(beats, dtype=np.int64).reshape(-1, lanes)


@pytest.mark.parametrize("rows, cols, m, k", SHAPES)
def test_token_words_match_the_reference_packing(rows, cols, m, k):
    x = np.random.default_rng(rows * 100 + cols * 10 + k).integers(-128, 128, (m, k))
    words = token_words(x, cols, max(rows, cols))
    reference = reference_beats(x, rows, cols)
    pack = 4 * max(rows, cols) // cols
    assert words.shape == reference.shape == (m // cols * -(-k // pack), max(rows, cols))
    np.testing.assert_array_equal(words, reference)


def test_token_words_by_hand():
    # 4 x 4: P = 4; K = 5 -> two beats per tile, the second holds k = 4 and three zero k-steps
    x = np.arange(20).reshape(4, 5) - 10        # x[j, k] = 5j + k - 10
    words = token_words(x, 4, 4)
    assert words.shape == (2, 4)
    # beat 0, lane kk: bytes x[0..3, kk]
    assert words[0, 0] == int.from_bytes(bytes(v & 0xFF for v in (-10, -5, 0, 5)), "little")
    assert words[1, 0] == int.from_bytes(bytes(v & 0xFF for v in (-6, -1, 4, 9)), "little")
    assert list(words[1, 1:]) == [0, 0, 0]


@pytest.mark.parametrize("rows, cols, m, k", [s for s in SHAPES if s[2] >= 2 * s[1]])
def test_token_walk_visits_every_beat_once(rows, cols, m, k):
    config = layer_config(rows=rows, cols=cols, max_m=m, max_k=16, max_n=rows, max_r=rows)
    tiling, lanes = layer_tiling(config), max(rows, cols)
    walk = TokenWalk(tiling, 16, lanes)
    pack = 4 * lanes // cols
    expected = [(word, tile) for tile in range(m // cols) for word in range(-(-k // pack))]
    seen = []

    async def testbench(ctx):
        ctx.set(walk.inner, k)
        ctx.set(walk.outer, m)
        ctx.set(walk.restart, 1)
        await ctx.tick()
        ctx.set(walk.restart, 0)
        for cycle in range(3 * len(expected)):
            advance = cycle % 3 != 1                  # idle cycles hold the walk
            ctx.set(walk.advance, advance)
            if advance:
                seen.append((ctx.get(walk.word), ctx.get(walk.tile), ctx.get(walk.last)))
                if seen[-1][2]:
                    break
            await ctx.tick()

    sim = Simulator(walk)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()
    assert [(w, t) for w, t, _ in seen] == expected
    assert [last for _, _, last in seen] == [0] * (len(expected) - 1) + [1]


@pytest.mark.parametrize("rows, cols, m, k", SHAPES)
def test_token_reader_reads_one_k_step_two_cycles_later(rows, cols, m, k):
    """The feeder's port on the packed memory: X[tile*C + j, k] two cycles after the read
    (the register behind the memory, then the k-step picked), held while ``en`` is low; the
    memory holds the host's beats, word Cat(word, tile)."""
    config = layer_config(rows=rows, cols=cols, max_m=m, max_k=k, max_n=rows, max_r=rows)
    tiling, lanes = layer_tiling(config), max(rows, cols)
    x = np.random.default_rng(k).integers(-128, 128, (m, k))
    beats = token_words(x, cols, lanes)
    pack = 4 * lanes // cols
    per_tile = -(-k // pack)
    word_bits, k_bits = address_bits(per_tile), address_bits(k)
    buffer = token_buffer(tiling, k, lanes)
    depth = max(buffer.depth, 2)
    init = [buffer.shape.from_bits(0)] * depth
    for index, beat in enumerate(beats):              # the loader's write: a beat per word
        tile, word = divmod(index, per_tile)
        value = sum(int(lane) << (32 * l) for l, lane in enumerate(beat))
        init[(tile << word_bits) | word] = buffer.shape.from_bits(
            value & ((1 << (8 * pack * cols)) - 1))
    top = Module()
    top.submodules.reader = reader = TokenReader(tiling, k, lanes)
    top.submodules.memory = memory = Memory(shape=buffer.shape, depth=depth, init=init)
    wiring.connect(top, reader.packed_rd, memory.read_port())
    rng = np.random.default_rng(m + k)
    reads = [(int(rng.integers(m // cols)), int(rng.integers(k))) for _ in range(40)]
    reads += [(tile, kk) for tile in range(m // cols) for kk in range(k)]

    def token_byte(value):
        return value - 256 if value >= 128 else value

    async def testbench(ctx):
        previous, before = None, None      # the last read, as of this and the last cycle
        for index, (tile, kk) in enumerate(reads):
            en = index % 5 != 3
            ctx.set(reader.x_rd.addr, (tile << k_bits) | kk)
            ctx.set(reader.x_rd.en, en)
            await ctx.tick()
            before = previous
            if en:
                previous = (tile, kk)
            if before is None:
                continue
            got = ctx.get(reader.x_rd.data.as_value())
            expected = [int(x[before[0] * cols + j, before[1]]) for j in range(cols)]
            assert [token_byte((got >> (8 * j)) & 0xFF) for j in range(cols)] == expected, (
                index, before)

    sim = Simulator(top)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()


# 4 x 2 (R != C) CI's: the reader's shapes with R != C run above in simulation by default
@pytest.mark.parametrize("rows, cols, mode, k", [
    (4, 4, "lora-fa", 6),
    pytest.param(4, 2, "full", 11, marks=(pytest.mark.slow, pytest.mark.ci))])
def test_rtl_loads_k_not_a_multiple_of_the_beat(rows, cols, mode, k, simulator):
    """Bit-exact with the last block of each tile zero-padded (4 x 4: P = 4, K = 6; 4 x 2:
    P = 8, K = 11), and ``load_x`` takes one cycle per beat: CYCLES = M/C * ceil(K/P) + 2 (the
CTRL write to the first beat, and the registered finish)."""
    config = layer_config(rows=rows, cols=cols, mode=mode, max_m=16, max_k=16, max_n=16,
                          max_r=8)
    options = ZoCosimOptions(steps=1, q=1, m=8, k=k, n=8, r=4, seed=k, grad_shift=30,
                             simulator=simulator)
    results = run_bit_exact(config, options)
    pack = 4 * max(rows, cols) // cols
    loads = [job["cycles"] for job in results["jobs"] if job["job"] == "load_x"]
    assert loads and set(loads) == {8 // cols * -(-k // pack) + 2}
