"""Golden-vs-RTL training of a ``hw-mlp`` classifier with no hidden layer, step by step.

:class:`LockstepTraining` is the one driver of ``zoforge demo`` and of the replay
:func:`cosim_training`. From a :class:`~zoforge.golden.zo.config.TrainConfig`
(``--trainable hw-mlp --method hw-prge --hidden 0``: the linear classifier is one full-weight
ZO layer) it builds the golden trainer (:mod:`zoforge.golden.zo.hwmlp`) and the layer design
(``cfg.layer_design``), then runs the steps: step ``t`` trains on the batch
``batch_index(seed, t, n_train, batch)`` in the golden trainer and on the RTL, from the same
initial master with the same integer step settings, and :func:`compare_step` checks that the
g values and the master after the update are equal. Equal at every step means the golden run
is the exact prediction of the hardware's. ``cfg.branch_lanes`` B > 1 puts B branches side
by side on the array's rows on both sides: the classes padded to rows / B, a branch job per
B / 2 queries, the perturbations in the layer's order for B lanes
(:func:`~zoforge.golden.zo.hwmlp.grouped_step`); :func:`zoforge.sim.mapping.choose_branch_lanes`
picks B for a shape.

Backends (:class:`LockstepOptions`): ``jobserver`` steps one persistent Verilator process
(:class:`~zoforge.sim.zolayer_jobserver.LayerSession`) right after each golden step; the host
computes the losses and g from the RTL's own outputs, and the test accuracies before and after
training are also counted from the RTL's own unperturbed outputs on the test split.
``cocotb`` (Verilator or Icarus; the RTL cannot be stepped from this process) runs the golden
steps, then the whole run on the cocotb bench
(:func:`zoforge.sim.zolayer_cosim.run_layer`), then compares step by step with the same
:func:`compare_step`; it has no RTL test accuracies.
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from zoforge.config import Config, FloatRange, IntRange, OneOf, param
from zoforge.errors import ConfigError
from zoforge.golden.zo.config import TrainConfig
from zoforge.golden.zo.features import build_trainable
from zoforge.golden.zo.train import batch_index, build_optimizer
from zoforge.golden.zolayer import ZoLayerConfig
from zoforge.golden.zolayer.network import StepSettings
from zoforge.sim.cosim import SIMULATORS
from zoforge.sim.jobserver import JobServerError
from zoforge.sim.program import HostCheckFailed
from zoforge.sim.verdict import Verdict
from zoforge.sim.zolayer_cosim import BACKENDS, ZoCosimOptions, run_layer
from zoforge.sim.zolayer_host import LayerSteps
from zoforge.sim.zolayer_jobserver import LayerServer, LayerSession

__all__ = ["LockstepOptions", "LockstepTraining", "StepOutcome", "StepResult",
           "TrainingResult", "compare_step", "CHECKS", "accuracy", "cosim_training"]

#: The checks of one step (:func:`compare_step`): equal g values, equal masters.
CHECKS = ("grads", "master")


@dataclass(frozen=True)
class LockstepOptions(Config):
    """How the RTL side of a :class:`LockstepTraining` runs."""

    kind: ClassVar[str] = "lockstep-training"

    backend: str = param("jobserver", "jobserver (one persistent Verilator process, stepped "
                                      "beside the golden trainer) or cocotb (the whole run "
                                      "on the cocotb bench after the golden steps)",
                         OneOf(BACKENDS))
    simulator: str = param("verilator", "simulator of the cocotb backend", OneOf(SIMULATORS))
    source_idle: float = param(0.0, "probability of an idle cycle on every input stream",
                               FloatRange(0, 1, high_open=True))
    sink_backpressure: float = param(0.0, "probability of a back-pressure cycle on every "
                                          "output stream", FloatRange(0, 1, high_open=True))
    seed: int = param(0, "seed of the stall pattern", IntRange(0))

    def check(self) -> None:
        ZoCosimOptions(backend=self.backend, simulator=self.simulator)   # its pairing rule


@dataclass(frozen=True)
class StepOutcome:
    """One side's step: the mean loss of its branches, its g values and the master after the
    update (``(K, N)`` integers)."""

    loss: float
    grads: list[int]
    master: np.ndarray


def compare_step(golden: StepOutcome, rtl: StepOutcome | None) -> dict[str, bool]:
    """The bit-exactness checks of one step: ``grads`` (equal g values) and ``master`` (equal
    masters after the update); both False when the RTL has no outcome (its run failed)."""
    pairs = dict.fromkeys(CHECKS, (None, None)) if rtl is None else {
        "grads": (rtl.grads, golden.grads), "master": (rtl.master, golden.master)}
    return Verdict.of(CHECKS, rtl is not None, pairs).checks


def accuracy(outputs: np.ndarray, labels: np.ndarray) -> float:
    """The fraction of rows of ``outputs`` (one column per class) whose largest entry is at
    the row's label."""
    return float((np.asarray(outputs).argmax(1) == np.asarray(labels)).mean())


@dataclass(frozen=True)
class StepResult:
    """Step ``step`` (from 0): its batch (training-split indices), both sides' outcomes, the
    checks of :func:`compare_step`, the RTL's STEP_CYCLES and the seconds each side took
    (the RTL's with its host work; 0 for the cocotb backend)."""

    step: int
    batch: np.ndarray
    golden: StepOutcome
    rtl: StepOutcome | None
    checks: dict[str, bool]
    cycles: int
    golden_s: float
    rtl_s: float

    @property
    def bit_exact(self) -> bool:
        return all(self.checks.values())


@dataclass
class TrainingResult:
    """A finished :meth:`LockstepTraining.run`. Accuracies are on the test split: the golden
    model's, and (jobserver) those counted from the RTL's own unperturbed outputs
    ``outputs_before_rtl`` / ``outputs_after_rtl`` (``(n_test, classes)``), else None.
    ``failures``: one-line messages of an RTL run that broke off; ``sim_cycles``: clock
    cycles simulated by the training steps; ``stalls``: the stalls inserted per channel
    (:func:`zoforge.sim.backends.stall_problems`), None when the run broke off."""

    steps: list[StepResult]
    requested_steps: int
    design: ZoLayerConfig
    settings: StepSettings
    accuracy_before: float
    accuracy_after: float
    accuracy_before_rtl: float | None = None
    accuracy_after_rtl: float | None = None
    outputs_before_rtl: np.ndarray | None = None
    outputs_after_rtl: np.ndarray | None = None
    failures: list[str] = dataclasses.field(default_factory=list)
    simulator: str = ""
    sim_cycles: int = 0
    stalls: dict | None = None

    @property
    def mismatched_steps(self) -> list[int]:
        return [s.step for s in self.steps if not s.bit_exact]

    @property
    def bit_exact(self) -> bool:
        """Every requested step ran and matched, and the RTL's test accuracies (where counted)
        equal the golden model's."""
        accuracies = [(self.accuracy_before_rtl, self.accuracy_before),
                      (self.accuracy_after_rtl, self.accuracy_after)]
        return (not self.failures and len(self.steps) == self.requested_steps
                and not self.mismatched_steps
                and all(rtl is None or rtl == golden for rtl, golden in accuracies))

    def checks(self) -> dict[str, bool]:
        """Each check of :func:`compare_step` over all the steps (False after a failure)."""
        complete = not self.failures and len(self.steps) == self.requested_steps
        return {name: complete and all(s.checks[name] for s in self.steps) for name in CHECKS}

    @property
    def cycles_per_step(self) -> float:
        """The RTL's STEP_CYCLES averaged over every step run (0.0 when none ran)."""
        return sum(s.cycles for s in self.steps) / len(self.steps) if self.steps else 0.0

    def summary(self) -> dict:
        """The run as JSON-able numbers (``zoforge demo``'s summary, less the board's):
        ``bit_exact``, ``steps`` (run), both sides' losses per step (the RTL's where it has
        one), ``mismatched_steps``, ``failures``, the four test accuracies,
        ``cycles_per_step`` (:attr:`cycles_per_step`), ``pytorch_seconds_per_step`` (the
        golden steps' seconds over the steps), ``cosim_steps_per_s`` and
        ``cosim_cycles_per_s`` (steps and :attr:`sim_cycles` over the RTL steps' seconds;
        None where there is nothing to divide by), ``stalls``, the design's ``config`` and
        the integer step ``settings``."""
        count = len(self.steps)
        golden_s = sum(s.golden_s for s in self.steps)
        rtl_s = sum(s.rtl_s for s in self.steps)
        return {
            "bit_exact": self.bit_exact, "steps": count,
            "loss_rtl": [s.rtl.loss for s in self.steps if s.rtl is not None],
            "loss_golden": [s.golden.loss for s in self.steps],
            "mismatched_steps": self.mismatched_steps, "failures": list(self.failures),
            "accuracy_before": self.accuracy_before, "accuracy_after": self.accuracy_after,
            "accuracy_before_rtl": self.accuracy_before_rtl,
            "accuracy_after_rtl": self.accuracy_after_rtl,
            "cycles_per_step": self.cycles_per_step,
            "pytorch_seconds_per_step": golden_s / count if count else None,
            "cosim_steps_per_s": count / rtl_s if rtl_s else None,
            "cosim_cycles_per_s": self.sim_cycles / rtl_s if rtl_s else None,
            "stalls": self.stalls, "config": self.design.to_dict(),
            "settings": vars(self.settings)}


OnStep = Callable[[StepResult], None]


class LockstepTraining:
    """The golden trainer and the ZO layer of ``cfg`` (``hw-mlp``, ``hidden`` 0, ``seed`` 0:
    the generated generator starts in its reset state); :meth:`run` trains them side by side,
    once. Building it extracts (or loads the cached) features."""

    def __init__(self, cfg: TrainConfig):
        if cfg.trainable != "hw-mlp" or cfg.hidden:
            raise ConfigError("hidden", "0 with --trainable hw-mlp (one ZO layer)",
                              f"{cfg.trainable}, hidden {cfg.hidden}")
        if cfg.seed:
            raise ConfigError("seed", "0 (the generated generator starts in its reset "
                              "state)", cfg.seed)
        self.cfg = cfg
        self.trainable, info = build_trainable(cfg)
        self.classes = info["num_classes"]
        self.optimizer = build_optimizer(cfg, self.trainable)
        self.initial_master = self._golden_master()
        self.design = cfg.layer_design(features=self.initial_master.shape[0],
                                       classes=self.classes)
        self._ran = False

    @property
    def settings(self) -> StepSettings:
        """The integer step settings (``eps_shift``, ``eta_mult``, ``eta_shift``, ...)."""
        return self.optimizer.settings

    def batch(self, step: int) -> np.ndarray:
        """The training-split indices of step ``step``'s batch."""
        return batch_index(self.cfg.seed, step, self.cfg.n_train, self.cfg.batch)

    def run(self, options: LockstepOptions | None = None,
            on_step: OnStep | None = None) -> TrainingResult:
        """``cfg.steps`` steps on both sides; ``on_step`` sees each step's result as soon as
        both sides have run it (after the whole RTL run for the cocotb backend)."""
        if self._ran:
            raise RuntimeError("a LockstepTraining runs once (its golden trainer has moved)")
        self._ran = True
        options = options or LockstepOptions()
        result = TrainingResult(
            steps=[], requested_steps=self.cfg.steps, design=self.design,
            settings=self.settings, accuracy_before=self._golden_accuracy(), accuracy_after=0.0)
        record = _Recorder(result, on_step)
        if options.backend == "jobserver":
            self._run_lockstep(options, result, record)
        else:
            self._run_replay(options, result, record)
        result.accuracy_after = self._golden_accuracy()
        return result

    # -- the two sides ------------------------------------------------------------------------

    def _golden_master(self) -> np.ndarray:
        (master,) = self.trainable.masters(self.trainable.theta)
        return master.numpy().copy()

    def _golden_accuracy(self) -> float:
        return self.trainable.evaluate(self.trainable.theta, "test")[0]

    def _golden_step(self, index: np.ndarray) -> tuple[StepOutcome, float]:
        tick = time.perf_counter()
        loss = self.optimizer.step(index)
        seconds = time.perf_counter() - tick
        return StepOutcome(loss, list(self.optimizer.last_grads), self._golden_master()), seconds

    def _train_batch(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x, _, labels = self.trainable.splits["train"].batch(index)
        return x.numpy(), labels.numpy()

    def _run_lockstep(self, options: LockstepOptions, result: TrainingResult,
                      record: "_Recorder") -> None:
        """Each golden step, then the same step on a job server."""
        cfg, settings, host = self.cfg, self.settings, self.optimizer.host
        test = self.trainable.splits["test"]
        test_x, test_labels = test.x.numpy(), test.labels.numpy()
        features, padded = self.initial_master.shape
        layer = LayerServer(self.design, source_idle=options.source_idle,
                            sink_backpressure=options.sink_backpressure, seed=options.seed)
        result.simulator = "verilator (jobserver)"
        try:
            with layer:
                session = LayerSession(layer, cfg.batch, features, padded,
                                       eps_shift=settings.eps_shift,
                                       eta_mult=settings.eta_mult,
                                       eta_shift=settings.eta_shift)
                session.load(self.initial_master)
                result.outputs_before_rtl = session.outputs(test_x)[:, :self.classes]
                result.accuracy_before_rtl = accuracy(result.outputs_before_rtl, test_labels)
                first_cycle = layer.cycle
                for step in range(cfg.steps):
                    index = self.batch(step)
                    x, labels = self._train_batch(index)
                    golden, golden_s = self._golden_step(index)
                    tick = time.perf_counter()
                    out = session.step(x, labels, cfg.queries, host.loss, host.gradient)
                    rtl_s = time.perf_counter() - tick
                    rtl = StepOutcome(sum(out.losses) / len(out.losses), out.grads, out.master)
                    record(step, index, golden, rtl, out.cycles, golden_s, rtl_s)
                result.sim_cycles = layer.cycle - first_cycle
                result.outputs_after_rtl = session.outputs(test_x)[:, :self.classes]
                result.accuracy_after_rtl = accuracy(result.outputs_after_rtl, test_labels)
                result.stalls = layer.stalls()
        except (JobServerError, HostCheckFailed) as error:
            result.failures.append(str(error))

    def _run_replay(self, options: LockstepOptions, result: TrainingResult,
                    record: "_Recorder") -> None:
        """All the golden steps, then the whole run on the cocotb bench, then the comparison
        of each step."""
        cfg, settings, host = self.cfg, self.settings, self.optimizer.host
        indices = [self.batch(step) for step in range(cfg.steps)]
        batches = [self._train_batch(index) for index in indices]
        goldens = [self._golden_step(index) for index in indices]
        if not indices:
            return
        features, padded = self.initial_master.shape
        cosim = ZoCosimOptions(steps=cfg.steps, q=cfg.queries, m=cfg.batch, k=features,
                               n=padded, r=1, eps_shift=settings.eps_shift,
                               eta_mult=settings.eta_mult, eta_shift=settings.eta_shift,
                               simulator=options.simulator, source_idle=options.source_idle,
                               sink_backpressure=options.sink_backpressure,
                               seed=options.seed, backend=options.backend)
        data = {"x": np.stack([x for x, _ in batches]),
                "labels": np.stack([labels for _, labels in batches]),
                "master": self.initial_master}
        rtl, bench = run_layer(self.design, cosim, data, host=host.to_dict())
        result.simulator, result.failures = bench.simulator, list(bench.failures)
        result.sim_cycles = bench.results.get("sim_cycles", 0) if bench.passed else 0
        result.stalls = bench.results.get("stalls") if bench.passed else None
        branches = 2 * cfg.queries
        for step, (index, (_, labels), (golden, golden_s)) in enumerate(zip(indices, batches,
                                                                            goldens)):
            outcome, cycles = None, 0
            if bench.passed:
                outputs = rtl["branches"][step * branches:(step + 1) * branches]
                losses = [host.loss(y, labels) for y in outputs]
                outcome = StepOutcome(sum(losses) / len(losses), bench.results["grads"][step],
                                      rtl["masters"][step])
                cycles = bench.results["step_cycles"][step]
            record(step, index, golden, outcome, cycles, golden_s, 0.0)


class _Recorder:
    """Compares a step (:func:`compare_step`), appends its :class:`StepResult` and shows it
    to the caller: the one place both backends record a step."""

    def __init__(self, result: TrainingResult, on_step: OnStep | None):
        self.result, self.on_step = result, on_step

    def __call__(self, step, index, golden, rtl, cycles, golden_s, rtl_s) -> None:
        done = StepResult(step=step, batch=np.asarray(index), golden=golden, rtl=rtl,
                          checks=compare_step(golden, rtl), cycles=int(cycles),
                          golden_s=golden_s, rtl_s=rtl_s)
        self.result.steps.append(done)
        if self.on_step is not None:
            self.on_step(done)


def cosim_training(cfg: TrainConfig, steps: int, simulator: str = "verilator",
                   source_idle: float = 0.0, sink_backpressure: float = 0.0,
                   backend: str = "cocotb") -> dict:
    """The replay: ``steps`` steps of ``cfg`` through :class:`LockstepTraining`; a JSON-able
    summary with ``bit_exact``, ``checks`` (``grads``, ``masters`` over all the steps), the
    per-step golden losses and both sides' g values, and the accuracies."""
    options = LockstepOptions(backend=backend, simulator=simulator, source_idle=source_idle,
                              sink_backpressure=sink_backpressure, seed=cfg.seed)
    training = LockstepTraining(dataclasses.replace(cfg, steps=steps))
    result = training.run(options)
    checks = result.checks()
    return {"bit_exact": result.bit_exact,
            "checks": {"grads": checks["grads"], "masters": checks["master"]},
            "failures": result.failures, "steps": steps,
            "mismatched_steps": result.mismatched_steps,
            "loss_golden": [s.golden.loss for s in result.steps],
            "grads_golden": [s.golden.grads for s in result.steps],
            "grads_rtl": [s.rtl.grads for s in result.steps if s.rtl is not None],
            "accuracy_before": result.accuracy_before,
            "accuracy_after": result.accuracy_after,
            "accuracy_before_rtl": result.accuracy_before_rtl,
            "accuracy_after_rtl": result.accuracy_after_rtl,
            "settings": vars(result.settings), "design": result.design.to_dict(),
            "simulator": result.simulator, "stalls": result.stalls}
