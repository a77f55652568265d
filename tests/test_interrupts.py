"""Interrupts (issue 34): SIGINT or SIGTERM to a sweep's coordinator stops it within seconds,
not when its running tasks end: one line, exit 130 / 143, the workers terminated, the
finished work kept and the running tasks handed back to the store (pending: the next run
does them)."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from zoforge.sweep.store import Store

#: Hours of training: a coordinator that waited for its task would hit the hang guard.
LONG_STEPS = 50_000_000


def _start_sweep(store, cache):
    command = [sys.executable, "-m", "zoforge", "sweep", "--store", str(store), "--jobs", "1",
               "--no-progress", "--name", "interrupt", "--set", "model=tiny", "--set",
               f"steps={LONG_STEPS}", "--set", "n_train=64", "--set", "n_val=16", "--set",
               "n_test=16", "--set", "eval_every=50000000", "--set", "checkpoint_every=50000000",
               "--set", "perturbation=gaussian"]
    env = dict(os.environ, ZOFORGE_CACHE=str(cache))
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)


def _wait_for_training(store, process, limit_s=180):
    """Until a task reports a training step (its progress.json), or fail."""
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        assert process.poll() is None, process.communicate()
        for progress in store.glob("**/progress.json"):
            try:
                state = json.loads(progress.read_text())
            except (OSError, ValueError):
                continue
            if state.get("stage") == "training" and state.get("step", 0) > 0:
                return
        time.sleep(0.2)
    pytest.fail("no task reached training")


def _children(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(p) for p in found.stdout.split()]


def _interrupt(tmp_path, signum: int) -> tuple[subprocess.CompletedProcess, float, list]:
    store, cache = tmp_path / "store", tmp_path / "cache"
    process = _start_sweep(store, cache)
    try:
        _wait_for_training(store, process)
        workers = _children(process.pid)
        sent = time.monotonic()
        process.send_signal(signum)
        out, err = process.communicate(timeout=60)       # a hang guard, not a timing claim
        stopped = time.monotonic() - sent
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return subprocess.CompletedProcess(process.args, process.returncode, out, err), stopped, \
        workers


def _gone(pid: int, limit_s: float = 10.0) -> bool:
    """Whether process ``pid`` ends (or is a zombie) within ``limit_s``."""
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except OSError:
            return True
        time.sleep(0.1)
    return False


def _pending_not_running(store_dir) -> dict:
    store = Store(store_dir)
    try:
        (scope,) = store.scopes()
        return store.counts(scope)
    finally:
        store.close()


def _assert_stopped_cleanly(done, workers, store_dir, code, line):
    assert done.returncode == code, done.stderr
    assert done.stderr.strip().splitlines()[-1] == line
    assert "Traceback" not in done.stderr
    for pid in workers:       # the workers were stopped, not left running (a few seconds'
        assert _gone(pid), pid  # grace: multiprocessing's resource tracker ends on its own)
    counts = _pending_not_running(store_dir)
    assert counts["running"] == 0 and counts["pending"] >= 1 and counts["failed"] == 0


def test_sigint_stops_a_sweep_without_waiting_for_its_tasks(tmp_path):
    done, stopped, workers = _interrupt(tmp_path, signal.SIGINT)
    _assert_stopped_cleanly(done, workers, tmp_path / "store", 130, "zoforge: interrupted")


@pytest.mark.slow
@pytest.mark.ci
def test_sigterm_stops_a_sweep_the_same_way(tmp_path):
    done, stopped, workers = _interrupt(tmp_path, signal.SIGTERM)
    _assert_stopped_cleanly(done, workers, tmp_path / "store", 143,
                            "zoforge: terminated (SIGTERM)")
