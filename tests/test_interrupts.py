"""Interrupts (issue 34): SIGINT or SIGTERM to a sweep's coordinator stops it within seconds,
not when its running tasks end: one line, exit 130 / 143, the workers terminated, the
finished work kept and the running tasks handed back to the store (pending: the next run
does them). The other long commands the same way, each signalled mid-run in a subprocess:
``finetune`` (its checkpoint kept, valid, at the steps done: the run resumes from it,
``tests/test_finetune_resume.py``), ``train`` (its checkpoint kept), ``build``, ``cosim``
and ``demo`` (no child process left running). The sweep's SIGINT case runs by default (the
same handler stops every command: ``zoforge.cli``), the others under ``-m slow`` (finetune's
and train's also in ``-m ci``; a finetune run resumed from its checkpoint by default:
``tests/test_finetune_resume.py``)."""
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
#: Seconds a signalled command may take to stop before the test calls it hung (alone, each
#: stops within seconds); what is checked is how it stops, not how fast.
HANG_S = 180


#: ``python -m zoforge ARGS`` started as a terminal starts it: SIGINT and SIGTERM at their
#: default action and no signal blocked, whatever this process has (a child inherits both
#: across exec; a pytest worker that ran other tests first may ignore or block one, and then
#: the command would never see the signal these tests send).
AS_FROM_A_TERMINAL = ("import os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, []); "
                      "[signal.signal(s, signal.SIG_DFL) for s in (signal.SIGINT, "
                      "signal.SIGTERM)]; os.execv(sys.executable, [sys.executable, '-m', "
                      "'zoforge', *sys.argv[1:]])")


def _zoforge(*argv) -> list[str]:
    return [sys.executable, "-c", AS_FROM_A_TERMINAL, *argv]


def _start_sweep(store, cache):
    command = [*_zoforge("sweep"), "--store", str(store), "--jobs", "1",
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
        out, err = process.communicate(timeout=HANG_S)   # a hang guard, not a timing claim
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


# -- the other long commands ------------------------------------------------------------------

FINETUNE = ["finetune", "--model", "tiny", "--blocks", "1", "--seq-len", "8", "--batch", "2",
            "--n-train", "40", "--n-test", "8", "--calibration", "8", "--steps", "1000000",
            "--checkpoint-every", "1", "--no-float", "--quiet"]
TRAIN = ["train", "--model", "tiny", "--steps", str(LONG_STEPS), "--n-train", "64", "--n-val",
         "16", "--n-test", "16", "--eval-every", str(LONG_STEPS), "--checkpoint-every", "1",
         "--perturbation", "gaussian", "--no-progress"]
LINES = {signal.SIGINT: (130, "zoforge: interrupted"),
         signal.SIGTERM: (143, "zoforge: terminated (SIGTERM)")}


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        children = _children(todo.pop())
        found += children
        todo += children
    return found


def _signal_mid_run(tmp_path, argv, ready, signum, limit_s=300):
    """Run ``zoforge ARGV`` (cwd ``tmp_path``, its own cache), send ``signum`` once
    ``ready(process)`` holds, and check the stop: the exit code and last line of
    :data:`LINES`, no traceback, no process it started left running."""
    env = dict(os.environ, ZOFORGE_CACHE=str(tmp_path / "cache"))
    process = subprocess.Popen(_zoforge(*argv), cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env, start_new_session=True)
    try:
        started = time.monotonic()
        while not ready(process):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() - started < limit_s, "never reached the point to signal"
            time.sleep(0.1)
        started_by_it = _descendants(process.pid)
        process.send_signal(signum)
        out, err = process.communicate(timeout=HANG_S)   # a hang guard, not a timing claim
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    code, line = LINES[signum]
    assert process.returncode == code, err
    assert err.strip().splitlines()[-1] == line and "Traceback" not in err, err
    for pid in started_by_it:
        assert _gone(pid), pid
    return out, err


def _checkpointed(path, at_least: int):
    def ready(process) -> bool:
        try:
            return json.loads(path.read_text())["step"] >= at_least
        except (OSError, ValueError, KeyError):
            return False
    return ready


def _finetune_interrupted(tmp_path, signum):
    from zoforge.config import config_from_dict
    from zoforge.golden.finetune.config import FinetuneConfig
    from zoforge.sim import finetune_checkpoint as ckpt
    out = tmp_path / "ft"
    _signal_mid_run(tmp_path, [*FINETUNE, "--out", str(out)],
                    _checkpointed(out / ckpt.CHECKPOINT, 2), signum)
    # the checkpoint is whole and valid for this configuration: a new run resumes from it
    state = json.loads((out / ckpt.CHECKPOINT).read_text())
    cfg = config_from_dict(state["key"]["config"], (FinetuneConfig,))
    assert cfg.steps == 1_000_000 and state["key"]["float_twin"] is False
    again = ckpt.read_checkpoint(out, ckpt.run_key(cfg, False), cfg.steps, [])
    assert again == state and again["step"] >= 2
    assert len(again["result"]["loss"]) == again["int8"]["step_index"] == again["step"]


@pytest.mark.slow
@pytest.mark.ci
def test_sigint_stops_finetune_with_its_checkpoint_kept(tmp_path):
    _finetune_interrupted(tmp_path, signal.SIGINT)


@pytest.mark.slow
@pytest.mark.ci
def test_sigterm_stops_finetune_with_its_checkpoint_kept(tmp_path):
    _finetune_interrupted(tmp_path, signal.SIGTERM)


@pytest.mark.slow
@pytest.mark.ci
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_train_with_its_checkpoint_kept(tmp_path, signum):
    import torch
    out = tmp_path / "train"
    path = out / "checkpoint.pt"

    def ready(process) -> bool:
        try:
            return torch.load(path, weights_only=True)["step"] >= 2
        except Exception:         # not written yet, or being replaced
            return False
    _signal_mid_run(tmp_path, [*TRAIN, "--out", str(out)], ready, signum)
    assert torch.load(path, weights_only=True)["step"] >= 2


def _has_child(process) -> bool:
    """Once the command runs a program of its own (a compiler, a simulator), or after 20 s
    of work in its own process (an in-process synthesis)."""
    if not hasattr(process, "_began"):
        process._began = time.monotonic()
    return bool(_children(process.pid)) or time.monotonic() - process._began > 20


@pytest.mark.slow
@pytest.mark.parametrize("argv", [
    ["build", "--design", "engine", "--out", "build", "--no-pnr", "--quiet"],
    ["cosim", "zo-layer", "--steps", "1000"],
    ["demo", "--model", "tiny", "--steps", "100000", "--out", "demo", "--quiet",
     "--no-report"],
], ids=["build", "cosim", "demo"])
def test_sigint_stops_the_other_long_commands(tmp_path, argv):
    _signal_mid_run(tmp_path, argv, _has_child, signal.SIGINT)
