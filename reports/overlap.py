"""The step's fabric and host work overlapped per piece: a list schedule of three resources.

A phase's work is cut the way the schedule cuts it (:class:`~zoforge.hw.accel.schedule.Job`
``rows``: the engine maps' M chunks, the attention jobs per sequence and head, the ZO
layer's jobs per branch and chunk), so a host driver can pipeline: while the fabric
computes piece c + 1 of a phase, the host post-processes piece c's rows, and the next
phase's piece starts once the host has finished the rows it reads.

* **pieces** (:func:`phase_stage`): a phase's jobs grouped by their first row (the loads,
  which read no row, with the first); each unit runs its jobs piece by piece (piece-major:
  the same jobs, so the same unit sums and phase cycles), so piece c is done when the last
  unit finishes its share of pieces 0..c; the fabric's seconds of piece c are the phase's
  roofline time (``max(compute, memory)``) times its share of those cycles;
* **host pieces**: the host's work after a phase, row-local (LayerNorm, GELU, residuals,
  (de)quantization, the split mapping's sums: spread over the phase's rows) or per sequence
  (the attention products and softmax, pooling: a sequence's work in the piece holding its
  last row); host piece c needs fabric pieces 0..c of its phase;
* **dependencies**: a job needs the host pieces of the previous phase that hold the rows it
  reads (its own rows; a shared phase's rows are branch 0's, a job on another branch reads
  the same token rows; a job after a per-sequence stage needs its sequences whole). Where
  the dependency is every row, the phase serializes: the head (mean pooling needs every
  token of a sequence; its rows are branch x batch) and the update walks (the loss of every
  branch), :data:`SERIAL_PHASES`;
* **resources**: the host, the engines and ZO layers (``fabric``) and the softmax units
  (``softmax``: a phase whose jobs all run on them, between a block's ``scores`` and
  ``context``; its pieces wait for the scores' pieces they read, the context's for the
  softmax's), each running its pieces in the schedule's order;
* **the makespan** (:func:`makespan`): each piece starts when its resource is free and its
  dependency done. Exact recurrence, no simulation.

The host and the fabric share the DDR: the model counts the fabric's streams (the phase's
roofline) and ignores the host's own DDR traffic.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from zoforge.errors import ConfigError

from zoforge.hw.accel.schedule import SOFTMAX

__all__ = ["Stage", "makespan", "phase_stage", "step_stages", "SERIAL_PHASES", "RESOURCES"]

#: Phases that need all of the previous host work (module docstring).
SERIAL_PHASES = ("head", "update")
#: The resources a stage's (non-host) pieces run on.
RESOURCES = ("fabric", SOFTMAX)


@dataclass(frozen=True)
class Stage:
    """One phase as pieces: ``fabric[c]`` and ``host[c]`` seconds of piece c (the host's
    after the fabric's), ``needs[c]``: the last host piece of the previous stage that
    fabric piece c needs (-1: none); ``bounds[c]``: piece c's first row; ``resource``: what
    runs the ``fabric`` pieces (:data:`RESOURCES`: the engines and ZO layers, or the softmax
    units)."""

    fabric: tuple[float, ...]
    host: tuple[float, ...]
    needs: tuple[int, ...]
    bounds: tuple[int, ...] = ()
    resource: str = "fabric"


def makespan(stages) -> float:
    """The overlapped seconds of ``stages`` (:class:`Stage`, in order): fabric piece c of
    stage p starts at max(its resource free, host piece ``needs[c]`` of stage p - 1 done);
    host piece c at max(the host free, fabric piece c done)."""
    free = dict.fromkeys(RESOURCES, 0.0)
    host_free = 0.0
    previous: list[float] = []
    for index, stage in enumerate(stages):
        if stage.resource not in free:
            raise ConfigError("stages", "resources in " + ", ".join(RESOURCES),
                              f"stage {index}: {stage.resource}")
        if not len(stage.fabric) == len(stage.host) == len(stage.needs) > 0:
            raise ConfigError("stages", "pieces with one fabric, host and needs entry each",
                              f"stage {index}")
        if min(stage.fabric + stage.host) < 0:
            raise ConfigError("stages", "seconds >= 0", f"stage {index}")
        if not all(-1 <= need < len(previous) for need in stage.needs):
            raise ConfigError("stages", f"needs in -1..{len(previous) - 1}", f"stage {index}")
        done = []
        for seconds, need in zip(stage.fabric, stage.needs):
            free[stage.resource] = max(free[stage.resource],
                                       previous[need] if need >= 0 else 0.0) + seconds
            done.append(free[stage.resource])
        previous = []
        for seconds, fabric_done in zip(stage.host, done):
            host_free = max(host_free, fabric_done) + seconds
            previous.append(host_free)
    return max(*free.values(), host_free)


def _piece_of(bounds, row: int) -> int:
    """The piece holding ``row`` (``bounds`` ascending from 0): the last first row <= ``row``."""
    return bisect_right(bounds, row) - 1


def _host_pieces(bounds, span: int, seq_len: int, row_s: float, seq_s: float):
    """The host's seconds per piece: ``row_s`` over the span's rows, ``seq_s`` over its
    sequences, each in the piece of its last row."""
    ends = list(bounds[1:]) + [span]
    sequences = -(-span // seq_len)
    host = [row_s * (end - first) / span for first, end in zip(bounds, ends)]
    for s in range(sequences):
        host[_piece_of(bounds, min((s + 1) * seq_len, span) - 1)] += seq_s / sequences
    return host


def _rows(jobs) -> tuple[tuple[int, ...], list[int], int]:
    """The pieces' first rows, each job's first row, and the rows' span."""
    firsts = [job.rows[0] if job.rows else 0 for job in jobs]
    bounds = tuple(sorted({0, *firsts}))
    return bounds, firsts, max([job.rows[1] for job in jobs if job.rows] + [bounds[-1] + 1])


def step_stages(phases, start_s: float, seq_len: int) -> list[Stage]:
    """The step's stages: ``phases`` in order, each ``(name, jobs, cycles per job,
    roofline seconds, (row-local, per-sequence) host seconds after it)``, after the host's
    row-local work before the first (``start_s``) on the first phase's pieces."""
    bounds, _, span = _rows(phases[0][1])
    stages = [Stage((0.0,) * len(bounds),
                    tuple(_host_pieces(bounds, span, seq_len, start_s, 0.0)),
                    (-1,) * len(bounds), bounds)]
    per_sequence = False
    for name, jobs, cycles, seconds, host in phases:
        stage, span = phase_stage(name, jobs, cycles, seconds, host, stages[-1], span,
                                  per_sequence, seq_len)
        stages.append(stage)
        per_sequence = host[1] > 0
    return stages


def phase_stage(name: str, jobs, cycles, seconds: float, host: tuple[float, float],
                previous: Stage, previous_span: int, previous_per_sequence: bool,
                seq_len: int) -> tuple[Stage, int]:
    """Phase ``name`` as a :class:`Stage` and its row span: ``jobs`` (schedule order) with
    ``cycles`` each, the phase's roofline ``seconds``, the host's work after it ``host`` =
    (row-local, per-sequence) seconds, the ``previous`` stage (its row span, whether its
    host work is per sequence)."""
    bounds, firsts, span = _rows(jobs)
    pieces = [_piece_of(bounds, first) for first in firsts]
    units: dict = {}
    for job, piece, count in zip(jobs, pieces, cycles):
        units.setdefault((job.unit, job.replica), [0] * len(bounds))[piece] += count
    done, totals = [], dict.fromkeys(units, 0)
    for c in range(len(bounds)):
        for unit in units:
            totals[unit] += units[unit][c]
        done.append(max(totals.values()))
    whole = done[-1]
    fabric = [seconds * ((d - (done[c - 1] if c else 0)) / whole if whole else
                         1 / len(bounds)) for c, d in enumerate(done)]
    last = len(previous.bounds) - 1
    needs = [-1] * len(bounds)
    for job, piece in zip(jobs, pieces):
        need = last if name in SERIAL_PHASES else _needed(job, previous, previous_span,
                                                          previous_per_sequence, seq_len)
        needs[piece] = max(needs[piece], need)
    resource = SOFTMAX if all(job.unit == SOFTMAX for job in jobs) else "fabric"
    return Stage(tuple(fabric), tuple(_host_pieces(bounds, span, seq_len, *host)),
                 tuple(needs), bounds, resource), span


def _needed(job, previous: Stage, span: int, per_sequence: bool, seq_len: int) -> int:
    """The last host piece of ``previous`` that ``job`` reads (module docstring)."""
    if job.rows is None:                              # a load: reads no forward row
        return -1
    first, end = job.rows
    if end > span:                                    # a shared phase: branch 0's rows
        shift = first // span * span
        first, end = first - shift, end - shift
        if end > span:
            return len(previous.bounds) - 1
    row = end - 1
    if per_sequence:
        row = min((row // seq_len + 1) * seq_len, span) - 1
    return _piece_of(previous.bounds, row)
