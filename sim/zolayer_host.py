"""The ZO layer's host program, written once for every backend (:mod:`zoforge.sim.program`).

The ARM host of a training run, as generators of bus-operation batches:
:class:`LayerHost` is the register and job interface (``write(name, value)``,
``read(name)``, ``job(name, words, receive, **flags)``; names from
:mod:`zoforge.hw.zolayer.registers`); a job is one batch (stream the words, write CTRL, collect
the output frame, poll STATUS done, read CYCLES and ARRAY_CYCLES, clear done).
:class:`LayerSteps` is the program one step at a time: load the frozen weights and the
master copy, then per step load the batch, compute the frozen products, run each query's
two branches, compute the loss and the projected gradient g
(:mod:`zoforge.golden.zolayer.host`, the code the golden model uses), accumulate, apply the
update and read T back (a :class:`StepRecord`). :func:`layer_program` is the whole
co-simulation: ``args["steps"]`` steps (the last under the sequential schedule, every branch
recomputing the frozen products, for the cycle comparison) and a plain (unperturbed) branch
at the end.

Each method is a generator: run it with :func:`~zoforge.sim.program.drive` (the job server:
:class:`~zoforge.sim.zolayer_jobserver.LayerSession`) or inside a program (``yield from``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from zoforge.golden.zolayer.host import CrossEntropyHost, projected_gradient, squared_error
from zoforge.hw.zolayer.layouts import branch_outputs, master_output, panel_words, token_words
from zoforge.hw.zolayer.registers import address, ctrl_word
from zoforge.sim.program import Poll, Read, Receive, Send, Write, check_frame

__all__ = ["LayerHost", "LayerSteps", "StepRecord", "layer_program", "host_functions",
           "POLL_GAP", "DONE"]

DONE = 0b10          # STATUS bit 1: done (sticky; writing it clears it)
POLL_GAP = 4         # idle cycles between STATUS reads


class LayerHost:
    """The layer's registers and jobs (``lanes``: the streams' 32-bit lanes); ``jobs``
    logs every job's counters and flags, ``irq`` is the pin after the last batch."""

    def __init__(self, lanes: int):
        self.lanes = lanes
        self.jobs: list[dict] = []
        self.irq = False

    def write(self, name: str, value: int):
        (reply,) = yield [Write(address(name), value)]
        self.irq = reply.irq

    def read(self, name: str):
        (reply,) = yield [Read(address(name))]
        self.irq = reply.irq
        return reply.value

    def job(self, name: str, words=None, receive: bool = False, beats: int | None = None,
            **flags):
        """One job; ``words`` (rows of lanes) are streamed in; returns the output frame
        ``(beats, lanes)`` int32 when ``receive`` (else None), which must end (TLAST) on
        beat ``beats`` (:func:`~zoforge.sim.program.check_frame`)."""
        batch = [] if words is None else [Send(words)]
        batch.append(Write(address("CTRL"), ctrl_word(name, **flags)))
        if receive:
            batch.append(Receive())
        batch += [Poll(address("STATUS"), DONE, POLL_GAP), Read(address("CYCLES")),
                  Read(address("ARRAY_CYCLES")), Write(address("STATUS"), DONE)]
        replies = yield batch
        self.irq = replies[-1].irq
        cycles, array_cycles = (reply.value for reply in replies[-3:-1])
        self.jobs.append({"job": name, "cycles": cycles, "array_cycles": array_cycles,
                          **{k: bool(v) for k, v in flags.items()}})
        if not receive:
            return None
        frame = replies[-5].words
        if beats is not None:
            check_frame(f"{name} job", frame, self.lanes, beats)
        return frame.view(np.int32).reshape(-1, self.lanes)


@dataclass
class StepRecord:
    """What the host saw in one step: each branch's output and loss (``+``, ``-`` per
    query), the g values, T after the update and the STEP_CYCLES counter."""

    outputs: list[np.ndarray] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    grads: list[int] = field(default_factory=list)
    master: np.ndarray | None = None
    cycles: int = 0


class LayerSteps:
    """The host's program on a layer of ``rows x cols`` (``lora``: lora-fa), shape ``m, k,
    n`` (and ``r``), as generators over ``host``."""

    def __init__(self, host: LayerHost, rows: int, cols: int, lora: bool,
                 m: int, k: int, n: int, r: int = 0, branch_lanes: int = 1):
        self.host, self.rows, self.cols, self.lora = host, rows, cols, lora
        self.m, self.k, self.n, self.r = m, k, n, r
        self.branch_lanes = branch_lanes
        self.per_job = max(1, branch_lanes // 2)     # queries of one branch job
        # output frames: a branch job's branch_lanes * M * N values on C lanes of a beat,
        # read_master's K_t * N values on R
        self.branch_beats = branch_lanes * m * n // cols
        self.master_beats = (r if lora else k) * n // rows

    def configure(self, *, eps_shift: int, eta_mult: int, eta_shift: int, mult: int,
                  shift: int):
        """The shape and step registers."""
        yield [Write(address(name), value) for name, value in (
            ("M", self.m), ("K", self.k), ("N", self.n), ("RANK", self.r), ("MULT", mult),
            ("SHIFT", shift), ("EPS_SHIFT", eps_shift), ("ETA_MULT", eta_mult),
            ("ETA_SHIFT", eta_shift))]

    def load(self, master: np.ndarray, w: np.ndarray | None = None,
             a: np.ndarray | None = None):
        """The frozen weights (lora-fa; no ``load_w`` when ``w`` is None, for branches with
        ``zero_w``) and the master copy."""
        lanes = self.host.lanes
        if self.lora:
            if w is not None:
                yield from self.host.job("load_w", panel_words(w, self.rows, lanes))
            yield from self.host.job("load_a", panel_words(a, self.rows, lanes))
        yield from self.host.job("load_master", panel_words(master, self.rows, lanes,
                                                            self.branch_lanes))

    def frozen(self, x: np.ndarray, zero_w: bool = False):
        """Load a batch and compute its frozen products (``zero_w``: U only, no
        ``frozen_w``, for branches with the ``zero_w`` flag)."""
        yield from self.host.job("load_x", token_words(x, self.cols, self.host.lanes))
        if self.lora:
            if not zero_w:
                yield from self.host.job("frozen_w")
            yield from self.host.job("frozen_a")

    def branches(self, **flags):
        """One branch job: its branches' outputs ``(branch_lanes, M, N)`` (query j's + and -
        at 2j and 2j + 1; a plain job's are all the plain output)."""
        out = yield from self.host.job("branch", receive=True, beats=self.branch_beats,
                                       **flags)
        return branch_outputs(out, self.m, self.n, self.rows, self.cols, self.branch_lanes)

    def branch(self, **flags):
        outputs = yield from self.branches(**flags)
        return outputs[0]

    def step(self, x: np.ndarray, target, queries: int, loss, gradient,
             sequential: bool = False):
        """One ZO step on the batch ``x`` (P-RGE schedule; ``sequential``: every branch
        recomputes the frozen products); returns its :class:`StepRecord`."""
        record = StepRecord()
        yield from self.host.write("STEP_CYCLES", 0)
        if not sequential:
            yield from self.frozen(x)
        for _ in range(queries // self.per_job):
            if sequential:
                yield from self.frozen(x)
            if self.branch_lanes > 1:        # every branch of the job's queries at once
                outputs = list((yield from self.branches(save=True)))
            else:
                outputs = [(yield from self.branch(save=True))]
                if sequential:
                    yield from self.frozen(x)
                outputs.append((yield from self.branch(restore=True, minus=True)))
            for query in range(self.per_job):
                y_plus, y_minus = outputs[2 * query], outputs[2 * query + 1]
                l_plus, l_minus = loss(y_plus, target), loss(y_minus, target)
                record.outputs += [y_plus, y_minus]
                record.losses += [l_plus, l_minus]
                record.grads.append(gradient(l_plus, l_minus))
            for query, g in enumerate(record.grads[-self.per_job:]):
                yield from self.host.write("GRAD", g)
                yield from self.host.job("accumulate", restore=True, query=query)
        yield from self.host.job("apply")
        record.cycles = yield from self.host.read("STEP_CYCLES")
        master = yield from self.host.job("read_master", receive=True,
                                          beats=self.master_beats)
        record.master = master_output(master, self.n, self.rows, self.branch_lanes)
        return record

    def outputs(self, x: np.ndarray):
        """Unperturbed outputs for ``x`` (any number of rows, in batches of ``m``; the last
        batch padded with zero rows)."""
        rows = []
        for start in range(0, len(x), self.m):
            batch = np.zeros((self.m, x.shape[1]), dtype=np.int64)
            part = x[start:start + self.m]
            batch[:len(part)] = part
            yield from self.frozen(batch)
            out = yield from self.branch(plain=True)
            rows.append(out[:len(part)])
        return np.concatenate(rows)


def host_functions(args: dict):
    """The host's ``(loss(y, target), gradient(l_plus, l_minus))`` and the data key of the
    targets: the classification host (``args["host"]``) or the regression host."""
    if args.get("host"):
        classifier = CrossEntropyHost(**args["host"])
        return classifier.loss, classifier.gradient, "labels"

    def gradient(loss_plus, loss_minus):
        return projected_gradient(loss_plus, loss_minus, args["grad_shift"])
    return squared_error, gradient, "target"


def layer_program(args: dict, data: dict[str, np.ndarray], host: LayerHost | None = None):
    """The ZO layer's co-simulation (a host program): ``args`` from
    :func:`zoforge.sim.zolayer_cosim.layer_args`, ``data`` from
    :func:`zoforge.sim.zolayer_cosim.make_data` (one batch per step; the last step runs
    sequentially). Returns the arrays ``branches``, ``masters``, ``plain`` and the results
    ``grads``, ``step_cycles``, ``jobs``, ``irq``."""
    host = host or LayerHost(args["lanes"])
    loss, gradient, target_key = host_functions(args)
    steps = LayerSteps(host, args["rows"], args["cols"], args["lora"],
                       args["m"], args["k"], args["n"], args["r"], args.get("branch_lanes", 1))
    yield from steps.configure(**{name: args[name] for name in (
        "eps_shift", "eta_mult", "eta_shift", "mult", "shift")})
    yield from steps.load(data["master"], data.get("w"), data.get("a"))
    xs = data["x"]
    branches, masters, grads, step_cycles = [], [], [], []
    for index, (x, target) in enumerate(zip(xs, data[target_key])):
        record = yield from steps.step(x, target, args["q"], loss, gradient,
                                       sequential=index == len(xs) - 1)
        branches += record.outputs
        masters.append(record.master)
        grads.append(record.grads)
        step_cycles.append(record.cycles)
    plain = yield from steps.branch(plain=True)
    arrays = {"branches": np.stack(branches), "masters": np.stack(masters), "plain": plain}
    return arrays, {"grads": grads, "step_cycles": step_cycles, "jobs": host.jobs,
                    "irq": int(host.irq)}
