"""The engine's result packer (hw/engine/packer.py) in Amaranth's simulator: requantized
rows four to a beat (row r of a beat at bytes r*C .. r*C + C-1, the frame's last beat zero
past its last row), raw rows passed through, against the layout written out here, with
random idle input and 40 % output back-pressure; frames of 1 to 9 rows (every remainder of
four), and no latency (a beat leaves in the cycle its last row is taken, but a job's short
last group under back-pressure, which leaves from the registers)."""
import numpy as np
import pytest
from amaranth.sim import Simulator

from zoforge.hw.engine.packer import ROWS_PER_BEAT, ResultPacker

LANES = 3
FRAMES = [1, 2, 3, 4, 5, 6, 7, 8, 9]        # rows per frame (job): remainders 1, 2, 3, 0


def _lanes(row: list[int]) -> int:
    """A row as the output stage's beat: value j in 32-bit lane j (two's complement)."""
    return sum((v & 0xFFFFFFFF) << 32 * j for j, v in enumerate(row))


def _beats_by_hand(frame: list[list[int]], raw: bool) -> list[tuple[int, int]]:
    """(tdata, tlast) of the frame's output beats."""
    if raw:
        return [(_lanes(row), int(i == len(frame) - 1)) for i, row in enumerate(frame)]
    beats = []
    for first in range(0, len(frame), 4):
        data = bytearray(4 * LANES)
        for r, row in enumerate(frame[first:first + 4]):
            for j, v in enumerate(row):
                data[r * LANES + j] = v & 0xFF
        beats.append((int.from_bytes(bytes(data), "little"), int(first + 4 >= len(frame))))
    return beats


def _simulate(frames, raw: bool, seed: int, beats: int):
    dut = ResultPacker(LANES)
    rng = np.random.default_rng(seed)
    rows = [(row, int(i == len(frame) - 1)) for frame in frames for i, row in enumerate(frame)]
    taken, out, late = [], [], []

    async def send(ctx):
        ctx.set(dut.raw, raw)
        for row, last in rows:
            while rng.random() < 0.3:                        # idle input
                await ctx.tick()
            # the int8 result sign-extended into each 32-bit lane (raw: any int32)
            ctx.set(dut.i.tdata, _lanes(row))
            ctx.set(dut.i.tlast, last)
            ctx.set(dut.i.tvalid, 1)
            while True:
                _, _, ready = await ctx.tick().sample(dut.i.tready)
                if ready:
                    break
            ctx.set(dut.i.tvalid, 0)

    async def receive(ctx):
        cycle = 0
        while len(out) < beats:
            ready = rng.random() >= 0.4                      # 40 % back-pressure
            ctx.set(dut.o.tready, ready)
            _, _, o_valid, data, last, i_valid, i_ready = await ctx.tick().sample(
                dut.o.tvalid, dut.o.tdata, dut.o.tlast, dut.i.tvalid, dut.i.tready)
            cycle += 1
            if i_valid and i_ready:
                taken.append(cycle)
            if o_valid and ready:
                out.append((int(data), int(last)))
                # no latency: a beat leaves in the cycle its last row is taken, but a job's
                # short last group whose beat was stalled (it leaves from the registers)
                if taken[-1] != cycle:
                    assert last and not raw
                    late.append(cycle)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(send)
    sim.add_testbench(receive)
    sim.run_until(1e-8 * (40 * len(rows) + 40))
    assert len(taken) == len(rows) and len(out) == beats, "the packer lost or held rows"
    return out, late


@pytest.mark.parametrize("raw", [False, True])
def test_rows_packed_four_to_a_beat_under_backpressure(raw):
    rng = np.random.default_rng(int(raw))
    high = 1 << 31 if raw else 128
    frames = [[[int(v) for v in rng.integers(-high, high, size=LANES)] for _ in range(count)]
              for count in FRAMES]
    frames[0][0] = [-128, 127, -1]                          # both ends, all bits set
    expected = [beat for frame in frames for beat in _beats_by_hand(frame, raw)]
    assert len(expected) == (sum(FRAMES) if raw else
                             sum(-(-c // ROWS_PER_BEAT) for c in FRAMES))
    out, late = _simulate(frames, raw, seed=3, beats=len(expected))
    assert out == expected
    assert bool(late) == (not raw)           # a stalled short last group was reached
