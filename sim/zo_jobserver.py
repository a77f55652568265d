"""The ZO layer's host program on the job server: ``zoforge cosim zo-layer --backend jobserver``.

:class:`LayerServer` is the layer on a :class:`~zoforge.sim.jobserver.JobServer` with the
interface of the cocotb bench's ``LayerHost`` (``write(name, value)``, ``read(name)``,
``job(name, words, receive, **flags)``; names from :mod:`zoforge.hw.zo.registers`); a job is
one batch of commands (stream the words, write CTRL, collect the output frame, poll STATUS
done, read CYCLES and ARRAY_CYCLES, clear done), so its cycles run in C++ and the pipe is
crossed once per job. The process stays alive across jobs and steps.

:class:`LayerSession` is the host's program one step at a time (load the batch, the frozen
products, each query's two branches, the host's g, accumulate; apply; read T back), returning
what the host saw, so a caller can compare each step with the golden model as it goes (the
demo). :func:`run_steps` is the schedule of :func:`zoforge.sim.benches.zo_layer.run_steps`
on a session (the same arguments, the same outputs), and :func:`run_layer` runs it for
:func:`zoforge.sim.zo_cosim.run_layer`. Verilator only.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from zoforge.golden.zolayer import ZoLayerConfig
from zoforge.golden.zolayer.host import CrossEntropyHost, projected_gradient, squared_error
from zoforge.hw.export import to_verilog
from zoforge.hw.zo.designs import elaborate_layer
from zoforge.hw.zo.layouts import branch_output, master_output, panel_words, token_words
from zoforge.hw.zo.registers import ADDR_BITS, address, ctrl_word
from zoforge.sim.cosim import CosimResult
from zoforge.sim.jobserver import Command, JobServer, JobServerError

__all__ = ["LayerServer", "LayerSession", "StepRecord", "run_steps", "run_layer"]

DONE = 0b10          # STATUS bit 1: done (sticky; writing it clears it)
POLL_GAP = 4         # idle cycles between STATUS reads, as the cocotb bench waits


class LayerServer:
    """The ZO layer of ``config`` on a job server (a context manager; see the module
    docstring). ``server_options``: :class:`~zoforge.sim.jobserver.JobServer`'s
    (``source_idle``, ``sink_backpressure``, ``seed``, ``max_cycles``, ``timeout_s``)."""

    def __init__(self, config: ZoLayerConfig, **server_options):
        elaborated = elaborate_layer(config)
        self.config = config
        self.lanes = max(config.rows, config.cols)
        self.server = JobServer(to_verilog(elaborated.top, elaborated.name), elaborated.name,
                                lanes=self.lanes, addr_bits=ADDR_BITS,
                                memory_files=elaborated.memory_files, **server_options)
        self.jobs: list[dict] = []

    @property
    def pid(self) -> int | None:
        return self.server.pid

    @property
    def cycle(self) -> int:
        """Clock cycles simulated since the server started."""
        return self.server.cycle

    def write(self, name: str, value: int) -> None:
        self.server.write(address(name), value)

    def read(self, name: str) -> int:
        return self.server.read(address(name))

    def job(self, name: str, words=None, receive: bool = False, **flags) -> np.ndarray | None:
        """Run one job; ``words`` (rows of lanes) are streamed in; returns the output frame
        ``(beats, lanes)`` int32 when ``receive``."""
        commands = [] if words is None else [Command.send(words)]
        commands.append(Command.write(address("CTRL"), ctrl_word(name, **flags)))
        if receive:
            commands.append(Command.receive())
        commands += [Command.poll(address("STATUS"), DONE, POLL_GAP),
                     Command.read(address("CYCLES")), Command.read(address("ARRAY_CYCLES")),
                     Command.write(address("STATUS"), DONE)]
        replies = self.server.exchange(commands)
        cycles, array_cycles = (int(reply.words[0]) for reply in replies[-3:-1])
        self.jobs.append({"job": name, "cycles": cycles, "array_cycles": array_cycles,
                          **{k: bool(v) for k, v in flags.items()}})
        if not receive:
            return None
        return replies[-5].words.view(np.int32).reshape(-1, self.lanes)

    def close(self, kill: bool = False) -> None:
        self.server.close(kill)

    def __enter__(self) -> "LayerServer":
        return self

    def __exit__(self, kind, value, traceback) -> None:
        self.close(kill=kind is not None)


# -- one step at a time -------------------------------------------------------------------

@dataclass
class StepRecord:
    """What the host saw in one step: each branch's output and loss (``+``, ``-`` per
    query), the g values, T after the update and the STEP_CYCLES counter."""

    outputs: list[np.ndarray] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    grads: list[int] = field(default_factory=list)
    master: np.ndarray | None = None
    cycles: int = 0


class LayerSession:
    """The host's side of a training run on ``layer`` (full or lora-fa, shape ``m, k, n``
    (and ``r``), loss ``loss(y, target)`` and gradient ``gradient(l_plus, l_minus)``)."""

    def __init__(self, layer: LayerServer, m: int, k: int, n: int, r: int = 0, *,
                 eps_shift: int, eta_mult: int, eta_shift: int, mult: int = 1 << 15,
                 shift: int = 24):
        self.layer, self.m, self.k, self.n, self.r = layer, m, k, n, r
        self.rows, self.cols, self.lanes = layer.config.rows, layer.config.cols, layer.lanes
        self.lora = layer.config.mode == "lora-fa"
        for name, value in (("M", m), ("K", k), ("N", n), ("RANK", r), ("MULT", mult),
                            ("SHIFT", shift), ("EPS_SHIFT", eps_shift),
                            ("ETA_MULT", eta_mult), ("ETA_SHIFT", eta_shift)):
            layer.write(name, value)

    def load(self, master: np.ndarray, w: np.ndarray | None = None,
             a: np.ndarray | None = None) -> None:
        """The frozen weights (lora-fa) and the master copy."""
        if self.lora:
            self.layer.job("load_w", panel_words(w, self.rows, self.lanes))
            self.layer.job("load_a", panel_words(a, self.rows, self.lanes))
        self.layer.job("load_master", panel_words(master, self.rows, self.lanes))

    def frozen(self, x: np.ndarray) -> None:
        """Load a batch and compute its frozen products."""
        self.layer.job("load_x", token_words(x, self.cols, self.lanes))
        if self.lora:
            self.layer.job("frozen_w")
            self.layer.job("frozen_a")

    def branch(self, **flags) -> np.ndarray:
        out = self.layer.job("branch", receive=True, **flags)
        return branch_output(out, self.m, self.n, self.rows, self.cols)

    def step(self, x: np.ndarray, target, queries: int, loss, gradient,
             sequential: bool = False) -> StepRecord:
        """One ZO step on the batch ``x`` (P-RGE schedule; ``sequential``: every branch
        recomputes the frozen products)."""
        record = StepRecord()
        self.layer.write("STEP_CYCLES", 0)
        if not sequential:
            self.frozen(x)
        for _ in range(queries):
            if sequential:
                self.frozen(x)
            y_plus = self.branch(save=True)
            if sequential:
                self.frozen(x)
            y_minus = self.branch(restore=True, minus=True)
            l_plus, l_minus = loss(y_plus, target), loss(y_minus, target)
            g = gradient(l_plus, l_minus)
            self.layer.write("GRAD", g)
            self.layer.job("accumulate", restore=True)
            record.outputs += [y_plus, y_minus]
            record.losses += [l_plus, l_minus]
            record.grads.append(g)
        self.layer.job("apply")
        record.cycles = self.layer.read("STEP_CYCLES")
        record.master = master_output(self.layer.job("read_master", receive=True), self.n,
                                      self.rows)
        return record

    def outputs(self, x: np.ndarray) -> np.ndarray:
        """Unperturbed outputs for ``x`` (any number of rows, in batches of ``m``; the last
        batch padded with zero rows)."""
        rows = []
        for start in range(0, len(x), self.m):
            batch = np.zeros((self.m, x.shape[1]), dtype=np.int64)
            part = x[start:start + self.m]
            batch[:len(part)] = part
            self.frozen(batch)
            rows.append(self.branch(plain=True)[:len(part)])
        return np.concatenate(rows)


# -- the host program -----------------------------------------------------------------------

def _host(args: dict):
    """The host's ``(loss(y, target), gradient(l_plus, l_minus))`` and the data key of the
    targets: the classification host (``args["host"]``) or the regression host."""
    if args.get("host"):
        classifier = CrossEntropyHost(**args["host"])
        return classifier.loss, classifier.gradient, "labels"

    def gradient(loss_plus, loss_minus):
        return projected_gradient(loss_plus, loss_minus, args["grad_shift"])
    return squared_error, gradient, "target"


def run_steps(layer: LayerServer, args: dict, data: dict[str, np.ndarray]
              ) -> tuple[dict[str, np.ndarray], dict]:
    """The cocotb bench's schedule on ``layer`` (``args``: the bench's arguments, ``data``:
    its arrays; the last step runs sequentially). Returns the arrays (``branches``,
    ``masters``, ``plain``) and the bench's results (``grads``, ``step_cycles``, ``jobs``,
    ``irq``) plus ``sim_cycles``."""
    loss, gradient, target_key = _host(args)
    session = LayerSession(layer, args["m"], args["k"], args["n"], args["r"],
                           eps_shift=args["eps_shift"], eta_mult=args["eta_mult"],
                           eta_shift=args["eta_shift"], mult=args["mult"],
                           shift=args["shift"])
    session.load(data["master"], data.get("w"), data.get("a"))
    xs = data["x"]
    branches, masters, grads, step_cycles = [], [], [], []
    for step, (x, target) in enumerate(zip(xs, data[target_key])):
        record = session.step(x, target, args["q"], loss, gradient,
                              sequential=step == len(xs) - 1)
        branches += record.outputs
        masters.append(record.master)
        grads.append(record.grads)
        step_cycles.append(record.cycles)
    plain = session.branch(plain=True)
    rtl = {"branches": np.stack(branches), "masters": np.stack(masters), "plain": plain}
    return rtl, {"grads": grads, "step_cycles": step_cycles, "jobs": layer.jobs,
                 "irq": int(layer.server.irq), "sim_cycles": layer.cycle}


def _cycle_bound(args: dict) -> int:
    """Generous most cycles of one job of ``args``' shape (a hung job fails, a slow one
    does not): 16x its multiply-accumulates at R x C per cycle, words and tile spacing,
    slowed by the stalls."""
    m, k, n, r = args["m"], args["k"], args["n"], args["r"]
    work = m * k * (n + r) // (args["rows"] * args["cols"]) + (m + n + r) * k + 4 * m * (n + r)
    return int((100_000 + 16 * work) / (1 - max(args["source_idle"], args["sink_backpressure"])))


def run_layer(config: ZoLayerConfig, args: dict, data: dict[str, np.ndarray]
              ) -> tuple[dict[str, np.ndarray], CosimResult]:
    """:func:`run_steps` on a fresh job server (stalls from ``args``: ``source_idle``,
    ``sink_backpressure``, ``seed``), as :func:`zoforge.sim.zo_cosim.run_layer` returns it:
    a failure in the run is ``passed`` False with its one-line message in ``failures``;
    ``run_s`` counts from the process start, ``build_s`` the (cached) build."""
    layer = LayerServer(config, source_idle=args["source_idle"],
                        sink_backpressure=args["sink_backpressure"], seed=args["seed"],
                        max_cycles=_cycle_bound(args))
    rtl, results, failures = {}, {}, []
    try:
        with layer:
            rtl, results = run_steps(layer, args, data)
    except JobServerError as error:
        failures = [str(error)]
    return rtl, CosimResult(passed=not failures, results=results,
                            simulator="verilator (jobserver)", build_s=layer.server.build_s,
                            run_s=time.perf_counter() - layer.server.started,
                            data_dir=layer.server.entry,
                            failures=failures)
