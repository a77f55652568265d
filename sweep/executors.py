"""Where a sweep's tasks run: local worker processes (default) or a Dask cluster.

Both offer the same small interface to the coordinator (:mod:`zoforge.sweep.runner`):
``slots()`` (tasks it runs at once), ``submit(kind, key, spec, work_dir)`` returning a
future of :func:`zoforge.sweep.tasks.run_task`'s dict, ``wait(futures, timeout)`` returning
the finished ones, and ``close(abandon=False)``: after the running tasks finish, or, with
``abandon`` (the coordinator was interrupted: SIGINT, SIGTERM), at once, the tasks in flight
stopped (their claims go back to the store, so the next run does them again).

* :class:`LocalExecutor`: a ``ProcessPoolExecutor`` of ``jobs`` spawned processes (one task
  per core), each single-threaded (``OMP_NUM_THREADS=1``, ``torch.set_num_threads(1)`` in
  the worker, never in the coordinator) and killed by the kernel if the coordinator dies
  (``PR_SET_PDEATHSIG``), so a SIGKILLed sweep leaves no orphan writing into the store's
  folders. Workers ignore SIGINT (a terminal's Ctrl-C reaches the whole process group): the
  coordinator alone decides, and terminates them. A pool broken by a crashed worker is
  replaced on the next submit.
* :class:`DaskExecutor`: a ``distributed.Client`` on ``--scheduler ADDRESS``; one task per
  worker thread (start workers with ``--nthreads 1``). Workers need zoforge installed and,
  for the task folders, the store's path (a shared file system; otherwise the files stay on
  the workers and only the results come back). Connecting and the scheduler's first
  answer happen under one overall timeout (:data:`CONNECT_TIMEOUT_S`): a scheduler that
  accepts the connection and never answers is a one-line error, not a hang. Without an
  address it starts a ``LocalCluster`` of ``jobs`` single-threaded worker processes and
  closes it afterwards.

Both run :func:`run_guarded` in their workers: whatever a task lets out (any exception, of
any type) crosses the process boundary as one picklable line (:func:`crossing`), so it
fails only its own task, never the pool.
"""
from __future__ import annotations

import asyncio
import concurrent.futures as cf
import contextlib
import ctypes
import io
import multiprocessing
import os
import pickle
import signal
from concurrent.futures.process import BrokenProcessPool

from zoforge.errors import ConfigError, check_choice, check_int_range, printable
from zoforge.sweep.tasks import run_task

__all__ = ["EXECUTORS", "LocalExecutor", "DaskExecutor", "make_executor",
           "CONNECT_TIMEOUT_S", "WorkerError", "crossing", "run_guarded"]

EXECUTORS = ("local", "dask")
#: Seconds for connecting to a Dask scheduler and its first answer, together.
CONNECT_TIMEOUT_S = 30.0
#: Seconds an abandoned worker has between SIGTERM and SIGKILL.
ABANDON_GRACE_S = 3.0


def make_executor(name: str, jobs: int | None = None, scheduler: str | None = None,
                  connect_timeout_s: float | None = None):
    """The executor ``name`` (``--executor``): local with ``jobs`` processes (default: the
    CPU count), or Dask on ``scheduler`` (an address, or a ``distributed.Client``; None: a
    local cluster of ``jobs`` single-threaded worker processes)."""
    check_choice("--executor", name, EXECUTORS)
    if name == "local":
        if scheduler is not None:
            raise ConfigError("scheduler", "given only with --executor dask", scheduler)
        return LocalExecutor(jobs or os.cpu_count() or 1)
    if scheduler is None:
        return DaskExecutor(None, jobs=jobs or os.cpu_count() or 1)
    if jobs is not None:
        raise ConfigError("jobs", "given only with --executor local, or --executor dask "
                          "without --scheduler (a cluster runs one task per worker thread)",
                          jobs)
    return DaskExecutor(scheduler, connect_timeout_s=connect_timeout_s or CONNECT_TIMEOUT_S)


class WorkerError(RuntimeError):
    """An exception from a worker that would not cross the process boundary intact, as
    one line: ``TYPE: first line of its message``."""


def crossing(error: BaseException) -> BaseException:
    """``error`` if it survives pickling as itself (its type and message), else a
    :class:`WorkerError` saying it in one line."""
    try:
        # the standard reducers, not copyreg's table: Dask's tblib registers its own for
        # every exception type once `distributed` is imported, and a spawned local worker
        # does not have them
        buffer = io.BytesIO()
        pickler = pickle.Pickler(buffer)
        pickler.dispatch_table = {}
        pickler.dump(error)
        copy = pickle.loads(buffer.getvalue())
        if type(copy) is type(error) and str(copy) == str(error):
            return error
    except Exception:       # anything pickling or unpickling raises: it would not cross
        pass
    lines = str(error).splitlines()
    return WorkerError(printable(f"{type(error).__name__}: {lines[0] if lines else ''}"))


def run_guarded(task, *args):
    """``task(*args)`` in a worker; what it raises crosses back by :func:`crossing`. A
    :class:`WorkerError` is raised outside the handler, so it carries no ``__context__``:
    where tblib's reducers are installed (a Dask worker, or any process that imported
    ``distributed``) they pickle the context too, and the original may not pickle."""
    try:
        return task(*args)
    except Exception as error:
        crossed = crossing(error)
        if crossed is error:
            raise
    raise crossed


#: The environment of every worker process (local and local-cluster Dask).
_WORKER_ENV = {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
               "HF_HUB_DISABLE_PROGRESS_BARS": "1"}


def _worker_start() -> None:
    """In each local worker: die with the coordinator; one thread for torch and the
    tokenizer; no model-loading progress bars over the sweep's own."""
    os.environ.update(_WORKER_ENV)
    signal.signal(signal.SIGINT, signal.SIG_IGN)       # the coordinator handles Ctrl-C
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass            # not Linux: an orphan finishes its task; the folder lock serialises
    # imported here, in the worker only: the coordinator never loads torch
    import torch
    torch.set_num_threads(1)


class LocalExecutor:
    """``jobs`` local worker processes; each task runs ``task`` (:func:`run_task`; a test
    may give another module-level function of the same arguments)."""

    def __init__(self, jobs: int, task=run_task):
        self.jobs = check_int_range("--jobs", jobs, 1, 1024)
        self.task = task
        self._pool = self._new_pool()

    def _new_pool(self) -> cf.ProcessPoolExecutor:
        return cf.ProcessPoolExecutor(self.jobs, mp_context=multiprocessing.get_context("spawn"),
                                      initializer=_worker_start)

    def slots(self) -> int:
        return self.jobs

    def submit(self, kind: str, key: str, spec: dict, work_dir: str):
        args = (run_guarded, self.task, kind, key, spec, work_dir)
        try:
            return self._pool.submit(*args)
        except BrokenProcessPool:       # a worker died (e.g. out of memory): start afresh
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = self._new_pool()
            return self._pool.submit(*args)

    def wait(self, futures, timeout: float):
        done, _ = cf.wait(futures, timeout=timeout, return_when=cf.FIRST_COMPLETED)
        return list(done)

    def close(self, abandon: bool = False) -> None:
        if not abandon:
            self._pool.shutdown(wait=True, cancel_futures=True)
            return
        self._pool.shutdown(wait=False, cancel_futures=True)
        workers = multiprocessing.active_children()
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.join(ABANDON_GRACE_S)
            if worker.is_alive():
                worker.kill()
                worker.join()


class DaskExecutor:
    """Tasks on a Dask cluster: ``scheduler`` an address, a ``distributed.Client``, or None
    for a ``LocalCluster`` of ``jobs`` single-threaded worker processes (closed with the
    executor)."""

    def __init__(self, scheduler, jobs: int = 1, connect_timeout_s: float | None = None):
        # imported here: dask.distributed loads only for --executor dask
        import distributed
        self._distributed = distributed
        self._cluster = None
        connect_timeout_s = connect_timeout_s or CONNECT_TIMEOUT_S
        if isinstance(scheduler, distributed.Client):
            self.client, self._own = scheduler, False
            return
        if scheduler is None:
            check_int_range("--jobs", jobs, 1, 1024)
            self._cluster = distributed.LocalCluster(
                n_workers=jobs, threads_per_worker=1, processes=True,
                dashboard_address=None, env=dict(_WORKER_ENV))
            scheduler = self._cluster.scheduler_address
        else:
            _check_scheduler(distributed, scheduler, connect_timeout_s)
        try:
            self.client = distributed.Client(scheduler, timeout=f"{connect_timeout_s}s")
        except (OSError, ValueError, TypeError) as error:
            self._close_cluster()
            raise ConfigError("scheduler", "the address of a running Dask scheduler",
                              f"{scheduler}: {error}") from None
        self._own = True

    def slots(self) -> int:
        return max(1, sum(self.client.nthreads().values()))

    def submit(self, kind: str, key: str, spec: dict, work_dir: str):
        return self.client.submit(run_guarded, run_task, kind, key, spec, work_dir,
                                  pure=False)

    def wait(self, futures, timeout: float):
        try:
            done, _ = self._distributed.wait(futures, timeout=timeout,
                                             return_when="FIRST_COMPLETED")
        except TimeoutError:
            return []
        return list(done)

    def close(self, abandon: bool = False) -> None:
        if abandon:                 # tasks in flight are cancelled, not waited for
            with contextlib.suppress(Exception):
                self.client.cancel(list(self.client.futures.values()), force=True)
        if self._own:
            self.client.close()
        self._close_cluster()

    def _close_cluster(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None


def _check_scheduler(distributed, address: str, timeout_s: float) -> None:
    """Connect to ``address`` and ask the scheduler who it is, all within ``timeout_s``;
    a one-line ConfigError naming ``scheduler`` if that fails or takes longer."""
    async def identity():
        comm = await distributed.comm.connect(address, timeout=timeout_s)
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    async def bounded():
        return await asyncio.wait_for(identity(), timeout_s)

    try:
        answer = asyncio.run(bounded())
    except (TimeoutError, asyncio.TimeoutError):
        raise ConfigError("scheduler", f"a Dask scheduler that answers within "
                          f"{timeout_s:g} s", address) from None
    except Exception as error:      # whatever the comm layer raises: OSError, a websocket
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__  # hand-
        raise ConfigError("scheduler", "the address of a running Dask scheduler",  # shake's
                          f"{address}: {reason}") from None          # error with an HTTP server
    if not isinstance(answer, dict) or answer.get("type") != "Scheduler":
        raise ConfigError("scheduler", "the address of a Dask scheduler (something else "
                          "answered)", address)
