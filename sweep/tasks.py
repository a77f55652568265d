"""One task of a sweep, as a worker runs it: a golden training or a generator report.

A training task is one of :data:`TASKS`, named by its spec's :data:`TASK_KEY` (absent:
``train``): ``train``, the head-level golden training (:class:`TrainConfig`, its result
:data:`TRAIN_FIELDS` from its result.json), or ``finetune``, the ZO fine-tuning of the
transformer's adapters in the accelerator's int8 arithmetic (:class:`FinetuneConfig`,
:func:`_finetune`: the few-shot protocol's metric, the final training loss over the
training set, as ``final_loss``; the test accuracy beside it; the float twin is not run).

:func:`run_task` is what an executor calls (in a local worker process or on a Dask worker):
a plain function of JSON data, touching no store and no process-global state beyond what
the work itself needs, returning JSON data. Its files go under ``work_dir``:
``runs/<key>/`` (the training's checkpoint, result.json and plot: a task claimed again after
its claimer died resumes from the checkpoint) and ``reports/<key>/`` (Verilog, Vivado
project, report.json/md/png). A file lock per folder makes a second runner of the same task
(a worker orphaned by a killed sweep) wait instead of writing beside it.

While it runs, a task keeps ``progress.json`` in its folder up to date (at most twice a
second): its stage (``model and features``, ``training`` with the step, or a report's
pipeline step) for the coordinator's per-task lines (:func:`read_progress`).
"""
from __future__ import annotations

import json
import time
import traceback
from pathlib import Path

from zoforge.config import config_from_dict
from zoforge.files import atomic_write_text, file_lock
from zoforge.golden.finetune.config import FinetuneConfig
from zoforge.golden.rng import GENERATOR_CONFIGS, GaussianConfig
from zoforge.golden.zo.config import TrainConfig
from zoforge.outputs import make_dirs

__all__ = ["run_task", "TRAIN_FIELDS", "FINETUNE_FIELDS", "TASKS", "TASK_KEY",
           "run_folder", "read_progress", "PROGRESS", "FINETUNE_CHECKPOINT", "PERTURBATION_OF",
           "finetune_spec"]

#: The file a running task reports its stage in (in its folder).
PROGRESS = "progress.json"
#: The trainings a sweep point can run, by name (a training spec's :data:`TASK_KEY`).
TASKS = {"train": TrainConfig, "finetune": FinetuneConfig}
TASK_KEY = "task"
#: A fine-tuning spec's label of its generator, for the outputs that name a training's
#: generator by its ``perturbation`` (tables, plots, the recommendation): the head-level
#: source bit-exact with the strategy's generator (``tests/test_sweep_finetune.py`` checks
#: each against :meth:`~zoforge.golden.zo.perturbation.Perturbation.hardware`).
PERTURBATION_OF = {"onthefly": "pezo-onthefly", "pregen": "pezo-pregen",
                   "gaussian": "gaussian-hw", "masked": "masked-onthefly"}
#: A fine-tuning task's checkpoint (in its folder; JSON, every curve step): a task claimed
#: again after its claimer died goes on from it, bit for bit.
FINETUNE_CHECKPOINT = "finetune-checkpoint.json"

#: What a training task returns (from its result.json).
TRAIN_FIELDS = ("accuracy_before", "accuracy_after", "test_loss_before", "test_loss_after",
                "final_loss", "steps", "steps_per_s", "d", "chance_accuracy")
#: What a fine-tuning task returns besides (``final_loss`` is ``train_loss_after``; the
#: accuracies and test losses are the int8 model's on the test split).
FINETUNE_FIELDS = ("train_loss_before", "train_loss_after", "loss_ratio", "curve_steps",
                   "train_loss_curve", "seconds_per_step")


def run_folder(work_dir: Path | str, key: str) -> Path:
    """Where the task ``key`` writes its files."""
    kind = "runs" if key.startswith("train-") else "reports"
    return Path(work_dir) / kind / key


def read_progress(work_dir: Path | str, key: str) -> dict | None:
    """The last progress ``key``'s task reported (None: none, or not readable here)."""
    try:
        return json.loads((run_folder(work_dir, key) / PROGRESS).read_text())
    except (OSError, ValueError):
        return None


class _Reporter:
    """Writes a task's progress to its folder, at most every ``interval_s``."""

    def __init__(self, folder: Path, interval_s: float = 0.5):
        self.path = folder / PROGRESS
        self.interval_s = interval_s
        self.last = -interval_s

    def __call__(self, force: bool = False, **state) -> None:
        now = time.monotonic()
        if force or now - self.last >= self.interval_s:
            self.last = now
            try:
                atomic_write_text(self.path, json.dumps(state))
            except OSError:
                pass            # progress is a courtesy: never fails the task

    def step(self, step: int, steps: int) -> None:
        self(force=step == steps, stage="training", step=step, steps=steps)


def run_task(kind: str, key: str, spec: dict, work_dir: str) -> dict:
    """Run one task; ``{"ok": True, "result": ..., "seconds": ...}`` or, if it raised,
    ``{"ok": False, "error": one line, "traceback": text, "seconds": ...}``."""
    started = time.perf_counter()
    folder = run_folder(work_dir, key)
    make_dirs(work_dir, folder, "--store")      # never through a link inside the store
    try:
        with file_lock(folder / ".lock"):
            reporter = _Reporter(folder)
            reporter(force=True, stage="model and features" if kind == "train" else "starting")
            result = (_train(spec, folder, reporter) if kind == "train"
                      else _report(spec, folder, reporter))
    except Exception as error:      # recorded in the store, with its traceback
        text = str(error).splitlines()[0] if str(error) else ""
        return {"ok": False, "error": f"{type(error).__name__}: {text}",
                "traceback": traceback.format_exc(), "seconds": time.perf_counter() - started}
    return {"ok": True, "result": result, "seconds": time.perf_counter() - started}


def finetune_spec(cfg: FinetuneConfig) -> dict:
    """A fine-tuning's training spec: ``task = "finetune"``, its generator's
    ``perturbation`` label (:data:`PERTURBATION_OF`) and its fields (those its result is a
    function of: :meth:`FinetuneConfig.result_fields`)."""
    return {TASK_KEY: "finetune", "perturbation": PERTURBATION_OF[cfg.strategy],
            **cfg.result_fields()}


def _train(spec: dict, folder: Path, reporter: _Reporter) -> dict:
    task = spec.get(TASK_KEY, "train")
    if task == "finetune":
        fields = {k: v for k, v in spec.items() if k not in (TASK_KEY, "perturbation")}
        return _finetune(fields, folder, reporter)
    if task != "train":
        raise ValueError(f"task must be one of {', '.join(TASKS)} (got {task!r})")
    # imported here for start-up time: torch and the model load only in a training worker
    from zoforge.golden.zo.train import train
    cfg = TrainConfig.from_dict({**spec, "out": str(folder), "progress": False, "threads": 1})
    result = train(cfg, on_step=reporter.step)
    return {name: result.get(name) for name in TRAIN_FIELDS}


def _finetune(spec: dict, folder: Path, reporter: _Reporter) -> dict:
    """The int8 ZO fine-tuning of ``spec`` (a :class:`FinetuneConfig`'s fields): the test
    accuracy and loss before, the steps with the training loss at every
    :func:`~zoforge.golden.finetune.train.curve_steps` checkpoint (where it also writes
    :data:`FINETUNE_CHECKPOINT` and resumes from it), the test accuracy and loss after."""
    # imported here for start-up time: torch and the model load only in a training worker
    import torch
    from zoforge.golden.finetune.train import ZoFinetune, accuracy, curve_steps, prepare
    from zoforge.golden.zolayer.host import mean_cross_entropy
    cfg = FinetuneConfig.from_result_fields(spec)
    torch.set_num_threads(1)
    prepared = prepare(cfg)
    zo = ZoFinetune(prepared, "int8")
    labels = prepared.test[2]

    def test() -> tuple[float, float]:
        logits = zo.logits("test")
        return accuracy(logits, labels), mean_cross_entropy(logits.numpy(), labels)

    path = folder / FINETUNE_CHECKPOINT
    state = _finetune_checkpoint(path, cfg)
    if state is None:
        before = test()
        state = {"config": cfg.key_dict(), "step": 0, "seconds": 0.0, "test_before": before,
                 "curve": [zo.train_loss()]}
    else:                                   # resume: the masters, the step, the generator
        zo.masters = {name: torch.tensor(value, dtype=torch.int64)
                      for name, value in state["masters"].items()}
        zo.step_index = state["step"]
        zo.units.generator.restore(state["generator"])
    checkpoints = curve_steps(cfg.steps)
    while zo.step_index < cfg.steps:
        started = time.perf_counter()
        zo.step()
        state["seconds"] += time.perf_counter() - started
        reporter.step(zo.step_index, cfg.steps)
        if zo.step_index in checkpoints:
            state["curve"].append(zo.train_loss())
            state.update(step=zo.step_index, generator=zo.units.generator.save(),
                         masters={n: t.tolist() for n, t in zo.masters.items()})
            atomic_write_text(path, json.dumps(state))
    after = test()
    curve, seconds = state["curve"], state["seconds"]
    return {"accuracy_before": state["test_before"][0], "accuracy_after": after[0],
            "test_loss_before": state["test_before"][1], "test_loss_after": after[1],
            "final_loss": curve[-1], "steps": cfg.steps,
            "steps_per_s": cfg.steps / seconds if seconds else None,
            "d": sum(t.numel() for t in zo.masters.values()),
            "chance_accuracy": 1.0 / len(prepared.label_names),
            "train_loss_before": curve[0], "train_loss_after": curve[-1],
            "loss_ratio": curve[-1] / curve[0], "curve_steps": checkpoints,
            "train_loss_curve": curve, "seconds_per_step": seconds / cfg.steps if seconds
            else None}


def _finetune_checkpoint(path: Path, cfg: FinetuneConfig) -> dict | None:
    """The checkpoint of ``cfg``'s run at ``path`` (JSON, never unpickled), or None: none,
    unreadable, or another configuration's."""
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) and state.get("config") == cfg.key_dict() else None


def _report(spec: dict, folder: Path, reporter: _Reporter) -> dict:
    # imported here for start-up time: Amaranth, the simulators and matplotlib load only in
    # a report worker
    from zoforge.boards.registry import get_board
    from zoforge.hw.rng.designs import DESIGN
    from zoforge.reports.pipeline import Progress, build_report
    from zoforge.reports.render import write_report

    class StageProgress(Progress):
        """The pipeline's steps, into the task's progress file."""

        def step(self, name: str):
            def report(text: str) -> None:
                reporter(force=True, stage=name, text=text)
            return report

    generator = config_from_dict(spec["generator"], tuple(GENERATOR_CONFIGS.values()))
    options = spec["report"]
    board = get_board(options["board"])
    design = DESIGN.elaborate(generator)
    lanes = options["activity_lanes"]
    proxy = None
    if isinstance(generator, GaussianConfig) and 0 < lanes < generator.n_rng:
        proxy = DESIGN.elaborate(generator.replace(n_rng=lanes))   # fewer lanes: still valid
    bench = DESIGN.activity_bench(generator, design) if DESIGN.activity_bench else None
    report = build_report(board, design, folder, options["clock_mhz"],
                          activity_cycles=options["activity_cycles"],
                          measure_power=options["power"], run_pnr=options["pnr"],
                          progress=StageProgress(quiet=True), bench=bench,
                          ram_style=options["ram_style"], activity_proxy=proxy)
    write_report(report, folder)
    return report.to_json()
