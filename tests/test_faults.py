"""Fault injection (issue 22): storage faults, damaged stores and checkpoints, SIGKILL at
random points of every writer, and the rule that every writer goes through the guarded
output path (:mod:`zoforge.outputs`, :mod:`zoforge.files`).

* A full, read-only or forbidden file system is simulated in process
  (:func:`failing_writes`): ``open`` for writing, ``os.open(O_CREAT)``, ``os.mkdir`` and
  ``os.replace`` under one folder fail with ``ENOSPC`` (after some bytes), ``EROFS`` or
  ``EACCES``; SQLite's full disk is a store capped with ``PRAGMA max_page_count``, its
  read-only file an immutable ``sweep.db`` (``chattr +i``; ``PRAGMA query_only`` where the
  file system has no such flag).
* The contract each case checks: exit code 2 (or :class:`ConfigError` in process), one line
  naming the flag and the path, nothing half-written under a final name (an earlier
  complete file stays whole), no temporary file left.
* SIGKILL: a child process writes complete, self-describing versions of a file in a loop and
  is killed after a random delay; the file under its final name is then absent or one whole
  version. The default run kills each writer a few times; ``-m slow`` many times, and adds
  the writers that import torch and matplotlib.
"""
from __future__ import annotations

import ast
import builtins
import contextlib
import errno
import io
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from zoforge.cli import main
from zoforge.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
CODES = {"ENOSPC": errno.ENOSPC, "EROFS": errno.EROFS, "EACCES": errno.EACCES}


# -- the simulated file system faults --------------------------------------------------------

class _FullFile:
    """A file handle whose writes fail with ENOSPC once ``room`` bytes are written."""

    def __init__(self, handle, room: int, path):
        self._handle, self._room, self._path = handle, room, path

    def write(self, data):
        if len(data) > self._room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self._path))
        self._room -= len(data)
        return self._handle.write(data)

    def __getattr__(self, name):
        return getattr(self._handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._handle.close()
        return False

    def __iter__(self):
        return iter(self._handle)


def _under(path, root: Path) -> bool:
    try:
        return os.path.abspath(os.fspath(path)).startswith(str(root) + os.sep)
    except TypeError:                    # a file descriptor
        return False


@contextlib.contextmanager
def failing_writes(monkeypatch, root: Path, code: int, room: int = 0):
    """Writes under ``root`` fail with ``code`` (ENOSPC: once ``room`` bytes are written to
    a file; EROFS/EACCES: creating, renaming or opening for writing)."""
    root = Path(os.path.abspath(root))
    real_open, real_os_open = builtins.open, os.open
    real_mkdir, real_replace = os.mkdir, os.replace

    def fault(path):
        return OSError(code, os.strerror(code), str(path))

    def fake_open(file, mode="r", *args, **kwargs):
        if _under(file, root) and any(c in mode for c in "wax+"):
            if code != errno.ENOSPC:
                raise fault(file)
            return _FullFile(real_open(file, mode, *args, **kwargs), room, file)
        return real_open(file, mode, *args, **kwargs)

    def fake_os_open(path, flags, *args, **kwargs):
        if _under(path, root) and flags & (os.O_CREAT | os.O_WRONLY | os.O_RDWR) \
                and code != errno.ENOSPC:
            raise fault(path)
        return real_os_open(path, flags, *args, **kwargs)

    def fake_mkdir(path, *args, **kwargs):
        if _under(path, root) and not os.path.isdir(path):
            raise fault(path)
        return real_mkdir(path, *args, **kwargs)

    def fake_replace(source, target, *args, **kwargs):
        if _under(target, root) and code != errno.ENOSPC:
            raise fault(target)
        return real_replace(source, target, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(builtins, "open", fake_open)
        patch.setattr(io, "open", fake_open)
        patch.setattr(os, "open", fake_os_open)
        patch.setattr(os, "mkdir", fake_mkdir)
        patch.setattr(os, "replace", fake_replace)
        yield


def _one_line(code: int, err: str, starts: str, *texts: str) -> str:
    assert code == 2, err
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith(f"zoforge: error: {starts}"), err
    assert err.isprintable() or err[:-1].isprintable(), err
    for text in texts:
        assert text in err, err
    return err


def _temporaries(folder: Path) -> list[Path]:
    return [p for p in folder.rglob(".*") if p.name.endswith(".tmp")]


GENERATE = ["generate", "rng", "--n-rng", "7", "--bits", "5"]


@pytest.mark.parametrize("name", sorted(CODES))
def test_generate_on_a_faulty_disk_is_one_line_and_keeps_the_old_files(name, tmp_path, capsys,
                                                                       monkeypatch):
    out = tmp_path / "out"
    assert main(GENERATE + ["--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    with failing_writes(monkeypatch, out, CODES[name], room=100):
        code = main(GENERATE + ["--out", str(out)])
    _one_line(code, capsys.readouterr().err, "--out must be", str(out))
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    fresh = tmp_path / "fresh"
    with failing_writes(monkeypatch, tmp_path, CODES[name]):
        code = main(GENERATE + ["--out", str(fresh)])
    _one_line(code, capsys.readouterr().err, "--out must be")
    assert not fresh.exists() or not [p for p in fresh.iterdir()]


RESULT = {"accuracy_before": 0.5, "accuracy_after": 0.75, "test_loss_before": 0.7,
          "test_loss_after": 0.5, "final_loss": 0.6, "steps": 10, "steps_per_s": 100.0,
          "d": 6, "chance_accuracy": 0.5}


def _store_with_runs(folder: Path):
    from zoforge.sweep.store import Owner, Store
    store = Store(folder)
    specs = [{"lr": 0.1 * (i + 1), "perturbation": "gaussian"} for i in range(3)]
    tasks = [(f"train-{i}", "train", spec) for i, spec in enumerate(specs)]
    store.add_scope("s", {"description": "faults"},
                    [(key, None, {"lr": spec["lr"]}) for key, _, spec in tasks], tasks)
    owner = Owner.here()
    for task in store.claim("s", 3, owner, lease_s=60):
        store.finish(task.key, owner, RESULT, 1.0)
    return store


@pytest.mark.parametrize("name", sorted(CODES))
def test_sweep_outputs_on_a_faulty_disk_are_one_line(name, tmp_path, monkeypatch):
    from zoforge.sweep.outputs import write_outputs
    store = _store_with_runs(tmp_path / "store")
    out = tmp_path / "out"
    paths = write_outputs(store, "s", out, plots=False)
    before = {p: p.read_bytes() for p in paths.values()}
    with failing_writes(monkeypatch, out, CODES[name], room=10):
        with pytest.raises(ConfigError) as error:
            write_outputs(store, "s", out, plots=False)
    assert str(error.value).startswith("--out must be") and "\n" not in str(error.value)
    assert {p: p.read_bytes() for p in paths.values()} == before
    assert not _temporaries(out)
    store.close()


def test_sweep_plots_are_never_written_through_a_link(tmp_path):
    from zoforge.sweep.outputs import write_outputs
    store = _store_with_runs(tmp_path / "store")
    out, outside = tmp_path / "out", tmp_path / "outside"
    outside.mkdir()
    out.mkdir()
    (out / "s-plots").symlink_to(outside)
    with pytest.raises(ConfigError, match="symbolic link"):
        write_outputs(store, "s", out)
    assert not list(outside.iterdir())
    store.close()


def test_a_task_folder_that_is_a_link_is_not_followed(tmp_path):
    from zoforge.sweep.tasks import run_folder, run_task
    work, outside = tmp_path / "store", tmp_path / "outside"
    (work / "runs").mkdir(parents=True)
    outside.mkdir()
    run_folder(work, "train-x").symlink_to(outside)
    with pytest.raises(ConfigError, match="symbolic link"):
        run_task("train", "train-x", {}, str(work))
    assert not list(outside.iterdir())


# -- the store ---------------------------------------------------------------------------------

def _fresh(store_module):
    store_module._CHECKED.clear()       # check again, as a new process would


def test_a_full_store_is_one_line(tmp_path):
    from zoforge.sweep import store as store_module
    from zoforge.sweep.store import Owner
    store = _store_with_runs(tmp_path / "store")
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count={pages}")        # a tiny full disk
    big = [(f"train-b{i}", "train", {"x": "y" * 2000}) for i in range(50)]
    with pytest.raises(ConfigError, match="^store must be a sweep store zoforge can write.*"
                                          "database or disk is full"):
        store.add_scope("b", {}, [(k, None, {}) for k, _, _ in big], big)
    assert store.counts("s")["done"] == 3              # what was there is intact
    store.close()
    _fresh(store_module)
    again = store_module.Store(tmp_path / "store")
    assert "b" not in again.scopes() and again.claim("s", 1, Owner.here(), 60) == []
    again.close()


def test_an_immutable_store_is_one_line(tmp_path, capsys):
    store = _store_with_runs(tmp_path / "store")
    store.close()
    db = tmp_path / "store" / "sweep.db"
    immutable = subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode == 0
    try:
        from zoforge.sweep import store as store_module
        _fresh(store_module)
        if immutable:
            code = main(["sweep", "--preset", "tiny", "--store", str(tmp_path / "store"),
                         "--outputs-only"])
            _one_line(code, capsys.readouterr().err, "--store must be", str(db))
        else:                            # no immutable flag here: SQLite's read-only mode
            again = store_module.Store(tmp_path / "store")
            again._db.execute("PRAGMA query_only=ON")
            with pytest.raises(ConfigError, match="readonly"):
                again.retry_failed("s")
            again.close()
    finally:
        subprocess.run(["chattr", "-i", str(db)], capture_output=True)


def test_random_bytes_inside_a_store_are_one_line(tmp_path, capsys):
    store = _store_with_runs(tmp_path / "store")
    store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    db = tmp_path / "store" / "sweep.db"
    data = bytearray(db.read_bytes())
    rng = random.Random(1)
    for index in range(100, len(data), 61):
        data[index] = rng.randrange(256)
    db.write_bytes(bytes(data))
    from zoforge.sweep import store as store_module
    _fresh(store_module)
    started = time.monotonic()
    code = main(["sweep", "--preset", "tiny", "--store", str(tmp_path / "store"),
                 "--outputs-only"])
    _one_line(code, capsys.readouterr().err, "--store must be", "move", str(db))
    assert time.monotonic() - started < 60


def test_another_schema_under_the_same_version_is_one_line(tmp_path):
    folder = tmp_path / "store"
    folder.mkdir()
    db = sqlite3.connect(folder / "sweep.db")
    db.executescript("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);"
                     "INSERT INTO meta VALUES('schema_version', '2');"
                     "CREATE TABLE tasks(key TEXT PRIMARY KEY, payload BLOB);")
    db.close()
    from zoforge.sweep.store import Store
    with pytest.raises(ConfigError, match="table tasks has columns key, payload"):
        Store(folder)


@pytest.mark.parametrize("path", ["fifo", "folder"])
def test_a_store_database_that_is_not_a_file_is_refused_unopened(tmp_path, path):
    folder = tmp_path / "store"
    folder.mkdir()
    if path == "fifo":
        os.mkfifo(folder / "sweep.db")
    else:
        (folder / "sweep.db").mkdir()
    from zoforge.sweep.store import Store
    with pytest.raises(ConfigError, match="not a regular file"):
        Store(folder)


@pytest.mark.parametrize("damage, tables", [
    ("UPDATE tasks SET result = '{\"accuracy' WHERE key = 'train-1'", ["tasks"]),
    ("UPDATE tasks SET result = NULL WHERE key = 'train-1'", ["tasks"]),
    ("UPDATE tasks SET result = '{\"accuracy_after\": 0.5}' WHERE key = 'train-1'", ["tasks"]),
    # a training stored as a report: the task and the point that names it as its training
    ("UPDATE tasks SET result = '{}', kind = 'report' WHERE key = 'train-1'", ["points", "tasks"]),
    # a lost specification: the task is removed, and with it its point
    ("UPDATE tasks SET spec = '[1, 2]' WHERE key = 'train-1'", ["points", "tasks"]),
    ("UPDATE points SET swept = 'nan' WHERE ord = 1", ["points"]),
])
def test_a_damaged_row_is_one_line_and_repair_sets_it_aside(tmp_path, capsys, damage, tables):
    from zoforge.sweep import store as store_module
    store = _store_with_runs(tmp_path / "store")
    store._db.execute(damage)
    store.close()
    _fresh(store_module)
    argv = ["sweep", "--preset", "tiny", "--store", str(tmp_path / "store"), "--outputs-only"]
    code = main(argv)
    _one_line(code, capsys.readouterr().err, "--store must be", "--repair")
    _fresh(store_module)
    repaired = store_module.Store(tmp_path / "store", repair=True)
    assert f"set {len(tables)} damaged rows" in capsys.readouterr().err
    aside = repaired._db.execute("SELECT tbl, key, data FROM damaged").fetchall()
    assert sorted(row[0] for row in aside) == tables
    assert repaired.damaged_rows() == []
    repaired.close()
    _fresh(store_module)
    store_module.Store(tmp_path / "store").close()     # clean on the next open


# -- the simulation cache ----------------------------------------------------------------------

@pytest.mark.parametrize("value, text", [("", "absolute"), ("relative/cache", "absolute"),
                                         ("{tmp}/with space", "letters"),
                                         ("{tmp}/dollar$HOME", "letters"),
                                         ("{tmp}/line\nbreak", "letters")])
def test_an_odd_zoforge_cache_is_refused_up_front(tmp_path, capsys, monkeypatch, value, text):
    monkeypatch.setenv("ZOFORGE_CACHE", value.format(tmp=tmp_path))
    monkeypatch.chdir(tmp_path)
    code = main(["cosim", "rng", "--cycles", "10"])
    _one_line(code, capsys.readouterr().err, "ZOFORGE_CACHE must be", text)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["EROFS", "EACCES"])
def test_an_unwritable_zoforge_cache_is_refused_up_front(tmp_path, capsys, monkeypatch, name):
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("ZOFORGE_CACHE", str(cache))
    with failing_writes(monkeypatch, cache, CODES[name]):
        code = main(["cosim", "rng", "--cycles", "10"])
    _one_line(code, capsys.readouterr().err, "ZOFORGE_CACHE must be", str(cache))


def test_a_full_cache_is_one_line(tmp_path, monkeypatch):
    from zoforge.files import atomic_write_text
    with failing_writes(monkeypatch, tmp_path, errno.ENOSPC):
        with pytest.raises(ConfigError, match="^ZOFORGE_CACHE must be .*No space left"):
            atomic_write_text(tmp_path / "entry.json", "x" * 100, "ZOFORGE_CACHE")
    assert list(tmp_path.iterdir()) == []


def test_a_cache_result_that_is_not_a_file_is_a_damaged_entry(tmp_path):
    from zoforge.files import load_result
    os.mkfifo(tmp_path / "result.json")              # never opened: no hang
    assert load_result(tmp_path) is None
    (tmp_path / "result.json").unlink()
    (tmp_path / "result.json").write_text("[1, 2]")
    assert load_result(tmp_path) is None


def test_an_os_fault_no_check_named_is_one_line(monkeypatch, capsys):
    import zoforge.cli.toolchain as toolchain

    def full(args):
        raise OSError(errno.ENOSPC, "No space left on device", "/some/where\nforged")
    monkeypatch.setattr(toolchain, "run", full)
    code = main(["toolchain"])
    _one_line(code, capsys.readouterr().err, "/some/where\\nforged: No space left")


# -- checkpoints -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def words(tmp_path_factory):
    import numpy as np
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("words") / "words.jsonl"
    good, bad = ["great", "superb", "fun"], ["awful", "dull", "bland"]
    path.write_text("".join(json.dumps({"text": " ".join(rng.choice(good if i % 2 else bad, 4))
                                        + f" {i}", "label": i % 2}) + "\n" for i in range(80)))
    return str(path)


def _train_config(tmp_path, words, **overrides):
    from zoforge.golden.zo.config import TrainConfig
    values = dict(model="tiny", data=words, n_train=20, n_val=10, n_test=10, max_len=8,
                  batch=4, steps=4, eval_every=2, checkpoint_every=2, progress=False,
                  out=str(tmp_path / "run"), cache_dir=str(tmp_path / "cache"))
    return TrainConfig(**{**values, **overrides})


def _tamper(path: Path, change) -> None:
    import torch
    state = torch.load(path, weights_only=True)
    change(state)
    with open(path, "wb") as handle:
        torch.save(state, handle)


@pytest.mark.parametrize("name, change, notice", [
    ("nan", lambda s: s["theta"].fill_(float("nan")), "non-finite"),
    ("shape", lambda s: s.update(theta=s["theta"][:-1]), "shape"),
    pytest.param("dtype", lambda s: s.update(theta=s["theta"].double()), "float64",
                 marks=pytest.mark.slow),
    pytest.param("step", lambda s: s.update(step=-3), "step -3", marks=pytest.mark.slow),
    pytest.param("step-type", lambda s: s.update(step="2"), "step '2'",
                 marks=pytest.mark.slow),
    pytest.param("history", lambda s: s["history"].update(loss=[1.0] * 7), "history",
                 marks=pytest.mark.slow),
    pytest.param("optimizer", lambda s: s.update(optimizer={"perturbation": {}}),
                 "optimizer", marks=pytest.mark.slow),
    ("not-a-dict", lambda s: (s.clear(), s.update(x=1)), "has no"),
])
def test_an_unusable_checkpoint_is_set_aside_with_a_notice(tmp_path, words, capsys, name,
                                                           change, notice):
    from zoforge.golden.zo.train import CHECKPOINT, Interrupted, train
    cfg = _train_config(tmp_path, words)
    with pytest.raises(Interrupted):
        train(cfg, stop_after=2)
    checkpoint = tmp_path / "run" / CHECKPOINT
    _tamper(checkpoint, change)
    capsys.readouterr()
    result = train(cfg)
    err = capsys.readouterr().err
    assert "damaged" in err and notice in err and "step 0" in err, err
    assert err.count("\n") == 1
    assert (tmp_path / "run" / (CHECKPOINT + ".damaged")).is_file()
    assert result["steps"] == 4
    if name == "nan":              # damaged, not reported as a diverging learning rate
        assert "lr" not in err


@pytest.mark.parametrize("name", ["ENOSPC", pytest.param("EROFS", marks=pytest.mark.slow),
                                  pytest.param("EACCES", marks=pytest.mark.slow)])
def test_training_on_a_faulty_disk_is_one_line(tmp_path, words, capsys, monkeypatch, name):
    from zoforge.golden.zo.train import CHECKPOINT, train
    cfg = _train_config(tmp_path, words)
    out = tmp_path / "run"
    out.mkdir()
    with failing_writes(monkeypatch, out, CODES[name], room=1000):
        with pytest.raises(ConfigError) as error:
            train(cfg)
    message = str(error.value)
    assert message.startswith("out must be") and "\n" not in message, message
    assert not (out / CHECKPOINT).exists() and not _temporaries(out)


# -- finishing a task: status and result in one transaction (issue 23) -----------------------

_CRASH_IN_FINISH = """
import os, signal, sys
from zoforge.sweep.store import Owner, Store
from zoforge.sweep.tasks import TRAIN_FIELDS
store = Store(sys.argv[1])
owner = Owner.here()
(task,) = store.claim("s", 1, owner, lease_s=3600)
def trace(statement):                 # killed after the UPDATE, before its COMMIT
    if statement.startswith("UPDATE tasks SET status"):
        store._db.set_trace_callback(lambda s: os.kill(os.getpid(), signal.SIGKILL)
                                     if s == "COMMIT" else None)
store._db.set_trace_callback(trace)
store.finish(task.key, owner, dict.fromkeys(TRAIN_FIELDS, 0.9), 1.0)
print("not killed")
"""


def test_a_crash_while_a_task_finishes_leaves_it_running_without_a_result(tmp_path):
    from zoforge.sweep import store as store_module
    from zoforge.sweep.store import Owner, Store
    store = Store(tmp_path / "store")
    store.add_scope("s", {}, [("train-1", None, {})], [("train-1", "train", {})])
    store.close()
    child = subprocess.run([sys.executable, "-c", _CRASH_IN_FINISH, str(tmp_path / "store")],
                           capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert child.returncode == -signal.SIGKILL, child.stderr
    _fresh(store_module)
    store = Store(tmp_path / "store")
    row = store.tasks()["train-1"]
    assert row["status"] == "running" and row["result"] is None and row["completions"] == 0
    me = Owner.here()
    (again,) = store.claim("s", 1, me, lease_s=3600)     # its claimer is gone: taken over
    assert store.finish(again.key, me, RESULT, 1.0)
    assert store.tasks()["train-1"]["result"] == RESULT
    store.close()


# -- SIGKILL at random points of every writer --------------------------------------------------

# Each child writes complete versions ("v<N>\n" + N's payload) of one file forever.
_WRITERS = {
    "write_text": ("out.txt", """
from zoforge.outputs import write_text
def write(path, text): write_text(path, text)"""),
    "write_bytes": ("out.png", """
from zoforge.outputs import write_bytes
def write(path, text): write_bytes(path, text.encode())"""),
    "cache": ("result.json", """
from zoforge.files import atomic_write_text
def write(path, text): atomic_write_text(path, text)"""),
    "config": ("design.toml", """
from zoforge.config import dump_config
from zoforge.golden.rng import OnTheFlyConfig
import re
def write(path, text):
    n = int(text.split(chr(10))[0][1:])
    dump_config(OnTheFlyConfig(n_rng=7, bits=3 + n % 10), path)"""),
}
_SLOW_WRITERS = {
    "savefig": ("plot.png", """
import matplotlib; matplotlib.use("Agg")
import matplotlib.pyplot as plt
from zoforge.outputs import output_path
def write(path, text):
    figure = plt.figure(figsize=(2, 2)); figure.text(0.1, 0.5, text[:20])
    with output_path(path) as tmp:
        figure.savefig(tmp, format="png")
    plt.close(figure)"""),
    "torch.save": ("checkpoint.pt", """
import torch
from zoforge.outputs import output_path
def write(path, text):
    with output_path(path) as tmp, open(tmp, "wb") as handle:
        torch.save({"text": text}, handle)"""),
}
_LOOP = """
import sys
from pathlib import Path
path = Path(sys.argv[1])
n = 0
print("ready", flush=True)
while True:
    n += 1
    write(path, f"v{n}\\n" + str(n % 97) * (20000 + 1000 * (n % 50)))
"""


def _whole(name: str, path: Path) -> bool:
    """The file is one complete version of what the writer writes."""
    data = path.read_bytes()
    if name == "config":
        from zoforge.config import load_config
        from zoforge.golden.rng import OnTheFlyConfig
        return load_config(path, (OnTheFlyConfig,)).n_rng == 7
    if name == "savefig":
        return data.startswith(b"\x89PNG") and data.endswith(b"IEND\xaeB`\x82")
    if name == "torch.save":
        import torch
        text = torch.load(path, weights_only=True)["text"]
        data = text.encode()
    head, _, body = data.decode().partition("\n")
    n = int(head[1:])
    return body == str(n % 97) * (20000 + 1000 * (n % 50))


def _kill_at_random(code: str, argument, rng: random.Random, within_s: float) -> None:
    """Run ``code`` in a child Python with ``argument``; once it prints ``ready``, SIGKILL it
    after a random time below ``within_s`` seconds."""
    child = subprocess.Popen([sys.executable, "-c", code, str(argument)], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "ready\n", child.stderr.read()
    time.sleep(rng.uniform(0.0, within_s))
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    child.stdout.close()
    child.stderr.close()


def _kill_writer(name: str, source: str, file_name: str, folder: Path, rounds: int,
                 rng: random.Random) -> None:
    code = textwrap.dedent(source) + _LOOP
    for round_ in range(rounds):
        target = folder / f"{round_}-{file_name}"
        _kill_at_random(code, target, rng, 0.25)
        if target.exists():
            assert target.stat().st_size > 0, f"{name}: a 0-byte {target.name}"
            assert _whole(name, target), f"{name}: a part of a version under {target.name}"


@pytest.mark.parametrize("name", sorted(_WRITERS))
def test_sigkill_never_leaves_a_part_under_the_final_name(tmp_path, name):
    file_name, source = _WRITERS[name]
    _kill_writer(name, source, file_name, tmp_path, 2, random.Random(name))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted({**_WRITERS, **_SLOW_WRITERS}))
def test_sigkill_never_leaves_a_part_under_the_final_name_many_times(tmp_path, name):
    file_name, source = {**_WRITERS, **_SLOW_WRITERS}[name]
    rounds = 10 if name in _SLOW_WRITERS else 25     # each of those imports torch/matplotlib
    _kill_writer(name, source, file_name, tmp_path, rounds, random.Random(name))


@pytest.mark.parametrize("rounds", [pytest.param(2, id="few"),
                                    pytest.param(12, id="many", marks=pytest.mark.slow)])
def test_sigkill_during_generate_leaves_whole_files_or_none(tmp_path, rounds):
    """``zoforge generate`` killed at random points: every file it left is byte for byte
    the one a complete run writes."""
    reference = tmp_path / "reference"
    assert main(GENERATE + ["--out", str(reference)]) == 0
    expected = {p.name: p.read_bytes() for p in reference.iterdir()}
    rng = random.Random(rounds)
    for round_ in range(rounds):
        out = tmp_path / f"out{round_}"
        child = subprocess.Popen([sys.executable, "-m", "zoforge", *GENERATE, "--out", str(out)],
                                 cwd=tmp_path, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, 2.5))           # start-up is about 1 s here
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        for path in (out.iterdir() if out.exists() else []):
            if path.name.startswith("."):           # a killed writer's hidden temporary
                continue
            assert path.read_bytes() == expected[path.name], f"a part of {path.name}"


_FINISH_LOOP = """
import sys
from zoforge.sweep.store import Owner, Store
from zoforge.sweep.tasks import TRAIN_FIELDS
store = Store(sys.argv[1])
owner = Owner.here()
print("ready", flush=True)
while True:
    claimed = store.claim("s", 4, owner, lease_s=3600)
    if not claimed:
        break
    for task in claimed:
        store.finish(task.key, owner, dict.fromkeys(TRAIN_FIELDS, 0.5), 1.0)
"""


@pytest.mark.parametrize("rounds", [pytest.param(2, id="few"),
                                    pytest.param(20, id="many", marks=pytest.mark.slow)])
def test_sigkill_during_a_sweep_leaves_a_consistent_store(tmp_path, rounds):
    from zoforge.sweep import store as store_module
    from zoforge.sweep.store import Store
    keys = [f"train-{i}" for i in range(2000)]
    store = Store(tmp_path / "store")
    store.add_scope("s", {}, [(k, None, {}) for k in keys], [(k, "train", {}) for k in keys])
    store.close()
    rng = random.Random(rounds)
    for _ in range(rounds):
        _kill_at_random(_FINISH_LOOP, tmp_path / "store", rng, 0.3)
        _fresh(store_module)
        store = Store(tmp_path / "store")          # checks itself: intact, rows readable
        for row in store.tasks().values():
            assert (row["status"] == "done") == (row["result"] is not None)
            assert row["completions"] == (row["status"] == "done")
        store.close()


# -- every writer goes through the guarded output path ----------------------------------------

#: The modules that are the guarded path itself.
GUARDED = {"zoforge/outputs.py", "zoforge/files.py", "zoforge/inputs.py"}
#: Functions whose ``with`` block yields a temporary file renamed into place.
ATOMIC = {"output_path", "atomic_path"}
#: Writers exempt from the rule, ``file:function`` -> why: scratch files of a simulation or
#: synthesis run inside a cache entry (locked, cleared when incomplete, complete only once
#: its manifest is stored last by :func:`zoforge.files.store_result`) or in a temporary run
#: folder. (A write into an ``io.BytesIO()`` is not a file write.) Every entry must still
#: be a writer (a stale entry fails the test), so the list only shrinks.
EXEMPT = {
    "reports/synth.py:synthesize": "synthesis sources in a cached entry",
    "sim/backends.py:run_program": "a co-simulation's input arrays in its run folder",
    "sim/benches/engine_percycle.py:run_jobs": "a cocotb bench's output arrays",
    "sim/benches/engine_registers.py:registers_from_the_bus": "a cocotb bench's outputs",
    "sim/benches/pe_accumulator.py:long_dot_products": "a cocotb bench's output arrays",
    "sim/benches/program.py:run_program": "a cocotb bench's output arrays",
    "sim/benches/linked_attention.py:run": "a cocotb bench's output arrays",
    "sim/benches/rng.py:stream_side_by_side": "a cocotb bench's output arrays",
    "sim/cosim.py:run_cocotb": "sources and memory files of a cached simulation build",
    "sim/cosim.py:scratch_folder": "a co-simulation's temporary run folder",
    "sim/engine_cosim.py:_run_bench": "job arrays of a co-simulation run",
    "sim/link_cosim.py:cosim_linked_attention": "a co-simulation's input arrays in its run "
                                                "folder",
    "sim/jobserver.py:build_server": "sources and log of a cached job-server build",
    "sim/lint.py:lint_verilog": "the source of a lint run in a temporary folder",
    "sim/rng_cosim.py:cosim_configs": "the stimulus array of a co-simulation run",
}
_WRITE_METHODS = {"write_text", "write_bytes", "savefig", "tofile", "mkdir", "makedirs",
                  "rename", "symlink_to", "touch", "copy", "copy2", "copyfile", "copytree",
                  "move", "save", "savez", "savez_compressed", "dump"}


def _is_write(node: ast.Call) -> bool:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    base = ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""
    if name == "open" and base in ("", "io", "gzip", "bz2"):
        mode = node.args[1] if len(node.args) > 1 else next(
            (k.value for k in node.keywords if k.arg == "mode"), None)
        return isinstance(mode, ast.Constant) and any(c in str(mode.value) for c in "wax+")
    if name == "open" and base == "os":
        return any(flag in ast.unparse(node) for flag in ("O_WRONLY", "O_RDWR", "O_CREAT"))
    if name == "replace":                 # os.replace / Path.replace (not str.replace)
        return base == "os" or (len(node.args) == 1 and not node.keywords
                                and base not in ("dataclasses",))
    if name in ("save", "savez", "savez_compressed"):
        return base in ("np", "numpy", "torch")
    if name in ("copy", "copy2", "copyfile", "copytree", "move"):
        return base == "shutil"
    if name == "dump":
        return base in ("json", "pickle", "yaml")
    if name in ("mkdir", "makedirs"):
        return True
    return name in _WRITE_METHODS and isinstance(func, ast.Attribute) and base not in (
        "self", "os.path")


def _writers() -> dict[str, list[int]]:
    """``file:function`` -> lines of every write outside the guarded modules that is not
    inside a ``with output_path(...)`` / ``with atomic_path(...)`` block."""
    found: dict[str, list[int]] = {}
    for folder in ("zoforge", "golden", "hw", "sim", "boards", "reports", "sweep"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative in GUARDED:
                continue
            _visit(ast.parse(path.read_text()), relative, "<module>", False, found)
    return found


def _visit(node, relative, function, atomic, found, memory=frozenset()) -> None:
    """Record the writes below ``node``; ``atomic``: inside a guarded ``with``; ``memory``:
    the names bound to ``io.BytesIO()`` in the function (writing there is no file write)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        function = node.name if function == "<module>" else function
        memory = frozenset(
            target.id for child in ast.walk(node) if isinstance(child, ast.Assign)
            and ast.unparse(child.value) in ("io.BytesIO()", "BytesIO()")
            for target in child.targets if isinstance(target, ast.Name))
    if isinstance(node, (ast.With, ast.AsyncWith)) and any(
            isinstance(item.context_expr, ast.Call)
            and getattr(item.context_expr.func, "id", getattr(item.context_expr.func, "attr",
                                                              None)) in ATOMIC
            for item in node.items):
        atomic = True
    if isinstance(node, ast.Call) and not atomic and _is_write(node) and not any(
            isinstance(arg, ast.Name) and arg.id in memory for arg in node.args):
        found.setdefault(f"{relative}:{function}", []).append(node.lineno)
    for child in ast.iter_child_nodes(node):
        _visit(child, relative, function, atomic, found, memory)


def test_every_writer_goes_through_the_guarded_output_path():
    writers = _writers()
    bypass = {where: lines for where, lines in writers.items() if where not in EXEMPT}
    assert not bypass, ("write through zoforge.outputs (or zoforge.files for caches): "
                        + "; ".join(f"{w} line {lines}" for w, lines in sorted(bypass.items())))
    stale = set(EXEMPT) - set(writers)
    assert not stale, f"no longer writers, remove from EXEMPT: {sorted(stale)}"


def test_the_writer_scan_finds_a_bypass(tmp_path):
    tree = ast.parse("def f(p):\n    p.write_text('x')\n    with output_path(p) as t:\n"
                     "        open(t, 'w')\n    open(p, 'a')\n    'a'.replace('a', 'b')\n"
                     "    b = io.BytesIO()\n    torch.save(1, b)\n    torch.save(1, p)\n")
    found: dict = {}
    _visit(tree, "x.py", "<module>", False, found)
    assert found == {"x.py:f": [2, 5, 9]}
