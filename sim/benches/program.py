"""cocotb testbench that runs a host program (:mod:`zoforge.sim.program`) over cocotbext-axi.

:func:`zoforge.sim.backends.run_program` starts it with ``bench_args()``: ``program``
(``module:function``, the program factory), its JSON ``args``, the streams' widths
(``in_bits``, ``lanes``), the stalls (``source_idle``, ``sink_backpressure``, ``seed``),
``max_cycles`` (most cycles of one operation; 0: none) and ``patterns`` (stall patterns in
``pause.npz``). The program's input arrays are ``in-<name>.npy`` in ``bench_dir()``; what it
returns is stored as ``out-<name>.npy`` and ``write_result`` (with ``sim_cycles`` and
``wall_s``, the seconds the program ran inside the simulator).

cocotbext-axi's AxiLiteMaster and AxiStreamSource/Sink drive the ports and check the
protocol. Stalls: with ``source_idle`` the input stream and the AXI4-Lite AW, W and AR
channels pause at random, with ``sink_backpressure`` the output stream and the B and R
channels hold ready low (seeded pause generators, one per channel); with ``patterns`` the
input source and the output sink follow ``pause.npz``'s ``source`` / ``sink`` (0/1 per
cycle, repeated). Every operation must end within ``max_cycles``, so a hung design fails
instead of hanging the run. The results' ``stalls`` count, per channel (the job server's
names, :data:`zoforge.sim.jobserver.CHANNELS`), the pause cycles its generator drew.
"""
import itertools
import random
import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, SimTimeoutError, with_timeout
from cocotb.utils import get_sim_time
from cocotbext.axi import (AxiLiteBus, AxiLiteMaster, AxiStreamBus, AxiStreamFrame,
                           AxiStreamSink, AxiStreamSource)

from zoforge.sim.cosim import bench_args, bench_dir, write_result
from zoforge.sim.jobserver import CHANNELS
from zoforge.sim.program import (Idle, Poll, Read, Receive, Reply, Send, Write, drive_async,
                                 load_program)

CLOCK_NS = 10


def _pauses(probability: float, seed: int):
    rng = random.Random(seed)
    return (rng.random() < probability for _ in itertools.count())


class _Counted:
    """A pause generator that counts the pause cycles it gives."""

    def __init__(self, pauses):
        self.pauses, self.count = iter(pauses), 0

    def __iter__(self):
        return self

    def __next__(self) -> bool:
        pause = bool(next(self.pauses))
        self.count += pause
        return pause


class BusDriver:
    """The design's AXI4-Lite target and streams as cocotbext-axi parts; runs batches."""

    def __init__(self, dut, settings: dict):
        self.dut = dut
        self.in_bits = settings["in_bits"]
        self.max_cycles = settings.get("max_cycles", 0)
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil_"), dut.clk, dut.rst)
        # 32-bit lanes where the input beat is whole words, else bytes
        self.word_lanes = self.in_bits % 32 == 0
        self.source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_"), dut.clk,
                                      dut.rst, byte_size=32 if self.word_lanes else 8)
        self.sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_"), dut.clk,
                                  dut.rst, byte_size=32)
        write, read = self.axil.write_if, self.axil.read_if
        for part in (self.source, self.sink, write, read):
            part.log.setLevel("WARNING")
        idle, pressure, seed = (settings.get(key, 0) for key in
                                ("source_idle", "sink_backpressure", "seed"))
        # sources pause (valid low), sinks hold off (ready low); the AXI4-Lite address and
        # data channels pause independently (AW and W apart)
        sources = (self.source, write.aw_channel, write.w_channel, read.ar_channel)
        sinks = (self.sink, write.b_channel, read.r_channel)
        parts = dict(zip(CHANNELS, sources + sinks))       # in, aw, w, ar, out, b, r
        self.pauses: dict[str, _Counted] = {}
        for offset, (name, part) in enumerate(parts.items()):
            probability = idle if part in sources else pressure
            if probability:
                self._pause(name, part, _pauses(probability, seed + offset))
        if settings.get("patterns"):
            patterns = np.load(bench_dir() / "pause.npz")
            for name, pattern_name in (("out", "sink"), ("in", "source")):
                pattern = [bool(v) for v in patterns[pattern_name]]
                if any(pattern):
                    self._pause(name, parts[name], itertools.cycle(pattern))

    def _pause(self, name: str, part, pauses) -> None:
        self.pauses[name] = _Counted(pauses)
        part.set_pause_generator(self.pauses[name])

    @property
    def stalls(self) -> dict[str, int]:
        """Per channel, the pause cycles drawn so far."""
        return {name: self.pauses[name].count if name in self.pauses else 0
                for name in CHANNELS}

    @property
    def cycle(self) -> int:
        return int(get_sim_time(unit="ns") // CLOCK_NS)

    async def reset(self):
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 3)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 2)

    async def execute(self, batch: list) -> list[Reply]:
        replies = []
        for operation in batch:
            if self.max_cycles:
                try:
                    words = await with_timeout(cocotb.start_soon(self._run(operation)),
                                               self.max_cycles * CLOCK_NS, "ns")
                except SimTimeoutError:
                    raise AssertionError(f"{type(operation).__name__.upper()} ran out of "
                                         f"cycles ({self.max_cycles} cycles, at cycle "
                                         f"{self.cycle})") from None
            else:
                words = await self._run(operation)
            replies.append(Reply(self.cycle, bool(self.dut.irq.value),
                                 np.asarray(words, dtype=np.uint32)))
        return replies

    async def _run(self, operation) -> list[int]:
        if isinstance(operation, Write):
            done = await self.axil.write(operation.address, operation.value.to_bytes(4, "little"))
            return [int(done.resp)]
        if isinstance(operation, Read):
            done = await self.axil.read(operation.address, 4)
            return [int.from_bytes(done.data, "little"), int(done.resp)]
        if isinstance(operation, Send):
            await self.source.send(AxiStreamFrame(self._frame(operation.words)))
            return []
        if isinstance(operation, Receive):
            frame = await self.sink.recv()
            return list(frame.tdata)
        if isinstance(operation, Poll):
            while True:
                (value, _) = await self._run(Read(operation.address))
                if value & operation.mask:
                    return [value]
                await ClockCycles(self.dut.clk, operation.gap)
        if isinstance(operation, Idle):
            await ClockCycles(self.dut.clk, operation.cycles)
            return []
        raise TypeError(f"not a bus operation: {operation!r}")

    def _frame(self, words: np.ndarray):
        """The frame's data for the source: 32-bit lanes, or each beat's bytes."""
        if self.word_lanes:
            return [int(word) for word in words]
        per_beat = -(-self.in_bits // 32)
        beats = words.astype("<u4").view(np.uint8).reshape(-1, 4 * per_beat)
        return beats[:, :self.in_bits // 8].tobytes()


@cocotb.test()
async def run_program(dut):
    settings = bench_args()
    folder = bench_dir()
    Clock(dut.clk, CLOCK_NS, unit="ns").start()     # cocotb's GPI clock: no Python per edge
    driver = BusDriver(dut, settings)
    await driver.reset()
    data = {path.stem[3:]: np.load(path) for path in folder.glob("in-*.npy")}
    program = load_program(settings["program"])(settings["args"], data)
    started = time.perf_counter()
    arrays, results = await drive_async(program, driver.execute)
    wall_s = time.perf_counter() - started
    for name, array in arrays.items():
        np.save(folder / f"out-{name}.npy", array)
    write_result({**results, "sim_cycles": driver.cycle, "wall_s": wall_s,
                  "stalls": driver.stalls})
