"""GeluUnit (hw/nonlinear/gelu.py) in Amaranth's simulator against
``zoforge.golden.finetune.integer_ops.int_gelu``, value by value: several input scales
(``GeluParams.of``, the finest and coarsest the golden makes constants for, MiniLM's), the
corners (both ends of int16, 0, +-1, +-beta and +-(beta +- 1), values past the clip where
the erf saturates), random idle cycles on the input and back-pressure on the output; the
credits (exactly BUFFER_BEATS beats taken while the output stalls, then one a cycle); the
latency and the cycle model :func:`gelu_cycles`; units made for coarser scales (narrower);
the multiplier blocks; the constants' widths; lint."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from amaranth.back import verilog
from amaranth.sim import Simulator

from zoforge.golden.finetune.integer_ops import (ERF_BITS, MAX_SCALE, MIN_SCALE, GeluParams,
                                                 int_gelu)
from zoforge.hw.export import to_verilog
from zoforge.hw.nonlinear.gelu import (BETA_BITS, BUFFER_BEATS, GAMMA_BITS, LATENCY,
                                       GeluUnit, GeluWidths, gelu_cycles, gelu_registers,
                                       output_layout)
from zoforge.sim.lint import lint_verilog
from stream_bench import run_stream

LANES = 4
Q_LOW, Q_HIGH = -2 ** 15, 2 ** 15 - 1          # int16; the golden's |q| < 2^15 and -2^15
#: The default run: the finest and coarsest scales (the widest and narrowest constants) and
#: MiniLM's order (its GELU inputs: 2.6e-4 to 7.5e-4); more, slow.
SCALES = [MIN_SCALE, 3.1e-4, MAX_SCALE]
SLOW_SCALES = [2.0 ** -20, 1e-4, 7.5e-4, 1e-3, 2.0 ** -9]


def corners(p: GeluParams) -> list[int]:
    """Both ends, zero, +-1 and the clip points +-beta, +-(beta +- 1), inside int16."""
    points = {Q_LOW, Q_LOW + 1, Q_HIGH, Q_HIGH - 1, 0, 1, -1}
    for v in (p.beta - 1, p.beta, p.beta + 1):
        points |= {v, -v}
    return sorted(v for v in points if Q_LOW <= v <= Q_HIGH)


def inputs(p: GeluParams, count: int, seed: int) -> np.ndarray:
    """``count`` int16 values: the corners, values past the clip (erf = +-one), values in
    [-beta, beta] (the erf's curve) and the whole range."""
    rng = np.random.default_rng(seed)
    clip = min(p.beta, Q_HIGH)
    parts = [np.array(corners(p)),
             rng.integers(-clip, clip + 1, count // 2),
             rng.integers(Q_LOW, Q_HIGH + 1, count // 4)]
    if p.beta < Q_HIGH:                                        # the erf saturates there
        past = rng.integers(p.beta, Q_HIGH + 1, count // 8)
        parts += [past, -past]
    q = np.concatenate(parts)
    q = np.concatenate([q, rng.integers(Q_LOW, Q_HIGH + 1, max(0, count - len(q)))])
    return rng.permutation(q[:max(count, len(corners(p)))])


def expected(q: np.ndarray, p: GeluParams) -> np.ndarray:
    return int_gelu(torch.from_numpy(q.astype(np.int64)), p).numpy()


def simulate(q: np.ndarray, p: GeluParams, seed: int, idle: float = 0.3,
             stall: float = 0.4, lanes: int = LANES, hold: int = 0,
             min_scale: float = MIN_SCALE):
    """``q`` (padded with zeros to whole beats) through the unit with random input idling
    and output back-pressure (``hold`` cycles of o.ready low first); returns the output
    values in order, the beats' ``last`` flags, the cycles from each beat's input transfer
    to its output transfer, and the cycles from the first input transfer to the last
    output transfer, both counted."""
    dut = GeluUnit(lanes, min_scale)
    beats = -(-len(q) // lanes)
    rows = np.zeros(beats * lanes, np.int64)
    rows[:len(q)] = q
    rows = rows.reshape(beats, lanes)
    payloads = [{"q": rows[r].tolist(), "last": int(r == beats - 1)} for r in range(beats)]
    run = run_stream(dut, payloads, gelu_registers(p, min_scale), output_layout(lanes), "y",
                     lanes, seed, idle, stall, hold, hold + 20 * beats + 4 * LATENCY + 20)
    assert len(run.out) == beats, "the unit lost or held beats"
    values = np.array(run.out, np.int64).reshape(-1)[:len(q)]
    latencies = [d - a for d, a in zip(run.delivered, run.accepted)]
    return values, run.lasts, latencies, run.delivered[-1] - run.accepted[0] + 1


def check(scale: float, count: int, seed: int, min_scale: float = MIN_SCALE):
    p = GeluParams.of(scale)
    q = inputs(p, count, seed)
    want = expected(q, p)
    got, lasts, latencies, _ = simulate(q, p, seed, min_scale=min_scale)
    np.testing.assert_array_equal(got, want)
    assert lasts == [0] * (len(lasts) - 1) + [1]
    assert min(latencies) >= LATENCY               # exactly LATENCY: the cycle-model test
    # the corners and both sides of the clip reached
    assert set(corners(p)) <= set(q.tolist())
    one = p.one
    assert (q >= p.beta).any() == (p.beta <= Q_HIGH)
    if p.beta <= Q_HIGH:                              # erf = one: y = 2 one q
        past = q >= p.beta
        assert (want[past] == 2 * one * q[past]).all() and (want[q <= -p.beta] == 0).all()


@pytest.mark.parametrize("scale", SCALES)
def test_equals_int_gelu_under_backpressure_and_idle(scale):
    check(scale, 240, seed=int(scale * 2 ** 30) % 1000)


@pytest.mark.parametrize("min_scale,scale", [(2.0 ** -13, 2.0 ** -13), (2.0 ** -13, 1e-3),
                                             (2.5e-4, 2.5e-4)])
def test_a_unit_for_coarser_scales_is_narrower_and_exact(min_scale, scale):
    """A unit made for ``min_scale`` to MAX_SCALE: the golden's values at its finest scale
    and above, one multiplier block fewer where ``c`` fits 17 bits (2^-13: beta 15 bits),
    and the constants of a finer scale refused."""
    check(scale, 160, seed=11, min_scale=min_scale)
    widths = GeluWidths.of(min_scale)
    assert widths.beta < BETA_BITS and widths.gamma < GAMMA_BITS
    text = verilog.convert(GeluUnit(2, min_scale), name="top",
                           platform=SimpleNamespace(family="ecp5"))
    assert text.count("MULT18X18D") == 2 * (2 if widths.c <= 17 else 3)
    with pytest.raises(ValueError, match="does not fit the unit"):
        gelu_registers(GeluParams.of(min_scale / 4), min_scale)


@pytest.mark.slow
@pytest.mark.parametrize("scale", SLOW_SCALES)
def test_equals_int_gelu_at_more_scales(scale):
    check(scale, 2000, seed=int(scale * 2 ** 30) % 1000)


@pytest.mark.slow
def test_equals_int_gelu_over_every_int16_at_minilms_scale():
    p = GeluParams.of(3.1e-4)
    q = np.arange(Q_LOW, Q_HIGH + 1)
    got, _, _, _ = simulate(q, p, seed=5, idle=0.05, stall=0.05, lanes=16)
    np.testing.assert_array_equal(got, expected(q, p))


def test_a_dropped_or_repeated_beat_is_seen():
    """The comparison the tests make fails on a stream with one beat dropped or repeated
    (distinct consecutive values): it can fail."""
    p = GeluParams.of(3.1e-4)
    q = inputs(p, 64, seed=1)
    want = expected(q, p)
    beats = want.reshape(-1, LANES)
    dropped = np.concatenate([beats[:5], beats[6:], beats[-1:]]).reshape(-1)
    repeated = np.concatenate([beats[:5], beats[4:-1]]).reshape(-1)
    assert not np.array_equal(dropped, want) and not np.array_equal(repeated, want)


def test_credits_take_exactly_the_buffer_then_stream_every_cycle():
    """With ``o.ready`` held low for a long stall the unit takes exactly BUFFER_BEATS beats
    (the stages never stall, so every beat taken must fit the buffer); released, the beats
    leave one per cycle, in order, the golden's values."""
    p = GeluParams.of(1e-3)
    count = (BUFFER_BEATS + 8) * LANES
    q = inputs(p, count, seed=2)
    dut = GeluUnit(LANES)
    rows = q.reshape(-1, LANES)
    layout = output_layout(LANES)
    taken, out, gaps = [], [], []

    async def send(ctx):
        for name, value in gelu_registers(p).items():
            ctx.set(getattr(dut.config, name), value)
        for cycle in range(6 * len(rows) + 60):
            r = len(taken)
            if r < len(rows):
                ctx.set(dut.i.payload, {"q": rows[r].tolist(), "last": 0})
            ctx.set(dut.i.valid, r < len(rows))
            _, _, ready = await ctx.tick().sample(dut.i.ready)
            if ready and r < len(rows):
                taken.append(cycle)

    async def receive(ctx):
        ctx.set(dut.o.ready, 0)
        await ctx.tick().repeat(4 * BUFFER_BEATS)               # a long stall
        gaps.append(len(taken))
        ctx.set(dut.o.ready, 1)
        previous = None
        for cycle in range(4 * len(rows)):
            _, _, valid, payload = await ctx.tick().sample(dut.o.valid,
                                                             dut.o.payload.as_value())
            if valid:
                beat = layout.from_bits(payload)
                out.append([int(beat.y[j]) for j in range(LANES)])
                if previous is not None:
                    gaps.append(cycle - previous)
                previous = cycle

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(send)
    sim.add_testbench(receive)
    sim.run_until(1e-8 * (10 * len(rows) + 200))
    assert gaps[0] == BUFFER_BEATS
    np.testing.assert_array_equal(np.array(out, np.int64).reshape(-1), expected(q, p))
    assert set(gaps[1:]) == {1}
    assert taken[BUFFER_BEATS:] == list(range(taken[BUFFER_BEATS],
                                              taken[BUFFER_BEATS] + len(rows) - BUFFER_BEATS))


@pytest.mark.parametrize("n_values,lanes", [(1, 4), (4, 4), (37, 4), (96, 8), (50, 1)])
def test_cycle_model_is_exact_without_backpressure(n_values, lanes):
    p = GeluParams.of(3.1e-4)
    q = inputs(p, n_values, seed=n_values)[:n_values]
    got, _, latencies, cycles = simulate(q, p, seed=0, idle=0, stall=0, lanes=lanes)
    np.testing.assert_array_equal(got, expected(q, p))
    assert set(latencies) == {LATENCY}
    assert cycles == gelu_cycles(n_values, lanes)
    assert gelu_cycles(0, lanes) == 0


@pytest.mark.parametrize("scale", [MIN_SCALE, MAX_SCALE])
def test_constants_fit_at_both_ends_of_the_golden_scales(scale):
    p = GeluParams.of(scale)
    registers = gelu_registers(p)
    assert registers["offset"] == p.gamma - p.beta ** 2 >= 0
    assert registers["one"] < 2 ** ERF_BITS


def test_constants_the_unit_cannot_hold_are_refused():
    p = GeluParams.of(MIN_SCALE)
    wide = GeluParams(p.scale / 2, 2 * p.beta, 4 * p.gamma, p.shift + 2, p.one)
    with pytest.raises(ValueError, match="beta"):
        gelu_registers(wide)
    with pytest.raises(ValueError, match="not made by"):
        gelu_registers(GeluParams(p.scale, p.beta, p.gamma, p.shift, p.one + 1))


def test_lint_clean():
    """``verilator --lint-only -Wall`` with the project's waivers (hw/lint_waivers.vlt: the
    ``nonlinear_*`` tops take the engine's four, no other)."""
    top = "nonlinear_gelu"
    result = lint_verilog(to_verilog(GeluUnit(2), top), top)
    assert result.clean, result


@pytest.mark.parametrize("lanes", [1, 3])
def test_three_multiplier_blocks_a_lane(lanes):
    """Every product is a PipelinedMultiplier whose operands fit an 18 x 18 block: on an
    ECP5 platform each is one MULT18X18D with its registers (the two of ``a c``, ``q m``)."""
    text = verilog.convert(GeluUnit(lanes), name="top", platform=SimpleNamespace(family="ecp5"))
    assert text.count("MULT18X18D") == 3 * lanes
