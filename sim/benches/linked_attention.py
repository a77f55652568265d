"""cocotb testbench: a scaled-down accelerator top with attention links
(:class:`~zoforge.hw.accel.top.Accelerator` with ``link``), two clocks.

The host (:mod:`zoforge.sim.link_cosim`) gives ``bench_args()``: ``engines``,
``softmax_units``, the clocks' periods in ns (``sync_ns`` for ``clk``, ``softmax_ns`` for
``softmax_clk``), the stalls (``idle``, ``backpressure``, ``seed``), ``timeout_ns`` and
``lanes``: one list of operations a *lane*, ``engine<e>`` (engine e's AXI4-Lite target,
its ``s_axis`` / ``m_axis`` and its link's job queue ``links[e]``, on ``clk``) and
``softmax<u>`` (unit u's target and streams and its selector's queue ``selects[u]``, on
``softmax_clk``). The lanes run concurrently, each its operations in order:

* ``["link", payload]`` / ``["select", payload]``: push one entry into ``links[e].job`` /
  ``selects[u]`` (``valid`` held until ``ready``; random idle before it with ``idle``);
* ``["write", address, value]`` / ``["read", name, address]``: an AXI4-Lite write / read
  (the read's value stored under ``name``);
* ``["send", name]``: queue the frame ``name`` (``in-<name>.npy``: the engine's input as
  bytes, a softmax unit's as 32-bit words) on the lane's ``s_axis`` (it streams while the
  next operations run);
* ``["receive", name]``: the next frame of the lane's ``m_axis`` (up to ``tlast``), its
  32-bit words stored as ``out-<name>.npy``;
* ``["poll", name, address, mask]``: read ``address`` until ``value & mask`` (a read every
  4 cycles), the value stored under ``name``;
* ``["idle", cycles]``: the lane's clock cycles;
* ``["signal", event]`` / ``["wait", event]``: set / wait for a named event (a softmax
  job's start after its scores job's done);
* ``["sample", name]``: the lane's ``irq`` pin stored under ``name``.

cocotbext-axi's AxiLiteMaster, AxiStreamSource and AxiStreamSink drive each unit's ports
and check the protocol; with ``idle`` the input streams and the AW, W and AR channels
pause at random, with ``backpressure`` the output streams and the B and R channels hold
ready low (a seeded pause generator a channel). The ZO layer's ports are held idle. At the
end, or after ``timeout_ns`` (the test then fails naming each unfinished lane's operation),
the bench stores every read so far (``reads``), ``timed_out``, each link's ``error`` and
the simulated time.
"""
import itertools
import random
import re

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import (ClockCycles, Combine, Event, FallingEdge, ReadOnly, RisingEdge,
                             SimTimeoutError, with_timeout)
from cocotb.utils import get_sim_time
from cocotbext.axi import (AxiLiteBus, AxiLiteMaster, AxiStreamBus, AxiStreamFrame,
                           AxiStreamSink, AxiStreamSource)

from zoforge.sim.cosim import bench_args, bench_dir, write_result


def _pauses(probability: float, seed: int):
    rng = random.Random(seed)
    return (rng.random() < probability for _ in itertools.count())


class Lane:
    """One unit's ports (``engines[e]`` or ``softmax[u]``) and its queue's port."""

    def __init__(self, dut, name: str, args: dict, seed: int):
        kind, index = re.fullmatch(r"(engine|softmax)(\d+)", name).groups()
        self.dut, self.name = dut, name
        if kind == "engine":
            prefix, queue = f"engines__{index}__", f"links__{index}__job__"
            self.clock, reset, in_size = dut.clk, dut.rst, 8
        else:
            prefix, queue = f"softmax__{index}__", f"selects__{index}__"
            self.clock, reset, in_size = dut.softmax_clk, dut.softmax_rst, 32
        self.irq = getattr(dut, prefix + "irq")
        self.queue_valid = getattr(dut, queue + "valid")
        self.queue_payload = getattr(dut, queue + "payload")
        self.queue_ready = getattr(dut, queue + "ready")
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, prefix + "s_axil_"),
                                  self.clock, reset)
        self.source = AxiStreamSource(AxiStreamBus.from_prefix(dut, prefix + "s_axis_"),
                                      self.clock, reset, byte_size=in_size)
        self.sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, prefix + "m_axis_"),
                                  self.clock, reset, byte_size=32)
        write, read = self.axil.write_if, self.axil.read_if
        for part in (self.source, self.sink, write, read):
            part.log.setLevel("WARNING")
        sources = (self.source, write.aw_channel, write.w_channel, read.ar_channel)
        sinks = (self.sink, write.b_channel, read.r_channel)
        for offset, part in enumerate(sources + sinks):
            probability = args["idle"] if part in sources else args["backpressure"]
            if probability:
                part.set_pause_generator(_pauses(probability, seed + offset))
        self.rng = random.Random(seed + 100)
        self.idle = args["idle"]
        self.position = 0                 # the operation under way
        self.queue_valid.value = 0
        self.queue_payload.value = 0

    async def push(self, payload: int) -> None:
        """One entry into the queue: random idle cycles, ``valid`` until a transfer."""
        await FallingEdge(self.clock)
        while self.rng.random() < self.idle:
            await FallingEdge(self.clock)
        self.queue_payload.value, self.queue_valid.value = payload, 1
        while True:
            await ReadOnly()
            taken = bool(self.queue_ready.value)
            await RisingEdge(self.clock)
            await FallingEdge(self.clock)
            if taken:
                break
        self.queue_valid.value = 0

    async def read(self, address: int) -> int:
        done = await self.axil.read(address, 4)
        if int(done.resp):
            raise AssertionError(f"{self.name}: read {address:#x} answered {int(done.resp)}")
        return int.from_bytes(done.data, "little")

    async def run(self, operations: list, events: dict, reads: dict, folder) -> None:
        for self.position, operation in enumerate(operations):
            op, *rest = operation
            if op in ("link", "select"):
                await self.push(rest[0])
            elif op == "write":
                done = await self.axil.write(rest[0], int(rest[1]).to_bytes(4, "little"))
                if int(done.resp):
                    raise AssertionError(f"{self.name}: write {rest[0]:#x} answered "
                                         f"{int(done.resp)}")
            elif op == "read":
                reads[rest[0]] = await self.read(rest[1])
            elif op == "send":
                data = np.load(folder / f"in-{rest[0]}.npy")
                payload = data.tobytes() if data.dtype == np.uint8 else \
                    [int(word) for word in data]
                await self.source.send(AxiStreamFrame(payload))
            elif op == "receive":
                frame = await self.sink.recv()
                np.save(folder / f"out-{rest[0]}.npy", np.asarray(frame.tdata, np.uint32))
            elif op == "poll":
                while True:
                    value = await self.read(rest[1])
                    if value & rest[2]:
                        reads[rest[0]] = value
                        break
                    await ClockCycles(self.clock, 4)
            elif op == "idle":
                await ClockCycles(self.clock, rest[0])
            elif op == "signal":
                events.setdefault(rest[0], Event()).set()
            elif op == "wait":
                await events.setdefault(rest[0], Event()).wait()
            elif op == "sample":
                await ReadOnly()
                reads[rest[0]] = int(self.irq.value)
                await FallingEdge(self.clock)
            else:
                raise ValueError(f"{self.name}: no operation {op!r}")
        self.position = len(operations)


@cocotb.test()
async def linked_attention(dut):
    args = bench_args()
    folder = bench_dir()
    Clock(dut.clk, args["sync_ns"], unit="ns").start()
    Clock(dut.softmax_clk, args["softmax_ns"], unit="ns").start()
    # the ZO layer idle; every link's error kept
    for name in ("s_axil__awvalid", "s_axil__wvalid", "s_axil__arvalid", "s_axil__bready",
                 "s_axil__rready", "s_axis__tvalid", "m_axis__tready"):
        getattr(dut, f"layers__0__{name}").value = 0
    for e in range(args["engines"]):
        getattr(dut, f"links__{e}__clear").value = 0
    lanes = {name: Lane(dut, name, args, args["seed"] + 1000 * n)
             for n, name in enumerate(args["lanes"])}
    dut.rst.value = dut.softmax_rst.value = 1
    await ClockCycles(dut.clk, 4)
    await ClockCycles(dut.softmax_clk, 4)
    dut.rst.value = dut.softmax_rst.value = 0
    await ClockCycles(dut.softmax_clk, 2)
    await ClockCycles(dut.clk, 2)
    events, reads = {}, {}
    tasks = [cocotb.start_soon(lane.run(args["lanes"][name], events, reads, folder))
             for name, lane in lanes.items()]
    started = get_sim_time(unit="ns")
    timed_out = False
    try:
        await with_timeout(Combine(*tasks), args["timeout_ns"], "ns")
    except SimTimeoutError:
        timed_out = True
    await ReadOnly()
    write_result({"reads": reads, "timed_out": timed_out,
                  "errors": [int(getattr(dut, f"links__{e}__error").value)
                             for e in range(args["engines"])],
                  "sim_ns": get_sim_time(unit="ns") - started})
    if timed_out:
        stuck = {name: lane.position for name, lane in lanes.items()
                 if lane.position < len(args["lanes"][name])}
        raise AssertionError(f"the lanes did not end within {args['timeout_ns']} ns: "
                             f"stuck at {stuck}")
