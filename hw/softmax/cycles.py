"""The bus softmax unit's cycle model: the CYCLES register of one job, and the bytes its
streams move (``zoforge.reports`` prices the step's softmax with them).

* :func:`softmax_job_cycles`: the streaming unit's :func:`~zoforge.hw.nonlinear.softmax.
  softmax_cycles` (the first input beat's transfer to the last output beat's, the rows'
  four processes) plus :data:`JOB_EXTRA` (CYCLES counts from the cycle after the start, and
  the first beat is taken the cycle after that, once the start's register has cleared the
  row counters); exact against the co-simulation with the input always valid and the
  output always ready (``tests/test_softmax_bus.py``);
* :func:`softmax_stream_bytes`: the bytes of a job's streams (in: ``ceil(L / lanes)`` beats
  of ``4 lanes`` bytes a row; out: as many beats of ``4 ceil(lanes / 4)`` bytes) and of
  its register writes (the key mask's words and the job's registers).
"""
from __future__ import annotations

from zoforge.errors import check_int_range
from zoforge.hw.nonlinear.softmax import softmax_cycles

from .config import ROW_BITS, SoftmaxConfig

__all__ = ["JOB_EXTRA", "JOB_REGISTERS", "softmax_job_cycles", "softmax_stream_bytes"]

#: CYCLES of a job beyond the streaming unit's own: the cycle of the start's register.
JOB_EXTRA = 1
#: Register writes a job takes besides its key mask: LENGTH, ROWS, CTRL (the constants are
#: a block's, written once per block and forward; STATUS's clear one more).
JOB_REGISTERS = 4


def softmax_job_cycles(config: SoftmaxConfig, rows: int, length: int) -> int:
    """CYCLES of one job of ``rows`` rows of ``length`` keys (module docstring)."""
    check_int_range("rows", rows, 0, (1 << ROW_BITS) - 1)
    check_int_range("length", length, 1, config.max_len)
    return softmax_cycles(rows, length, config.lanes) + JOB_EXTRA


def softmax_stream_bytes(config: SoftmaxConfig, rows: int, length: int) -> dict[str, int]:
    """Bytes of one job: ``scores`` (the input stream), ``p`` (the output stream),
    ``registers`` (AXI4-Lite words written: the key mask and :data:`JOB_REGISTERS`)."""
    beats = rows * config.beats(length)
    return {"scores": 4 * config.lanes * beats, "p": 4 * config.out_words * beats,
            "registers": 4 * (config.mask_words + JOB_REGISTERS)}
