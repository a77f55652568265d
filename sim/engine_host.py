"""The GEMM engine's host program (:mod:`zoforge.sim.program`), for every backend.

Jobs run back to back without reset: per job, write the dimension and requantization
registers and the per-column tables over AXI4-Lite, queue the job's input frame, start the
engine (CTRL), collect the output frame (up to TLAST, which must fall on the job's last
output beat: :func:`~zoforge.sim.program.check_frame`), wait two cycles (done and irq follow
the last beat), sample irq, read STATUS and the cycle counters, clear done and read STATUS
again. Each job is one batch. ``args``: ``lanes`` (32-bit words of an output beat),
``registers``, ``regions`` (the engine's address map) and ``jobs`` (per job: ``m, k, n,
ctrl, mult, shift, tables, out_beats`` and ``writes``, more registers by name: a GELU job's
constants);
``data``: ``job<i>_frame`` (the input stream as 32-bit words) and ``job<i>_<TABLE>``.
Returns the arrays ``out<i>`` (output words) and the results ``jobs`` (per-job counters).
"""
from __future__ import annotations

from zoforge.sim.program import HostCheckFailed, Idle, Read, Receive, Send, Write, check_frame

__all__ = ["engine_program"]

DONE = 0b10          # STATUS bit 1 (write 1 to clear)


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
        batch += [Send(data[f"job{index}_frame"]), Write(reg["CTRL"], spec["ctrl"] | 1),
                  Receive(), Idle(2), Read(reg["STATUS"]), Read(reg["CYCLES"]),
                  Read(reg["ARRAY_CYCLES"]), Write(reg["STATUS"], DONE), Read(reg["STATUS"])]
        replies = yield batch
        frame, settled = replies[-7], replies[-6]
        check_frame(f"job {index}", frame.words, args["lanes"], spec["out_beats"])
        status, cycles, array_cycles, _, cleared = (reply.value for reply in replies[-5:])
        if status & 0b11 != DONE:
            raise HostCheckFailed(f"job {index}: STATUS {status:#x} after its output frame")
        if cleared & 0b11:
            raise HostCheckFailed(f"job {index}: done did not clear (STATUS {cleared:#x})")
        if not settled.irq:
            raise HostCheckFailed(f"job {index}: irq not raised at completion")
        arrays[f"out{index}"] = frame.words
        stats.append({"cycles": cycles, "array_cycles": array_cycles, "status": status,
                      "status_after_clear": cleared, "irq": settled.irq})
    return arrays, {"jobs": stats}
