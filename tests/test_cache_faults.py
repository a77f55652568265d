"""Caches by construction (issue 34): every lock zoforge takes (``zoforge.files.file_lock``)
is opened without blocking and must be a regular file; a simulation build is verified by
the SHA-256 of every file it holds (``zoforge.sim.build_cache``), so a tampered file of the
same size is rebuilt, never run; a build whose tools are missing is one line naming the tool
and how to install it (``zoforge.sim.toolchain.check_build_tools``)."""
import os

import pytest

from hang_guard import deadline
from planted_files import KINDS, plant
from zoforge.cli import main
from zoforge.errors import ConfigError
from zoforge.files import file_lock
from zoforge.sim.build_cache import cached_build
from zoforge.sim.toolchain import check_build_tools


@pytest.mark.parametrize("kind", KINDS)
def test_a_lock_that_is_not_a_regular_file_is_one_line_never_a_hang(tmp_path, kind):
    lock = tmp_path / ".lock"
    keep = plant(lock, kind, tmp_path / "elsewhere")
    try:
        with deadline(10), pytest.raises(ConfigError) as error:
            with file_lock(lock):
                pass
    finally:
        if keep is not None:
            keep.close()
    message = str(error.value)
    assert message.startswith("ZOFORGE_CACHE must be a cache whose lock files are regular")
    assert f"{lock}: a {kind}" in message and "\n" not in message
    assert not (tmp_path / "elsewhere").exists()        # nothing written through the link


def test_a_fifo_lock_with_a_reader_is_refused_too(tmp_path):
    """With a reader at the other end the open succeeds: the file's kind is checked after."""
    lock = tmp_path / ".lock"
    os.mkfifo(lock)
    reader = os.open(lock, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with deadline(10), pytest.raises(ConfigError, match="a FIFO"):
            with file_lock(lock, parameter="--store"):
                pass
    finally:
        os.close(reader)


def test_a_regular_lock_is_created_kept_and_not_truncated(tmp_path):
    lock = tmp_path / ".lock"
    with file_lock(lock):
        assert lock.is_file()
    lock.write_text("left by another run")
    with file_lock(lock):
        pass
    assert lock.read_text() == "left by another run"


def _builder(calls: list, payload: bytes):
    def build(entry, complete):
        calls.append(complete)
        if not complete:
            (entry / "model.bin").write_bytes(payload)
            (entry / "obj").mkdir()
            (entry / "obj" / "part.o").write_bytes(payload[::-1])
    return build


@pytest.mark.parametrize("tampered", ["model.bin", "obj/part.o"])
def test_a_built_file_replaced_by_another_of_the_same_size_is_rebuilt(
        tmp_path, monkeypatch, capsys, tampered):
    monkeypatch.setenv("ZOFORGE_CACHE", str(tmp_path / "cache"))
    calls = []
    build = _builder(calls, b"the real model")
    entry, _ = cached_build("probe", ["parts"], build)
    cached_build("probe", ["parts"], build)
    assert calls == [False, True]                      # built once, then reused
    original = (entry / tampered).read_bytes()
    (entry / tampered).write_bytes(bytes(reversed(original)) if original[::-1] != original
                                   else b"X" * len(original))
    assert (entry / tampered).stat().st_size == len(original)
    cached_build("probe", ["parts"], build)
    assert calls == [False, True, False]               # rebuilt from nothing
    assert (entry / tampered).read_bytes() == original
    assert "rebuilding an incomplete simulation build" in capsys.readouterr().err


def test_a_file_added_to_or_removed_from_a_build_rebuilds_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ZOFORGE_CACHE", str(tmp_path / "cache"))
    calls = []
    build = _builder(calls, b"model")
    entry, _ = cached_build("probe", ["parts"], build)
    (entry / "planted.sh").write_text("echo")
    cached_build("probe", ["parts"], build)
    (entry / "obj" / "part.o").unlink()
    cached_build("probe", ["parts"], build)
    assert calls == [False, False, False]
    assert not (entry / "planted.sh").exists()


@pytest.mark.parametrize("damage", ["truncate-file", "truncate-manifest", "empty-manifest",
                                    "no-manifest"])
def test_a_truncated_file_or_a_damaged_manifest_rebuilds_it(tmp_path, monkeypatch, capsys,
                                                            damage):
    """The damage a killed build or a full disk leaves (the end-to-end form with a real
    simulator build: tests/test_crash_recovery.py)."""
    monkeypatch.setenv("ZOFORGE_CACHE", str(tmp_path / "cache"))
    calls = []
    build = _builder(calls, b"the real model")
    entry, _ = cached_build("probe", ["parts"], build)
    manifest = entry / "result.json"
    if damage == "truncate-file":
        model = entry / "model.bin"
        model.write_bytes(model.read_bytes()[:5])
    elif damage == "truncate-manifest":
        manifest.write_text(manifest.read_text()[:10])
    elif damage == "empty-manifest":
        manifest.write_text("{}")
    else:
        manifest.unlink()
    cached_build("probe", ["parts"], build)
    assert calls == [False, False]                     # rebuilt from nothing
    assert (entry / "model.bin").read_bytes() == b"the real model"
    assert "rebuilding an incomplete simulation build" in capsys.readouterr().err
    cached_build("probe", ["parts"], build)            # healed: reused
    assert calls == [False, False, True]


@pytest.mark.parametrize("variable, value, missing", [
    ("CXX", "/nonexistent/g++", "/nonexistent/g++"),
    ("CXX", "no-such-compiler -O2", "no-such-compiler"),
    ("PATH", "", "make")])
def test_missing_build_tools_are_named_with_how_to_install_them(
        monkeypatch, tmp_path, variable, value, missing):
    monkeypatch.setenv(variable, value or str(tmp_path))   # PATH: an empty folder
    with pytest.raises(ConfigError) as error:
        check_build_tools("verilator")
    message = str(error.value)
    assert message.startswith("--simulator must be a simulator whose build tools")
    assert f"no {missing} on PATH" in message and "apt-get install make g++" in message
    check_build_tools("icarus")                             # Icarus builds with itself


def test_cosim_without_a_compiler_is_one_line_and_exit_2(monkeypatch, tmp_path, capsys):
    """Through the command line, with an empty cache (so the model must be built)."""
    monkeypatch.setenv("ZOFORGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    code = main(["cosim", "engine", "--rows", "2", "--cols", "2", "--pack", "1", "--max-m",
                 "4", "--max-k", "4", "--max-n", "4", "--m", "2", "--k", "2", "--n", "2"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert err.startswith("zoforge: error: --simulator must be") and "/nonexistent/c++" in err
