"""cocotb testbench of the GEMM engine: whole jobs through cocotbext-axi (no per-cycle loop).

For each job prepared by :mod:`zoforge.sim.gemm_cosim` (``job<n>.npz`` in ``bench_dir()``):
write the dimension/requantization registers and the per-column tables over AXI4-Lite,
queue the job's whole input frame on the AXI4-Stream source, start the engine, await the
whole output frame from the sink, then read the status and cycle counters. Jobs run back
to back without reset. The clock is cocotb's (simulator-side) clock; Python only runs when
cocotbext-axi moves a beat or the bench awaits completion.

Stores ``out<n>.npy`` (uint32 output words) and, via ``write_result``, per-job counters and
the simulation speed (``sim_cycles``, ``wall_s``, ``cycles_per_s``).
"""
import itertools
import random
import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge, with_timeout
from cocotb.utils import get_sim_time
from cocotbext.axi import (AxiLiteBus, AxiLiteMaster, AxiStreamBus, AxiStreamFrame,
                           AxiStreamSink, AxiStreamSource)

from zoforge.sim.cosim import bench_args, bench_dir, write_result

CLOCK_NS = 10


class EngineHarness:
    """The engine's AXI ports as cocotbext-axi masters/sources/sinks."""

    def __init__(self, dut, registers, regions, backpressure=0.0, seed=0):
        self.dut = dut
        self.reg = registers
        self.regions = regions
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil_"), dut.clk, dut.rst)
        self.source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_"), dut.clk,
                                      dut.rst)
        self.sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_"), dut.clk, dut.rst,
                                  byte_size=32)
        for part in (self.source, self.sink, self.axil.write_if, self.axil.read_if):
            part.log.setLevel("WARNING")
        if backpressure:
            rng = random.Random(seed)
            self.sink.set_pause_generator(
                (rng.random() < backpressure for _ in itertools.count()))

    async def reset(self):
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 3)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 2)

    async def program(self, spec, tables):
        """Write the job's dimension/requantization registers and per-column tables."""
        await self.axil.write_dwords(self.reg["M"], [spec["m"], spec["k"], spec["n"],
                                                     spec["mult"], spec["shift"]])
        for name in spec["tables"]:
            await self.axil.write(self.regions[name], tables[name].tobytes())

    async def launch(self, spec, frame):
        """Queue the first panels and start the job; returns a task that feeds the rest of
        ``frame`` and returns the output words.

        W panel 0, the X panels and W panel 1 are taken as fast as they come; each later W
        panel only when a W bank is free (tready rises): queued earlier, the source would
        poll the stalled stream from Python on every cycle."""
        panel = spec["panel_beats"] * spec["beat_bytes"]
        first = spec["first_panels"] * panel
        await self.source.send(AxiStreamFrame(frame[:first].tobytes()))
        await self.axil.write_dword(self.reg["CTRL"], spec["ctrl"] | 1)
        return cocotb.start_soon(self._complete(frame, first, panel))

    async def _complete(self, frame, first, panel):
        receiving = cocotb.start_soon(self.sink.recv())
        for start in range(first, frame.size, panel):
            await self.source.wait()
            if not int(self.dut.s_axis__tready.value):
                await RisingEdge(self.dut.s_axis__tready)
            await self.source.send(AxiStreamFrame(frame[start:start + panel].tobytes()))
        out = await receiving
        await ClockCycles(self.dut.clk, 2)   # done (and irq) follow the last beat
        return np.array(out.tdata, dtype=np.uint32)

    async def counters(self) -> dict:
        """``irq`` now, STATUS and the cycle counters."""
        irq = bool(self.dut.irq.value)
        status = await self.axil.read_dword(self.reg["STATUS"])
        cycles, array_cycles = await self.axil.read_dwords(self.reg["CYCLES"], 2)
        return {"cycles": cycles, "array_cycles": array_cycles, "status": status, "irq": irq}

    async def run_job(self, spec, tables, frame):
        """One whole job; returns the output words and the counters (``done`` cleared after
        reading them, ``status_after_clear`` read back)."""
        await self.program(spec, tables)
        words = await (await self.launch(spec, frame))
        stats = await self.counters()
        await self.axil.write_dword(self.reg["STATUS"], 2)     # clear done (W1C)
        stats["status_after_clear"] = await self.axil.read_dword(self.reg["STATUS"])
        return words, stats


def job_limit_cycles(spec) -> int:
    """A bound no correct job reaches (one MAC per cycle, every beat stalled 20x): a job
    still running then has stalled, and fails instead of hanging the test."""
    m, k, n = spec["m"], spec["k"], spec["n"]
    return 20 * (m * k * n + m * n) + 100_000


async def run_all_jobs(dut, harness):
    """Reset, enable the interrupt and run every job of ``bench_args()`` back to back, each
    within :func:`job_limit_cycles`; stores ``out<n>.npy`` and the counters."""
    args = bench_args()
    data = bench_dir()
    await harness.reset()
    await harness.axil.write_dword(args["registers"]["IRQ_EN"], 1)
    started_wall = time.perf_counter()
    started_cycle = get_sim_time(unit="ns") // CLOCK_NS
    stats = []
    for index, spec in enumerate(args["jobs"]):
        loaded = np.load(data / f"job{index}.npz")
        tables = {name: loaded[name] for name in spec["tables"]}
        words, job_stats = await with_timeout(
            cocotb.start_soon(harness.run_job(spec, tables, loaded["frame"])),
            job_limit_cycles(spec) * CLOCK_NS, "ns")
        np.save(data / f"out{index}.npy", words)
        stats.append(job_stats)
        assert job_stats["status"] & 0b11 == 0b10, f"job {index}: STATUS {job_stats['status']}"
        assert job_stats["status_after_clear"] & 0b11 == 0, "done did not clear"
        assert job_stats["irq"], f"job {index}: irq not raised at completion"
    wall = time.perf_counter() - started_wall
    sim_cycles = int(get_sim_time(unit="ns") // CLOCK_NS - started_cycle)
    write_result({"jobs": stats, "info": {"sim_cycles": sim_cycles, "wall_s": wall,
                                          "cycles_per_s": sim_cycles / wall if wall else 0}})


@cocotb.test()
async def run_jobs(dut):
    args = bench_args()
    Clock(dut.clk, CLOCK_NS, unit="ns").start()     # cocotb's GPI clock: no Python per edge
    harness = EngineHarness(dut, args["registers"], args["regions"],
                            args.get("backpressure", 0.0), args.get("seed", 0))
    await run_all_jobs(dut, harness)
