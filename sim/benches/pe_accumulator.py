"""cocotb testbench: very long dot products through the systolic array (``SystolicArray``).

The host (``tests/test_engine_accumulator.py``) gives one tile of K k-steps as three parts:
``prefix.npz`` and ``suffix.npz`` (``a [steps, R]``, ``b [steps, C]``, driven one step per
cycle from Python) and, between them, ``middle`` steps of the constant operands ``a_const`` /
``b_const`` (held on the ports while the simulator runs on its own: no Python per cycle, so
K can exceed 2^17 and the accumulators leave the int32 range). ``first`` is high on the
first step and ``last`` on the last. The bench then waits until the sums are in the result
registers and reads them out (``sel``: row by row, top row first) into ``res.npy``
(``[R, C]``, int64, the signed 32-bit values).
"""
import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge, Timer

from zoforge.sim.cosim import bench_args, bench_dir, write_result

CLOCK_NS = 10


def pack(values, bits: int) -> int:
    return sum((int(v) & ((1 << bits) - 1)) << (bits * i) for i, v in enumerate(values))


def unpack(word: int, count: int, bits: int) -> list[int]:
    lanes = [(word >> (bits * i)) & ((1 << bits) - 1) for i in range(count)]
    return [v - (1 << bits) if v >> (bits - 1) else v for v in lanes]


@cocotb.test(timeout_time=10_000_000, timeout_unit="ns")     # 10^6 cycles: fail, not hang
async def long_dot_products(dut):
    args = bench_args()
    data = bench_dir()
    rows, cols, a_bits, b_bits = args["rows"], args["cols"], args["a_bits"], args["b_bits"]
    prefix, suffix = np.load(data / "prefix.npz"), np.load(data / "suffix.npz")
    Clock(dut.clk, CLOCK_NS, unit="ns").start()
    for name in ("valid", "first", "last", "sel", "a", "b"):
        getattr(dut, name).value = 0
    dut.rst.value = 1
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    await RisingEdge(dut.clk)
    total = len(prefix["a"]) + args["middle"] + len(suffix["a"])
    step = 0

    async def drive(a, b):
        nonlocal step
        for a_row, b_row in zip(a, b):
            dut.a.value = pack(a_row, a_bits)
            dut.b.value = pack(b_row, b_bits)
            dut.valid.value = 1
            dut.first.value = int(step == 0)
            dut.last.value = int(step == total - 1)
            step += 1
            await RisingEdge(dut.clk)

    await drive(prefix["a"], prefix["b"])
    # the constant middle: sampled by the next `middle` rising edges, with no Python in
    # between (half a period early, then the edge itself)
    dut.a.value = pack(args["a_const"], a_bits)
    dut.b.value = pack(args["b_const"], b_bits)
    dut.first.value = int(step == 0)
    dut.valid.value = 1
    if args["middle"]:
        await Timer(CLOCK_NS * args["middle"] - CLOCK_NS // 2, unit="ns")
        await RisingEdge(dut.clk)
        step += args["middle"]
    await drive(suffix["a"], suffix["b"])
    assert step == total
    dut.valid.value = dut.first.value = dut.last.value = 0
    await ClockCycles(dut.clk, rows + cols + 4)        # capture latency, with margin
    drained = []
    for row in range(rows):
        dut.sel.value = row
        await ReadOnly()
        drained.append(unpack(int(dut.res_out.value), cols, 32))
        await RisingEdge(dut.clk)
    np.save(data / "res.npy", np.array(drained, dtype=np.int64))
    write_result({"steps": step})
