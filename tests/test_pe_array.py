# amaranth: UnusedElaboratable=no
"""The PE and the systolic array in Amaranth's simulator (before any Verilog)."""
import numpy as np
import pytest
from amaranth.sim import Simulator

from zoforge.errors import ConfigError
from zoforge.golden.engine import gemm_int32, wrap_signed
from zoforge.golden.engine_widths import accumulator_bits
from zoforge.hw.pe.array import (SystolicArray, capture_latency, min_tile_interval,
                                 read_out_interval)
from zoforge.hw.pe.pe import LATENCY as PE_LATENCY
from zoforge.hw.pe.pe import ProcessingElement


def test_pe_accumulates_and_wraps_at_32_bits():
    pe = ProcessingElement()
    steps = [(-128, -128)] * 3 + [(127, -128)]
    captured = []

    async def bench(ctx):
        for n, (a, b) in enumerate(steps):
            ctx.set(pe.a_in, a)
            ctx.set(pe.b_in, b)
            ctx.set(pe.valid_in, 1)
            ctx.set(pe.first_in, n == 0)
            ctx.set(pe.last_in, n == len(steps) - 1)
            await ctx.tick()
        ctx.set(pe.valid_in, 0)
        await ctx.tick().repeat(PE_LATENCY - 2)
        captured.append(ctx.get(pe.res[0]))          # not yet
        await ctx.tick()                             # the last step's sum is in res
        captured.append(ctx.get(pe.res[0]))
        ctx.set(pe.a_in, 5)                          # a new dot product without its last
        ctx.set(pe.valid_in, 1)
        ctx.set(pe.first_in, 1)
        ctx.set(pe.last_in, 0)
        await ctx.tick().repeat(PE_LATENCY + 3)
        captured.append(ctx.get(pe.res[0]))          # res holds until the next capture

    sim = Simulator(pe)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert captured == [0, 3 * 16384 - 127 * 128, 3 * 16384 - 127 * 128]


def _wrap32(value: int) -> int:
    return (value + (1 << 31)) % (1 << 32) - (1 << 31)


def test_first_restarts_the_sum_whatever_the_accumulator_holds():
    """16 x 16-bit operands (products up to 2^30): dot products back to back, sums wrapped
    past both ends of int32 (0x7fffffff + 1, -2^31 - 2^30) and at all-ones (-1), each
    next ``first`` restarting from its product alone; steps with ``valid`` low (their
    first / last flags high) change nothing. Against Python's integers wrapped mod 2^32."""
    rng = np.random.default_rng(5)
    big = [-32768, 32767, -1, 0, 1]
    dots = [[(-32768, -32768)] * 2 + [(1, 1)],            # 2^31 wraps to -2^31, then + 1
            [(-32768, 32767)] * 3,                         # below -2^31: wraps to positive
            [(-1, 1)],                                     # -1: every accumulator bit set
            [(32767, 32767), (-32768, 32767)],
            [(-32768, -32768)] * 4]                        # 2^32: wraps to 0
    dots += [[(int(rng.choice(big)) if rng.random() < 0.5 else int(rng.integers(-32768, 32768)),
               int(rng.choice(big)) if rng.random() < 0.5 else int(rng.integers(-32768, 32768)))
              for _ in range(int(rng.integers(1, 5)))] for _ in range(40)]
    steps = []              # (a, b, valid, first, last)
    for n, dot in enumerate(dots):
        for k, (a, b) in enumerate(dot):
            steps.append((a, b, 1, k == 0, k == len(dot) - 1))
            if rng.random() < 0.2:                         # a bubble with both flags high
                steps.append((int(rng.integers(-32768, 32768)), 7, 0, 1, 1))
    pe = ProcessingElement(a_bits=16, b_bits=16)
    seen = []

    async def bench(ctx):
        for a, b, valid, first, last in steps + [(0, 0, 0, 0, 0)] * PE_LATENCY:
            ctx.set(pe.a_in, a)
            ctx.set(pe.b_in, b)
            ctx.set(pe.valid_in, valid)
            ctx.set(pe.first_in, first)
            ctx.set(pe.last_in, last)
            await ctx.tick()
            seen.append(ctx.get(pe.res[0]))

    sim = Simulator(pe)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    got, total = [], 0
    for t, (a, b, valid, first, last) in enumerate(steps):
        if valid:
            total = a * b + (0 if first else total)
            if last:
                got.append((seen[t + PE_LATENCY - 1], _wrap32(total)))
    assert len(got) == len(dots)
    assert [g for g, _ in got] == [want for _, want in got]
    assert {-(1 << 31) + 1, 0, -1} <= {want for _, want in got}


def _run_tiles(rows, cols, tiles, slack=0, paired=False, early=0, acc_bits=32,
               skewed_drain=False, interval=None):
    """Feed ``tiles`` (list of (X [R,K], W [K,C])) as close as the array allows (tile starts
    ``max(K, interval) + slack`` cycles apart, ``interval`` the array's
    ``min_tile_interval`` unless given); drain each when the array says its sums are ready
    (``early`` cycles before that): R reads of ``res_out`` from ``capture_latency`` cycles
    after the last step, top row first, ``sel`` counting the rows from ``drain_lead``
    cycles before the first read. Returns the drained tiles."""
    array = SystolicArray(rows, cols, paired=paired, acc_bits=acc_bits,
                          skewed_drain=skewed_drain)
    interval = array.min_tile_interval if interval is None else interval
    gap = max(0, interval - tiles[0][0].shape[1]) + slack
    drained = []

    async def feeder(ctx):
        for x, w in tiles:
            k_steps = x.shape[1]
            for k in range(k_steps):
                for i in range(rows):
                    ctx.set(array.a[i], int(x[i, k]))
                for j in range(cols):
                    ctx.set(array.b[j], int(w[k, j]))
                ctx.set(array.valid, 1)
                ctx.set(array.first, k == 0)
                ctx.set(array.last, k == k_steps - 1)
                await ctx.tick()
            ctx.set(array.valid, 0)
            if gap:
                await ctx.tick().repeat(gap)

    async def drainer(ctx):
        t, starts = 0, []
        for x, _ in tiles:
            t += x.shape[1]
            starts.append(t - 1 + array.capture_latency - early)
            t += gap
        sels = {s - array.drain_lead + n: n for s in starts for n in range(rows)}
        reads = {s + n: (index, n) for index, s in enumerate(starts) for n in range(rows)}
        rows_out = [[[None] * cols] * rows for _ in tiles]      # a row never read: None
        for cycle in range(max(starts) + rows):
            ctx.set(array.sel, sels.get(cycle, 0))
            if cycle in reads:
                index, n = reads[cycle]
                rows_out[index][n] = [ctx.get(array.res_out[j]) for j in range(cols)]
            await ctx.tick()
        drained.extend(np.array(tile, dtype=object if any(None in row for row in tile)
                                else None) for tile in rows_out)

    sim = Simulator(array)
    sim.add_clock(1e-6)
    sim.add_testbench(feeder)
    sim.add_testbench(drainer)
    sim.run()
    return drained


def _tiles(rows, cols, k):
    rng = np.random.default_rng(rows * 100 + cols * 10 + k)
    tiles = []
    for n in range(3):
        x = rng.choice([-128, 127], size=(rows, k)) if n == 1 else \
            rng.integers(-128, 128, size=(rows, k))
        w = rng.choice([-128, 127], size=(k, cols)) if n == 1 else \
            rng.integers(-128, 128, size=(k, cols))
        tiles.append((x, w))
    return tiles


@pytest.mark.parametrize("rows, cols, k", [(2, 3, 4), (3, 2, 9), (4, 4, 12)])
def test_array_back_to_back_tiles_at_the_minimum_interval(rows, cols, k):
    tiles = _tiles(rows, cols, k)
    drained = _run_tiles(rows, cols, tiles)
    for (x, w), got in zip(tiles, drained):
        assert (got == x @ w).all()


@pytest.mark.parametrize("rows, cols, k", [(2, 3, 4), (4, 2, 9), (4, 4, 1), (6, 3, 12)])
def test_paired_array_back_to_back_tiles_at_the_minimum_interval(rows, cols, k):
    """Rows in pairs on one packed multiplier each: the same products, corners (tile 1: all
    operands at -128 / 127) included, drained when the array says: R / 2 + C - 2 + LATENCY
    cycles after the last step, R / 2 sooner than the plain array."""
    tiles = _tiles(rows, cols, k)
    drained = _run_tiles(rows, cols, tiles, paired=True)
    for (x, w), got in zip(tiles, drained):
        assert (got == x @ w).all()
    assert capture_latency(rows, cols, paired=True) == rows // 2 + cols - 2 + PE_LATENCY
    assert capture_latency(rows, cols) - capture_latency(rows, cols, paired=True) == rows // 2


@pytest.mark.parametrize("rows, cols, paired, skewed", [
    (4, 3, True, False), (6, 2, True, False), (3, 3, False, False), (4, 3, True, True),
    (4, 3, False, True), (6, 2, True, True)])
def test_read_early_by_the_unit_rows_is_wrong(rows, cols, paired, skewed):
    """The read-out (top row first) reads row r of column j where it was captured, the
    bottom unit row's last: read U - 1 cycles before capture_latency after the last step
    the sums are all there (the top row, captured first, is read first), U cycles before
    the top row of column C-1 (plain) or j (skewed) is not yet captured. The drain keeps
    capture_latency (the shift chains' exact latency, the cycles the models count)."""
    tiles = _tiles(rows, cols, 5)
    units = rows // 2 if paired else rows
    exact = _run_tiles(rows, cols, tiles, paired=paired, skewed_drain=skewed,
                       early=units - 1)
    assert all((got == x @ w).all() for (x, w), got in zip(tiles, exact))
    drained = _run_tiles(rows, cols, tiles, paired=paired, skewed_drain=skewed, early=units)
    assert any((got != x @ w).any() for (x, w), got in zip(tiles, drained))


@pytest.mark.parametrize("rows, a_bits", [(3, 8), (4, 16)])
def test_a_paired_array_needs_even_rows_and_int8(rows, a_bits):
    with pytest.raises(ValueError, match="even number of rows and INT8"):
        SystolicArray(rows, 2, a_bits=a_bits, paired=True)


@pytest.mark.parametrize("rows, cols, paired", [(3, 2, False), (4, 3, False), (4, 3, True),
                                                (6, 2, True)])
def test_the_read_out_s_own_interval_is_exact(rows, cols, paired):
    """The plain read-out's own bound, R + C - 1 (:func:`read_out_interval`, below the
    feeders' 2R + C): tiles that far apart are exact, one cycle closer lose sums (the next
    tile's capture before the read of a row)."""
    tiles = _tiles(rows, cols, 1)
    bound = read_out_interval(rows, cols)
    assert bound == rows + cols - 1 < min_tile_interval(rows, cols, paired)
    for slack, exact in ((0, True), (-1, False)):
        drained = _run_tiles(rows, cols, tiles, paired=paired, interval=bound, slack=slack)
        assert all((got == x @ w).all() for (x, w), got in zip(tiles, drained)) == exact


def _corner_tiles(rows, cols, k):
    """Tiles of K steps: every product -128 x -128 (the largest sum, K·2^14), every one
    -128 x 127 (the most negative, -K·16256), both in one tile (column by column), signs
    alternating along K (16384, -16256, ...), and random operands."""
    rng = np.random.default_rng(k)
    column = np.where(np.arange(cols) % 2, 127, -128)
    alternating = np.where(np.arange(k) % 2, 127, -128)
    return [(np.full((rows, k), -128), np.full((k, cols), -128)),
            (np.full((rows, k), -128), np.full((k, cols), 127)),
            (np.full((rows, k), -128), np.tile(column, (k, 1))),
            (np.tile(alternating, (rows, 1)), np.full((k, cols), -128)),
            (rng.integers(-128, 128, size=(rows, k)), rng.integers(-128, 128, size=(k, cols)))]


def _golden(x, w, bits=32):
    """The golden engine's int32 sums of X @ W, wrapped to ``bits``."""
    return wrap_signed(gemm_int32(x.astype(np.int8), w.astype(np.int8)).long(), bits).numpy()


# K = 1 (16 bits, a product's width), K = 2^(w-15) - 1 (the most a width holds) and 2^(w-15)
# (one bit more), at 17 / 18 and 20 / 21 bits
NARROW = [(1, 16), (3, 17), (4, 18), (31, 20), (32, 21)]


@pytest.mark.parametrize("k, bits", NARROW)
@pytest.mark.parametrize("rows, paired", [(2, False), (4, True)])
def test_narrow_accumulators_exact_at_the_corners(k, bits, rows, paired):
    """An array whose accumulators are ``accumulator_bits(K)`` wide gives the golden
    engine's sums at the corners, sign-extended to 32 bits, value by value."""
    assert accumulator_bits(k) == bits
    tiles = _corner_tiles(rows, 2, k)
    drained = _run_tiles(rows, 2, tiles, paired=paired, acc_bits=bits)
    for (x, w), got in zip(tiles, drained):
        assert (got == _golden(x, w)).all()
        assert (got == x @ w).all()


@pytest.mark.parametrize("k, bits", NARROW[1:])
def test_one_bit_narrower_wraps_at_the_corners(k, bits):
    """The bound is tight: one bit fewer wraps K·2^14 (every product -128 x -128); the most
    negative sum -K·16256 wraps too below the step (K = 2^(w-15) - 1), fits at it."""
    tiles = _corner_tiles(4, 2, k)
    drained = _run_tiles(4, 2, tiles, paired=True, acc_bits=bits - 1)
    for (x, w), got in zip(tiles, drained):
        assert (got == _golden(x, w, bits - 1)).all()          # the narrower wrap, exactly
    assert (drained[0] != _golden(*tiles[0])).all()
    negative_wraps = (drained[1] != _golden(*tiles[1])).all()
    assert negative_wraps == (k & (k + 1) == 0)     # K = 2^n - 1


@pytest.mark.parametrize("a_bits, acc_bits", [(8, 15), (8, 33), (16, 23)])
def test_accumulators_narrower_than_a_product_or_wider_than_32_are_refused(a_bits, acc_bits):
    with pytest.raises(ConfigError, match=rf"acc_bits must be .*{a_bits + 8}.*32"):
        SystolicArray(2, 2, a_bits=a_bits, acc_bits=acc_bits)



# -- the skewed drain: each column drains right after its own captures ----------------------

@pytest.mark.parametrize("rows, cols, k, paired", [
    (1, 3, 1, False), (2, 3, 1, False), (3, 2, 2, False), (4, 16, 8, False),
    (4, 3, 1, True), (6, 2, 3, True), (8, 4, 2, True)])
def test_skewed_drain_back_to_back_at_the_feeders_minimum(rows, cols, k, paired):
    """Tiles max(U + R - 2, R) apart (U unit rows: R, or R / 2 paired; the feeders'
    interval), whatever C, with
    shallow tiles (K below the interval, so the interval decides), corners included: every
    sum as the plain product; the interval independent of C."""
    tiles = _tiles(rows, cols, k)
    drained = _run_tiles(rows, cols, tiles, paired=paired, skewed_drain=True)
    for (x, w), got in zip(tiles, drained):
        assert (got == x @ w).all()
    units = rows // 2 if paired else rows
    assert min_tile_interval(rows, cols, paired, True) == max(units + rows - 2, rows)
    assert min_tile_interval(rows, cols + 7, paired, True) == max(units + rows - 2, rows)


@pytest.mark.parametrize("rows, cols, paired", [(3, 2, False), (4, 6, False), (6, 2, True),
                                                (8, 3, True)])
def test_skewed_drain_at_the_read_out_s_own_interval(rows, cols, paired):
    """The skewed read-out's own bound, R (:func:`read_out_interval`; the feeders keep
    ``max(U + R - 2, R)``): tiles that far apart are exact, one cycle closer lose sums."""
    tiles = _tiles(rows, cols, 1)
    bound = read_out_interval(rows, cols, skewed_drain=True)
    assert bound == rows <= min_tile_interval(rows, cols, paired, True)
    exact = _run_tiles(rows, cols, tiles, paired=paired, skewed_drain=True, interval=bound)
    assert all((got == x @ w).all() for (x, w), got in zip(tiles, exact))
    drained = _run_tiles(rows, cols, tiles, paired=paired, skewed_drain=True,
                         interval=bound, slack=-1)
    assert any((got != x @ w).any() for (x, w), got in zip(tiles, drained))


