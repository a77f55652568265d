"""RequantStream (hw/pe/requant.py) in Amaranth's simulator against
``zoforge.golden.engine.requantize``: random idle cycles on the input stream and random
back-pressure on the output stream, rows that saturate at both ends, shifts 0 and 47, ReLU,
raw output, per-tensor and per-column parameters, with and without bias."""
import numpy as np
import pytest
import torch
from amaranth.sim import Simulator

from zoforge.golden.engine import RequantParams, requantize
from zoforge.golden.engine_widths import SHIFT_MAX
from zoforge.hw.pe.requant import BUFFER_ROWS, LATENCY, RequantStream, output_layout

LANES = 3
ROWS = 120
INT32 = 1 << 32
MODES = {   # name: (bias_en, per_channel, raw, relu)
    "per-tensor": (True, False, False, False),
    "per-column-relu": (True, True, False, True),
    "per-column-no-bias": (False, True, False, False),
    "raw": (True, False, True, True),       # relu is ignored in raw mode
}


def wrap32(values):
    return (np.asarray(values, np.int64) + INT32 // 2) % INT32 - INT32 // 2


def random_rows(rng: np.random.Generator):
    """acc, bias, mult, shift: [ROWS, LANES] int64, with the corners forced in."""
    acc = rng.integers(-2 ** 31, 2 ** 31, size=(ROWS, LANES))
    acc[::7] = rng.integers(-3000, 3000, size=acc[::7].shape)     # lands inside int8 often
    acc[1::11] = rng.choice([-2 ** 31, 2 ** 31 - 1], size=acc[1::11].shape)
    bias = rng.integers(-2 ** 31, 2 ** 31, size=(ROWS, LANES))
    bias[::3] = rng.integers(-100, 100, size=bias[::3].shape)
    mult = rng.integers(0, 1 << 16, size=(ROWS, LANES))
    mult[::5] = rng.choice([0, 1, (1 << 16) - 1], size=mult[::5].shape)
    shift = rng.integers(0, SHIFT_MAX + 1, size=(ROWS, LANES))
    shift[::4] = rng.choice([0, 8, 40, SHIFT_MAX], size=shift[::4].shape)
    return acc, bias, mult, shift


def expected_rows(acc, bias, mult, shift, mode, tensor):
    bias_en, per_channel, raw, relu = mode
    total = wrap32(acc + bias) if bias_en else acc
    if raw:
        return total
    if not per_channel:
        mult, shift = np.full_like(mult, tensor[0]), np.full_like(shift, tensor[1])
    params = RequantParams(torch.from_numpy(mult), torch.from_numpy(shift))
    rows = [requantize(torch.from_numpy(total[r]), RequantParams(params.multiplier[r],
                                                                 params.shift[r]), relu)
            for r in range(len(total))]
    return torch.stack(rows).numpy().astype(np.int64)


def simulate(acc, bias, mult, shift, mode, tensor, seed, last=None):
    """Rows through the RTL with random input idling and output back-pressure; returns
    the output rows, their ``last`` flags (the input's ``last``: the final row's only
    unless given) and the fewest cycles from input to output."""
    dut = RequantStream(LANES)
    count = len(acc)
    rng = np.random.default_rng(seed)
    out, lasts, accepted, delivered = [], [], [], []
    layout = output_layout(LANES)

    async def configure_and_send(ctx):
        for name, value in zip(("bias_en", "per_channel", "raw", "relu"), mode):
            ctx.set(getattr(dut.mode, name), value)
        ctx.set(dut.mode.tensor_mult, tensor[0])
        ctx.set(dut.mode.tensor_shift, tensor[1])
        cycle = 0
        for r in range(count):
            while rng.random() < 0.3:                          # idle input
                await ctx.tick()
                cycle += 1
            ctx.set(dut.i.payload, {"acc": acc[r].tolist(), "bias": bias[r].tolist(),
                                    "mult": mult[r].tolist(), "shift": shift[r].tolist(),
                                    "last": int(r == count - 1) if last is None
                                    else int(last[r])})
            ctx.set(dut.i.valid, 1)
            ticks = 0
            while True:
                _, _, ready = await ctx.tick().sample(dut.i.ready)
                ticks += 1
                if ready:
                    break
            accepted.append(cycle + ticks)
            cycle += ticks
            ctx.set(dut.i.valid, 0)

    async def receive(ctx):
        cycle = 0
        while len(out) < count:
            ready = rng.random() >= 0.4                       # 40 % back-pressure
            ctx.set(dut.o.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.o.valid, dut.o.payload.as_value())
            cycle += 1
            if valid and ready:
                row = layout.from_bits(payload)
                out.append([int(row.data[j]) for j in range(LANES)])
                lasts.append(int(row.last))
                delivered.append(cycle)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(configure_and_send)
    sim.add_testbench(receive)
    sim.run_until(1e-8 * (20 * count + 20))
    assert len(out) == count, "the pipeline lost or held rows"
    latency = min(d - a for d, a in zip(delivered, accepted))
    return np.array(out, np.int64), lasts, latency


@pytest.mark.parametrize("name", MODES)
def test_matches_the_golden_model_under_backpressure_and_idle(name):
    mode = MODES[name]
    rng = np.random.default_rng(list(MODES).index(name))
    acc, bias, mult, shift = random_rows(rng)
    tensor = (int(rng.integers(1 << 15, 1 << 16)), 20)
    expected = expected_rows(acc, bias, mult, shift, mode, tensor)
    got, lasts, latency = simulate(acc, bias, mult, shift, mode, tensor, seed=7)
    np.testing.assert_array_equal(got, expected)
    assert lasts == [0] * (ROWS - 1) + [1]
    assert latency == LATENCY
    if not mode[2]:                                          # requantized: corners reached
        assert expected.max() == 127 and expected.min() == (0 if mode[3] else -128)
        inside = expected[(expected > -128) & (expected < 127) & (expected != 0)]
        assert inside.size > 0
        if mode[1]:
            assert {0, SHIFT_MAX} <= set(shift.ravel().tolist())
    else:
        assert (np.abs(expected) > 127).any() and (expected < 0).any()


def test_last_flags_travel_with_their_rows_through_the_buffer():
    """Random ``last`` flags under back-pressure: each leaves with its row, whether the
    row is bypassed or waits in the output buffer (whose first row's ``last`` is a
    register beside the memory)."""
    mode = MODES[next(iter(MODES))]
    rng = np.random.default_rng(11)
    acc, bias, mult, shift = random_rows(rng)
    flags = rng.integers(0, 2, ROWS)
    for seed in range(3):
        _, lasts, _ = simulate(acc, bias, mult, shift, mode, (1 << 15, 20), seed, flags)
        assert lasts == flags.tolist()


def test_shift_zero_and_47_ties_and_saturation():
    """Exact corners: shift 0 passes the product through (then saturates), shift 1 rounds
    ties half up, shift 47 leaves -1, 0 or 1 (the tie -2^46 rounds up to 0)."""
    acc = np.array([[5, -5, 2 ** 31 - 1], [127, -128, -2 ** 31], [3, -3, 255],
                    [-2 ** 31, -2 ** 31, 2 ** 31 - 1]], np.int64)
    mult = np.array([[1, 1, 1]] * 3 + [[1 << 15, (1 << 16) - 1, (1 << 16) - 1]], np.int64)
    shift = np.array([[0, 0, 0], [0, 0, 0], [1, 1, 1], [47, 47, 47]], np.int64)
    zeros = np.zeros_like(acc)
    mode = (False, True, False, False)
    expected = expected_rows(acc, zeros, mult, shift, mode, (0, 0))
    assert expected.tolist() == [[5, -5, 127], [127, -128, -128], [2, -1, 127], [0, -1, 1]]
    got, lasts, _ = simulate(acc, zeros, mult, shift, mode, (0, 0), seed=3)
    np.testing.assert_array_equal(got, expected)
    assert lasts == [0, 0, 0, 1]


def test_shifts_above_47_give_zero():
    """Outside the golden model's range: the 6-bit shift register allows up to 63."""
    acc = np.array([[2 ** 31 - 1, -2 ** 31, -1]] * 3, np.int64)
    mult = np.full_like(acc, (1 << 16) - 1)
    shift = np.array([[48] * 3, [55] * 3, [63] * 3], np.int64)
    zeros = np.zeros_like(acc)
    got, _, _ = simulate(acc, zeros, mult, shift, (False, True, False, False), (0, 0), seed=4)
    assert not got.any()


def test_credits_take_exactly_the_buffer_then_stream_every_cycle():
    """With ``o.ready`` held low, the unit takes exactly BUFFER_ROWS rows (the stages never
    stall, so every row taken must fit the output buffer) and ``i.ready`` falls from a
    register; released, the rows leave one per cycle in order, the values the golden
    model's, and the unit takes a row every cycle again."""
    dut = RequantStream(LANES)
    layout = output_layout(LANES)
    rows = BUFFER_ROWS + 6
    acc = np.arange(rows * LANES, dtype=np.int64).reshape(rows, LANES) * 7919 - 2 ** 20
    expected = wrap32(acc + 3)
    taken, out, gaps = [], [], []

    async def send(ctx):
        for name, value in zip(("bias_en", "per_channel", "raw", "relu"), (1, 0, 1, 0)):
            ctx.set(getattr(dut.mode, name), value)
        for cycle in range(4 * rows + 40):
            r = len(taken)
            if r < rows:
                ctx.set(dut.i.payload, {"acc": acc[r].tolist(), "bias": [3] * LANES,
                                        "mult": [1] * LANES, "shift": [0] * LANES,
                                        "last": int(r == rows - 1)})
            ctx.set(dut.i.valid, r < rows)
            _, _, ready = await ctx.tick().sample(dut.i.ready)
            if ready and r < rows:
                taken.append(cycle)

    async def receive(ctx):
        ctx.set(dut.o.ready, 0)
        await ctx.tick().repeat(3 * BUFFER_ROWS)               # the stages drained into it
        held = len(taken)
        ctx.set(dut.o.ready, 1)
        last_cycle = None
        for cycle in range(4 * rows):
            _, _, valid, payload = await ctx.tick().sample(dut.o.valid,
                                                             dut.o.payload.as_value())
            if valid:
                row = layout.from_bits(payload)
                out.append([int(row.data[j]) for j in range(LANES)])
                if last_cycle is not None:
                    gaps.append(cycle - last_cycle)
                last_cycle = cycle
        gaps.insert(0, held)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(send)
    sim.add_testbench(receive)
    sim.run_until(1e-8 * (8 * rows + 100))
    assert gaps[0] == BUFFER_ROWS                 # taken while o.ready was low: exactly
    np.testing.assert_array_equal(np.array(out, np.int64), expected)
    assert set(gaps[1:BUFFER_ROWS]) == {1}         # the buffer empties one row per cycle
    assert taken[BUFFER_ROWS:] == list(range(taken[BUFFER_ROWS], taken[BUFFER_ROWS] + 6))
