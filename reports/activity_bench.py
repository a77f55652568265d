"""Generic cocotb stimulus for switching activity: works on any registered design.

Runs inside the simulator (see :mod:`zoforge.reports.activity`, which prepares the args).
Holds reset for ``reset_cycles``, then runs ``cycles`` clock cycles with every handshake /
enable input held high (``high``) and every other input given a fresh uniformly random value
each cycle (``random``) or one random value for the whole run (``hold``).
"""
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

from zoforge.sim.cosim import bench_args, write_result


@cocotb.test()
async def activity(dut):
    args = bench_args()
    rng = random.Random(args.get("seed", 1))
    inputs = [(getattr(dut, name), width, mode) for name, width, mode in args["inputs"]]
    cocotb.start_soon(Clock(dut.clk, args.get("period_ps", 10_000), unit="ps").start())
    for handle, _, _ in inputs:
        handle.value = 0
    dut.rst.value = 1
    await ClockCycles(dut.clk, args.get("reset_cycles", 4))
    dut.rst.value = 0
    randomised = [(handle, width) for handle, width, mode in inputs if mode == "random"]
    for handle, width, mode in inputs:
        if mode == "high":
            handle.value = (1 << width) - 1
        elif mode == "hold":
            handle.value = rng.getrandbits(width)
    cycles = args["cycles"]
    if randomised:
        for _ in range(cycles):
            for handle, width in randomised:
                handle.value = rng.getrandbits(width)
            await RisingEdge(dut.clk)
    else:
        await ClockCycles(dut.clk, cycles)
    write_result({"cycles": cycles, "reset_cycles": args.get("reset_cycles", 4)})
