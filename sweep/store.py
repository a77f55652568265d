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
is a regular file (not a link; a FIFO or a device is refused unopened), SQLite's
``PRAGMA quick_check``, the schema (the tables and their columns) and every row, column by
column and as a whole (:mod:`zoforge.sweep.store_rows`: typed columns, finite numbers, JSON
objects where JSON is kept, a readable result for every ``done`` task, every reference
resolvable). A damaged store or row is a one-line :class:`~zoforge.errors.ConfigError`
naming ``store`` (a row: its table, row and column) and how to recover: a damaged file is
moved aside by hand (its tasks are run again); damaged rows are set aside by
``repair=True`` (``zoforge sweep --repair``), each copied as it was into the ``damaged``
table and then fixed where the fix is certain or removed (:func:`_repair`): finished work
whose result is intact is kept, a damaged claim is queued again, a task whose result is
lost runs again, a row that cannot be fixed is registered again by the next run of its
sweep. :meth:`finish` never writes what the check would call damaged (an unreadable result
fails its task). A store on a full disk, a read-only file system or a read-only file is
one line too.

**One configuration per scope.** A scope (a sweep's ``--name``) registered again with
another configuration (its data but the description: :func:`configuration`) is a one-line
error naming the name and both configurations; the same configuration again continues it.
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

from zoforge.errors import ConfigError, printable
from zoforge.outputs import make_out_dir
from zoforge.sweep.store_rows import (LEASE_COLUMNS, STATUSES, Damage, find_damage,
                                      json_object, load_json, result_problem)

__all__ = ["Store", "Owner", "Claimed", "SCHEMA_VERSION", "DB_NAME", "STATUSES", "COLUMNS",
           "configuration", "DESCRIPTIVE"]

SCHEMA_VERSION = 2      # 2: training and report keys are zoforge.config.data_hash
DB_NAME = "sweep.db"

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
        ``append`` the scope's earlier points are replaced by these (the same sweep again).
        A scope the store holds with another configuration (:func:`configuration`) is a
        one-line error naming both (``name``: the sweep's ``--name``)."""
        try:
            text = _dump(data)
            points = [(train, hw, _dump(swept)) for train, hw, swept in points]
            tasks = [(key, kind, _dump(spec)) for key, kind, spec in tasks]
        except ValueError as error:
            raise ConfigError(f"sweep {scope!r}", "a sweep whose values are finite numbers",
                              str(error)) from None
        with self._write():
            stored = self._db.execute("SELECT data FROM scopes WHERE scope = ?",
                                      (scope,)).fetchone()
            if stored is not None:
                _check_same(scope, load_json(stored[0]), data)
            self._db.execute("INSERT INTO scopes(scope, data) VALUES(?, ?) ON CONFLICT(scope) "
                             "DO UPDATE SET data = excluded.data", (scope, text))
            if not append:
                self._db.execute("DELETE FROM points WHERE scope = ?", (scope,))
            start = self._db.execute("SELECT COALESCE(MAX(ord) + 1, 0) FROM points WHERE "
                                     "scope = ?", (scope,)).fetchone()[0]
            now = time.time()
            self._db.executemany(
                "INSERT INTO tasks(key, kind, spec, updated) VALUES(?, ?, ?, ?) "
                "ON CONFLICT(key) DO NOTHING", [(*task, now) for task in tasks])
            self._db.executemany(
                "INSERT INTO points(scope, ord, train_key, hw_key, swept) VALUES(?, ?, ?, ?, ?)",
                [(scope, start + i, *point) for i, point in enumerate(points)])

    def scopes(self) -> dict[str, dict]:
        return {scope: load_json(data) for scope, data in
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
        return [Claimed(row[0], row[1], load_json(row[2])) for row in chosen]

    def heartbeat(self, owner: Owner) -> None:
        with self._write():
            self._db.execute("UPDATE tasks SET heartbeat = ? WHERE owner = ? AND status = "
                             "'running'", (time.time(), owner.token))

    def finish(self, key: str, owner: Owner, result: dict, seconds: float) -> bool:
        """Record ``result``; False (and nothing written) if ``owner`` lost the task. A
        result the store could not read back (a number that is not finite, a field
        missing: :func:`~zoforge.sweep.store_rows.result_problem`) fails the task instead,
        with what is wrong as its error."""
        row = self._db.execute("SELECT kind FROM tasks WHERE key = ?", (key,)).fetchone()
        try:
            text = _dump(result)
            problem = json_object(text) or result_problem(row[0] if row else "", result)
        except (ValueError, TypeError) as error:
            problem = str(error)
        if problem:
            return self.fail(key, owner, printable(f"unusable result: {problem}"),
                             seconds=seconds)
        return self._close(key, owner, "done", result=text, seconds=seconds,
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
                item[name] = load_json(item[name]) if item[name] is not None else None
            out[item["key"]] = item
        return out

    def points(self, scope: str) -> list[dict]:
        """The scope's points in order: ``ord``, ``train_key``, ``hw_key``, ``swept``."""
        return [dict(row, swept=load_json(row["swept"])) for row in self._db.execute(
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

    def damaged_rows(self, repair: bool = False) -> list[Damage]:
        """Every damaged row (:mod:`zoforge.sweep.store_rows`): none, or a one-line error
        naming the first (``repair``: each set aside, see the module docstring, until none
        is left: a task removed can leave its points without it)."""
        found = find_damage(self._db)
        if not found:
            return []
        if not repair:
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            raise ConfigError("store", "a folder holding a zoforge sweep store whose rows "
                              "can be read", f"{self.path}: {found[0]}{more}; {_REPAIR}")
        rows, every = 0, []
        with self._write():
            while found and len(every) < 4 * len(COLUMNS):      # a removed row's dependants
                rows += _repair(self._db, found)
                every += found
                found = find_damage(self._db)
        print(f"zoforge: set {rows} damaged rows of {printable(str(self.path))} aside (table "
              "damaged); their tasks run again", file=sys.stderr)
        return every

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


def _repair(db: sqlite3.Connection, found: list[Damage]) -> int:
    """Set the damaged rows of ``found`` aside, each copied as it was into ``damaged``
    (with its reasons), and fix or remove it; returns how many rows. A task keeps what is
    certain: a damaged claim (``LEASE_COLUMNS``) ends (a running task is queued again), a
    damaged bookkeeping column is reset, a damaged result makes a ``done`` task pending
    again; a finished task whose result is intact stays done with it. A task whose key,
    kind or specification is damaged, and every other table's damaged row, is removed (the
    next run of its sweep registers it again)."""
    by_row: dict[tuple[str, int], list[Damage]] = {}
    for damage in found:
        by_row.setdefault((damage.table, damage.rowid), []).append(damage)
    now = time.time()
    for (table, rowid), damages in by_row.items():
        row = db.execute(f"SELECT * FROM {table} WHERE rowid = ?", (rowid,)).fetchone()
        data = json.dumps({name: row[name] for name in row.keys()}, default=repr)
        db.execute("INSERT INTO damaged(tbl, key, data, reason, moved) VALUES(?, ?, ?, ?, ?)",
                   (table, printable(damages[0].label), data,
                    printable("; ".join(str(d) for d in damages)), now))
        fixed = _fixed_task(dict(row), {d.column for d in damages}) if table == "tasks" \
            else None
        if fixed is None:
            db.execute(f"DELETE FROM {table} WHERE rowid = ?", (rowid,))
        else:
            sets = ", ".join(f"{name} = :{name}" for name in fixed)
            db.execute(f"UPDATE tasks SET {sets}, updated = :now WHERE rowid = :rowid",
                       {**fixed, "now": now, "rowid": rowid})
    return len(by_row)


def _fixed_task(row: dict, bad: set[str]) -> dict | None:
    """The columns to write into a damaged task row (see :func:`_repair`), or None to
    remove it."""
    if bad & {"key", "kind", "spec"}:
        return None
    status = row["status"]
    fixed: dict = {}
    if "status" in bad or ("result" in bad and status == "done"):
        status = "pending"
        fixed.update(result=None, attempts=0, completions=0, seconds=None, finished_by=None)
    elif "result" in bad:
        fixed["result"] = None
    if bad & set(LEASE_COLUMNS) or status != row["status"]:
        fixed.update(dict.fromkeys(LEASE_COLUMNS))      # the claim ends
        if status == "running":
            status = "pending"
    if bad & {"attempts", "completions"}:
        fixed.update(completions=int(status == "done"),
                     attempts=int(status in ("done", "failed")))
    for column in ("seconds", "finished_by", "traceback"):
        if column in bad:
            fixed[column] = None
    if "error" in bad:
        fixed["error"] = ("the error was unreadable (set aside in table damaged)"
                          if status == "failed" else None)
    fixed["status"] = status
    return fixed


#: Keys of a sweep's data that describe it without changing its points (may be edited).
DESCRIPTIVE = ("description", "paper")


def configuration(data: dict) -> dict:
    """What of a scope's data must match for a run to continue it: everything but
    :data:`DESCRIPTIVE`."""
    return {key: value for key, value in data.items() if key not in DESCRIPTIVE}


def _check_same(scope: str, stored: dict, data: dict) -> None:
    """A one-line error if ``data`` is another configuration than the ``stored`` one of
    ``scope``: both named by digest and by what differs."""
    old, new = _flat(configuration(stored)), _flat(configuration(data))
    if old == new:
        return
    # imported here: the hash of JSON data, one definition (zoforge.config)
    from zoforge.config import data_hash
    differ = [key for key in sorted(old.keys() | new.keys()) if old.get(key) != new.get(key)]
    shown = "; ".join(f"{key} {_brief(old, key)} -> {_brief(new, key)}" for key in differ[:3])
    more = f"; and {len(differ) - 3} more" if len(differ) > 3 else ""
    raise ConfigError("name", "a name this store does not hold with another configuration: "
                      "give this sweep a new --name (finished trainings and reports are "
                      "shared by configuration, none runs twice) or another --store",
                      f"{scope!r}: stored configuration {data_hash(configuration(stored))[:12]}"
                      f", this one {data_hash(configuration(data))[:12]}: {shown}{more}")


def _flat(data, prefix: str = "") -> dict[str, str]:
    """``data``'s leaves by dotted path (lists as one canonical JSON value each)."""
    if not isinstance(data, dict):
        return {prefix: json.dumps(data, sort_keys=True)}
    out: dict[str, str] = {}
    for key, value in data.items():
        out.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def _brief(flat: dict[str, str], key: str) -> str:
    text = flat.get(key, "(absent)")
    return text if len(text) <= 40 else text[:37] + "..."


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
    """JSON text as the store keeps it (a non-finite number raises ``ValueError``: the
    store never writes a value its check on open would call damaged)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


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
