"""The scores reorder buffer's cycle model, with both streams always ready and each start
given as soon as ``job.ready`` is (exact against the simulation: tests/test_link_reorder.py).

Cycles count from the first start's cycle (0). A job's input beats are taken one a cycle
from the cycle after its start, once its bank is free (the bank of the job two before,
free from the cycle after that job's last read); the job's start is taken the cycle after
the previous job's last input beat. Its output beats follow one a cycle, the first read
in the cycle after both its last input beat and the previous job's last read, and sent
the cycle after each read.
"""
from __future__ import annotations

from dataclasses import dataclass

from zoforge.errors import check_int_range

from .config import ReorderConfig

__all__ = ["JobCycles", "reorder_schedule", "reorder_job_cycles"]


@dataclass(frozen=True)
class JobCycles:
    """A job's cycles: its start's, its first and last input beats', its first and last
    output beats'."""

    start: int
    first_in: int
    last_in: int
    first_out: int
    last_out: int


def reorder_schedule(config: ReorderConfig, jobs) -> list[JobCycles]:
    """The cycles of ``jobs`` (``(m, length)`` pairs) back to back (module docstring)."""
    out: list[JobCycles] = []
    start = 0
    for k, (m, length) in enumerate(jobs):
        check_int_range("m", m, 1, config.max_rows)
        check_int_range("length", length, 1, config.max_len)
        first_in = start + 1
        if k >= 2:                                   # the bank of job k-2, once read
            first_in = max(first_in, out[k - 2].last_out)
        last_in = first_in + config.in_beats(m, length) - 1
        read = last_in + 1
        if k >= 1:                                   # the previous job's reads
            read = max(read, out[k - 1].last_out)
        out.append(JobCycles(start, first_in, last_in, read + 1,
                             read + config.out_beats(m, length)))
        start = last_in + 1
    return out


def reorder_job_cycles(config: ReorderConfig, m: int, length: int) -> int:
    """The cycle of a lone job's last output beat: ``in_beats + out_beats + 1``."""
    return reorder_schedule(config, [(m, length)])[0].last_out
