"""The GEMM engine's AXI ports as cocotbext-axi parts, for the register/protocol bench.

:class:`EngineHarness` splits a job into programming, launch and completion so that
:mod:`zoforge.sim.benches.engine_registers` can act while a job runs. Whole jobs run through
the host program :mod:`zoforge.sim.engine_host` (every backend), not here.
"""
import itertools
import random

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import (AxiLiteBus, AxiLiteMaster, AxiStreamBus, AxiStreamFrame,
                           AxiStreamSink, AxiStreamSource)

from zoforge.sim.program import check_frame


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
        first, panel = spec["first_bytes"], spec["w_panel_bytes"]
        await self.source.send(AxiStreamFrame(frame[:first].tobytes()))
        await self.axil.write_dword(self.reg["CTRL"], spec["ctrl"] | 1)
        return cocotb.start_soon(self._complete(frame, first, panel, spec["out_beats"]))

    async def _complete(self, frame, first, panel, out_beats):
        receiving = cocotb.start_soon(self.sink.recv())
        for start in range(first, frame.size, panel):
            await self.source.wait()
            if not int(self.dut.s_axis__tready.value):
                await RisingEdge(self.dut.s_axis__tready)
            await self.source.send(AxiStreamFrame(frame[start:start + panel].tobytes()))
        out = np.array((await receiving).tdata, dtype=np.uint32)
        check_frame("job", out, len(self.dut.m_axis__tdata) // 32, out_beats)   # TLAST
        await ClockCycles(self.dut.clk, 2)   # done (and irq) follow the last beat
        return out

    async def counters(self) -> dict:
        """``irq`` now, STATUS and the cycle counters."""
        irq = bool(self.dut.irq.value)
        status = await self.axil.read_dword(self.reg["STATUS"])
        cycles, array_cycles = await self.axil.read_dwords(self.reg["CYCLES"], 2)
        return {"cycles": cycles, "array_cycles": array_cycles, "status": status, "irq": irq}
