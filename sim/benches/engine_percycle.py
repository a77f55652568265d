"""Baseline for the co-simulation speed comparison: the same jobs as :mod:`.gemm`, driven
from Python on every clock cycle (AXI4-Lite and AXI4-Stream handshakes by hand, one
``await RisingEdge`` per cycle, output sampled every cycle).

Only ``benchmarks/bench_engine.py`` uses it; its output files and results have the same
format as :mod:`.gemm`, so the host checks both the same way.
"""
import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotb.utils import get_sim_time

from zoforge.sim.cosim import bench_args, bench_dir, write_result

CLOCK_NS = 10


async def until_high(dut, signal):
    """Clock edges until ``signal`` is 1 at one."""
    while True:
        await RisingEdge(dut.clk)
        if int(signal.value):
            return


async def axil_write(dut, address, value):
    dut.s_axil__awaddr.value = address
    dut.s_axil__wdata.value = value & 0xFFFFFFFF
    dut.s_axil__wstrb.value = 0xF
    dut.s_axil__awvalid.value = 1
    dut.s_axil__wvalid.value = 1
    dut.s_axil__bready.value = 1
    await until_high(dut, dut.s_axil__awready)
    dut.s_axil__awvalid.value = 0
    dut.s_axil__wvalid.value = 0
    await until_high(dut, dut.s_axil__bvalid)


async def axil_read(dut, address):
    dut.s_axil__araddr.value = address
    dut.s_axil__arvalid.value = 1
    dut.s_axil__rready.value = 1
    await until_high(dut, dut.s_axil__arready)
    dut.s_axil__arvalid.value = 0
    await until_high(dut, dut.s_axil__rvalid)
    return int(dut.s_axil__rdata.value)


@cocotb.test()
async def run_jobs(dut):
    args = bench_args()
    data = bench_dir()
    reg, regions = args["registers"], args["regions"]
    Clock(dut.clk, CLOCK_NS, unit="ns").start()     # cocotb's GPI clock: no Python per edge
    for name in ("s_axil__awvalid", "s_axil__wvalid", "s_axil__arvalid", "s_axis__tvalid",
                 "s_axis__tlast", "m_axis__tready"):
        getattr(dut, name).value = 0
    dut.rst.value = 1
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)
    await axil_write(dut, reg["IRQ_EN"], 1)
    lanes = len(dut.m_axis__tdata) // 32
    started_wall = time.perf_counter()
    started_cycle = get_sim_time(unit="ns") // CLOCK_NS
    stats = []
    for index, spec in enumerate(args["jobs"]):
        loaded = np.load(data / f"job{index}.npz")
        for name in ("M", "K", "N", "MULT", "SHIFT"):
            await axil_write(dut, reg[name], spec[name.lower()])
        for name in spec["tables"]:
            for word_index, word in enumerate(loaded[name].tolist()):
                await axil_write(dut, regions[name] + 4 * word_index, word)
        frame = loaded["frame"]
        beat_bytes = len(dut.s_axis__tdata) // 8
        beats = [int.from_bytes(row.tobytes(), "little")
                 for row in frame.reshape(-1, beat_bytes)]
        await axil_write(dut, reg["CTRL"], spec["ctrl"] | 1)
        words, sent, finished = [], 0, False
        dut.m_axis__tready.value = 1
        dut.s_axis__tdata.value = beats[0]
        dut.s_axis__tvalid.value = 1
        while not finished:                      # one iteration per clock cycle
            await RisingEdge(dut.clk)
            if sent < len(beats) and int(dut.s_axis__tready.value):
                sent += 1
                if sent < len(beats):
                    dut.s_axis__tdata.value = beats[sent]
                else:
                    dut.s_axis__tvalid.value = 0
            if int(dut.m_axis__tvalid.value):
                value = int(dut.m_axis__tdata.value)
                words.extend((value >> (32 * lane)) & 0xFFFFFFFF for lane in range(lanes))
                finished = bool(int(dut.m_axis__tlast.value))
        dut.m_axis__tready.value = 0
        await ClockCycles(dut.clk, 2)
        irq = bool(int(dut.irq.value))
        status = await axil_read(dut, reg["STATUS"])
        cycles = await axil_read(dut, reg["CYCLES"])
        array_cycles = await axil_read(dut, reg["ARRAY_CYCLES"])
        await axil_write(dut, reg["STATUS"], 2)
        np.save(data / f"out{index}.npy", np.array(words, dtype=np.uint32))
        stats.append({"cycles": cycles, "array_cycles": array_cycles, "status": status,
                      "irq": irq})
    wall = time.perf_counter() - started_wall
    sim_cycles = int(get_sim_time(unit="ns") // CLOCK_NS - started_cycle)
    write_result({"jobs": stats, "info": {"sim_cycles": sim_cycles, "wall_s": wall,
                                          "cycles_per_s": sim_cycles / wall if wall else 0}})
