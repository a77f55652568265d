"""cocotb testbench: GEMM jobs under given stall patterns on both streams (fuzzing).

Like :mod:`zoforge.sim.benches.gemm` (the same :class:`~zoforge.sim.benches.gemm.EngineHarness`
and job files, run through :meth:`zoforge.sim.gemm_cosim.GemmCosim.run` with
``bench="zoforge.sim.benches.gemm_fuzz"``), but the output sink's ``tready`` and the input
source's ``tvalid`` follow the patterns in ``pause.npz`` (``sink``, ``source``: 0/1 per
cycle, repeated; 1 = stalled that cycle) instead of a random probability, so that a
property-based test can draw bursts, periodic stalls or none. Every job must finish within
:func:`~zoforge.sim.benches.gemm.job_limit_cycles`; the host checks the outputs against the
golden model.
"""
import itertools

import cocotb
import numpy as np
from cocotb.clock import Clock

from zoforge.sim.benches.gemm import CLOCK_NS, EngineHarness, run_all_jobs
from zoforge.sim.cosim import bench_args, bench_dir


@cocotb.test()
async def run_jobs_with_stall_patterns(dut):
    args = bench_args()
    Clock(dut.clk, CLOCK_NS, unit="ns").start()
    harness = EngineHarness(dut, args["registers"], args["regions"])
    patterns = np.load(bench_dir() / "pause.npz")
    for part, name in ((harness.sink, "sink"), (harness.source, "source")):
        pattern = [bool(v) for v in patterns[name]]
        if any(pattern):
            part.set_pause_generator(itertools.cycle(pattern))
    await run_all_jobs(dut, harness)
