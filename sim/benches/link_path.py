"""cocotb testbench: the attention link on one engine's output (:class:`~zoforge.hw.link.
path.ScoresLink`), two clocks.

The host (``tests/test_link_path.py``) gives ``frames`` (each the engine's beats as packed
``tdata`` ints), ``entries`` (one packed job entry a frame: route | m << 1 | length << (1 +
m_bits)), ``pass_beats``, ``softmax_beats``, ``idle``, ``backpressure``, ``seed`` and the
clocks' periods in ns (``sync_ns``, ``softmax_ns``). The bench queues the entries and sends
the frames with random idle cycles on ``clk``, takes ``m_axis`` on ``clk`` and
``softmax_axis`` on ``softmax_clk`` with random back-pressure, and stores every word and
``tlast`` of both sides and ``error`` at the end.
"""
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly

from zoforge.sim.benches.handshake import handshake, push_entries
from zoforge.sim.cosim import bench_args, write_result


@cocotb.test(timeout_time=4_000_000, timeout_unit="ns")
async def link_frames(dut):
    args = bench_args()
    rng = random.Random(args["seed"])
    Clock(dut.clk, args["sync_ns"], unit="ns").start()
    Clock(dut.softmax_clk, args["softmax_ns"], unit="ns").start()
    for name in ("job__payload", "job__valid", "clear", "s_axis__tdata", "s_axis__tvalid",
                 "s_axis__tlast", "m_axis__tready", "softmax_axis__tready"):
        getattr(dut, name).value = 0
    dut.rst.value = dut.softmax_rst.value = 1
    await ClockCycles(dut.clk, 4)
    await ClockCycles(dut.softmax_clk, 4)
    dut.rst.value = dut.softmax_rst.value = 0
    await FallingEdge(dut.clk)
    sides = {"pass": ([], [], dut.clk, "m_axis__", args["pass_beats"]),
             "softmax": ([], [], dut.softmax_clk, "softmax_axis__", args["softmax_beats"])}


    async def receive(words, lasts, clock, port, total):
        await FallingEdge(clock)
        while len(words) < total:
            getattr(dut, port + "tready").value = int(rng.random() >= args["backpressure"])
            await ReadOnly()
            if getattr(dut, port + "tvalid").value and getattr(dut, port + "tready").value:
                words.append(int(getattr(dut, port + "tdata").value))
                lasts.append(int(getattr(dut, port + "tlast").value))
            await FallingEdge(clock)

    async def host():
        await push_entries(dut.clk, dut.job__valid, dut.job__payload, dut.job__ready,
                           args["entries"], rng, args["idle"])

    receivers = [cocotb.start_soon(receive(*side)) for side in sides.values()]
    queue = cocotb.start_soon(host())
    for frame in args["frames"]:
        for position, word in enumerate(frame):
            while rng.random() < args["idle"]:
                dut.s_axis__tvalid.value = 0
                await FallingEdge(dut.clk)
            dut.s_axis__tdata.value = word
            dut.s_axis__tlast.value = int(position == len(frame) - 1)
            dut.s_axis__tvalid.value = 1
            await handshake(dut.clk, dut.s_axis__tready)
    dut.s_axis__tvalid.value = 0
    await queue
    for receiver in receivers:
        await receiver
    await ReadOnly()
    write_result({"pass": sides["pass"][0], "pass_lasts": sides["pass"][1],
                  "softmax": sides["softmax"][0], "softmax_lasts": sides["softmax"][1],
                  "error": int(dut.error.value)})
