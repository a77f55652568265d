"""cocotb testbench for the PeZO generators (``zoforge.sim.rng_cosim``).

Drives the side-by-side wrapper's ``ctrl`` input (ready, save, restore bits of every
generator) from ``stimulus.npy`` (one little-endian byte row per cycle), samples ``observe``
(valid bits and all payloads) after the combinational settle of every cycle and stores the
samples as bytes in ``observed.npy``. All checking happens on the host.
"""
import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from zoforge.sim.cosim import bench_args, bench_dir, write_result


@cocotb.test()
async def stream_side_by_side(dut):
    args = bench_args()
    folder = bench_dir()
    stimulus = np.load(folder / "stimulus.npy")
    controls = [int.from_bytes(row.tobytes(), "little") for row in stimulus]
    observe_bytes = args["observe_bytes"]
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    dut.ctrl.value = 0
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    samples = []
    started = time.perf_counter()
    for control in controls:
        dut.ctrl.value = control
        await ReadOnly()
        samples.append(dut.observe.value.to_unsigned())
        await RisingEdge(dut.clk)
    elapsed = time.perf_counter() - started
    observed = np.frombuffer(b"".join(s.to_bytes(observe_bytes, "little") for s in samples),
                             dtype=np.uint8).reshape(len(samples), observe_bytes)
    np.save(folder / "observed.npy", observed)
    write_result({"cycles": len(controls), "loop_s": elapsed})
