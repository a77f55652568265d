"""What each row of a sweep store may hold, column by column, and which rows break it.

:data:`RULES` gives every column of every table of the store (:data:`zoforge.sweep.store.
COLUMNS`; a test holds the two equal) one check, a function of the value returning what is
wrong with it or None:

* text columns: a ``str`` (SQLite keeps what it is given: an integer, a float or a blob in
  a text column is damage);
* integers (``pid``, ``attempts``, ``completions``, ``ord``): an ``int`` within a range;
* reals (``heartbeat``, ``seconds``, ``updated``, ``moved``): an ``int`` or a ``float``,
  finite (SQLite stores NaN as NULL, but ``1e999`` as infinity);
* JSON (``spec``, ``result``, ``data``, ``swept``): text that parses as a JSON object whose
  numbers are all finite (``NaN``, ``Infinity``, ``1e999`` and integers beyond a double are
  refused: :func:`load_json` is the one parser of stored JSON).

Then each row as a whole (:func:`find_damage`): a task's key starts with its kind
(``train-``, ``report-``: :func:`zoforge.sweep.spec.stable_key`), its ``completions`` is 1 when
it is ``done`` and 0 otherwise (a result is recorded once), a ``done`` task has a result, a stored
result is one :mod:`zoforge.sweep.results` can read (a training's has every field of
:data:`~zoforge.sweep.tasks.TRAIN_FIELDS`, a finite number or null; a report's is read by
:meth:`~zoforge.reports.model.Report.from_json`), and every reference resolves: a point's
``scope`` to a scope, its ``train_key`` to a training task, its ``hw_key`` (if any) to a
report task. Each finding is a :class:`Damage` naming the table, the row, the column and
what is wrong; the store turns them into its one-line error and its repair.
"""
from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["RULES", "STATUSES", "KINDS", "Damage", "find_damage", "load_json",
           "json_object", "result_problem", "LEASE_COLUMNS"]

STATUSES = ("pending", "running", "done", "failed")
KINDS = ("train", "report")
#: The columns of a claim: damage in any of them ends the claim (the task is queued again).
LEASE_COLUMNS = ("owner", "host", "pid", "heartbeat")
_MAX_INT_DIGITS = 300           # an integer a double holds (results are read as floats)

Check = Callable[[object], "str | None"]


class _NotFinite(ValueError):
    pass


def _constant(name: str):
    raise _NotFinite(f"{name} is not a finite number")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(f"{text} is not a finite number")
    return value


def _int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_INT_DIGITS:
        raise _NotFinite(f"an integer of {len(text)} digits is not a finite number")
    return int(text)


def load_json(text: str):
    """Stored JSON text as Python data; ``ValueError`` (with what is wrong) if it is not
    JSON or holds a number that is not finite."""
    return json.loads(text, parse_constant=_constant, parse_float=_float, parse_int=_int)


def json_object(value: object) -> str | None:
    """What is wrong with ``value`` as a stored JSON object (finite numbers), or None."""
    if not isinstance(value, str):
        return f"not JSON text ({type(value).__name__})"
    try:
        data = load_json(value)
    except _NotFinite as error:
        return str(error)
    except (ValueError, RecursionError):
        return "malformed JSON"
    return None if isinstance(data, dict) else f"JSON {type(data).__name__}, not an object"


def _text(value: object) -> str | None:
    return None if isinstance(value, str) else f"{_shown(value)} is not text"


def _integer(low: int, high: int | None = None) -> Check:
    def check(value: object) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{_shown(value)} is not an integer"
        if value < low or (high is not None and value > high):
            return f"{value} is out of range ({low} to {high if high is not None else 'any'})"
        return None
    return check


def _real(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{_shown(value)} is not a number"
    return None if math.isfinite(value) else f"{value} is not a finite number"


def _one_of(choices: tuple[str, ...]) -> Check:
    def check(value: object) -> str | None:
        return None if value in choices else f"{_shown(value)} is not one of {', '.join(choices)}"
    return check


def _optional(check: Check) -> Check:
    def optional(value: object) -> str | None:
        return None if value is None else check(value)
    return optional


def _shown(value: object) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


#: table -> column -> check (see the module docstring).
RULES: dict[str, dict[str, Check]] = {
    "meta": {"key": _text, "value": _text},
    "tasks": {
        "key": _text, "kind": _one_of(KINDS), "spec": json_object,
        "status": _one_of(STATUSES), "owner": _optional(_text), "host": _optional(_text),
        "pid": _optional(_integer(1, 2**31 - 1)), "heartbeat": _optional(_real),
        "attempts": _integer(0), "completions": _integer(0),
        "result": _optional(json_object), "error": _optional(_text),
        "traceback": _optional(_text), "seconds": _optional(_real),
        "finished_by": _optional(_text), "updated": _optional(_real)},
    "scopes": {"scope": _text, "data": json_object},
    "points": {"scope": _text, "ord": _integer(0, 2**62), "train_key": _text,
               "hw_key": _optional(_text), "swept": json_object},
    "damaged": {"tbl": _text, "key": _optional(_text), "data": _text, "reason": _text,
                "moved": _optional(_real)},
}


@dataclass(frozen=True)
class Damage:
    """One thing wrong with one row: ``table``, its ``rowid``, the row as people name it
    (``label``: a task's key, ``scope#ord`` for a point), the ``column`` and the
    ``reason``."""

    table: str
    rowid: int
    label: str
    column: str
    reason: str

    def __str__(self) -> str:
        return f"table {self.table} row {self.label!r} column {self.column}: {self.reason}"


def result_problem(kind: str, result: dict) -> str | None:
    """What makes a stored result unreadable by :mod:`zoforge.sweep.results`, or None."""
    if kind == "train":
        # imported here for start-up time: the task module loads only when results are read
        from zoforge.sweep.tasks import TRAIN_FIELDS
        for name in TRAIN_FIELDS:
            if name not in result:
                return f"{name} missing"
            if result[name] is not None and (problem := _real(result[name])):
                return f"{name}: {problem}"
        return None
    # imported here for start-up time: the report model loads only when reports are read
    from zoforge.reports.model import Report
    try:
        Report.from_json(result)
    except Exception as error:        # any way a stored report can be unreadable
        return f"not a report ({type(error).__name__})"
    return None


def _label(table: str, row: sqlite3.Row) -> str:
    if table == "points":
        return f"{row['scope']}#{row['ord']}"
    key = row["scope"] if table == "scopes" else row["tbl"] if table == "damaged" else row[
        "key"]
    return str(key)


def find_damage(db: sqlite3.Connection) -> list[Damage]:
    """Every :class:`Damage` in the store's rows, table by table (``db`` has
    ``sqlite3.Row`` rows)."""
    found: list[Damage] = []
    kinds: dict[str, object] = {}
    for key, kind in db.execute("SELECT key, kind FROM tasks"):
        if isinstance(key, str):
            kinds[key] = kind
    scopes = {row[0] for row in db.execute("SELECT scope FROM scopes")}
    for table, rules in RULES.items():
        for row in db.execute(f"SELECT rowid AS zoforge_rowid, * FROM {table}"):
            label = _label(table, row)

            def note(column: str, reason: str) -> None:
                found.append(Damage(table, row["zoforge_rowid"], label, column, reason))

            bad = set()
            for column, check in rules.items():
                if reason := check(row[column]):
                    note(column, reason)
                    bad.add(column)
            if table == "tasks" and not bad & {"key", "kind"} and not row["key"].startswith(
                    f"{row['kind']}-"):
                note("kind", f"{row['kind']!r} is not the kind its key names")
                bad.add("kind")
            if table == "tasks" and not bad & {"status", "completions"} and \
                    row["completions"] != int(row["status"] == "done"):
                # a result is recorded once: one completion when done, none otherwise
                note("completions", f"{row['completions']} completions of a "
                                    f"{row['status']} task (a result is recorded once)")
            if table == "tasks" and not bad & {"kind", "status", "result"}:
                if row["status"] == "done" and row["result"] is None:
                    note("result", "a done task without a result")
                elif row["result"] is not None and (
                        problem := result_problem(row["kind"], load_json(row["result"]))):
                    note("result", problem)
            if table == "points":
                if "scope" not in bad and row["scope"] not in scopes:
                    note("scope", "no such scope")
                for column, kind in (("train_key", "train"), ("hw_key", "report")):
                    key = row[column]
                    if column not in bad and key is not None and kinds.get(key) != kind:
                        note(column, f"no {kind} task {key!r}")
    return found
