"""Errors cross process boundaries intact (issue 34): whatever a task raises in a sweep's
local worker reaches the coordinator as one picklable line and fails only its own task (a
ConfigError as itself: it pickles by its fields; an exception that would not survive
pickling as a WorkerError naming its type). An unpicklable one used to break the whole
process pool (BrokenProcessPool) and every task with it."""
import os
import pickle
import threading

import pytest

from zoforge.errors import ConfigError
from zoforge.sweep.executors import LocalExecutor, WorkerError, run_guarded
from zoforge.sweep.runner import run_scope
from zoforge.sweep.store import Store
from zoforge.sweep.tasks import TRAIN_FIELDS, run_task


@pytest.mark.parametrize("got", [None, 3, "a\nb", 1.5])
def test_config_error_pickles_with_its_fields_and_message(got):
    error = ConfigError("--bits", "an integer with 4 <= value <= 20", got)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is ConfigError and str(copy) == str(error)
    assert (copy.parameter, copy.allowed, copy.got) == ("--bits", error.allowed, got)


# -- any exception, at the worker boundary (zoforge.sweep.executors.run_guarded) -------------

class NeedsTwo(Exception):
    """Pickles, but cannot be unpickled (its ``__init__`` needs two arguments): the kind that
    broke the process pool."""

    def __init__(self, what, why):
        super().__init__(f"{what} failed\nbecause {why}")


class HoldsALock(Exception):
    """Cannot be pickled at all (it holds a lock)."""

    def __init__(self):
        super().__init__("holding a lock")
        self.lock = threading.Lock()


#: What each made-up task does in the worker (module-level: a spawned worker imports it).
BEHAVIOUR = {"train-0": "ok", "train-1": "needs-two", "train-2": "lock",
             "train-3": "value", "train-4": "ok", "train-5": "config"}


def made_up_task(kind, key, spec, work_dir):
    """A worker's task by :data:`BEHAVIOUR`: a training's result, or one of the raises."""
    behaviour = BEHAVIOUR[key]
    if behaviour == "needs-two":
        raise NeedsTwo("the step", "\x1b[2Jreasons")
    if behaviour == "lock":
        raise HoldsALock()
    if behaviour == "value":
        raise ValueError("a plain error")
    if behaviour == "config":       # the real task, whose folder cannot be made
        return run_task(kind, key, {}, spec["store"])
    result = {name: 0.5 for name in TRAIN_FIELDS}
    return {"ok": True, "result": {**result, "d": os.getpid()}, "seconds": 0.0}


@pytest.mark.parametrize("error, crossed", [
    (NeedsTwo("the step", "reasons"), "WorkerError: NeedsTwo: the step failed"),
    (HoldsALock(), "WorkerError: HoldsALock: holding a lock"),
    (ValueError("plain"), "ValueError: plain"),
    (ConfigError("--bits", "small", 99), "ConfigError: --bits must be small (got 99)"),
    (KeyError("k"), "KeyError: 'k'"),
])
def test_what_a_task_raises_crosses_as_one_picklable_line(error, crossed):
    def task():
        raise error
    with pytest.raises(Exception) as raised:
        run_guarded(task)
    copy = pickle.loads(pickle.dumps(raised.value))
    assert f"{type(copy).__name__}: {copy}" == crossed
    assert (raised.value is error) == (type(copy) is not WorkerError)
    if type(copy) is WorkerError:   # nothing of the original rides along (tblib pickles it)
        assert raised.value.__context__ is None and raised.value.__cause__ is None


def test_any_exception_in_a_local_worker_fails_only_its_task(tmp_path):
    """Through the coordinator: tasks whose worker raises an exception that cannot be
    unpickled, one that cannot be pickled, a plain one and the real task's ConfigError (its
    folder cannot be made: the store is a file) each fail alone, with one escaped line; the
    other tasks finish, all in the same worker process (the pool never broke)."""
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("a file")
    store = Store(tmp_path / "store")
    store.add_scope("s", {}, [(key, None, {}) for key in BEHAVIOUR],
                    [(key, "train", {"store": str(not_a_folder)}) for key in BEHAVIOUR])
    executor = LocalExecutor(1, task=made_up_task)
    try:
        counts = run_scope(store, "s", executor, lease_s=60, progress=False, poll_s=0.01)
    finally:
        executor.close()
    assert counts == {"pending": 0, "running": 0, "done": 2, "failed": 4}
    tasks = store.tasks()
    assert {key: tasks[key]["error"] for key in BEHAVIOUR if BEHAVIOUR[key] != "ok"} == {
        "train-1": "WorkerError: NeedsTwo: the step failed",
        "train-2": "WorkerError: HoldsALock: holding a lock",
        "train-3": "ValueError: a plain error",
        "train-5": "ConfigError: --store must be a folder that can be created (got "
                   f"{not_a_folder}: File exists)"}
    pids = {tasks[key]["result"]["d"] for key in ("train-0", "train-4")}
    assert len(pids) == 1 and pids != {os.getpid()}
    store.close()


def test_the_check_ignores_reducers_other_libraries_register():
    """Once Dask's ``distributed`` is imported, tblib's reducers make every exception
    pickle through copyreg; a spawned local worker has none of them, so the check uses the
    standard reducers and still wraps what would not cross there."""
    import distributed  # noqa: F401  (imported for its side effect on copyreg)
    from zoforge.sweep.executors import WorkerError, crossing
    for error in (NeedsTwo("the step", "reasons"), HoldsALock()):
        assert isinstance(crossing(error), WorkerError)
