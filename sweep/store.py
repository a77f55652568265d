"""The durable sweep store: one SQLite database in WAL mode, ``STORE/sweep.db``.

Tables (every value is JSON text, never a pickle)::

    tasks(key PRIMARY KEY, kind 'train'|'report', spec, status, owner, host, pid,
          heartbeat, attempts, completions, result, error, traceback, seconds,
          finished_by, updated)
    points(scope, ord, train_key, hw_key, swept, PRIMARY KEY(scope, ord))
    scopes(scope PRIMARY KEY, data)      -- a sweep (or a search) and its SWEEP data
    meta(key PRIMARY KEY, value)         -- schema_version
    damaged(tbl, key, data, reason, moved)  -- rows set aside by repair

A *task* is a training or a generator report, keyed by its stable hash
(:func:`zoforge.sweep.spec.stable_key`); a *point* of a scope joins one training with at
most one report, so a report shared by several points (all seeds of one generator) is one
task. ``status`` is ``pending``, ``running``, ``done`` or ``failed``.

**Claims and leases.** :meth:`Store.claim` runs in one ``BEGIN IMMEDIATE`` transaction
(SQLite's write lock): it picks tasks that are pending, or running under a lease that has
ended, and marks them ``running`` with the claimer's owner token, host, pid and a
heartbeat, so two processes never hold the same task. A lease ends when its heartbeat is
older than ``lease_s`` or, on the same host, when the owner's process is gone (SIGKILL:
no waiting). The claimer refreshes its heartbeats (:meth:`heartbeat`) while it works.
:meth:`finish` and :meth:`fail` write only if the caller still holds the task, so a result
is recorded once (``completions`` counts it). Failed tasks keep their error and traceback
and run again only after :meth:`retry_failed`. Every write is a short transaction, so a
process killed at any moment leaves the database consistent (WAL, ``synchronous=FULL``);
:meth:`finish` writes a task's status and result in one statement of one transaction, so
no reader ever sees a ``done`` task without its result.

**Checked on open.** Once per process and store, :class:`Store` checks that ``sweep.db``
is a regular file (a link is resolved; a FIFO or a device is refused unopened), SQLite's
``PRAGMA quick_check``, the schema (the tables and their columns) and every row (a known
status and kind, JSON objects where JSON is kept, a result for every ``done`` task that
:mod:`zoforge.sweep.results` can read). A
damaged store or row is a one-line :class:`~zoforge.errors.ConfigError` naming ``store``,
what is wrong and how to recover: a damaged file is moved aside by hand (its tasks are run
again), damaged rows are set aside by ``repair=True`` (``zoforge sweep --repair``): each
goes, as it was, into the ``damaged`` table, and its task is run again (a task whose
specification is lost is registered again by the next run of its sweep). A store on a
full disk, a read-only file system or a read-only file is one line too.
"""
from __future__ import annotations

import json
import os
import socket
import sqlite3
import stat
import sys
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from zoforge.errors import ConfigError
from zoforge.outputs import make_out_dir

__all__ = ["Store", "Owner", "Claimed", "SCHEMA_VERSION", "DB_NAME", "STATUSES"]

SCHEMA_VERSION = 2      # 2: training and report keys are zoforge.config.data_hash
DB_NAME = "sweep.db"
STATUSES = ("pending", "running", "done", "failed")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks(
    key TEXT PRIMARY KEY, kind TEXT NOT NULL, spec TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'running', 'done', 'failed')),
    owner TEXT, host TEXT, pid INTEGER, heartbeat REAL,
    attempts INTEGER NOT NULL DEFAULT 0, completions INTEGER NOT NULL DEFAULT 0,
    result TEXT, error TEXT, traceback TEXT, seconds REAL, finished_by TEXT, updated REAL);
CREATE TABLE IF NOT EXISTS scopes(scope TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS points(
    scope TEXT NOT NULL, ord INTEGER NOT NULL, train_key TEXT NOT NULL, hw_key TEXT,
    swept TEXT NOT NULL, PRIMARY KEY (scope, ord));
CREATE INDEX IF NOT EXISTS points_train ON points(train_key);
CREATE INDEX IF NOT EXISTS points_hw ON points(hw_key);
CREATE TABLE IF NOT EXISTS damaged(
    tbl TEXT NOT NULL, key TEXT, data TEXT NOT NULL, reason TEXT NOT NULL, moved REAL);
"""



def _schema_columns() -> dict[str, tuple[str, ...]]:
    """Each table of :data:`_SCHEMA` and its columns, read from a database made from it."""
    db = sqlite3.connect(":memory:")
    db.executescript(_SCHEMA)
    tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = "
                                           "'table'")]
    columns = {table: tuple(row[1] for row in db.execute(f"PRAGMA table_info({table})"))
               for table in tables}
    db.close()
    return columns


#: The columns of each table (the schema check on open; a missing table is created).
COLUMNS = _schema_columns()
_KINDS = ("train", "report")
_RECOVER = ("to recover, move {db} aside (its tasks are run again) or restore a copy")
_REPAIR = "run again with --repair to set damaged rows aside (their tasks run again)"
_CHECKED: set[str] = set()        # stores this process has checked (once each)

# The keys of a scope's tasks, in point order (a point's report before its training).
_SCOPE_TASKS = """
SELECT key, MIN(ord) AS ord, kind_order FROM (
    SELECT train_key AS key, ord, 1 AS kind_order FROM points WHERE scope = :scope
    UNION ALL
    SELECT hw_key AS key, ord, 0 AS kind_order FROM points
        WHERE scope = :scope AND hw_key IS NOT NULL)
GROUP BY key
"""


@dataclass(frozen=True)
class Owner:
    """Who holds a claim: a random token, this host and this process."""

    token: str
    host: str
    pid: int

    @classmethod
    def here(cls) -> "Owner":
        return cls(uuid.uuid4().hex, socket.gethostname(), os.getpid())


@dataclass(frozen=True)
class Claimed:
    key: str
    kind: str
    spec: dict


class Store:
    """A sweep store folder (created if missing); see the module docstring."""

    def __init__(self, folder: Path | str, timeout_s: float = 120.0, repair: bool = False):
        self.folder = make_out_dir("store", folder)
        self.path = self.folder / DB_NAME
        _check_regular(self.path)
        self._db = _connect(self.path, timeout_s)
        try:
            fresh = str(self.path.resolve()) not in _CHECKED
            if fresh:
                self._check_file()
            self._check_schema()
            self._db.executescript(_SCHEMA)     # idempotent; each statement commits itself
            self._check_version()
            if fresh or repair:
                self.damaged_rows(repair)
        except sqlite3.DatabaseError as error:
            self._db.close()
            raise _damaged(self.path, error) from None
        except BaseException:
            self._db.close()
            raise
        _CHECKED.add(str(self.path.resolve()))

    def close(self) -> None:
        self._db.close()

    def connect_again(self) -> "Store":
        """Another connection to the same store (one per thread)."""
        return Store(self.folder)

    # -- scopes and points --------------------------------------------------------------

    def add_scope(self, scope: str, data: dict, points: Iterable[tuple[str, str | None, dict]],
                  tasks: Iterable[tuple[str, str, dict]], append: bool = False) -> None:
        """Register a scope's points ``(train_key, hw_key, swept)`` and their tasks
        ``(key, kind, spec)``; known tasks keep their state and results. Without
        ``append`` the scope's earlier points are replaced (an edited sweep)."""
        with self._write():
            self._db.execute("INSERT INTO scopes(scope, data) VALUES(?, ?) ON CONFLICT(scope) "
                             "DO UPDATE SET data = excluded.data", (scope, _dump(data)))
            if not append:
                self._db.execute("DELETE FROM points WHERE scope = ?", (scope,))
            start = self._db.execute("SELECT COALESCE(MAX(ord) + 1, 0) FROM points WHERE "
                                     "scope = ?", (scope,)).fetchone()[0]
            self._db.executemany(
                "INSERT INTO tasks(key, kind, spec, updated) VALUES(?, ?, ?, ?) "
                "ON CONFLICT(key) DO NOTHING",
                [(key, kind, _dump(spec), time.time()) for key, kind, spec in tasks])
            self._db.executemany(
                "INSERT INTO points(scope, ord, train_key, hw_key, swept) VALUES(?, ?, ?, ?, ?)",
                [(scope, start + i, train, hw, _dump(swept))
                 for i, (train, hw, swept) in enumerate(points)])

    def scopes(self) -> dict[str, dict]:
        return {scope: json.loads(data) for scope, data in
                self._db.execute("SELECT scope, data FROM scopes ORDER BY scope")}

    # -- claims -------------------------------------------------------------------------

    def claim(self, scope: str, limit: int, owner: Owner, lease_s: float) -> list[Claimed]:
        """Up to ``limit`` claimable tasks of ``scope``, now held by ``owner``."""
        if limit <= 0:
            return []
        now = time.time()
        with self._write():
            rows = self._db.execute(
                f"SELECT t.key, t.kind, t.spec, t.status, t.host, t.pid, t.heartbeat "
                f"FROM tasks t JOIN ({_SCOPE_TASKS}) s ON s.key = t.key "
                f"WHERE t.status IN ('pending', 'running') ORDER BY s.ord, s.kind_order",
                {"scope": scope}).fetchall()
            chosen = [row for row in rows if row[3] == "pending"
                      or _lease_ended(row[4], row[5], row[6], now, lease_s, owner)][:limit]
            self._db.executemany(
                "UPDATE tasks SET status = 'running', owner = ?, host = ?, pid = ?, "
                "heartbeat = ?, attempts = attempts + 1, updated = ? WHERE key = ?",
                [(owner.token, owner.host, owner.pid, now, now, row[0]) for row in chosen])
        return [Claimed(row[0], row[1], json.loads(row[2])) for row in chosen]

    def heartbeat(self, owner: Owner) -> None:
        with self._write():
            self._db.execute("UPDATE tasks SET heartbeat = ? WHERE owner = ? AND status = "
                             "'running'", (time.time(), owner.token))

    def finish(self, key: str, owner: Owner, result: dict, seconds: float) -> bool:
        """Record ``result``; False (and nothing written) if ``owner`` lost the task."""
        return self._close(key, owner, "done", result=_dump(result), seconds=seconds,
                           error=None, traceback=None)

    def fail(self, key: str, owner: Owner, error: str, traceback: str = "",
             seconds: float | None = None) -> bool:
        return self._close(key, owner, "failed", error=error, traceback=traceback,
                           seconds=seconds, result=None)

    def _close(self, key: str, owner: Owner, status: str, **values) -> bool:
        sets = ", ".join(f"{name} = :{name}" for name in values)
        bump = ", completions = completions + 1" if status == "done" else ""
        with self._write():
            cursor = self._db.execute(
                f"UPDATE tasks SET status = :status, {sets}{bump}, owner = NULL, "
                f"finished_by = :by, updated = :now "
                f"WHERE key = :key AND owner = :owner AND status = 'running'",
                {**values, "status": status, "now": time.time(), "key": key,
                 "owner": owner.token, "by": f"{owner.host}:{owner.pid}"})
        return cursor.rowcount == 1

    def release(self, owner: Owner) -> None:
        """Hand back every task ``owner`` still holds (a clean stop: Ctrl-C)."""
        with self._write():
            self._db.execute("UPDATE tasks SET status = 'pending', owner = NULL, updated = ? "
                             "WHERE owner = ? AND status = 'running'", (time.time(), owner.token))

    def retry_failed(self, scope: str) -> int:
        """Make the scope's failed tasks pending again; returns how many."""
        with self._write():
            cursor = self._db.execute(
                f"UPDATE tasks SET status = 'pending', updated = :now WHERE status = "
                f"'failed' AND key IN (SELECT key FROM ({_SCOPE_TASKS}))",
                {"scope": scope, "now": time.time()})
        return cursor.rowcount

    # -- reading ------------------------------------------------------------------------

    def counts(self, scope: str) -> dict[str, int]:
        """Tasks of ``scope`` by status (every status present, 0 if none)."""
        counts = dict.fromkeys(STATUSES, 0)
        for status, number in self._db.execute(
                f"SELECT t.status, COUNT(*) FROM tasks t JOIN ({_SCOPE_TASKS}) s "
                f"ON s.key = t.key GROUP BY t.status", {"scope": scope}):
            counts[status] = number
        return counts

    def tasks(self, keys: Iterable[str] | None = None) -> dict[str, dict]:
        """Task rows by key (all, or those of ``keys``), JSON columns decoded."""
        if keys is None:
            rows = self._db.execute("SELECT * FROM tasks").fetchall()
        else:
            keys, rows = list(keys), []
            for start in range(0, len(keys), 500):        # SQLite's parameter limit
                chunk = keys[start:start + 500]
                rows += self._db.execute("SELECT * FROM tasks WHERE key IN (" + ", ".join(
                    "?" * len(chunk)) + ")", chunk).fetchall()
        out = {}
        for row in rows:
            item = dict(row)
            for name in ("spec", "result"):
                item[name] = json.loads(item[name]) if item[name] is not None else None
            out[item["key"]] = item
        return out

    def points(self, scope: str) -> list[dict]:
        """The scope's points in order: ``ord``, ``train_key``, ``hw_key``, ``swept``."""
        return [dict(row, swept=json.loads(row["swept"])) for row in self._db.execute(
            "SELECT ord, train_key, hw_key, swept FROM points WHERE scope = ? ORDER BY ord",
            (scope,))]

    # -- internals ----------------------------------------------------------------------

    def _write(self):
        return _Transaction(self._db, self.path)

    def _check_file(self) -> None:
        """SQLite's own check of the file's pages and indexes."""
        problems = [row[0] for row in self._db.execute("PRAGMA quick_check(5)")]
        if problems != ["ok"]:
            raise ConfigError("store", "a folder holding an intact zoforge sweep store",
                              f"{self.path}: damaged ({'; '.join(problems)}); "
                              + _RECOVER.format(db=self.path))

    def _check_schema(self) -> None:
        """The tables present have exactly this version's columns; a database with other
        tables and no ``meta`` is not a sweep store."""
        tables = {row[0] for row in self._db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables and "meta" not in tables:
            raise ConfigError("store", "a folder holding a zoforge sweep store (or a new "
                              "folder)", f"{self.path}: an SQLite database with tables "
                              f"{', '.join(sorted(tables))}")
        for table, columns in COLUMNS.items():
            if table not in tables:
                continue
            found = tuple(row[1] for row in self._db.execute(f"PRAGMA table_info({table})"))
            if found != columns:
                raise ConfigError("store", f"a folder holding a zoforge sweep store of schema "
                                  f"version {SCHEMA_VERSION}", f"{self.path}: table {table} "
                                  f"has columns {', '.join(found)}, not {', '.join(columns)}; "
                                  + _RECOVER.format(db=self.path))

    def damaged_rows(self, repair: bool = False) -> list[tuple[str, str, str]]:
        """The rows that cannot be read as (table, key, what is wrong): none, or a one-line
        error naming the first (``repair``: each set aside, see the module docstring)."""
        found = _damaged_rows(self._db)
        if not found:
            return []
        if not repair:
            table, key, reason = found[0]
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            raise ConfigError("store", "a folder holding a zoforge sweep store whose rows "
                              "can be read", f"{self.path}: {table} row {key!r}: {reason}"
                              f"{more}; {_REPAIR}")
        with self._write():
            for table, key, reason in found:
                _set_aside(self._db, table, key, reason)
        print(f"zoforge: set {len(found)} damaged rows of {self.path} aside (table damaged); "
              "their tasks run again", file=sys.stderr)
        return found

    def _check_version(self) -> None:
        with self._write():
            self._db.execute("INSERT INTO meta(key, value) VALUES('schema_version', ?) "
                             "ON CONFLICT(key) DO NOTHING", (str(SCHEMA_VERSION),))
        found = self._db.execute("SELECT value FROM meta WHERE key = 'schema_version'"
                                 ).fetchone()[0]
        if found != str(SCHEMA_VERSION):
            raise ConfigError("store", f"a sweep store of schema version {SCHEMA_VERSION} "
                              "(or a new folder)", f"{self.path}: version {found}")


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on an exception); SQLite's errors
    (a full disk, a read-only file) become one-line errors naming the store."""

    def __init__(self, db: sqlite3.Connection, path: Path):
        self.db = db
        self.path = path

    def __enter__(self):
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            raise _unwritable(self.path, error) from None
        return self.db

    def __exit__(self, kind, value, traceback):
        if kind is None:
            try:
                self.db.execute("COMMIT")
                return False
            except sqlite3.Error as error:
                kind, value = type(error), error
        if self.db.in_transaction:
            try:
                self.db.execute("ROLLBACK")
            except sqlite3.Error:
                pass
        if isinstance(value, sqlite3.Error):
            raise _unwritable(self.path, value) from None
        return False


def _unwritable(path: Path, error: sqlite3.Error) -> ConfigError:
    text = str(error)
    if isinstance(error, sqlite3.DatabaseError) and not isinstance(
            error, sqlite3.OperationalError):
        return _damaged(path, error)
    return ConfigError("store", "a sweep store zoforge can write (free space, a writable "
                       "file and folder)", f"{path}: {text}")


def _damaged(path: Path, error: sqlite3.Error) -> ConfigError:
    if isinstance(error, sqlite3.OperationalError) and "malformed" not in str(error):
        return _unwritable(path, error)
    return ConfigError("store", "a folder holding a zoforge sweep store (or a new folder)",
                       f"{path}: {error}; " + _RECOVER.format(db=path))


def _check_regular(path: Path) -> None:
    """``sweep.db``, if present, is a regular file and not a link: nothing else is opened (a
    FIFO would hang SQLite's open; a link would make a store of whatever file it names)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as error:
        raise ConfigError("store", "a folder holding a readable sweep store",
                          f"{path}: {error.strerror}") from None
    if not stat.S_ISREG(mode):
        kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
        raise ConfigError("store", "a folder holding a zoforge sweep store (or a new "
                          "folder)", f"{path}: {kind}")


def _json_object(text) -> str | None:
    """What is wrong with ``text`` as a stored JSON object, or None."""
    if not isinstance(text, str):
        return f"not JSON text ({type(text).__name__})"
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return "malformed JSON"
    return None if isinstance(value, dict) else f"JSON {type(value).__name__}, not an object"


def _damaged_rows(db: sqlite3.Connection) -> list[tuple[str, str, str]]:
    """(table, key, reason) of every row that cannot be read (see the module docstring)."""
    found = []
    for row in db.execute("SELECT key, kind, spec, status, result, attempts, completions "
                          "FROM tasks"):
        if reason := _task_problem(*row):
            found.append(("tasks", str(row[0]), reason))
    for scope, data in db.execute("SELECT scope, data FROM scopes"):
        if reason := _json_object(data):
            found.append(("scopes", str(scope), f"data: {reason}"))
    for scope, order, train, swept in db.execute(
            "SELECT scope, ord, train_key, swept FROM points"):
        problem = _json_object(swept)
        reason = ("no training key" if not isinstance(train, str) else
                  problem and f"swept: {problem}")
        if reason:
            found.append(("points", f"{scope}#{order}", reason))
    return found


def _task_problem(key, kind, spec, status, result, attempts, completions) -> str | None:
    """What is wrong with a task row, or None."""
    if status not in STATUSES:
        return f"status {status!r}"
    if kind not in _KINDS:
        return f"kind {kind!r}"
    if problem := _json_object(spec):
        return f"spec: {problem}"
    if status == "done" and result is None:
        return "done without a result"
    if result is not None and (problem := _json_object(result) or _result_problem(
            kind, json.loads(result))):
        return f"result: {problem}"
    if not all(isinstance(n, int) for n in (attempts, completions)):
        return "attempts or completions not integers"
    return None


def _result_problem(kind: str, result: dict) -> str | None:
    """What makes a stored result unreadable by :mod:`zoforge.sweep.results`, or None: a
    training's needs every field of :data:`~zoforge.sweep.tasks.TRAIN_FIELDS` (a number or
    null), a report's must be read by :meth:`~zoforge.reports.model.Report.from_json`."""
    if kind == "train":
        # imported here for start-up time: the task module loads only when results are read
        from zoforge.sweep.tasks import TRAIN_FIELDS
        for name in TRAIN_FIELDS:
            value = result.get(name, "missing")
            if value is not None and (isinstance(value, bool)
                                      or not isinstance(value, (int, float))):
                return f"{name} {value!r} is not a number"
        return None
    # imported here for start-up time: the report model loads only when reports are read
    from zoforge.reports.model import Report
    try:
        Report.from_json(result)
    except Exception as error:        # any way a stored report can be unreadable
        return f"not a report ({type(error).__name__})"
    return None


def _set_aside(db: sqlite3.Connection, table: str, key: str, reason: str) -> None:
    """Copy one damaged row into ``damaged`` and remove it (a task whose specification is
    readable stays, pending again, without its result)."""
    if table == "points":
        scope, _, order = key.rpartition("#")
        where, args = "scope = ? AND ord = ?", (scope, int(order))
    else:
        where, args = f"{'key' if table == 'tasks' else 'scope'} = ?", (key,)
    for row in db.execute(f"SELECT * FROM {table} WHERE {where}", args).fetchall():
        data = json.dumps({name: row[name] for name in row.keys()}, default=repr)
        db.execute("INSERT INTO damaged(tbl, key, data, reason, moved) VALUES(?, ?, ?, ?, ?)",
                   (table, key, data, reason, time.time()))
    if table == "tasks" and _spec_ok(db, key):
        db.execute("UPDATE tasks SET status = 'pending', result = NULL, owner = NULL, "
                   "attempts = 0, completions = 0, updated = ? WHERE key = ?",
                   (time.time(), key))
    else:
        db.execute(f"DELETE FROM {table} WHERE {where}", args)


def _spec_ok(db: sqlite3.Connection, key: str) -> bool:
    kind, spec = db.execute("SELECT kind, spec FROM tasks WHERE key = ?", (key,)).fetchone()
    return kind in _KINDS and _json_object(spec) is None


def _connect(path: Path, timeout_s: float) -> sqlite3.Connection:
    try:
        db = sqlite3.connect(path, timeout=timeout_s, isolation_level=None,
                             check_same_thread=True)
        db.row_factory = sqlite3.Row
        mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        db.execute("PRAGMA synchronous=FULL")
        db.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
    except sqlite3.DatabaseError as error:
        raise _damaged(path, error) from None
    if mode.lower() != "wal":
        raise ConfigError("store", "a folder on a file system with shared-memory locking "
                          "(SQLite WAL mode)", f"{path}: journal mode {mode}")
    return db


def _dump(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _lease_ended(host: str | None, pid: int | None, heartbeat: float | None, now: float,
                 lease_s: float, owner: Owner) -> bool:
    """A running task's claim is over: no heartbeat for ``lease_s``, or its owner's process
    on this host is gone."""
    if heartbeat is None or now - heartbeat > lease_s:
        return True
    return host == owner.host and pid is not None and not _process_alive(pid)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:        # a killed process its parent has not reaped yet is gone too
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True
