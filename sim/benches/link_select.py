"""cocotb testbench: the softmax unit's input selector (:class:`~zoforge.hw.link.select.
FrameSelect`).

The host (``tests/test_link_select.py``) gives ``frames`` (per source, its frames, each a
list of words), ``order`` (the queued source indices), ``idle`` and ``backpressure``
(probabilities, per cycle) and ``seed`` in the arguments. The bench queues the entries with
random idle cycles, drives every source's frames at once with random idle cycles, takes
``m_axis`` with random back-pressure, and stores every output word and ``tlast``.
"""
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge

from zoforge.sim.benches.handshake import handshake, push_entries
from zoforge.sim.cosim import bench_args, write_result

CLOCK_NS = 10


@cocotb.test(timeout_time=1_000_000, timeout_unit="ns")       # 10^5 cycles: fail, not hang
async def select_frames(dut):
    args = bench_args()
    frames, order = args["frames"], args["order"]
    rng = random.Random(args["seed"])
    total = sum(len(frame) for source in frames for frame in source)
    Clock(dut.clk, CLOCK_NS, unit="ns").start()
    ports = [f"s_axis__{i}__" for i in range(len(frames))]
    for name in ["select__payload", "select__valid", "m_axis__tready"] + \
            [p + s for p in ports for s in ("tdata", "tvalid", "tlast")]:
        getattr(dut, name).value = 0
    dut.rst.value = 1
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    await RisingEdge(dut.clk)
    out, lasts = [], []
    # inputs set at a falling edge, handshakes read there once settled (ReadOnly): the
    # rising edge after it is the transfer
    await FallingEdge(dut.clk)


    async def source(index: int):
        port = ports[index]
        for frame in frames[index]:
            for position, word in enumerate(frame):
                while rng.random() < args["idle"]:
                    getattr(dut, port + "tvalid").value = 0
                    await FallingEdge(dut.clk)
                getattr(dut, port + "tdata").value = word
                getattr(dut, port + "tlast").value = int(position == len(frame) - 1)
                getattr(dut, port + "tvalid").value = 1
                await handshake(dut.clk, getattr(dut, port + "tready"))
            getattr(dut, port + "tvalid").value = 0

    async def host():
        await push_entries(dut.clk, dut.select__valid, dut.select__payload, dut.select__ready,
                           order, rng, args["idle"])

    async def receive():
        while len(out) < total:
            dut.m_axis__tready.value = int(rng.random() >= args["backpressure"])
            await ReadOnly()
            if dut.m_axis__tvalid.value and dut.m_axis__tready.value:
                out.append(int(dut.m_axis__tdata.value))
                lasts.append(int(dut.m_axis__tlast.value))
            await FallingEdge(dut.clk)

    tasks = [cocotb.start_soon(source(i)) for i in range(len(frames))]
    tasks.append(cocotb.start_soon(host()))
    await receive()
    for task in tasks:
        await task
    write_result({"out": out, "lasts": lasts})
