"""The time-zero bench (``tests/test_time_zero.py``): after a reset and a few cycles with
``go`` low, reports ``out`` and ``count`` as the simulator shows them (a string of 0, 1, x
or z a bit, most significant first)."""
import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

from zoforge.sim.cosim import write_result


@cocotb.test()
async def read_after_reset(dut):
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    dut.go.value = 0
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 5)
    await RisingEdge(dut.clk)
    write_result({"out": str(dut.out.value), "count": str(dut.count.value)})
