"""The coordinator: claims a scope's tasks from the store, runs them on an executor, and
records each result as it finishes.

:func:`run_scope` loops until every task of the scope is done or failed: it claims as many
tasks as the executor has free slots (:meth:`Store.claim`), submits them, and writes each
result (or the error and its traceback) the moment it arrives. Tasks another live process
holds are waited for (and taken over if their lease ends). A heartbeat thread keeps this
process's leases alive. On Ctrl-C the claims are handed back; on SIGKILL they end with the
process (same host) or with their lease (another host). A progress bar (tqdm, on stderr)
counts finished tasks with an ETA; under it one line per task in flight says what it is
and where it stands (loading the model and features, training step n of N, a report's
pipeline step), from the task's ``progress.json`` (:func:`zoforge.sweep.tasks.read_progress`;
absent when the workers' files are not on this machine).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

from tqdm import tqdm

from zoforge.errors import printable
from zoforge.sweep.safe import plain
from zoforge.sweep.spec import Point, Sweep
from zoforge.sweep.store import Owner, Store
from zoforge.sweep.tasks import read_progress

__all__ = ["run_scope", "register_scope", "DEFAULT_LEASE_S"]

DEFAULT_LEASE_S = 120.0


def register_scope(store: Store, scope: str, sweep: Sweep, points: Sequence[Point],
                   append: bool = False) -> None:
    """Put ``points`` of ``sweep`` (and their tasks) into ``store`` under ``scope``."""
    by_key = {key: (kind, spec) for key, kind, spec in sweep.tasks()}
    keys = []
    for point in points:
        keys += [k for k in (point.hw_key, point.train_key) if k is not None]
    store.add_scope(scope, sweep.data,
                    [(p.train_key, p.hw_key, p.swept) for p in points],
                    [(key, *by_key[key]) for key in dict.fromkeys(keys)], append=append)


def run_scope(store: Store, scope: str, executor, *, lease_s: float = DEFAULT_LEASE_S,
              retry_failed: bool = False, progress: bool = True, poll_s: float = 1.0
              ) -> dict[str, int]:
    """Run the scope's open tasks; returns the task counts by status at the end."""
    if retry_failed:
        store.retry_failed(scope)
    owner = Owner.here()
    beat = _Heartbeat(store.folder, owner, lease_s / 6)
    work_dir = str(Path(store.folder).resolve())
    in_flight: dict = {}
    bar = _bar(store.counts(scope), scope) if progress else None
    lines = _TaskLines(executor.slots(), work_dir) if progress else None
    try:
        while True:
            free = executor.slots() - len(in_flight)
            for task in store.claim(scope, free, owner, lease_s):
                future = executor.submit(task.kind, task.key, task.spec, work_dir)
                in_flight[future] = task
            counts = store.counts(scope)
            if bar is not None:
                _advance(bar, counts)
                lines.show(list(in_flight.values()))
            if not in_flight:
                if counts["pending"] + counts["running"] == 0:
                    return counts
                time.sleep(poll_s)          # others hold the rest: wait, or take them over
                continue
            for future in executor.wait(list(in_flight), poll_s):
                task = in_flight.pop(future)
                _record(store, owner, task, future)
    except BaseException:
        store.release(owner)
        raise
    finally:
        beat.stop()
        if bar is not None:
            lines.close()
            bar.close()


def _record(store: Store, owner: Owner, task, future) -> None:
    try:
        outcome = future.result()
    except Exception as error:      # the worker died (crash, out of memory, lost) or the
        lines = str(error).splitlines()         # task raised (executors.crossing): one line
        store.fail(task.key, owner, printable(f"{type(error).__name__}: "
                                              f"{lines[0] if lines else ''}"))
        return
    if outcome["ok"]:
        store.finish(task.key, owner, outcome["result"], outcome["seconds"])
    else:
        store.fail(task.key, owner, outcome["error"], outcome["traceback"],
                   outcome["seconds"])


def _bar(counts: dict[str, int], scope: str):
    total = sum(counts.values())
    return tqdm(total=total, initial=counts["done"] + counts["failed"], desc=plain(scope),
                unit="task", dynamic_ncols=True)


def _advance(bar, counts: dict[str, int]) -> None:
    finished = counts["done"] + counts["failed"]
    if finished > bar.n:
        bar.update(finished - bar.n)
    bar.set_postfix(running=counts["running"], failed=counts["failed"], refresh=False)


def task_label(kind: str, spec: dict) -> str:
    """A task in a few words: ``train pezo-onthefly seed 1``, ``report onthefly n_rng=7,
    bits=6``."""
    if kind == "train":
        return f"train {spec.get('perturbation')} seed {spec.get('seed')}"
    generator = spec.get("generator", {})
    rest = ", ".join(f"{k}={v}" for k, v in generator.items()
                     if k not in ("kind", "strategy") and not isinstance(v, bool))
    return f"report {generator.get('strategy', '')} {rest}".strip()


def progress_text(state: dict | None) -> str:
    """A task's reported progress in a few words."""
    if not state:
        return "waiting for a worker"
    if state.get("stage") == "training":
        return f"training step {state.get('step')}/{state.get('steps')}"
    text = str(state.get("text", ""))
    text = text if len(text) <= 50 else text[:47] + "..."
    return f"{state.get('stage')}: {text}" if text else str(state.get("stage"))


class _TaskLines:
    """One text line per task in flight, under the task bar."""

    def __init__(self, slots: int, work_dir: str):
        self.work_dir = work_dir
        self.lines = [tqdm(bar_format="{desc}", position=index + 1, leave=False,
                           dynamic_ncols=True) for index in range(min(slots, 16))]

    def show(self, tasks) -> None:
        for index, line in enumerate(self.lines):
            if index < len(tasks):
                task = tasks[index]
                text = (f"  {task_label(task.kind, task.spec)}: "
                        f"{progress_text(read_progress(self.work_dir, task.key))}")
            else:
                text = ""
            line.set_description_str(text, refresh=True)

    def close(self) -> None:
        for line in self.lines:
            line.close()


class _Heartbeat:
    """A thread refreshing ``owner``'s leases every ``interval_s`` (its own connection)."""

    def __init__(self, folder: Path, owner: Owner, interval_s: float):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(folder, owner, interval_s),
                                        name="sweep-heartbeat", daemon=True)
        self._thread.start()

    def _run(self, folder: Path, owner: Owner, interval_s: float) -> None:
        store = Store(folder)
        try:
            while not self._stop.wait(interval_s):
                store.heartbeat(owner)
        finally:
            store.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
