"""cocotb testbench: the scores reorder buffer (:class:`~zoforge.hw.link.reorder.ScoresReorder`).

The host (``tests/test_link_reorder.py``) gives ``jobs`` (``[M, L, beats]`` each), ``cols``,
``lanes``, ``idle`` and ``backpressure`` (probabilities, per cycle) in the arguments and the
engine's raw beats in ``in.npy`` (``[beats, C]`` int32, every job's in order, ``tlast`` on
each job's last beat). The bench starts each job (``job.start`` with M and L, once ``ready``),
sends its beats with random idle cycles, takes ``m_axis`` with random back-pressure, and
stores every output beat's lanes (signed 32-bit) and ``tlast``, and each job's ``error``.
"""
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge

from zoforge.sim.benches.handshake import handshake
from zoforge.sim.cosim import bench_args, bench_dir, write_result

CLOCK_NS = 10


def lanes_of(word: int, count: int) -> list[int]:
    values = [(word >> (32 * i)) & 0xFFFFFFFF for i in range(count)]
    return [v - (1 << 32) if v >> 31 else v for v in values]


@cocotb.test(timeout_time=2_000_000, timeout_unit="ns")       # 2 * 10^5 cycles: fail, not hang
async def reorder_jobs(dut):
    args = bench_args()
    beats = np.load(bench_dir() / "in.npy")
    rng = random.Random(args["seed"])
    total_out = args["out_beats"]
    Clock(dut.clk, CLOCK_NS, unit="ns").start()
    for name in ("job__start", "job__m", "job__length", "s_axis__tdata", "s_axis__tvalid",
                 "s_axis__tlast", "m_axis__tready"):
        getattr(dut, name).value = 0
    dut.rst.value = 1
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    await RisingEdge(dut.clk)
    out, lasts, errors = [], [], []
    # every input is set at a falling edge, every handshake read there once settled
    # (ReadOnly): the rising edge after it is the transfer
    await FallingEdge(dut.clk)

    async def receive():
        while len(out) < total_out:
            dut.m_axis__tready.value = int(rng.random() >= args["backpressure"])
            await ReadOnly()
            if dut.m_axis__tvalid.value and dut.m_axis__tready.value:
                out.append(lanes_of(int(dut.m_axis__tdata.value), args["lanes"]))
                lasts.append(int(dut.m_axis__tlast.value))
            await FallingEdge(dut.clk)


    receiver = cocotb.start_soon(receive())
    sent = 0
    for m, length, count in args["jobs"]:
        dut.job__m.value, dut.job__length.value, dut.job__start.value = m, length, 1
        await handshake(dut.clk, dut.job__ready)
        dut.job__start.value = 0
        for b in range(count):
            while rng.random() < args["idle"]:
                dut.s_axis__tvalid.value = 0
                await FallingEdge(dut.clk)
            dut.s_axis__tdata.value = int.from_bytes(beats[sent].astype("<i4").tobytes(),
                                                     "little")
            dut.s_axis__tlast.value = int(b == count - 1)
            dut.s_axis__tvalid.value = 1
            await handshake(dut.clk, dut.s_axis__tready)
            sent += 1
        dut.s_axis__tvalid.value = 0
        await ReadOnly()
        errors.append(int(dut.job__error.value))
        await FallingEdge(dut.clk)
    await receiver
    write_result({"out": out, "lasts": lasts, "errors": errors})
