"""``zoforge sweep`` end to end on the ``tiny`` preset (6 short trainings of the small random
BERT, 2 generator reports): results and outputs; a SIGKILL at a random point and a resume;
two sweep processes on one store; the same sweep on a local Dask cluster; the search mode.
Every run is compared with one uninterrupted reference run, value for value (timings and
file paths left out)."""
from __future__ import annotations

import csv
import io
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from zoforge.cli import main
from zoforge.sweep.presets import preset
from zoforge.sweep.results import group_runs, read_runs
from zoforge.sweep.spec import sweep_from_dict
from zoforge.sweep.store import Store

ZOFORGE = [sys.executable, "-m", "zoforge"]
TINY = sweep_from_dict(preset("tiny"))
TASKS = len(TINY.tasks())
_REFERENCE: dict[str, Path] = {}


def reference_store(tmp_path_factory) -> Path:
    """The tiny preset run once, uninterrupted, in process (cached for the session)."""
    if "path" not in _REFERENCE:
        folder = tmp_path_factory.mktemp("sweep-reference")
        # one worker process: the results do not depend on the count (the runs compared
        # with it in CI use two), at 2/3 of the CPU; two local workers by default: none
        # (CI: the SIGKILL run, Dask); the store's claims: tests/test_sweep_store.py
        assert main(["sweep", "--preset", "tiny", "--store", str(folder), "--jobs", "1",
                     "--no-progress"]) == 0
        _REFERENCE["path"] = folder
    return _REFERENCE["path"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    return reference_store(tmp_path_factory)


def comparable(folder: Path, scope: str = "tiny") -> dict:
    """Per point: its training's result without the timing, and the hardware figures."""
    store = Store(folder)
    try:
        return {run.train_key: ({k: v for k, v in run.train.items() if k != "steps_per_s"},
                                {k: (m.value, m.source) for k, m in run.hardware.items()})
                for run in read_runs(store, scope)}
    finally:
        store.close()


def task_rows(folder: Path) -> list[sqlite3.Row]:
    db = sqlite3.connect(folder / "sweep.db")
    db.row_factory = sqlite3.Row
    try:
        return db.execute("SELECT * FROM tasks").fetchall()
    finally:
        db.close()


def test_tiny_preset_results_and_outputs(reference):
    rows = task_rows(reference)
    assert len(rows) == TASKS == 8                   # 6 trainings, 2 shared reports
    assert all(r["status"] == "done" and r["completions"] == 1 for r in rows)
    runs = read_runs(Store(reference), "tiny")
    assert len(runs) == 6
    for run in runs:
        assert 0.0 <= run.train["accuracy_after"] <= 1.0
        assert run.train["final_loss"] > 0 and run.train["steps_per_s"] > 0
        if run.config["perturbation"] == "gaussian":        # a software source: no cost
            assert run.hw_key is None and run.hardware == {}
        else:
            assert run.hardware["LUT"].source == "yosys-estimate"
            assert run.hardware["power_w"].source == "activity-model"
            assert run.hardware["LUT"].value > 0
    by_bits = {run.config["bits"]: run.hw_key for run in runs if run.hw_key}
    assert len(set(by_bits.values())) == 2           # one report per generator, not per seed
    table = (reference / "tiny.md").read_text()
    assert "LUT (yosys-estimate)" in table and "power W (activity-model)" in table
    assert "## What to build" in table and table.index("## What to build") < table.index(
        "## Configurations")
    rows = list(csv.DictReader(io.StringIO((reference / "tiny.csv").read_text())))
    assert [r["row"] for r in rows] == ["configuration"] * 3 + ["run"] * 6
    configurations = [r for r in rows if r["row"] == "configuration"]
    assert all(r["front"] in ("True", "False") and r["n"] == "2" for r in configurations)
    assert sum(r["front"] == "True" for r in configurations) >= 1
    assert configurations[2]["perturbation"] == "gaussian" == rows[-1]["perturbation"]
    assert configurations[2]["front"] == "False"            # no generator: never on a front
    # BRAM18 is 0 everywhere: no plot for it; power is plotted as its dynamic part
    plots = sorted(p.stem for p in (reference / "tiny-plots").glob("*.png"))
    assert plots == ["accuracy-vs-LUT", "accuracy-vs-bits", "accuracy-vs-dynamic_w",
                     "final-loss-vs-bits"]


def test_a_finished_sweep_runs_nothing_again(reference, tmp_path):
    folder = tmp_path / "again"
    shutil.copytree(reference, folder)
    assert main(["sweep", "--preset", "tiny", "--store", str(folder), "--jobs", "1",
                 "--no-progress"]) == 0
    assert all(r["attempts"] == 1 and r["completions"] == 1 for r in task_rows(folder))


def _done(folder: Path) -> int:
    try:
        return sum(r["status"] == "done" for r in task_rows(folder))
    except sqlite3.Error:
        return 0


def _kill_at(command: list[str], folder: Path, finished: int, delay_s: float) -> int:
    """Start the sweep ``command``, SIGKILL it ``delay_s`` after ``finished`` tasks are
    done; the tasks done at the kill (all of them if the sweep ended first)."""
    process = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    while _done(folder) < finished and process.poll() is None:
        time.sleep(0.2)
    time.sleep(delay_s)
    if process.poll() is None:          # (a sweep that ended first: every task done)
        os.kill(process.pid, signal.SIGKILL)
    process.wait()
    return _done(folder)


# end to end (CI runs it); the default run's representatives of the store's crash safety are
# tests/test_sweep_store.py (claims, the lease of a dead process, heartbeats, failures)
@pytest.mark.slow
@pytest.mark.ci
def test_sigkill_at_a_random_point_resumes_and_runs_every_point_once(reference, tmp_path):
    seed = time.time_ns() % 10_000
    rng = random.Random(seed)
    # The kill must land with work left: a point drawn late can let the last tasks finish
    # first (fast, cached tasks), which tests nothing; such a try is drawn again, earlier,
    # in a fresh store (at most three tries, the last at the first task).
    for attempt in range(3):
        folder = tmp_path / f"killed-{attempt}"
        command = [*ZOFORGE, "sweep", "--preset", "tiny", "--store", str(folder), "--jobs",
                   "2", "--no-progress", "--lease-s", "600"]
        finished_before_kill = 0 if attempt == 2 else rng.randrange(TASKS - 2 - 2 * attempt)
        done = _kill_at(command, folder, finished_before_kill,
                        0.0 if attempt == 2 else rng.uniform(0.0, 1.0))
        if done < TASKS:
            break
    assert done < TASKS, f"every try's kill came after the last task (seed {seed})"
    # The lease (600 s) has not ended: the killed owner's process is gone from this host.
    subprocess.run(command, check=True, timeout=600, stdout=subprocess.DEVNULL)
    rows = task_rows(folder)
    assert all(r["status"] == "done" and r["completions"] == 1 for r in rows), f"seed {seed}"
    assert sum(r["attempts"] > 1 for r in rows) <= 2     # at most the 2 tasks in flight
    assert comparable(folder) == comparable(reference), f"seed {seed}"


@pytest.mark.slow
@pytest.mark.ci
def test_two_sweep_processes_share_one_store(reference, tmp_path):
    folder = tmp_path / "shared"
    command = [*ZOFORGE, "sweep", "--preset", "tiny", "--store", str(folder), "--jobs", "1",
               "--no-progress"]
    processes = [subprocess.Popen(command, stdout=subprocess.DEVNULL) for _ in range(2)]
    assert [p.wait(timeout=600) for p in processes] == [0, 0]
    rows = task_rows(folder)
    assert all(r["status"] == "done" for r in rows)
    assert all(r["attempts"] == 1 and r["completions"] == 1 for r in rows)   # none twice
    assert len({r["finished_by"] for r in rows}) == 2        # both processes did work
    assert comparable(folder) == comparable(reference)


@pytest.mark.slow
@pytest.mark.ci
@pytest.mark.parametrize("own_cluster", [True, False], ids=["no-scheduler", "scheduler"])
def test_the_same_sweep_on_a_local_dask_cluster(reference, tmp_path, own_cluster):
    """--executor dask without --scheduler starts (and closes) its own LocalCluster of
    --jobs single-threaded worker processes; with one, it uses that cluster."""
    from distributed import LocalCluster

    folder = tmp_path / "dask"
    command = ["sweep", "--preset", "tiny", "--store", str(folder), "--executor", "dask",
               "--no-progress"]
    if own_cluster:
        assert main(command + ["--jobs", "2"]) == 0
    else:
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster:
            assert main(command + ["--scheduler", cluster.scheduler_address]) == 0
    assert all(r["status"] == "done" and r["completions"] == 1 for r in task_rows(folder))
    assert comparable(folder) == comparable(reference)


def test_search_finds_the_front_from_the_store(reference, tmp_path):
    from zoforge.sweep.executors import LocalExecutor
    from zoforge.sweep.search import run_search

    folder = tmp_path / "search"
    shutil.copytree(reference, folder)
    store = Store(folder)
    executor = LocalExecutor(1)
    try:
        found = run_search(TINY, store, executor, progress=False)
    finally:
        executor.close()
    # 3 configurations, 4 trials: every configuration is evaluated, none twice
    assert found.trials == found.configurations == 3 and found.trainings == 6
    assert all(r["completions"] == 1 for r in task_rows(folder))   # all found in the store
    grid = [g for g in group_runs(read_runs(store, "tiny")) if g.front]
    assert sorted(g.runs[0].train_key for g in found.front) == sorted(
        g.runs[0].train_key for g in grid)


def test_a_failed_task_is_recorded_and_retried_only_on_request(tmp_path, capsys):
    config = tmp_path / "SWEEP.toml"
    config.write_text('name = "bad-data"\n[train]\nmodel = "tiny"\nsteps = 2\n'
                      f'data = "{tmp_path / "missing.csv"}"\nn_train = 8\nn_val = 4\n'
                      'n_test = 4\nbatch = 2\n')
    arguments = ["sweep", "--config", str(config), "--store", str(tmp_path / "s"),
                 "--jobs", "1", "--no-progress"]
    assert main(arguments) == 1
    assert "1 tasks failed" in capsys.readouterr().err
    (row,) = task_rows(tmp_path / "s")
    assert row["status"] == "failed" and row["error"] and "Traceback" in row["traceback"]
    assert main(arguments) == 1
    assert task_rows(tmp_path / "s")[0]["attempts"] == 1          # not retried
    assert main(arguments + ["--retry-failed"]) == 1
    assert task_rows(tmp_path / "s")[0]["attempts"] == 2
    assert "missing.csv" in (tmp_path / "s" / "bad-data.md").read_text()
