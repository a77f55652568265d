"""The sweep store's claim/lease protocol, on made-up tasks (no training, no report), the
repair of a damaged store judged by what runs afterwards, and the Pareto helpers."""
from __future__ import annotations

import concurrent.futures as cf
import csv
import json
import sqlite3
import subprocess
import sys
import time

import pytest

from zoforge.errors import ConfigError
from zoforge.sweep import store as store_module
from zoforge.sweep.pareto import hypervolume, igd, pareto_mask
from zoforge.sweep.runner import run_scope
from zoforge.sweep.store import Owner, Store

TASKS = [(f"train-{i}", "train", {"i": i}) for i in range(6)]
POINTS = [(f"train-{i}", None, {"i": i}) for i in range(6)]


@pytest.fixture
def store(tmp_path):
    store = Store(tmp_path / "store")
    store.add_scope("s", {}, POINTS, TASKS)
    yield store
    store.close()


def test_two_connections_never_claim_the_same_task(store, tmp_path):
    other = Store(tmp_path / "store")
    a, b = Owner.here(), Owner("b" * 32, "this-host-too", 1)
    first = store.claim("s", 4, a, lease_s=60)
    second = other.claim("s", 4, b, lease_s=60)
    assert [t.key for t in first] == [f"train-{i}" for i in range(4)]
    assert [t.key for t in second] == ["train-4", "train-5"]
    assert store.claim("s", 4, a, lease_s=60) == []
    assert other.finish("train-4", b, train_result({"i": 4}, 1.0), 1.0)
    assert not store.finish("train-4", a, train_result({"i": 4}, 2.0), 1.0)  # not its task
    assert store.tasks(["train-4"])["train-4"]["result"] == train_result({"i": 4}, 1.0)
    other.close()


def test_a_lease_ends_without_heartbeats_or_when_its_process_is_gone(store):
    me = Owner.here()
    far = Owner("f" * 32, "another-host", 12345)
    claimed = store.claim("s", 1, far, lease_s=60)[0]
    assert store.claim("s", 6, me, lease_s=60)[0].key != claimed.key   # still leased
    time.sleep(0.2)
    taken = store.claim("s", 6, me, lease_s=0.1)      # no heartbeat for 0.1 s: taken over
    assert claimed.key in [t.key for t in taken]
    assert not store.finish(claimed.key, far, train_result({"i": 0}, 1.0), 0.0)  # refused:
    assert store.tasks([claimed.key])[claimed.key]["result"] is None   # the old owner's

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    gone = Owner("d" * 32, me.host, dead.pid)
    fresh = Store(store.folder)
    fresh.add_scope("t", {}, [("train-x", None, {})], [("train-x", "train", {})])
    assert fresh.claim("t", 1, gone, lease_s=3600)
    assert [t.key for t in fresh.claim("t", 1, me, lease_s=3600)] == ["train-x"]
    fresh.close()


def test_heartbeats_keep_a_lease(store):
    me, other = Owner.here(), Owner("o" * 32, "elsewhere", 1)
    store.claim("s", 6, other, lease_s=60)
    time.sleep(0.3)
    store.heartbeat(other)
    assert store.claim("s", 6, me, lease_s=0.25) == []


def test_failures_are_kept_and_retried_only_on_request(store):
    me = Owner.here()
    task = store.claim("s", 1, me, lease_s=60)[0]
    assert store.fail(task.key, me, "ValueError: boom", "Traceback ...")
    assert store.counts("s")["failed"] == 1
    assert task.key not in [t.key for t in store.claim("s", 6, me, lease_s=60)]
    store.release(me)
    assert store.retry_failed("s") == 1
    assert store.counts("s") == {"pending": 6, "running": 0, "done": 0, "failed": 0}


def test_release_hands_back_claims(store):
    """Released tasks are pending and claimable at once (not when their lease ends)."""
    me = Owner.here()
    store.claim("s", 3, me, lease_s=60)
    store.release(me)
    assert store.counts("s")["pending"] == 6
    again = Owner.here()
    assert [t.key for t in store.claim("s", 3, again, lease_s=3600)] == [
        "train-0", "train-1", "train-2"]


def test_no_reader_sees_a_done_task_without_its_result(store):
    """finish writes status and result in one transaction: another connection, reading
    before every statement of the finish and after it, sees the task running without a
    result or done with it, never in between."""
    me = Owner.here()
    (task,) = store.claim("s", 1, me, lease_s=60)
    reader = sqlite3.connect(store.path)
    seen = []
    store._db.set_trace_callback(lambda statement: seen.append(reader.execute(
        "SELECT status, result FROM tasks WHERE key = ?", (task.key,)).fetchone()))
    try:
        assert store.finish(task.key, me, train_result(task.spec, 1.0), 1.0)
    finally:
        store._db.set_trace_callback(None)
    seen.append(reader.execute("SELECT status, result FROM tasks WHERE key = ?",
                               (task.key,)).fetchone())
    reader.close()
    assert seen[0] == ("running", None) and seen[-1][0] == "done"
    assert set(seen) == {("running", None), seen[-1]} and json.loads(seen[-1][1]) == train_result(
        task.spec, 1.0)


def test_a_folder_that_is_not_a_store_is_a_one_line_error(tmp_path):
    (tmp_path / "sweep.db").write_text("not a database at all" * 100)
    with pytest.raises(ConfigError, match="store must be a folder holding a zoforge sweep"):
        Store(tmp_path)


def test_pareto_helpers():
    assert pareto_mask([(1, 2), (2, 1), (2, 2)]) == [True, True, False]
    assert hypervolume([(0, 0.5), (0.5, 0)], (1, 1)) == pytest.approx(0.75)
    assert hypervolume([(0, 0, 0.5), (0.5, 0.5, 0)], (1, 1, 1)) == pytest.approx(0.625)
    assert igd([(0, 0)], [(0, 0)]) == 0 and igd([(0, 0)], [(3, 4)]) == 5


# -- repair: damaged rows set aside, their tasks really run again -----------------------------

def train_result(spec: dict, marker: float) -> dict:
    """A training's result for the made-up task ``spec`` (every field a training has),
    ``marker`` telling who wrote it."""
    return {"accuracy_before": 0.5, "accuracy_after": 0.5 + spec["i"] / 100,
            "test_loss_before": 0.7, "test_loss_after": 0.6, "final_loss": marker,
            "steps": 10, "steps_per_s": 100.0, "d": 6, "chance_accuracy": 0.5}


class RecordingExecutor:
    """Runs each submitted task at once, in this process: its result is
    :func:`train_result` with marker 2.0; every submitted key is recorded."""

    def __init__(self):
        self.submitted: list[str] = []

    def slots(self) -> int:
        return 2

    def submit(self, kind, key, spec, work_dir):
        self.submitted.append(key)
        future = cf.Future()
        future.set_result({"ok": True, "result": train_result(spec, 2.0), "seconds": 0.25})
        return future

    def wait(self, futures, timeout):
        return [f for f in futures if f.done()]


#: How each damaged task row is broken (SQL on its row), and what stays of it.
DAMAGE = {
    "train-1": "UPDATE tasks SET result = '{\"accuracy' WHERE key = 'train-1'",   # cut short
    "train-2": "UPDATE tasks SET result = NULL WHERE key = 'train-2'",       # done, no result
    "train-3": "UPDATE tasks SET result = '{\"accuracy_after\": \"high\"}' WHERE key = "
               "'train-3'",                                                   # a field's type
}


def _damaged_store(folder) -> tuple[dict, Owner]:
    """A store of six tasks: 0, 1, 2, 3 finished (1, 2, 3 then damaged), 4 failed, 5
    interrupted (claimed by a process that is gone). Returns the rows as they were before
    the damage, and the finishing owner."""
    store = Store(folder)
    store.add_scope("s", {}, POINTS, TASKS)
    me = Owner.here()
    for task in store.claim("s", 4, me, lease_s=60):
        assert store.finish(task.key, me, train_result(task.spec, 1.0), 1.0)
    (failing,) = store.claim("s", 1, me, lease_s=60)
    assert store.fail(failing.key, me, "ValueError: boom", "Traceback ...")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert [t.key for t in store.claim("s", 1, Owner("d" * 32, me.host, dead.pid), 3600)
            ] == ["train-5"]
    before = store.tasks()
    for sql in DAMAGE.values():
        store._db.execute(sql)
    store.close()
    return before, me


def test_repair_runs_the_damaged_tasks_again_and_keeps_finished_work(tmp_path, capsys):
    """``Store(repair=True)`` (``zoforge sweep --repair``) sets the three damaged rows aside
    (as they were, with their reasons) and makes their tasks pending with no result; the
    next run then runs exactly those and the interrupted one, once each, and every one ends
    done with the new result, attempts 1 and completions 1. The intact finished task keeps
    its result and counters untouched, the failed one stays failed (only --retry-failed
    runs it), and the store opens clean afterwards. The repair happens although this
    process had already checked the store (before the damage)."""
    folder = tmp_path / "store"
    before, _ = _damaged_store(folder)
    store = Store(folder, repair=True)      # this process checked it before the damage
    assert f"set {len(DAMAGE)} damaged rows" in capsys.readouterr().err
    aside = store._db.execute("SELECT tbl, key, data, reason FROM damaged ORDER BY key"
                              ).fetchall()
    assert [(row[0], row[1]) for row in aside] == [("tasks", key) for key in sorted(DAMAGE)]
    for _, key, data, reason in aside:
        assert json.loads(data)["status"] == "done" and reason
    repaired = store.tasks()
    for key in DAMAGE:
        assert (repaired[key]["status"], repaired[key]["result"]) == ("pending", None)
        assert (repaired[key]["attempts"], repaired[key]["completions"]) == (0, 0)
    assert store.counts("s") == {"pending": 3, "running": 1, "done": 1, "failed": 1}

    executor = RecordingExecutor()
    counts = run_scope(store, "s", executor, lease_s=60, progress=False, poll_s=0.01)
    assert counts == {"pending": 0, "running": 0, "done": 5, "failed": 1}
    assert sorted(executor.submitted) == sorted([*DAMAGE, "train-5"])   # each exactly once
    after = store.tasks()
    for key in [*DAMAGE, "train-5"]:
        task = after[key]
        assert (task["status"], task["attempts"], task["completions"]) == (
            "done", 1 if key in DAMAGE else 2, 1)
        assert task["result"] == train_result(task["spec"], 2.0)
    for key in ("train-0", "train-4"):                  # finished work and the failure kept
        assert after[key] == before[key]
    assert after["train-0"]["result"] == train_result({"i": 0}, 1.0)
    assert after["train-4"]["status"] == "failed"
    store.close()
    store_module._CHECKED.clear()
    clean = Store(folder)
    assert clean.damaged_rows() == []
    assert len(clean._db.execute("SELECT * FROM damaged").fetchall()) == len(DAMAGE)
    clean.close()


def test_repair_drops_a_damaged_point_and_the_next_run_registers_it_again(tmp_path):
    """A point whose row is unreadable is set aside and removed (its task, intact, keeps
    its result); registering the scope again (the next run of the sweep) brings the point
    back with the same task and nothing runs twice."""
    folder = tmp_path / "store"
    store = Store(folder)
    store.add_scope("s", {}, POINTS, TASKS)
    me = Owner.here()
    for task in store.claim("s", 6, me, lease_s=60):
        store.finish(task.key, me, train_result(task.spec, 1.0), 1.0)
    store._db.execute("UPDATE points SET swept = 'nan' WHERE ord = 2")
    store.close()
    store_module._CHECKED.clear()
    store = Store(folder, repair=True)
    assert [p["ord"] for p in store.points("s")] == [0, 1, 3, 4, 5]
    assert store.tasks(["train-2"])["train-2"]["status"] == "done"
    store.add_scope("s", {}, POINTS, TASKS)           # the sweep registered again
    assert [p["swept"] for p in store.points("s")] == [swept for _, _, swept in POINTS]
    executor = RecordingExecutor()
    assert run_scope(store, "s", executor, lease_s=60, progress=False, poll_s=0.01) == {
        "pending": 0, "running": 0, "done": 6, "failed": 0}
    assert executor.submitted == []
    assert all(t["result"]["final_loss"] == 1.0 for t in store.tasks().values())
    store.close()


def test_sweep_repair_flag_reaches_the_store(tmp_path, capsys):
    """``zoforge sweep --repair --outputs-only`` on a store with a damaged task: exit 0,
    the row set aside (said on stderr), and the outputs show that task pending (it runs on
    the next sweep), the others done with their results."""
    from zoforge.cli import main
    folder = tmp_path / "store"
    store = Store(folder)
    specs = [{"i": i, "perturbation": "gaussian"} for i in range(6)]
    store.add_scope("tiny", {}, [(key, None, {"tag": f"t{i}"})       # text: no plot to draw
                                 for i, (key, _, _) in enumerate(POINTS)],
                    [(f"train-{i}", "train", spec) for i, spec in enumerate(specs)])
    me = Owner.here()
    for task in store.claim("tiny", 6, me, lease_s=60):
        store.finish(task.key, me, train_result(task.spec, 1.0), 1.0)
    store._db.execute(DAMAGE["train-1"])
    store.close()
    store_module._CHECKED.clear()
    argv = ["sweep", "--preset", "tiny", "--store", str(folder), "--outputs-only"]
    assert main(argv) == 2
    assert "--repair" in capsys.readouterr().err
    store_module._CHECKED.clear()
    assert main(argv + ["--repair"]) == 0
    assert "set 1 damaged rows" in capsys.readouterr().err
    rows = [r for r in csv.DictReader((folder / "tiny.csv").open()) if r["row"] == "run"]
    assert [(r["index"], r["status"]) for r in rows] == [
        (str(i), "pending" if i == 1 else "done") for i in range(6)]
    assert [r["accuracy_after"] for r in rows] == [
        "" if i == 1 else str(0.5 + i / 100) for i in range(6)]
