"""Per-task progress: a running task reports its stage in its folder, and the coordinator
shows one line per task in flight under the task bar."""
from __future__ import annotations

from test_sweep_search import InstantExecutor, space
from zoforge.sweep.runner import progress_text, register_scope, run_scope, task_label
from zoforge.sweep.spec import sweep_from_dict
from zoforge.sweep.store import Store
from zoforge.sweep.tasks import read_progress, run_task


def test_a_training_task_reports_its_steps(tmp_path):
    sweep = sweep_from_dict({"train": {"model": "tiny", "perturbation": "gaussian",
                                       "steps": 4, "batch": 4, "n_train": 16, "n_val": 8,
                                       "n_test": 8, "eval_every": 2,
                                       "checkpoint_every": 2}})
    point = sweep.points[0]
    assert read_progress(tmp_path, point.train_key) is None
    outcome = run_task("train", point.train_key, point.train_spec(), str(tmp_path))
    assert outcome["ok"], outcome.get("error")
    state = read_progress(tmp_path, point.train_key)
    assert state == {"stage": "training", "step": 4, "steps": 4}       # the last step
    assert progress_text(state) == "training step 4/4"


def test_task_lines_say_what_runs_and_where_it_stands():
    assert task_label("train", {"perturbation": "pezo-onthefly", "seed": 1}) == (
        "train pezo-onthefly seed 1")
    assert task_label("report", {"generator": {"kind": "rng", "strategy": "onthefly",
                                               "n_rng": 7, "bits": 6,
                                               "snapshot": False}}) == (
        "report onthefly n_rng=7, bits=6")
    assert progress_text(None) == "waiting for a worker"
    assert progress_text({"stage": "model and features"}) == "model and features"
    assert progress_text({"stage": "synth", "text": "x" * 80}) == "synth: " + "x" * 47 + "..."


def test_the_coordinator_runs_with_task_lines(tmp_path, capsys):
    sweep = space([7, 15], [8], trials=2)
    store = Store(tmp_path / "s")
    register_scope(store, sweep.name, sweep, sweep.points)
    counts = run_scope(store, sweep.name, InstantExecutor(), progress=True, poll_s=0.01)
    assert counts["done"] == sum(counts.values()) == 6
    assert "space" in capsys.readouterr().err            # the bar was drawn on stderr
