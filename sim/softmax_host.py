"""The bus softmax unit's host program (:mod:`zoforge.sim.program`), for every backend, and
``zoforge cosim softmax`` (random jobs against the golden ``int_softmax``).

:func:`softmax_program`: jobs back to back without reset; per job, write the registers it
changes (LENGTH, ROWS, the constants) and its key mask over AXI4-Lite, queue its input
frame, start the unit (CTRL), collect the output frame (up to TLAST, which must fall on the
job's last beat: :func:`~zoforge.sim.program.check_frame`), wait two cycles (done and irq
follow the last beat), sample irq, read STATUS and CYCLES, clear done and read STATUS again.
Each job is one batch. ``args``: ``lanes`` (32-bit words of an output beat), ``registers``
(the register map's addresses), ``key_mask`` (the mask region's address) and ``jobs`` (per
job: ``writes``, register name -> value, and ``out_beats``); ``data``: ``job<i>_frame``
(the input stream as 32-bit words) and ``job<i>_mask`` (the key mask's words). Returns the
arrays ``out<i>`` (output words) and the results ``jobs`` (per job: its counters).

Torch- and Amaranth-free at import (the command line reads :class:`SoftmaxCosimOptions`);
:func:`cosim_softmax` imports :mod:`zoforge.sim.softmax_cosim` when run.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from zoforge.config import Config, FloatRange, IntRange, OneOf, param
from zoforge.sim.program import Write, streamed_job

__all__ = ["softmax_program", "SoftmaxCosimOptions", "cosim_softmax"]


def softmax_program(args: dict, data: dict):
    reg, mask_base = args["registers"], args["key_mask"]
    yield [Write(reg["IRQ_EN"], 1)]
    arrays, stats = {}, []
    for index, spec in enumerate(args["jobs"]):
        batch = [Write(reg[name], value) for name, value in spec["writes"].items()]
        batch += [Write(mask_base + 4 * i, word)
                  for i, word in enumerate(data[f"job{index}_mask"])]
        arrays[f"out{index}"], job = yield from streamed_job(
            f"job {index}", reg, batch, data[f"job{index}_frame"], 0, args["lanes"],
            spec["out_beats"])
        stats.append(job)
    return arrays, {"jobs": stats}


@dataclass(frozen=True)
class SoftmaxCosimOptions(Config):
    """How ``zoforge cosim softmax`` runs random jobs through the unit."""

    kind: ClassVar[str] = "cosim-softmax"

    jobs: int = param(4, "jobs back to back (random row length, rows, key mask, scale)",
                      IntRange(1, 1000))
    max_rows: int = param(6, "most rows a job", IntRange(1, 1 << 12))
    seed: int = param(0, "seed of the random jobs", IntRange(0))
    backend: str = param("jobserver", "where the host program runs: jobserver (Verilator, "
                         "no Python per cycle) or cocotb (cocotbext-axi, Verilator)",
                         OneOf(("jobserver", "cocotb")))
    source_idle: float = param(0.0, "probability that the input stream (and AXI4-Lite "
                               "AW/W/AR) holds valid low in a cycle",
                               FloatRange(0.0, 1.0, high_open=True))
    backpressure: float = param(0.0, "probability that the output stream (and AXI4-Lite "
                                "B/R) holds ready low in a cycle",
                                FloatRange(0.0, 1.0, high_open=True))


def cosim_softmax(config, options: SoftmaxCosimOptions | None = None) -> dict:
    """Random jobs (:func:`zoforge.sim.softmax_cosim.random_call`) on the RTL, compared value
    by value with ``int_softmax``; JSON-able: ``bit_exact``, the jobs' cycles and the cycle
    model's (equal where nothing stalls)."""
    from zoforge.sim.softmax_cosim import cosim_random   # torch: only when a cosim runs
    return cosim_random(config, options or SoftmaxCosimOptions())
