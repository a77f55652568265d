"""The ZO layer's blocks on their own (Amaranth simulator), value by value against the
golden model's functions (:func:`perturbed_operand`, :func:`applied_update`), with idle and
back-pressure on every stream and the formats' corner values; the branch spread against a
plain loop over its lanes (:func:`spread_steps`) and the token reader's division against
Python's ``divmod`` for every value of its width."""
from __future__ import annotations

import random

import pytest
import torch
from amaranth import Module, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.sim import Simulator

from zoforge.golden.zolayer.config import Formats
from zoforge.golden.zolayer.model import applied_update, perturbed_operand
from zoforge.hw.zolayer.perturb import LATENCY, PerturbUnit
from zoforge.hw.zolayer.spread import BranchSpread, minus_lanes
from zoforge.hw.zolayer.token_buffer import divide
from zoforge.hw.zolayer.update import _CHUNK, UpdateUnit, _splits

ROWS, Z_LANES, Z_WIDTH = 3, 5, 12
M_MIN, M_MAX = -(1 << 23), (1 << 23) - 1
Z_MIN, Z_MAX = -(1 << (Z_WIDTH - 1)), (1 << (Z_WIDTH - 1)) - 1


def _pack(values, width):
    return sum((int(v) & ((1 << width) - 1)) << (width * i) for i, v in enumerate(values))


def _pick(rng, low, high):
    return rng.choice([low, high, 0, -1, rng.randint(low, high)])


def test_perturb_unit_matches_the_golden_operand():
    dut = PerturbUnit(ROWS, Z_LANES, Z_WIDTH)
    rng = random.Random(3)
    seen = {"high": 0, "low": 0, "moved": 0, "stalled": 0}
    expected = []                                 # operands of the words taken, in order

    async def bench(ctx):
        for _ in range(4000):
            master = [_pick(rng, M_MIN, M_MAX) for _ in range(ROWS)]
            z = [_pick(rng, Z_MIN, Z_MAX) for _ in range(Z_LANES)]
            perturb = rng.random() < 0.8
            minus = rng.choice([0, (1 << ROWS) - 1, rng.randrange(1 << ROWS)])   # per lane
            eps_shift = rng.choice([0, 1, Formats.EPS_SHIFT_MAX, rng.randint(0, 31)])
            valid, z_valid, ready = (rng.random() < 0.7 for _ in range(3))
            for signal, value in ((dut.words.payload, master),
                                  (dut.z.payload, _pack(z, Z_WIDTH)), (dut.perturb, perturb),
                                  (dut.minus, minus), (dut.eps_shift, eps_shift),
                                  (dut.words.valid, valid), (dut.z.valid, z_valid),
                                  (dut.out.ready, ready)):
                ctx.set(signal, value)
            out_valid = ctx.get(dut.out.valid)
            advance = not out_valid or ready      # back-pressure stalls every stage
            z_ok = z_valid or not perturb
            assert ctx.get(dut.words.ready) == (advance and z_ok)
            assert ctx.get(dut.z.ready) == (perturb and valid and advance)
            if out_valid and ready:
                got = [ctx.get(dut.out.payload[i]) for i in range(ROWS)]
                want, sign = expected.pop(0)
                assert got == want, (got, want)
                seen["high"] += (1 << 15) - 1 in got and sign != 0
                seen["low"] += -(1 << 15) in got and sign != 0
            seen["stalled"] += out_valid and not ready
            if valid and advance and z_ok:
                signs = [0 if not perturb else (-1 if minus >> i & 1 else 1)
                         for i in range(ROWS)]
                want = [int(perturbed_operand(torch.tensor([master[i]]), torch.tensor([z[i]]),
                                              sign, eps_shift)[0])
                        for i, sign in enumerate(signs)]
                sign = 0 if not perturb else 1
                expected.append((want, sign))
                seen["moved"] += 1
            await ctx.tick()
        assert len(expected) <= LATENCY                # the rest is still in the pipeline

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert min(seen.values()) > 20, seen          # both saturation ends, many transfers


def test_perturb_unit_latency():
    """Without stalls a word taken at a clock edge is on ``out`` LATENCY edges later."""
    dut = PerturbUnit(ROWS, Z_LANES, Z_WIDTH)

    async def bench(ctx):
        ctx.set(dut.out.ready, 1)
        ctx.set(dut.perturb, 1)
        ctx.set(dut.z.valid, 1)
        ctx.set(dut.words.payload, [256, -512, 1 << 12])
        ctx.set(dut.z.payload, _pack([1, 2, 3, 4, 5], Z_WIDTH))
        ctx.set(dut.words.valid, 1)
        await ctx.tick()
        ctx.set(dut.words.valid, 0)
        for _ in range(LATENCY - 1):
            assert not ctx.get(dut.out.valid)
            await ctx.tick()
        assert ctx.get(dut.out.valid)
        assert [ctx.get(dut.out.payload[i]) for i in range(ROWS)] == [2, 0, 19]
        await ctx.tick()
        assert not ctx.get(dut.out.valid)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


class _UpdateHarness(wiring.Component):
    """The update unit with its two memories, as the layer wires them (T's read data through
    the register of :class:`~zoforge.hw.zolayer.share.MasterPorts`)."""

    def __init__(self, master, accumulator):
        self.unit = UpdateUnit(ROWS, Z_LANES, Z_WIDTH, dim_bits=8, addr_bits=4)
        acc_bits = self.unit.acc_bits
        self.t_mem = Memory(shape=data.ArrayLayout(signed(Formats.MASTER_BITS), ROWS),
                            depth=16, init=[[*w] for w in master])
        self.d_mem = Memory(shape=data.ArrayLayout(signed(acc_bits), ROWS), depth=16,
                            init=[[*w] for w in accumulator])
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.unit, m.submodules.t, m.submodules.d = self.unit, self.t_mem, self.d_mem
        u = self.unit
        t_rd = self.t_mem.read_port()
        m.d.comb += [t_rd.addr.eq(u.t_rd.addr), t_rd.en.eq(u.t_rd.en)]
        with m.If(u.t_rd.en):
            m.d.sync += u.t_rd.data.eq(t_rd.data)
        wiring.connect(m, u.t_wr, self.t_mem.write_port())
        wiring.connect(m, u.d_rd, self.d_mem.read_port())
        wiring.connect(m, u.d_wr, self.d_mem.write_port())
        return m


async def _update_job(ctx, u, apply, rng, z_words=()):
    """One job of the update unit ``u`` (the harness's walk: 2 panels of R features x 3
    k-steps), the z transfers offered with idle cycles, until ``done``."""
    ctx.set(u.apply, apply)
    ctx.set(u.inner, 3)
    ctx.set(u.outer, 2 * ROWS)
    ctx.set(u.start, 1)
    await ctx.tick()
    ctx.set(u.start, 0)
    pending = list(z_words)
    for _ in range(200):
        if pending:
            valid = rng.random() < 0.6              # idle cycles on the z stream
            ctx.set(u.z.valid, valid)
            ctx.set(u.z.payload, _pack(pending[0], Z_WIDTH))
            taken = valid and ctx.get(u.z.ready)
        else:
            ctx.set(u.z.valid, 0)
            taken = False
        done = ctx.get(u.done)
        await ctx.tick()
        if taken:
            pending.pop(0)
        if done:
            break
    assert not pending and not ctx.get(u.busy)


def _word_lanes(ctx, memory, word):
    value = ctx.get(memory.data[word])
    return [value[i] for i in range(ROWS)]


def _simulate(harness, bench):
    sim = Simulator(harness)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("eta_mult, eta_shift", [((1 << 16) - 1, 9), (12345, 1), (1, 0),
                                                 (40000, 8), (777, 47)])
def test_update_unit_accumulates_and_applies_like_the_golden_model(eta_mult, eta_shift):
    """Shifts 0, 1 (ties), 8 (a multiple of 8 only), 9 (both parts of the shift) and 47."""
    rng = random.Random(5 + eta_shift)
    words = 6                                      # 2 panels of R features x 3 k-steps
    master = [[_pick(rng, M_MIN, M_MAX) for _ in range(ROWS)] for _ in range(words)]
    harness = _UpdateHarness(master, [[0] * ROWS] * words)
    grads = [(1 << 15) - 1, -(1 << 15), 7]
    transfers = [[[_pick(rng, Z_MIN, Z_MAX) for _ in range(Z_LANES)] for _ in range(words)]
                 for _ in grads]
    u = harness.unit

    async def bench(ctx):
        for g, z_words in zip(grads, transfers):
            ctx.set(u.g, g)
            await _update_job(ctx, u, 0, rng, z_words)
        d = [_word_lanes(ctx, harness.d_mem, w) for w in range(words)]
        want_d = sum(g * torch.tensor([t[:ROWS] for t in z]) for g, z in zip(grads, transfers))
        assert d == want_d.tolist()
        ctx.set(u.eta_mult, eta_mult)
        ctx.set(u.eta_shift, eta_shift)
        await _update_job(ctx, u, 1, rng)
        t = [_word_lanes(ctx, harness.t_mem, w) for w in range(words)]
        want_t = applied_update(torch.tensor(master), want_d, eta_mult, eta_shift)
        assert t == want_t.tolist()
        if eta_shift < 16:
            assert {M_MIN, M_MAX} <= {v for row in t for v in row}   # both saturation ends
        assert all(_word_lanes(ctx, harness.d_mem, w) == [0] * ROWS for w in range(words))

    _simulate(harness, bench)


@pytest.mark.parametrize("eta_shift", [0, 1])
def test_update_unit_saturates_exactly_at_both_ends(eta_shift):
    """An apply whose T - delta lands on, one and two past, and one inside each end of T's
    24 bits (eta_mult 1; at eta_shift 1 every delta a rounding tie, D = 2(T - v) - 1):
    T is min(max(v, -2^23), 2^23 - 1) by hand and the golden model's value."""
    rng = random.Random(17 + eta_shift)
    ends = [M_MAX - 1, M_MAX, M_MAX + 1, M_MAX + 2, M_MIN + 1, M_MIN, M_MIN - 1, M_MIN - 2]
    targets = ends + [M_MAX + (1 << 23), M_MIN - (1 << 23), 0, -1] + ends[::-1][:6]
    master = [rng.choice([M_MIN, M_MAX, 0, rng.randint(M_MIN, M_MAX)]) for _ in targets]
    accum = [((t - v) << eta_shift) - eta_shift for t, v in zip(master, targets)]
    words = len(targets) // ROWS
    harness = _UpdateHarness(*([values[w * ROWS:(w + 1) * ROWS] for w in range(words)]
                               for values in (master, accum)))
    u = harness.unit

    async def bench(ctx):
        ctx.set(u.eta_mult, 1)
        ctx.set(u.eta_shift, eta_shift)
        await _update_job(ctx, u, 1, rng)
        got = [v for w in range(words) for v in _word_lanes(ctx, harness.t_mem, w)]
        assert got == [min(max(v, M_MIN), M_MAX) for v in targets]
        golden = applied_update(torch.tensor(master), torch.tensor(accum), 1, eta_shift)
        assert got == golden.tolist()

    _simulate(harness, bench)


def test_update_unit_saturates_where_t_leaves_26_bits():
    """The apply's bounds where its t = (2 * D * eta_mult) >> eta_shift (here D: eta_mult 1,
    eta_shift 1) is one inside, on and one past +/-2^25 (the 27-bit difference 2T - t and
    t's own range test meet there), against T at both ends and 0: T is
    min(max(T - ((D + 1) >> 1), -2^23), 2^23 - 1) by hand and the golden model's value."""
    rng = random.Random(29)
    edges = [(1 << 25) - 1, 1 << 25, (1 << 25) + 1, -(1 << 25) + 1, -(1 << 25), -(1 << 25) - 1]
    pairs = [(t, d) for t in (M_MAX, M_MIN, 0) for d in edges]
    master, accum = ([pair[j] for pair in pairs] for j in (0, 1))
    words = len(pairs) // ROWS
    harness = _UpdateHarness(*([values[w * ROWS:(w + 1) * ROWS] for w in range(words)]
                               for values in (master, accum)))
    u = harness.unit

    async def bench(ctx):
        ctx.set(u.eta_mult, 1)
        ctx.set(u.eta_shift, 1)
        await _update_job(ctx, u, 1, rng)
        got = [v for w in range(words) for v in _word_lanes(ctx, harness.t_mem, w)]
        assert got == [min(max(t - ((d + 1) >> 1), M_MIN), M_MAX) for t, d in pairs]
        golden = applied_update(torch.tensor(master), torch.tensor(accum), 1, 1)
        assert got == golden.tolist()

    _simulate(harness, bench)


def _lanes(value, width, count):
    """``count`` signed ``width``-bit lanes of an integer."""
    lanes = [(value >> (width * i)) & ((1 << width) - 1) for i in range(count)]
    return [v - (1 << width) if v >> (width - 1) else v for v in lanes]


def spread_steps(rows, branch_lanes, z_lanes, words, transfers, perturb):
    """(row lanes of T, row lanes of z or None) of every k-step the spread sends: word i's
    k-steps kk = 0 .. B-1, lane b*F + f carrying T_i[kk*F + f] and the z of query b // 2
    (transfer i*Q + b // 2) at kk*F + f; lanes of z past R are 0."""
    features, queries = rows // branch_lanes, branch_lanes // 2
    steps = []
    for i, word in enumerate(words):
        for kk in range(branch_lanes):
            lanes = [(b, f) for b in range(branch_lanes) for f in range(features)]
            t = [word[kk * features + f] for b, f in lanes]
            z = ([transfers[i * queries + b // 2][kk * features + f] for b, f in lanes]
                 + [0] * (z_lanes - rows)) if perturb else None
            steps.append((t, z))
    return steps


@pytest.mark.parametrize("acc", [20, 24, 28, 30, 32, 36, 40, 48])
@pytest.mark.parametrize("b_bits", [16, 24, 32])
def test_update_multiplier_chunks_cover_the_operands(acc, b_bits):
    """The update unit's operand chunks: as many as 16-bit chunks take, each at most 18 bits
    as a signed operand (an ECP5 MULT18X18D's), every bit in one chunk; b's top chunk no
    wider than a's narrowest operand where that keeps b's count (then b's chunk is the
    narrower operand of each product)."""
    a_cuts, b_cuts = _splits(acc, b_bits)
    for cuts, width in ((a_cuts, acc), (b_cuts, b_bits)):
        assert cuts[0] == 0 and cuts == sorted(set(cuts))
        assert len(cuts) == -(-width // _CHUNK)
        ends = cuts[1:] + [width]
        assert all(end - low + (end != width) <= 18 for low, end in zip(cuts, ends))
    a_ends = a_cuts[1:] + [acc]
    narrowest = min(end - low + (end != acc) for low, end in zip(a_cuts, a_ends))
    if b_bits - _CHUNK * (len(b_cuts) - 1) <= narrowest:
        assert b_bits - b_cuts[-1] <= narrowest


@pytest.mark.parametrize("rows, branch_lanes", [(4, 2), (4, 4), (8, 4)])
def test_branch_spread_sends_every_branchs_k_steps(rows, branch_lanes):
    """Words of B k-steps of F features and Q = B/2 transfers each, through the spread with
    idle inputs and a stalled output, perturbed and plain (no transfer taken, ``z_out``
    never valid), jobs one after the other with a ``restart`` that drops a word already
    taken: every k-step's T and z lanes as :func:`spread_steps` (F = 2 and 1, Q = 1 and
    2). Without stalls a k-step leaves every cycle; the minus lanes are the odd branches'."""
    features = rows // branch_lanes
    assert minus_lanes(rows, branch_lanes) == sum(
        1 << (b * features + f) for b in range(1, branch_lanes, 2) for f in range(features))
    z_lanes, queries = rows + 1, branch_lanes // 2
    dut = BranchSpread(rows, branch_lanes, z_lanes, Z_WIDTH)
    rng = random.Random(rows * branch_lanes)
    jobs = [(perturb, stall) for perturb in (1, 0, 1) for stall in (True, False)]

    async def bench(ctx):
        for perturb, stall in jobs:
            words = [[_pick(rng, M_MIN, M_MAX) for _ in range(rows)] for _ in range(4)]
            transfers = [[_pick(rng, Z_MIN, Z_MAX) for _ in range(z_lanes)]
                         for _ in range(len(words) * queries)] if perturb else []
            expected = spread_steps(rows, branch_lanes, z_lanes, words, transfers, perturb)
            words_in, z_in, seen, valid_cycles = list(words), list(transfers), [], []
            ctx.set(dut.perturb, perturb)
            for cycle in range(20 * len(expected)):
                word_valid = bool(words_in) and (not stall or rng.random() < 0.6)
                z_valid = bool(z_in) and (not stall or rng.random() < 0.6)
                ready = not stall or rng.random() < 0.6
                ctx.set(dut.words.valid, word_valid)
                ctx.set(dut.words.payload, words_in[0] if words_in else [0] * rows)
                ctx.set(dut.z.valid, z_valid)
                ctx.set(dut.z.payload, _pack(z_in[0] if z_in else [], Z_WIDTH))
                ctx.set(dut.words_out.ready, ready)
                ctx.set(dut.z_out.ready, ready)
                assert ctx.get(dut.z_out.valid) == (perturb and ctx.get(dut.words_out.valid))
                if not perturb:
                    assert not ctx.get(dut.z.ready)
                if ctx.get(dut.words_out.valid):
                    valid_cycles.append(cycle)
                    if ready:
                        t = [ctx.get(dut.words_out.payload[i]) for i in range(rows)]
                        z = (_lanes(ctx.get(dut.z_out.payload), Z_WIDTH, z_lanes)
                             if perturb else None)
                        seen.append((t, z))
                took_word = word_valid and ctx.get(dut.words.ready)
                took_z = z_valid and ctx.get(dut.z.ready)
                await ctx.tick()
                if took_word:
                    words_in.pop(0)
                if took_z:
                    z_in.pop(0)
                if len(seen) == len(expected):
                    break
            assert seen == expected, (perturb, stall)
            if not stall:                                   # one k-step per cycle
                assert valid_cycles == list(range(valid_cycles[0],
                                                  valid_cycles[0] + len(expected)))
            # a word taken but not sent is dropped by the restart
            ctx.set(dut.words_out.ready, 0)
            ctx.set(dut.words.valid, 1)
            ctx.set(dut.words.payload, [1] * rows)
            await ctx.tick()
            ctx.set(dut.words.valid, 0)
            ctx.set(dut.restart, 1)
            await ctx.tick()
            ctx.set(dut.restart, 0)
            assert not ctx.get(dut.words_out.valid)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("width, divisor", [(6, 3), (7, 5), (7, 6), (5, 7), (8, 12), (6, 4),
                                            (3, 1), (4, 15)])
def test_divide_is_exact_for_every_value_of_its_width(width, divisor):
    """The token reader's division by P (a multiply by a rounded-up reciprocal, or bit
    slices for a power of two): quotient and remainder equal Python's divmod for every
    value below 2^width, the widest included."""
    top = Module()
    value = Signal(width)
    quotient, remainder = divide(value, divisor)
    q_out, r_out = Signal(width), Signal(max(1, (divisor - 1).bit_length()))
    top.d.comb += [q_out.eq(quotient), r_out.eq(remainder)]

    async def bench(ctx):
        for v in range(1 << width):
            ctx.set(value, v)
            assert (ctx.get(q_out), ctx.get(r_out)) == divmod(v, divisor), v

    sim = Simulator(top)
    sim.add_testbench(bench)
    sim.run()
