"""The sweep store's claim/lease protocol, on made-up tasks (no training, no report), and
the Pareto helpers."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time

import pytest

from zoforge.errors import ConfigError
from zoforge.sweep.pareto import hypervolume, igd, pareto_mask
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
    assert other.finish("train-4", b, {"x": 1}, 1.0)
    assert not store.finish("train-4", a, {"x": 2}, 1.0)     # not its task
    assert store.tasks(["train-4"])["train-4"]["result"] == {"x": 1}
    other.close()


def test_a_lease_ends_without_heartbeats_or_when_its_process_is_gone(store):
    me = Owner.here()
    far = Owner("f" * 32, "another-host", 12345)
    claimed = store.claim("s", 1, far, lease_s=60)[0]
    assert store.claim("s", 6, me, lease_s=60)[0].key != claimed.key   # still leased
    time.sleep(0.2)
    taken = store.claim("s", 6, me, lease_s=0.1)      # no heartbeat for 0.1 s: taken over
    assert claimed.key in [t.key for t in taken]
    assert not store.finish(claimed.key, far, {}, 0.0)  # the old owner's result is refused

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
    me = Owner.here()
    store.claim("s", 3, me, lease_s=60)
    store.release(me)
    assert store.counts("s")["pending"] == 6


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
        assert store.finish(task.key, me, {"x": 1}, 1.0)
    finally:
        store._db.set_trace_callback(None)
    seen.append(reader.execute("SELECT status, result FROM tasks WHERE key = ?",
                               (task.key,)).fetchone())
    reader.close()
    assert seen[0] == ("running", None) and seen[-1][0] == "done"
    assert set(seen) == {("running", None), seen[-1]} and json.loads(seen[-1][1]) == {"x": 1}


def test_a_folder_that_is_not_a_store_is_a_one_line_error(tmp_path):
    (tmp_path / "sweep.db").write_text("not a database at all" * 100)
    with pytest.raises(ConfigError, match="store must be a folder holding a zoforge sweep"):
        Store(tmp_path)


def test_pareto_helpers():
    assert pareto_mask([(1, 2), (2, 1), (2, 2)]) == [True, True, False]
    assert hypervolume([(0, 0.5), (0.5, 0)], (1, 1)) == pytest.approx(0.75)
    assert hypervolume([(0, 0, 0.5), (0.5, 0.5, 0)], (1, 1, 1)) == pytest.approx(0.625)
    assert igd([(0, 0)], [(0, 0)]) == 0 and igd([(0, 0)], [(3, 4)]) == 5
