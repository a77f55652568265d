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
  softmax's);
* **the attention links** (``Stage.feeds``): a scores phase whose S streams into the softmax
  units through the links (hw/link/path.py: two reorder banks per engine, a piece's jobs
  on an engine fill at most both) starts its piece c + 1 only when the softmax's piece c
  is done (its banks read out; the host driver issues the next piece's scores jobs then,
  so no engine stalls behind a full link); a design whose engines would take more than
  :data:`LINK_BANKS` of a piece's scores jobs is refused (one line: the stall within the
  piece is not priced);
* **the list schedule** (:func:`schedule`, :func:`makespan`): the host driver issues a
  piece as soon as what it reads is done, so the pieces of different phases interleave (the
  row pieces move through the blocks as a wavefront, not phase by phase). Whenever a
  resource is free it starts, of its pieces whose dependencies are done, on the fabric and
  the softmax units the one of the earliest phase (no piece falls behind), on the host the
  one of the latest phase (the work that lets the fabric run ahead); each resource runs one
  phase's pieces in their order. A host piece with no work takes no host time (it is done
  when its fabric piece and the phase's earlier host pieces are). Every piece is the same
  jobs in any order: an engine job streams its own X, W and tables, and the ZO layer's
  forward pieces load their own state (:mod:`zoforge.hw.accel.schedule`); a stage whose
  pieces share state loaded once (``loads``: jobs that read no row, the update walks')
  runs alone: its first piece starts when every earlier piece is done, and no later piece
  starts before its last ends;
* **the DDR** (:func:`ddr_rates`): a fabric or softmax piece streams at its phase's share of
  the DDR's peak (``Stage.ddr``: the phase's memory seconds over its roofline seconds);
  when the pieces running at once ask for more than the peak it is shared max-min fair, and
  a piece given less than it asks runs slower in proportion. Event by event (a piece's end
  moves when another starts or ends), no simulation of the units.

The host's own DDR traffic is ignored (the phases' roofline counts the fabric's streams).
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, replace

from zoforge.errors import ConfigError

from zoforge.hw.accel.schedule import SOFTMAX

__all__ = ["Stage", "Placed", "HOST", "schedule", "makespan", "ddr_rates", "phase_stage", "step_stages", "SERIAL_PHASES", "RESOURCES"]

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
    units); ``loads``: its pieces share state its first piece loads (it runs alone); ``ddr``:
    the share of the DDR's peak its pieces stream at alone (the phase's memory seconds over
    its roofline seconds, 0..1); ``feeds``: its pieces stream into the next stage's through
    the attention links (the next stage's piece c is done before its piece c + 1 starts;
    both stages cut alike)."""

    fabric: tuple[float, ...]
    host: tuple[float, ...]
    needs: tuple[int, ...]
    bounds: tuple[int, ...] = ()
    resource: str = "fabric"
    loads: bool = False
    ddr: float = 0.0
    feeds: bool = False


#: The host's name in :func:`schedule`'s placements (the other resources: :data:`RESOURCES`).
HOST = "host"


@dataclass(frozen=True)
class Placed:
    """One piece placed by :func:`schedule`: on ``resource`` (:data:`HOST` or one of
    :data:`RESOURCES`), stage ``stage``'s piece ``piece`` from ``start`` to ``end`` seconds
    (a host piece with no work is not placed: it is done with its fabric piece)."""

    resource: str
    stage: int
    piece: int
    start: float
    end: float


def _check(stages) -> None:
    count = 0
    for index, stage in enumerate(stages):
        if stage.resource not in RESOURCES:
            raise ConfigError("stages", "resources in " + ", ".join(RESOURCES),
                              f"stage {index}: {stage.resource}")
        if not len(stage.fabric) == len(stage.host) == len(stage.needs) > 0:
            raise ConfigError("stages", "pieces with one fabric, host and needs entry each",
                              f"stage {index}")
        if min(stage.fabric + stage.host) < 0:
            raise ConfigError("stages", "seconds >= 0", f"stage {index}")
        if not 0 <= stage.ddr <= 1:
            raise ConfigError("stages", "a DDR share in 0..1", f"stage {index}: {stage.ddr}")
        if not all(-1 <= need < count for need in stage.needs):
            raise ConfigError("stages", f"needs in -1..{count - 1}", f"stage {index}")
        count = len(stage.fabric)
        if stage.feeds and (index + 1 == len(stages)
                            or stages[index + 1].bounds != stage.bounds
                            or len(stages[index + 1].fabric) != len(stage.fabric)
                            or stage.loads or stages[index + 1].loads
                            or any(need > c for c, need in enumerate(stages[index + 1].needs))):
            raise ConfigError("stages", "a stage that feeds the next through the links cut "
                              "as the next, neither loading anything, the next's piece c "
                              "reading pieces 0..c", f"stage {index}")


def schedule(stages) -> list[Placed]:
    """The pieces of ``stages`` (:class:`Stage`, in order) placed by the list schedule of
    the module docstring, in the order they end."""
    _check(stages)
    count = len(stages)
    fabric_done = [[None] * len(stage.fabric) for stage in stages]
    host_done = [[None] * len(stage.host) for stage in stages]   # pieces 0..c all done
    next_fabric, next_host = [0] * count, [0] * count
    barrier = [max([q for q in range(p) if stages[q].loads], default=-1) for p in range(count)]
    running: dict = {}                    # resource -> [stage, piece, start, seconds left]
    placed: list[Placed] = []
    left = sum(len(stage.fabric) + len(stage.host) for stage in stages)
    now = 0.0

    def fabric_ready(p: int) -> bool:
        stage, c = stages[p], next_fabric[p]
        if c == len(stage.fabric):
            return False
        need = stage.needs[c]
        before = range(p) if stage.loads and c == 0 else \
            (barrier[p],) if barrier[p] >= 0 else ()     # a stage with loads runs alone
        if stage.feeds and c and fabric_done[p + 1][c - 1] is None:
            return False                                 # the link's banks still full
        return (need < 0 or host_done[p - 1][need] is not None) and \
            all(fabric_done[q][-1] is not None for q in before)

    while left:
        for p, stage in enumerate(stages):       # a host piece with no work: no host time
            c = next_host[p]
            while c < len(stage.host) and stage.host[c] == 0 and \
                    fabric_done[p][c] is not None and (c == 0 or host_done[p][c - 1]
                                                       is not None):
                host_done[p][c] = max(fabric_done[p][c], host_done[p][c - 1] if c else 0.0)
                c, left = c + 1, left - 1
            next_host[p] = c
        for resource in (*RESOURCES, HOST):      # each idle resource starts its first piece
            if any(piece[3] == 0 for piece in running.values()):
                break                            # what a piece of no time frees comes first
            if resource in running:
                continue
            if resource == HOST:
                ready = [p for p in range(count - 1, -1, -1) if next_host[p] < len(
                    stages[p].host) and fabric_done[p][next_host[p]] is not None]
            else:
                ready = [p for p in range(count) if stages[p].resource == resource
                         and fabric_ready(p)]
            if ready:
                p = ready[0]
                c = next_host[p] if resource == HOST else next_fabric[p]
                seconds = stages[p].host[c] if resource == HOST else stages[p].fabric[c]
                if resource == HOST:
                    next_host[p] += 1
                else:
                    next_fabric[p] += 1
                running[resource] = [p, c, now, seconds]
        if not running:
            if left:                             # _check's needs rule out a cycle
                raise RuntimeError(f"overlap: {left} pieces cannot start")
            break
        rates = dict.fromkeys(running, 1.0)
        rates.update(ddr_rates({resource: stages[p].ddr for resource, (p, *_) in
                                running.items() if resource != HOST}))
        step = min(piece[3] / rates[resource] for resource, piece in running.items())
        now += step
        for resource, piece in list(running.items()):
            piece[3] -= step * rates[resource]
            if piece[3] > 1e-12 * max(1.0, now):
                continue
            p, c, start = piece[:3]
            del running[resource]
            left -= 1
            if resource == HOST:
                host_done[p][c] = max(now, host_done[p][c - 1] if c else 0.0)
            else:
                fabric_done[p][c] = now
            placed.append(Placed(resource, p, c, start, now))
    return placed


def ddr_rates(demands: dict) -> dict:
    """Each streaming piece's speed (0..1) when pieces asking ``demands`` (key -> share of
    the DDR's peak, 0..1) stream at once: the peak shared max-min fair (water-filling, as
    a round-robin arbiter between the ports serves them): a piece asking at most an equal
    share of what is left gets all it asks, the rest split the remainder equally; speed =
    what it gets over what it asks (1 for a piece that asks nothing)."""
    rates, left = {}, 1.0
    ordered = sorted(demands.items(), key=lambda item: item[1])
    for index, (key, ask) in enumerate(ordered):
        given = min(ask, left / (len(ordered) - index))
        rates[key] = given / ask if ask else 1.0
        left -= given
    return rates


def makespan(stages) -> float:
    """The overlapped seconds of ``stages`` (:class:`Stage`, in order): the last piece's
    end in :func:`schedule`."""
    return max((piece.end for piece in schedule(stages)), default=0.0)


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


def step_stages(phases, start_s: float, seq_len: int, linked: bool = False) -> list[Stage]:
    """The step's stages: ``phases`` in order, each ``(name, jobs, cycles per job,
    roofline seconds, (row-local, per-sequence) host seconds after it, DDR share)``, after
    the host's row-local work before the first (``start_s``) on the first phase's pieces;
    with ``linked`` (the attention links), a stage followed by a softmax units' stage
    feeds it (``Stage.feeds``)."""
    bounds, _, span = _rows(phases[0][1])
    stages = [Stage((0.0,) * len(bounds),
                    tuple(_host_pieces(bounds, span, seq_len, start_s, 0.0)),
                    (-1,) * len(bounds), bounds)]
    per_sequence = False
    for name, jobs, cycles, seconds, host, ddr in phases:
        stage, span = phase_stage(name, jobs, cycles, seconds, host, stages[-1], span,
                                  per_sequence, seq_len, ddr)
        if linked and stage.resource == SOFTMAX:
            _check_banks(phases[len(stages) - 2][:2])
            stages[-1] = replace(stages[-1], feeds=True)
        stages.append(stage)
        per_sequence = host[1] > 0
    return stages


#: Reorder banks of an attention link (hw/link/reorder.py): the scores jobs of one piece a
#: linked engine can run before the softmax units read any of them.
LINK_BANKS = 2


def _check_banks(phase) -> None:
    """A linked scores phase ``(name, jobs)`` puts at most :data:`LINK_BANKS` jobs of a
    piece on each engine (else an engine would stall behind its full link within a piece,
    which the pieces' model does not price): a one-line error otherwise."""
    name, jobs = phase
    bounds, firsts, _ = _rows(jobs)
    count: dict = {}
    for job, first in zip(jobs, firsts):
        key = (job.unit, job.replica, _piece_of(bounds, first))
        count[key] = count.get(key, 0) + 1
    most = max(count.values(), default=0)
    if most > LINK_BANKS:
        raise ConfigError("link", f"a design whose engines each take at most {LINK_BANKS} "
                          f"of a piece's linked scores jobs (the link's banks; {name}: "
                          f"{most})", True)


def phase_stage(name: str, jobs, cycles, seconds: float, host: tuple[float, float],
                previous: Stage, previous_span: int, previous_per_sequence: bool,
                seq_len: int, ddr: float = 0.0) -> tuple[Stage, int]:
    """Phase ``name`` as a :class:`Stage` and its row span: ``jobs`` (schedule order) with
    ``cycles`` each, the phase's roofline ``seconds``, the host's work after it ``host`` =
    (row-local, per-sequence) seconds, the ``previous`` stage (its row span, whether its
    host work is per sequence), the share of the DDR's peak it streams at (``ddr``)."""
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
                 tuple(needs), bounds, resource,
                 loads=any(job.rows is None for job in jobs), ddr=ddr), span


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
