"""Where a sweep's tasks run: local worker processes (default) or a Dask cluster.

Both offer the same small interface to the coordinator (:mod:`zoforge.sweep.runner`):
``slots()`` (tasks it runs at once), ``submit(kind, key, spec, work_dir)`` returning a
future of :func:`zoforge.sweep.tasks.run_task`'s dict, ``wait(futures, timeout)`` returning
the finished ones, and ``close()``.

* :class:`LocalExecutor`: a ``ProcessPoolExecutor`` of ``jobs`` spawned processes (one task
  per core), each single-threaded (``OMP_NUM_THREADS=1``, ``torch.set_num_threads(1)`` in
  the worker, never in the coordinator) and killed by the kernel if the coordinator dies
  (``PR_SET_PDEATHSIG``), so a SIGKILLed sweep leaves no orphan writing into the store's
  folders. A pool broken by a crashed worker is replaced on the next submit.
* :class:`DaskExecutor`: a ``distributed.Client`` on ``--scheduler ADDRESS``; one task per
  worker thread (start workers with ``--nthreads 1``). Workers need zoforge installed and,
  for the task folders, the store's path (a shared file system; otherwise the files stay on
  the workers and only the results come back).
"""
from __future__ import annotations

import concurrent.futures as cf
import ctypes
import multiprocessing
import os
import signal
from concurrent.futures.process import BrokenProcessPool

from zoforge.errors import ConfigError, check_choice, check_int_range
from zoforge.sweep.tasks import run_task

__all__ = ["EXECUTORS", "LocalExecutor", "DaskExecutor", "make_executor"]

EXECUTORS = ("local", "dask")


def make_executor(name: str, jobs: int | None = None, scheduler: str | None = None):
    """The executor ``name`` (``--executor``): local with ``jobs`` processes (default: the
    CPU count), or Dask on ``scheduler`` (an address, or a ``distributed.Client``)."""
    check_choice("--executor", name, EXECUTORS)
    if name == "local":
        if scheduler is not None:
            raise ConfigError("scheduler", "given only with --executor dask", scheduler)
        return LocalExecutor(jobs or os.cpu_count() or 1)
    if jobs is not None:
        raise ConfigError("jobs", "given only with --executor local (a Dask cluster runs "
                          "one task per worker thread)", jobs)
    if scheduler is None:
        raise ConfigError("scheduler", "a Dask scheduler address (tcp://HOST:PORT) with "
                          "--executor dask", None)
    return DaskExecutor(scheduler)


def _worker_start() -> None:
    """In each local worker: die with the coordinator; one thread for torch and the
    tokenizer; no model-loading progress bars over the sweep's own."""
    os.environ.update(OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false",
                      HF_HUB_DISABLE_PROGRESS_BARS="1")
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass            # not Linux: an orphan finishes its task; the folder lock serialises
    # imported here, in the worker only: the coordinator never loads torch
    import torch
    torch.set_num_threads(1)


class LocalExecutor:
    def __init__(self, jobs: int):
        self.jobs = check_int_range("--jobs", jobs, 1, 1024)
        self._pool = self._new_pool()

    def _new_pool(self) -> cf.ProcessPoolExecutor:
        return cf.ProcessPoolExecutor(self.jobs, mp_context=multiprocessing.get_context("spawn"),
                                      initializer=_worker_start)

    def slots(self) -> int:
        return self.jobs

    def submit(self, kind: str, key: str, spec: dict, work_dir: str):
        try:
            return self._pool.submit(run_task, kind, key, spec, work_dir)
        except BrokenProcessPool:       # a worker died (e.g. out of memory): start afresh
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = self._new_pool()
            return self._pool.submit(run_task, kind, key, spec, work_dir)

    def wait(self, futures, timeout: float):
        done, _ = cf.wait(futures, timeout=timeout, return_when=cf.FIRST_COMPLETED)
        return list(done)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


class DaskExecutor:
    def __init__(self, scheduler):
        # imported here: dask.distributed loads only for --executor dask
        import distributed
        self._distributed = distributed
        if isinstance(scheduler, distributed.Client):
            self.client, self._own = scheduler, False
        else:
            try:
                self.client = distributed.Client(scheduler, timeout="30s")
            except (OSError, ValueError, TypeError) as error:
                raise ConfigError("scheduler", "the address of a running Dask scheduler",
                                  f"{scheduler}: {error}") from None
            self._own = True

    def slots(self) -> int:
        return max(1, sum(self.client.nthreads().values()))

    def submit(self, kind: str, key: str, spec: dict, work_dir: str):
        return self.client.submit(run_task, kind, key, spec, work_dir, pure=False)

    def wait(self, futures, timeout: float):
        try:
            done, _ = self._distributed.wait(futures, timeout=timeout,
                                             return_when="FIRST_COMPLETED")
        except TimeoutError:
            return []
        return list(done)

    def close(self) -> None:
        if self._own:
            self.client.close()
