"""The sweep store's rows are untrusted input (issue 34): every row is checked on open, column
by column (typed columns, finite numbers) and as a whole (references resolvable); a damaged
row is one line naming the store, table, row and column and saying ``--repair``, and the
repair fixes what is certain or sets the row aside, never losing finished work. A sweep name
reused with another configuration is an error naming both.

The held-out examples of the issue are pinned one by one; then a fuzzer writes every kind of
wrong value into every column of every table (SQL on a copy of one template store) and
checks the outcome against an oracle written here from the documented rules (not from
``zoforge.sweep.store_rows``): refused with one line exactly when a rule is broken, clean
after ``--repair``, finished work kept, and every task done exactly once by the next run
(a small budget by default, a larger one under ``-m slow``).
"""
from __future__ import annotations

import concurrent.futures as cf
import json
import math
import shutil
import sqlite3
import tomllib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zoforge.cli import main
from zoforge.errors import ConfigError
from zoforge.sweep import store as store_module
from zoforge.sweep.runner import run_scope
from zoforge.sweep.store import COLUMNS, Owner, Store
from zoforge.sweep.store_rows import RULES
from zoforge.sweep.tasks import TRAIN_FIELDS

FEW, MANY = 12, 400         # generated cases: the default run, -m slow
KEYS = [f"train-{i}" for i in range(4)]      # 0, 1 done; 2 failed; 3 running (claimer gone)
FIELDS = ("accuracy_before", "accuracy_after", "test_loss_before", "test_loss_after",
          "final_loss", "steps", "steps_per_s", "d", "chance_accuracy")   # by hand


def result(i: int, marker: float = 1.0) -> dict:
    return {name: (i + 1) / 10 for name in FIELDS} | {"final_loss": marker}


class Instant:
    """Runs each task at once in this process, with :func:`result` marker 2.0."""

    def __init__(self):
        self.submitted: list[str] = []

    def slots(self) -> int:
        return 2

    def submit(self, kind, key, spec, work_dir):
        self.submitted.append(key)
        future = cf.Future()
        future.set_result({"ok": True, "result": result(spec["i"], 2.0), "seconds": 0.5})
        return future

    def wait(self, futures, timeout):
        return [f for f in futures if f.done()]


def _register(store: Store, data: dict | None = None) -> None:
    store.add_scope("s", {"description": "rows"} if data is None else data,
                    [(key, None, {"i": i}) for i, key in enumerate(KEYS)],
                    [(key, "train", {"i": i}) for i, key in enumerate(KEYS)])


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A store folder: two finished tasks, one failed, one running whose claimer is gone,
    and one row in ``damaged``; checkpointed into ``sweep.db`` alone."""
    folder = tmp_path_factory.mktemp("template") / "store"
    store = Store(folder)
    _register(store)
    me = Owner.here()
    for task in store.claim("s", 2, me, 60):
        assert store.finish(task.key, me, result(task.spec["i"]), 1.0)
    (failing,) = store.claim("s", 1, me, 60)
    assert store.fail(failing.key, me, "ValueError: boom", "Traceback ...")
    store.claim("s", 1, Owner("d" * 32, me.host, 2**31 - 1), 3600)   # no such process
    store._db.execute("INSERT INTO damaged VALUES('tasks', 'old', '{}', 'earlier', 1.0)")
    store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    return folder


def _copy(template, tmp_path, sql: str | None = None, args=()):
    folder = tmp_path / "store"
    folder.mkdir()
    shutil.copyfile(template / "sweep.db", folder / "sweep.db")
    if sql:
        db = sqlite3.connect(folder / "sweep.db")
        db.execute(sql, args)
        db.commit()
        db.close()
    store_module._CHECKED.clear()           # checked again, as a new process would
    return folder


def _refused(folder) -> str:
    store_module._CHECKED.clear()
    with pytest.raises(ConfigError) as error:
        Store(folder)
    text = str(error.value)
    assert "\n" not in text and text.startswith("store must be")
    return text


def _repaired(folder, capsys) -> Store:
    store_module._CHECKED.clear()
    store = Store(folder, repair=True)
    assert "damaged rows" in capsys.readouterr().err
    store.close()
    store_module._CHECKED.clear()
    return Store(folder)                    # clean on the next open


def test_every_column_of_every_table_has_a_rule():
    assert {table: tuple(rules) for table, rules in RULES.items()} == COLUMNS
    assert TRAIN_FIELDS == FIELDS


# -- the held-out examples ---------------------------------------------------------------

def _with_d(literal: str) -> str:
    """train-0's result as JSON text, its ``d`` written as ``literal``."""
    return json.dumps({**result(0), "d": "@"}).replace('"@"', literal)


HELD_OUT = {   # name: (SQL, its arguments, the row and column named, the task's state after)
    "nan-in-a-result": ("UPDATE tasks SET result = ? WHERE key = 'train-0'",
                        (_with_d("NaN"),), "'train-0' column result",
                        ("pending", None)),
    "1e999-in-a-result": ("UPDATE tasks SET result = ? WHERE key = 'train-0'",
                          (_with_d("1e999"),),
                          "'train-0' column result", ("pending", None)),
    "huge-integer": ("UPDATE tasks SET result = ? WHERE key = 'train-0'",
                     (_with_d("9" * 400),),
                     "'train-0' column result", ("pending", None)),
    "text-pid-of-running": ("UPDATE tasks SET pid = 'abc' WHERE key = 'train-3'", (),
                            "'train-3' column pid", ("pending", None)),
    "text-heartbeat-of-running": ("UPDATE tasks SET heartbeat = 'soon' WHERE key = "
                                  "'train-3'", (), "'train-3' column heartbeat",
                                  ("pending", None)),
    "inf-heartbeat": ("UPDATE tasks SET heartbeat = 1e999 WHERE key = 'train-3'", (),
                      "'train-3' column heartbeat", ("pending", None)),
    # finished work with damaged bookkeeping stays finished, its result kept
    "text-heartbeat-of-done": ("UPDATE tasks SET heartbeat = 'x', seconds = 'y' WHERE key = "
                               "'train-0'", (), "'train-0' column heartbeat",
                               ("done", result(0))),
    "blob-attempts-of-done": ("UPDATE tasks SET attempts = X'00' WHERE key = 'train-1'", (),
                              "'train-1' column attempts", ("done", result(1))),
    "a-point-without-its-training": ("DELETE FROM tasks WHERE key = 'train-1'", (),
                                     "points row 's#1' column train_key", None),
}


@pytest.mark.parametrize("name", sorted(HELD_OUT))
def test_a_held_out_damaged_row_is_one_line_and_repair_keeps_finished_work(
        name, template, tmp_path, capsys):
    sql, args, named, after = HELD_OUT[name]
    folder = _copy(template, tmp_path, sql, args)
    text = _refused(folder)
    assert named in text and "--repair" in text and str(folder / "sweep.db") in text
    store = _repaired(folder, capsys)
    tasks = store.tasks()
    key = named.split("'")[1]
    if after is not None:
        assert (tasks[key]["status"], tasks[key]["result"]) == after
    _register(store)                            # the next run of the sweep
    executor = Instant()
    counts = run_scope(store, "s", executor, lease_s=60, progress=False, poll_s=0.01)
    assert counts == {"pending": 0, "running": 0, "done": 3, "failed": 1}
    after_run = store.tasks()
    for key in KEYS:                            # finished work kept, each result once
        kept = after_run[key]
        if key in executor.submitted:
            assert kept["result"] == result(int(key[-1]), 2.0)
        elif kept["status"] == "done":
            assert kept["result"] == result(int(key[-1]))
        assert kept["completions"] == (kept["status"] == "done")
    assert len(executor.submitted) == len(set(executor.submitted))
    store.close()


def test_a_damaged_row_through_the_command_line_is_exit_2_one_line(template, tmp_path,
                                                                     capsys):
    folder = _copy(template, tmp_path, "UPDATE tasks SET pid = 'abc' WHERE key = 'train-3'")
    code = main(["sweep", "--preset", "tiny", "--name", "s", "--store", str(folder),
                 "--outputs-only"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("zoforge: error: --store must be") and "--repair" in err


def test_finish_never_writes_a_result_the_store_would_refuse(template, tmp_path):
    """A non-finite number or a missing field fails the task with what is wrong (the store
    then opens clean); a good result is recorded."""
    store = Store(_copy(template, tmp_path))
    me = Owner.here()
    store.retry_failed("s")
    (task,) = store.claim("s", 1, me, 60)
    assert store.finish(task.key, me, {**result(2), "final_loss": math.inf}, 1.0)
    row = store.tasks([task.key])[task.key]
    assert row["status"] == "failed" and row["error"].startswith("unusable result:")
    store.retry_failed("s")
    (task,) = store.claim("s", 1, me, 60)
    assert store.finish(task.key, me, {k: v for k, v in result(2).items() if k != "d"}, 1.0)
    assert "d missing" in store.tasks([task.key])[task.key]["error"]
    store.close()
    store_module._CHECKED.clear()
    Store(tmp_path / "store").close()


# -- one configuration per name ----------------------------------------------------------

def test_a_name_reused_with_another_configuration_is_an_error_naming_both(template,
                                                                          tmp_path):
    store = Store(_copy(template, tmp_path))
    before = store.points("s")
    with pytest.raises(ConfigError) as error:
        _register(store, {"train": {"steps": 5}})
    text = str(error.value)
    assert text.startswith("name must be") and "new --name" in text and "'s'" in text
    assert "train.steps (absent) -> 5" in text and text.count("configuration") >= 2
    assert store.points("s") == before          # nothing replaced
    _register(store, {"description": "edited words only"})      # the same configuration
    assert store.points("s") == before
    store.close()


def test_two_sweeps_under_one_name_through_the_command_line(tmp_path, capsys):
    """The second sweep with another configuration under the first one's --name is refused
    before any task runs (the first's points stay); with its own --name it is accepted."""
    folder = tmp_path / "store"
    first = ["sweep", "--name", "q", "--set", "model=tiny", "--set", "steps=1"]
    assert main([*first, "--print-config"]) == 0
    store = Store(folder)
    store.add_scope("q", tomllib.loads(capsys.readouterr().out), [("train-q", None, {})],
                    [("train-q", "train", {})])
    store.close()
    code = main(["sweep", "--store", str(folder), "--name", "q", "--set", "model=tiny",
                 "--set", "steps=2", "--jobs", "1", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("zoforge: error: --name must be") and "'q'" in err
    assert "train.steps 1 -> 2" in err and "and " not in err.split("->")[-1]
    store_module._CHECKED.clear()
    store = Store(folder)
    assert [p["train_key"] for p in store.points("q")] == ["train-q"]     # kept
    store.close()


# -- the fuzzer: every kind of wrong value in every column ---------------------------------

#: SQL literals of every kind of value (SQLite's column affinity then stores what it stores).
VALUES = {"null": "NULL", "int": "7", "negative": "-3", "zero": "0", "real": "2.5",
          "inf": "1e999", "text": "'abc'", "blob": "X'00ff'", "object": "'{\"a\": 1}'",
          "nan-object": "'{\"a\": NaN}'", "list": "'[1, 2]'", "bad-json": "'{\"a\"'",
          "status": "'done'", "kind": "'report'"}
#: The row each table's value goes into.
ROWS = {"tasks": ["key = 'train-0'", "key = 'train-2'", "key = 'train-3'"],
        "points": ["ord = 1"], "scopes": ["scope = 's'"], "damaged": ["key = 'old'"],
        "meta": ["key = 'schema_version'"]}


def _number(value) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def _json_object_ok(value) -> bool:
    if not isinstance(value, str):
        return False
    try:
        data = json.loads(value, parse_constant=lambda name: math.nan)
    except ValueError:
        return False
    return isinstance(data, dict) and all(
        not isinstance(v, float) or math.isfinite(v) for v in data.values())


def acceptable(table: str, column: str, value, row: dict) -> bool:
    """The oracle: may ``column`` of this ``row`` (the rest intact) hold ``value`` (as
    SQLite stored it)? From the documented rules, by hand."""
    optional = value is None
    if table == "tasks":
        status = row["status"]
        return {
            "key": False,               # another key: not its kind's, its point orphaned
            "kind": value == "train",
            "spec": _json_object_ok(value),
            "status": value in ("pending", "running", "failed") or (
                value == "done" and row["result"] is not None),
            "result": optional and status != "done",    # no generated value is a result
            "pid": optional or (type(value) is int and 1 <= value < 2**31),
            "attempts": type(value) is int and value >= 0,
            # a result is recorded once: one completion when done, none otherwise
            "completions": type(value) is int and value == int(status == "done"),
        }.get(column, optional or (_number(value) if column in (
            "heartbeat", "seconds", "updated") else isinstance(value, str)))
    if table == "points":
        return {"scope": value == "s", "ord": type(value) is int and value >= 0,
                "train_key": value == "train-1", "hw_key": optional,
                "swept": _json_object_ok(value)}[column]
    if table == "scopes":
        return column == "data" and _json_object_ok(value)
    if table == "damaged":
        return optional if column == "key" and optional else (
            _number(value) or optional) if column == "moved" else isinstance(value, str)
    return isinstance(value, str)       # meta (its version is checked apart)


CASES = st.tuples(st.sampled_from([(t, c) for t, cs in COLUMNS.items() for c in cs]),
                  st.sampled_from(sorted(VALUES)), st.integers(0, 2))
_SETTINGS = dict(deadline=None, database=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow,
                                        HealthCheck.function_scoped_fixture])


def check_case(case, template, tmp_path, capsys) -> None:
    (table, column), kind, which = case
    rows = ROWS[table]
    where = rows[which % len(rows)]
    case_dir = tmp_path / f"{table}-{column}-{kind}-{which}"
    case_dir.mkdir()
    db = sqlite3.connect(template / "sweep.db")
    db.row_factory = sqlite3.Row
    row = dict(db.execute(f"SELECT rowid AS n, * FROM {table} WHERE {where}").fetchone())
    db.close()
    try:
        folder = _copy(template, case_dir, f"UPDATE {table} SET {column} = {VALUES[kind]} "
                                           f"WHERE {where}")
    except sqlite3.IntegrityError:          # NOT NULL, CHECK or a key taken: never stored
        return
    db = sqlite3.connect(folder / "sweep.db")
    (value,) = db.execute(f"SELECT {column} FROM {table} WHERE rowid = ?", (row["n"],)
                          ).fetchone()
    db.close()
    if table == "meta" and column == "value" and value != "2":
        assert "version" in _refused(folder)            # not a row to repair: another store
        return
    if acceptable(table, column, value, row):
        store_module._CHECKED.clear()
        store = Store(folder)
    else:
        text = _refused(folder)
        named = "table points row" if (table, column) == ("scopes", "scope") and isinstance(
            value, str) else f"table {table} row"   # a scope renamed: its points name none
        assert named in text and "--repair" in text, text
        store = _repaired(folder, capsys)
    for key in ("train-0", "train-1"):      # finished work kept unless its own row broke
        task = store.tasks([key]).get(key)
        if not (table == "tasks" and where == f"key = '{key}'") and task is not None:
            assert (task["status"], task["result"]) == ("done", result(int(key[-1])))
    if "s" in store.scopes() and store.scopes()["s"] != {"description": "rows"}:
        with pytest.raises(ConfigError, match="^name must be"):
            _register(store)
        store.close()
        return
    _register(store)
    executor = Instant()
    counts = run_scope(store, "s", executor, lease_s=60, progress=False, poll_s=0.01)
    assert counts["pending"] == counts["running"] == 0
    assert len(executor.submitted) == len(set(executor.submitted))
    assert all(t["completions"] == (t["status"] == "done") for t in store.tasks().values()
               if t["key"] in executor.submitted)
    store.close()


@settings(max_examples=FEW, **_SETTINGS)
@given(case=CASES)
def test_every_wrong_value_in_every_column(case, template, tmp_path_factory, capsys):
    check_case(case, template, tmp_path_factory.mktemp("case"), capsys)


@pytest.mark.slow
@settings(max_examples=MANY, **{**_SETTINGS, "derandomize": False})
@given(case=CASES)
def test_every_wrong_value_in_every_column_many(case, template, tmp_path_factory, capsys):
    check_case(case, template, tmp_path_factory.mktemp("case"), capsys)
