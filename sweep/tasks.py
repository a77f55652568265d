"""One task of a sweep, as a worker runs it: a golden training or a generator report.

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
from zoforge.golden.rng import GENERATOR_CONFIGS, GaussianConfig
from zoforge.golden.zo.config import TrainConfig
from zoforge.outputs import make_dirs

__all__ = ["run_task", "TRAIN_FIELDS", "run_folder", "read_progress", "PROGRESS"]

#: The file a running task reports its stage in (in its folder).
PROGRESS = "progress.json"

#: What a training task returns (from its result.json).
TRAIN_FIELDS = ("accuracy_before", "accuracy_after", "test_loss_before", "test_loss_after",
                "final_loss", "steps", "steps_per_s", "d", "chance_accuracy")


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


def _train(spec: dict, folder: Path, reporter: _Reporter) -> dict:
    # imported here for start-up time: torch and the model load only in a training worker
    from zoforge.golden.zo.train import train
    cfg = TrainConfig.from_dict({**spec, "out": str(folder), "progress": False, "threads": 1})
    result = train(cfg, on_step=reporter.step)
    return {name: result.get(name) for name in TRAIN_FIELDS}


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
