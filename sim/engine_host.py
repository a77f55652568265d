"""The GEMM engine's host program (:mod:`zoforge.sim.program`), for every backend.

Jobs run back to back without reset: per job, write the dimension and requantization
registers and the per-column tables over AXI4-Lite, queue the job's input frame, start the
engine (CTRL), collect the output frame (up to TLAST, which must fall on the job's last
output beat: :func:`~zoforge.sim.program.check_frame`), wait two cycles (done and irq follow
the last beat), sample irq, read STATUS and the cycle counters, clear done and read STATUS
again (:func:`~zoforge.sim.program.streamed_job`, the softmax unit's too). Each job is one
batch. ``args``: ``lanes`` (32-bit words of an output beat),
``registers``, ``regions`` (the engine's address map) and ``jobs`` (per job: ``m, k, n,
ctrl, mult, shift, tables, out_beats`` and ``writes``, more registers by name: a GELU job's
constants);
``data``: ``job<i>_frame`` (the input stream as 32-bit words) and ``job<i>_<TABLE>``.
Returns the arrays ``out<i>`` (output words) and the results ``jobs`` (per-job counters).
"""
from __future__ import annotations

from zoforge.sim.program import Write, streamed_job

__all__ = ["engine_program"]


def engine_program(args: dict, data: dict):
    reg, regions = args["registers"], args["regions"]
    yield [Write(reg["IRQ_EN"], 1)]
    arrays, stats = {}, []
    for index, spec in enumerate(args["jobs"]):
        batch = [Write(reg[name], spec[name.lower()]) for name in ("M", "K", "N", "MULT",
                                                                    "SHIFT")]
        batch += [Write(reg[name], value) for name, value in spec.get("writes", {}).items()]
        for name in spec["tables"]:
            batch += [Write(regions[name] + 4 * i, word)
                      for i, word in enumerate(data[f"job{index}_{name}"])]
        arrays[f"out{index}"], job = yield from streamed_job(
            f"job {index}", reg, batch, data[f"job{index}_frame"], spec["ctrl"],
            args["lanes"], spec["out_beats"], ("CYCLES", "ARRAY_CYCLES"))
        stats.append(job)
    return arrays, {"jobs": stats}
