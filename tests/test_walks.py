"""The walks and counters of the array's and the ZO layer's blocks, on Amaranth's simulator,
against plain Python loops that enumerate the expected sequence.

Each walk is driven through every combination of small inner and outer dimensions (one,
two and three inner steps and panels / tiles, the zero dimensions the blocks accept, the
widest values their ports take), one walk after the other in one simulation: a walk is
restarted the cycle after its last word, sometimes in the middle of a walk (the new walk
must start over), sometimes with ``advance`` high in the same cycle (``restart`` wins),
with idle cycles in between (the walk must hold). On every cycle the walk's outputs must
be those of the word the loop says it is at.

* :class:`~zoforge.hw.zolayer.walk.PanelWalk`: panels of ``step`` features (outer) by
  k-steps (inner); ``k``, ``panel``, ``flat``, ``panel_end``, ``last``.
* :class:`~zoforge.hw.zolayer.token_buffer.TokenWalk`: ``load_x``'s beats, token tiles of
  C (outer) by words of P k-steps (inner); ``word``, ``tile``, ``last``.
* :func:`~zoforge.hw.pe.tiles.tile_order`: the result rows, panels of weight lanes
  (outer) by activation tiles (inner) by the R rows of a tile; both sides of the array
  carrying the weights, and one row (its end tests unregistered).
* :class:`~zoforge.hw.pe.feeder.Feeder`: the k-steps it sends into the array (the
  words it reads, the k-step picked from a word, ``first`` / ``last``, the bank of each
  panel, ``w_release``), when tiles begin (``min_gap``), and that no third tile begins
  while two result banks are still unread.
* :class:`~zoforge.hw.pe.drain.Drain`: the rows it writes into the result banks
  (top row first, banks alternating per tile), its read-out's ``sel`` and ``drained``.
"""
from __future__ import annotations

import random
from itertools import product

import pytest
from amaranth import Module, ResetInserter
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from zoforge.hw.pe.drain import Drain
from zoforge.hw.pe.feeder import READ_LATENCY, Feeder
from zoforge.hw.pe.tiles import Tiling, address_bits, tile_order
from zoforge.hw.zolayer.token_buffer import TokenWalk
from zoforge.hw.zolayer.walk import PanelWalk


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def simulate(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


async def drive_walks(ctx, walk, jobs, expected_of, observe, outputs_of_last, seed):
    """Runs ``jobs`` ((inner, outer) pairs) one after the other on a walk with ``restart``,
    ``advance``, ``inner``, ``outer``: before every clock edge, the walk's outputs
    (``observe``) must be the word the expected list (``expected_of(inner, outer)``) says it
    is at (words advanced past since the restart). A walk ends at its last word (its
    ``last`` output, ``outputs_of_last``, must be set exactly there) or, for one job in
    five, in its middle: the next job's restart comes instead of the next advance."""
    rng = random.Random(seed)
    restart_with_advance = 0
    for inner, outer in jobs:
        expected = expected_of(inner, outer)
        cut = rng.randrange(len(expected)) if rng.random() < 0.2 else None
        ctx.set(walk.inner, inner)
        ctx.set(walk.outer, outer)
        ctx.set(walk.restart, 1)
        advance = rng.random() < 0.5                 # restart wins over advance
        restart_with_advance += advance
        ctx.set(walk.advance, advance)
        await ctx.tick()
        ctx.set(walk.restart, 0)
        index = 0
        for _ in range(3 * len(expected) + 8):
            got = observe(ctx)
            assert got == expected[index], (inner, outer, index, got, expected[index])
            assert outputs_of_last(got) == (index == len(expected) - 1), (inner, outer, index)
            if index == cut:
                break
            advance = rng.random() < 0.7
            ctx.set(walk.advance, advance)
            if advance and index == len(expected) - 1:
                break                                # the next job restarts right after
            await ctx.tick()
            index += advance
        else:
            raise AssertionError(f"walk ({inner}, {outer}) did not end")
        ctx.set(walk.advance, 0)
    assert restart_with_advance > 0


# -- PanelWalk ----------------------------------------------------------------------------

def panel_walk_words(step: int, inner: int, outer: int):
    """(k, panel, flat, panel_end, last) of every word: panels at features 0, step, ... below
    ``outer`` (at least one), k-steps 0 .. inner-1 (at least one)."""
    panels, steps = max(1, ceil_div(outer, step)), max(1, inner)
    words = []
    for panel in range(panels):
        for k in range(steps):
            panel_end = k == steps - 1
            words.append((k, panel, len(words), int(panel_end),
                          int(panel_end and panel == panels - 1)))
    return words


def check_panel_walk(step, dim_bits, jobs, seed):
    flat_bits = address_bits((1 << dim_bits) * (1 << (dim_bits + 1)) + 1)
    walk = PanelWalk(step, dim_bits, flat_bits)

    def observe(ctx):
        return tuple(ctx.get(s) for s in (walk.k, walk.panel, walk.flat, walk.panel_end,
                                          walk.last))

    async def bench(ctx):
        await drive_walks(ctx, walk, jobs, lambda i, o: panel_walk_words(step, i, o),
                          observe, lambda word: word[4] == 1, seed)

    simulate(walk, bench)


def test_panel_walk_words_by_hand():
    """The expected list itself, written out: step 2, 2 k-steps, 3 features (two panels, the
    second one short)."""
    assert panel_walk_words(2, 2, 3) == [(0, 0, 0, 0, 0), (1, 0, 1, 1, 0),
                                         (0, 1, 2, 0, 0), (1, 1, 3, 1, 1)]
    assert panel_walk_words(4, 0, 0) == [(0, 0, 0, 1, 1)]


@pytest.mark.parametrize("step", [1, 2, 3])
def test_panel_walk_every_small_shape(step):
    """Every ``inner`` its 2-bit port takes (0 .. 3 k-steps) by every ``outer`` of its 3-bit
    port (0 .. 7 features: one to seven panels of ``step``, the last one short when
    ``step`` does not divide it), walk after walk: k, panel, flat address, panel_end and
    last on every cycle, as :func:`panel_walk_words`."""
    jobs = list(product(range(4), range(8)))
    random.Random(step).shuffle(jobs)
    check_panel_walk(step, 2, jobs, seed=step)


def test_panel_walk_at_the_layers_width():
    """The layer's 16-bit dimensions (DIM_BITS): one k-step, one feature, and shapes whose
    end tests are one feature or one k-step either side of a panel's edge (R = 4)."""
    jobs = [(1, 1), (1, 4), (1, 5), (3, 8), (2, 9), (0, 3), (5, 12), (1, 13), (4, 1)]
    check_panel_walk(4, 16, jobs, seed=11)


# -- TokenWalk ----------------------------------------------------------------------------

def token_walk_beats(cols: int, pack: int, inner: int, outer: int):
    """(word, tile) of every beat: token tiles of ``cols`` below ``outer`` (at least one),
    words of ``pack`` k-steps below ``inner`` (at least one)."""
    return [(word, tile) for tile in range(max(1, ceil_div(outer, cols)))
            for word in range(max(1, ceil_div(inner, pack)))]


@pytest.mark.parametrize("rows, cols", [(2, 2), (3, 2)])
def test_token_walk_every_small_shape(rows, cols):
    """K from 0 to three words of P k-steps (P = 4 and, with 3 lanes of 2 tokens, 6: every
    K either side of a word's edge) by M from 0 to three token tiles, walk after walk:
    ``word``, ``tile`` on every cycle and ``last`` on the last beat only."""
    lanes = max(rows, cols)
    pack = 4 * lanes // cols                         # a beat's bytes over C tokens
    tiles = 3
    tiling = Tiling(rows=rows, cols=cols, weights_on="a", panel_words=3 * pack, tiles=tiles,
                    dim_bits=5)
    walk = TokenWalk(tiling, 3 * pack, lanes)
    assert walk.pack == pack
    jobs = list(product(range(3 * pack + 1), range(tiles * cols + 1)))
    random.Random(pack).shuffle(jobs)

    def expected_of(inner, outer):
        beats = token_walk_beats(cols, pack, inner, outer)
        return [(word, tile, int(i == len(beats) - 1)) for i, (word, tile) in enumerate(beats)]

    def observe(ctx):
        return ctx.get(walk.word), ctx.get(walk.tile), ctx.get(walk.last)

    async def bench(ctx):
        await drive_walks(ctx, walk, jobs, expected_of, observe, lambda beat: beat[2] == 1,
                          seed=rows)

    simulate(walk, bench)


# -- tile_order ---------------------------------------------------------------------------

class TileOrderHarness(wiring.Component):
    """:func:`tile_order`'s counters in a block of their own, cleared by ``clear`` (as the
    output stage clears them at a job's start)."""

    def __init__(self, tiling: Tiling):
        self.tiling = tiling
        super().__init__({
            "clear": In(1), "advance": In(1),
            "m_dim": In(tiling.dim_bits), "n_dim": In(tiling.dim_bits),
            "row": Out(address_bits(tiling.rows)), "tile": Out(tiling.tile_bits),
            "panel": Out(tiling.dim_bits), "first_weight": Out(tiling.dim_bits + 1),
            "tile_end": Out(1), "job_end": Out(1),
        })

    def elaborate(self, platform):
        inner = Module()
        order = tile_order(inner, self.tiling, self.advance, self.m_dim, self.n_dim)
        inner.d.comb += [self.row.eq(order.row), self.tile.eq(order.tile),
                         self.panel.eq(order.panel), self.first_weight.eq(order.first_weight),
                         self.tile_end.eq(order.tile_end), self.job_end.eq(order.job_end)]
        m = Module()
        m.submodules.order = ResetInserter(self.clear)(inner)
        return m


def result_rows(rows: int, act_lanes: int, weight_lanes: int, m_dim: int, n_dim: int):
    """(row, tile, panel, first weight, tile_end, job_end) of every result row."""
    panels, tiles = max(1, ceil_div(n_dim, weight_lanes)), max(1, ceil_div(m_dim, act_lanes))
    out = []
    for panel in range(panels):
        for tile in range(tiles):
            for row in range(rows):
                end = row == rows - 1
                out.append((row, tile, panel, panel * weight_lanes, int(end),
                            int(end and tile == tiles - 1 and panel == panels - 1)))
    return out


@pytest.mark.parametrize("rows, cols, weights_on", [(2, 3, "a"), (3, 2, "b"), (1, 2, "b"),
                                                    (1, 3, "a")])
def test_tile_order_every_small_shape(rows, cols, weights_on):
    """Rows, activation tiles and weight panels in order, with the panel's first weight and
    both end flags, for M and N at 0, 1, one lane short of / at / one past a tile or panel,
    two and three of them; rows != cols both ways so that the activation and weight lanes
    (R and C, swapped with the weights' side) cannot be swapped unnoticed; one row
    (unregistered end tests) both ways."""
    tiles = 3
    tiling = Tiling(rows=rows, cols=cols, weights_on=weights_on, panel_words=2, tiles=tiles,
                    dim_bits=4)
    act, weight = (rows, cols) if weights_on == "b" else (cols, rows)
    assert (tiling.act_lanes, tiling.weight_lanes) == (act, weight)
    dut = TileOrderHarness(tiling)

    def corners(lanes):
        return sorted({0, 1, lanes - 1, lanes, lanes + 1, 2 * lanes, 3 * lanes})

    jobs = list(product(corners(act), corners(weight)))
    random.Random(rows * 10 + cols).shuffle(jobs)

    async def bench(ctx):
        rng = random.Random(cols)
        for m_dim, n_dim in jobs:
            expected = result_rows(rows, act, weight, m_dim, n_dim)
            ctx.set(dut.m_dim, m_dim)
            ctx.set(dut.n_dim, n_dim)
            ctx.set(dut.clear, 1)
            await ctx.tick()
            ctx.set(dut.clear, 0)
            index = 0
            while True:
                got = tuple(ctx.get(s) for s in (dut.row, dut.tile, dut.panel,
                                                 dut.first_weight, dut.tile_end, dut.job_end))
                assert got == expected[index], (m_dim, n_dim, index, got, expected[index])
                if index == len(expected) - 1:
                    break
                advance = rng.random() < 0.75
                ctx.set(dut.advance, advance)
                await ctx.tick()
                ctx.set(dut.advance, 0)
                index += advance

    simulate(dut, bench)


# -- Feeder -------------------------------------------------------------------------------

LANE_CODE = 4          # operand value = ((source * 8 + word) * 4 + k-step in word) * 4 + lane


def operand(source: int, word: int, step: int, lane: int) -> int:
    return ((source * 8 + word) * LANE_CODE + step) * LANE_CODE + lane


class FeederHarness(wiring.Component):
    """A feeder on real memories whose every operand says where it was read: a weight
    lane's value ``operand(bank, word, k-step of the word, lane)``, an activation's
    ``operand(tile, word, ...)``; the weight banks always both full, ``tile_done`` from
    the bench."""

    def __init__(self, tiling: Tiling, min_gap: int):
        self.tiling = tiling
        self.feeder = Feeder(tiling, min_gap)
        t = tiling
        super().__init__({
            "start": In(1), "busy": In(1), "m": In(t.dim_bits), "k": In(t.dim_bits),
            "n": In(t.dim_bits), "tile_done": In(1),
            "valid": Out(1), "first": Out(1), "last": Out(1), "w_release": Out(1),
            "x": Out(t.acts()), "w": Out(t.weights()),
        })

    def memory(self, buffer, sources, lanes):
        words = 1 << self.tiling.word_bits             # addresses Cat(word, source)
        init = [[[operand(source, word, step, lane) for lane in range(lanes)]
                 for step in range(self.tiling.pack)]
                for source in range(sources) for word in range(words)]
        return Memory(shape=buffer.shape, depth=len(init), init=init)

    def elaborate(self, platform):
        m = Module()
        t, feeder = self.tiling, self.feeder
        m.submodules.feeder = feeder
        m.submodules.w_mem = w_mem = self.memory(t.weight_banks(), 2, t.weight_lanes)
        m.submodules.x_mem = x_mem = self.memory(t.act_buffer(), t.tiles, t.act_lanes)
        wiring.connect(m, feeder.w_rd, w_mem.read_port())
        wiring.connect(m, feeder.x_rd, x_mem.read_port())
        job = feeder.job
        m.d.comb += [job.start.eq(self.start), job.busy.eq(self.busy), job.m.eq(self.m),
                     job.k.eq(self.k), job.n.eq(self.n), feeder.panels.w_banks.eq(2),
                     self.w_release.eq(feeder.panels.w_release),
                     feeder.tile_done.eq(self.tile_done),
                     self.valid.eq(feeder.valid), self.first.eq(feeder.first),
                     self.last.eq(feeder.last), self.x.eq(feeder.x), self.w.eq(feeder.w.payload)]
        return m


def feeder_steps(tiling: Tiling, m_dim: int, k_dim: int, n_dim: int):
    """(x, w, first, last) of every k-step the feeder sends: panels (outer), activation
    tiles, k-steps 0 .. pack * ceil(K / pack) - 1 (a word's unused k-steps are sent too),
    panel p's weights from bank p % 2."""
    P = tiling.pack
    steps = P * max(1, ceil_div(k_dim, P))
    out = []
    for panel in range(max(1, ceil_div(n_dim, tiling.weight_lanes))):
        for tile in range(max(1, ceil_div(m_dim, tiling.act_lanes))):
            for k in range(steps):
                x = [operand(tile, k // P, k % P, lane) for lane in range(tiling.act_lanes)]
                w = [operand(panel % 2, k // P, k % P, lane)
                     for lane in range(tiling.weight_lanes)]
                out.append((x, w, int(k == 0), int(k == steps - 1)))
    return out


def run_feeder(tiling, min_gap, jobs, done_after=1):
    """Runs ``jobs`` (M, K, N) one after the other; returns, per job, the k-steps seen
    (x, w, first, last), the cycles (from the job's start) of each tile's first k-step and
    of each ``w_release``. ``tile_done`` pulses ``done_after`` cycles after each tile's
    first k-step leaves the feeder (None: never)."""
    dut = FeederHarness(tiling, min_gap)
    results = []

    async def bench(ctx):
        for m_dim, k_dim, n_dim in jobs:
            total = len(feeder_steps(tiling, m_dim, k_dim, n_dim))
            for signal, value in ((dut.m, m_dim), (dut.k, k_dim), (dut.n, n_dim),
                                  (dut.start, 1), (dut.busy, 0)):
                ctx.set(signal, value)
            await ctx.tick()
            ctx.set(dut.start, 0)
            ctx.set(dut.busy, 1)
            seen, firsts, releases, dones, tail = [], [], [], [], 0
            budget = 4 * total + 8 * (min_gap + READ_LATENCY) + 40
            for cycle in range(budget):
                ctx.set(dut.tile_done, cycle in dones)
                if ctx.get(dut.w_release):
                    releases.append(cycle)
                if ctx.get(dut.valid):
                    step = ([ctx.get(dut.x[i]) for i in range(tiling.act_lanes)],
                            [ctx.get(dut.w[i]) for i in range(tiling.weight_lanes)],
                            ctx.get(dut.first), ctx.get(dut.last))
                    seen.append(step)
                    if step[2]:
                        firsts.append(cycle)
                        if done_after is not None:
                            dones.append(cycle + done_after)
                else:
                    assert not ctx.get(dut.first) and not ctx.get(dut.last)
                await ctx.tick()
                if len(seen) >= total and done_after is not None:
                    tail += 1                    # a few cycles more: nothing else comes
                    if tail > READ_LATENCY + 4 and cycle > max(dones):
                        break
            ctx.set(dut.busy, 0)
            ctx.set(dut.tile_done, 0)
            results.append((seen, firsts, releases))

    simulate(dut, bench)
    return results


# M and N at one lane past R = 2 and C = 3 too (3 activations: two tiles, 3 weights: one
# panel), and with four tiles and three panels (7 activations, 9 weights: the end tests
# after the counters' second step), so that the activation and weight lanes' steps cannot
# be swapped unnoticed
FEEDER_JOBS = [(m, k, n) for k in (1, 2, 3)
               for m, n in ((1, 1), (3, 4), (4, 3), (5, 5), (2, 6), (7, 9))]


@pytest.mark.parametrize("pack", [1, 2])
def test_feeder_sends_every_k_step_in_order(pack):
    """One, two and three k-steps (with two k-steps per word: a word's unused k-step, the
    last word's first k-step last) by one, two and three activation tiles (R = 2 on the
    rows; four) and weight panels (C = 3 on the columns), job after job: each k-step's
    activations and weights (read from the right tile / bank, word and k-step of the word,
    every lane), ``first`` and ``last`` as :func:`feeder_steps`, and ``w_release`` once per
    panel, with the panel's last k-step."""
    tiling = Tiling(rows=2, cols=3, weights_on="b", panel_words=4, tiles=4, dim_bits=4,
                    weight_bits=12, act_bits=12, pack=pack)
    results = run_feeder(tiling, 1, FEEDER_JOBS)
    for (m_dim, k_dim, n_dim), (seen, firsts, releases) in zip(FEEDER_JOBS, results):
        expected = feeder_steps(tiling, m_dim, k_dim, n_dim)
        assert seen == expected, (m_dim, k_dim, n_dim)
        steps = pack * ceil_div(k_dim, pack)
        tiles = ceil_div(m_dim, 2)
        # a release with the step of a panel's last k-step, READ_LATENCY cycles before it
        # leaves: the last step of tile tiles - 1 of each panel
        last_steps = [firsts[(p + 1) * tiles - 1] + steps - 1 for p in range(ceil_div(n_dim, 3))]
        assert releases == [c - READ_LATENCY for c in last_steps], (m_dim, k_dim, n_dim)


@pytest.mark.parametrize("min_gap, k_dim", [(5, 2), (5, 7), (6, 6)])
def test_feeder_tiles_begin_min_gap_apart(min_gap, k_dim):
    """With the result banks freed at once, a tile begins ``max(min_gap, k-steps)`` cycles
    after the one before (a tile shorter than the gap waits, a longer one is followed
    without a gap, equal both ways), over two panels of two tiles."""
    tiling = Tiling(rows=2, cols=3, weights_on="b", panel_words=8, tiles=2, dim_bits=4,
                    weight_bits=12, act_bits=12)
    ((seen, firsts, _),) = run_feeder(tiling, min_gap, [(4, k_dim, 6)])
    assert seen == feeder_steps(tiling, 4, k_dim, 6)
    spacing = max(min_gap, k_dim)
    assert [b - a for a, b in zip(firsts, firsts[1:])] == [spacing] * 3


def test_feeder_waits_for_a_free_result_bank():
    """Two tiles in flight at most: with no ``tile_done`` the feeder sends two tiles and then
    nothing, however long it waits."""
    tiling = Tiling(rows=2, cols=3, weights_on="b", panel_words=2, tiles=3, dim_bits=4,
                    weight_bits=12, act_bits=12)
    ((seen, firsts, _),) = run_feeder(tiling, 1, [(6, 2, 3)], done_after=None)
    assert seen == feeder_steps(tiling, 6, 2, 3)[:4]
    assert len(firsts) == 2


# -- Drain --------------------------------------------------------------------------------

def drain_writes(rows: int, latency: int, captures: list[int]):
    """cycle -> (row address, bank, drained) of every result-bank write: tile t captured at
    cycle c writes its rows top row first at c + latency .. + rows - 1 into bank t % 2."""
    writes = {}
    for tile, cycle in enumerate(captures):
        for i in range(rows):
            writes[cycle + latency + i] = (i, tile % 2, int(i == rows - 1))
    return writes


def drain_sels(rows: int, latency: int, lead: int, captures: list[int]) -> dict[int, int]:
    """cycle -> ``sel`` (the row the array reads out) where it counts: tile t captured at
    cycle c reads row i at c + latency - lead + i (``lead`` cycles before its write);
    0 elsewhere."""
    return {cycle + latency - lead + i: i for cycle in captures for i in range(rows)}


@pytest.mark.parametrize("rows, latency, lead", [(3, 2, 0), (1, 4, 0), (4, 1, 0), (3, 3, 2),
                                                 (4, 2, 1), (2, 1, 0)])
def test_drain_writes_rows_top_first_into_alternating_banks(rows, latency, lead):
    """Tiles captured back to back (every R cycles), one apart by more, then a start (the
    next tile goes to bank 0 again): on every cycle the write enable, its row address and
    bank, ``drained`` as :func:`drain_writes` and ``sel`` as :func:`drain_sels`, the
    written row the array's ``res`` of that cycle; three rows (a row address that is not a
    power of two), one row, two and four, with and without a lead (a skewed drain's: the
    read's own row counter on an earlier tap)."""
    tiling = Tiling(rows=rows, cols=2, weights_on="b", panel_words=2, tiles=2, dim_bits=4)
    dut = Drain(tiling, latency, lead)
    row_bits = address_bits(rows)
    first = [0, rows, 2 * rows, 3 * rows + 2, 4 * rows + 5]
    start_at = first[-1] + rows + latency + 1
    second = [start_at + 1 + c for c in (0, rows)]
    expected = {**drain_writes(rows, latency, first), **drain_writes(rows, latency, second)}
    sels = drain_sels(rows, latency, lead, first + second)
    assert len(sels) == 7 * rows

    async def bench(ctx):
        for cycle in range(second[-1] + rows + latency + 3):
            ctx.set(dut.capture, cycle in first or cycle in second)
            ctx.set(dut.start, cycle == start_at)
            ctx.set(dut.res, [cycle * 10 + i for i in range(2)])
            want = expected.get(cycle)
            assert ctx.get(dut.res_wr.en) == (want is not None), cycle
            assert ctx.get(dut.sel) == sels.get(cycle, 0), cycle
            if want is not None:
                row, bank, drained = want
                assert ctx.get(dut.res_wr.addr) == row | bank << row_bits, cycle
                assert [ctx.get(dut.res_wr.data[i]) for i in range(2)] == [cycle * 10,
                                                                          cycle * 10 + 1]
                assert ctx.get(dut.drained) == drained, cycle
            else:
                assert not ctx.get(dut.drained), cycle
            await ctx.tick()

    simulate(dut, bench)
