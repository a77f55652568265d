"""A streaming unit in Amaranth's simulator: input beats with random idling, output taken
under random back-pressure, and the cycle of each transfer (the i-GELU and i-softmax units'
tests; one copy of the two testbenches)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from amaranth.sim import Simulator


@dataclass
class StreamRun:
    """What left the unit: each output beat's ``field`` lanes and ``last``, and the cycle
    (from the run's start, counted from 1) of every input and output transfer."""

    out: list = field(default_factory=list)
    lasts: list = field(default_factory=list)
    accepted: list = field(default_factory=list)
    delivered: list = field(default_factory=list)


def run_stream(dut, beats: list[dict], config: dict, layout, field_name: str, lanes: int,
               seed: int, idle: float, stall: float, hold: int, cycles: int) -> StreamRun:
    """``beats`` (payloads of ``dut.i``) in after ``config`` is set on ``dut.config``, each
    beat preceded by idle cycles with probability ``idle``; ``dut.o.ready`` low for ``hold``
    cycles, then low with probability ``stall``; the output payloads read with ``layout``
    until every beat is out or ``cycles`` cycles have passed."""
    rng = np.random.default_rng(seed)
    run = StreamRun()

    async def send(ctx):
        for name, value in config.items():
            ctx.set(getattr(dut.config, name), value)
        cycle = 0
        for beat in beats:
            while rng.random() < idle:
                await ctx.tick()
                cycle += 1
            ctx.set(dut.i.payload, beat)
            ctx.set(dut.i.valid, 1)
            while True:
                _, _, ready = await ctx.tick().sample(dut.i.ready)
                cycle += 1
                if ready:
                    break
            run.accepted.append(cycle)
            ctx.set(dut.i.valid, 0)

    async def receive(ctx):
        cycle = 0
        while len(run.out) < len(beats):
            ready = cycle >= hold and rng.random() >= stall
            ctx.set(dut.o.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.o.valid,
                                                             dut.o.payload.as_value())
            cycle += 1
            if valid and ready:
                beat = layout.from_bits(payload)
                run.out.append([int(getattr(beat, field_name)[j]) for j in range(lanes)])
                run.lasts.append(int(beat.last))
                run.delivered.append(cycle)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(send)
    sim.add_testbench(receive)
    sim.run_until(1e-8 * cycles)
    return run
