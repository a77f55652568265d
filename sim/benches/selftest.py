"""Self-test of the co-simulation harness on an 8-bit counter (``zoforge.sim.selftest``).

Holds ``en`` high for ``cycles`` clock edges, then low for a few, and reports the count.
"""
import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

from zoforge.sim.cosim import bench_args, write_result


@cocotb.test()
async def count_cycles(dut):
    args = bench_args()
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    dut.en.value = 0
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    dut.en.value = 1
    await ClockCycles(dut.clk, args["cycles"])
    dut.en.value = 0
    await ClockCycles(dut.clk, 3)
    await RisingEdge(dut.clk)
    write_result({"count": int(dut.count.value)})
