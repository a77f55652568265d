"""The one cache of simulation builds (cocotb's and the job server's): one key, one rule.

An entry lives under ``cache_dir()/sim/<name>-<key>``, ``key`` being
:func:`zoforge.files.content_key` of everything the build reads (sources, tool arguments,
memory files) and of this environment (``sys.prefix``: a cocotb model links against this
venv's cocotb; the C++ optimisation level, :func:`~zoforge.sim.toolchain.cxx_opt`). Builds of one entry are serialised with its lock, so parallel test workers
share them. An entry is complete once its manifest (``result.json``: the key and the size and
SHA-256 of every file) is stored after the build succeeded, and while every file still has
that size and digest; anything else (a build killed or failed half-way, a truncated file, a
file replaced by another of the same size) is cleared and rebuilt, so an interrupted or
tampered build is never run.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Callable

from zoforge.files import RESULT, check_cache_dir, clear_entry, content_key, entry_dir, \
    file_digest, load_result, locked, store_result
from zoforge.sim.toolchain import cxx_opt

__all__ = ["cached_build"]

_NOT_BUILT = {".lock", "build.log", RESULT}


def cached_build(name: str, parts: list[str], build: Callable[[Path, bool], None]
                 ) -> tuple[Path, float]:
    """The entry of ``name`` keyed by ``parts``; ``(entry, seconds)``.

    ``build(entry, complete)`` runs under the entry's lock: it builds into ``entry`` when
    ``complete`` is False (the entry then holds nothing but its lock) and may run a cheap
    up-to-date step when True (cocotb's runner needs its build step before a test)."""
    check_cache_dir()       # a one-line error for a cache Make cannot build in or write
    key = content_key(*parts, sys.prefix, cxx_opt())
    entry = entry_dir("sim", f"{name}-{key}")
    started = time.perf_counter()
    with locked(entry):
        complete = _complete(entry, key)
        if not complete:
            if any(child.name != ".lock" for child in entry.iterdir()):
                print(f"zoforge: rebuilding an incomplete simulation build ({entry.name})",
                      file=sys.stderr)
            clear_entry(entry)
        build(entry, complete)
        if not complete:
            store_result(entry, {"key": key, "files": _manifest(entry)})
    return entry, time.perf_counter() - started


def _built_files(folder: Path) -> list[Path]:
    """Every file of a build (not the lock, the log or the manifest itself), sorted."""
    return [path for path in sorted(folder.rglob("*"))
            if path.is_file() and path.name not in _NOT_BUILT]


def _manifest(folder: Path) -> dict[str, list]:
    """Relative path -> ``[size, sha256]`` of every file of a build."""
    return {str(path.relative_to(folder)): [path.stat().st_size, file_digest(path)]
            for path in _built_files(folder)}


def _complete(folder: Path, key: str) -> bool:
    """The manifest's key is ``key`` and every file has its recorded size and digest (the
    sizes first: a cheap refusal before any file is read)."""
    stored = load_result(folder)
    if not (isinstance(stored, dict) and stored.get("key") == key):
        return False
    files = stored.get("files")
    sizes = {str(path.relative_to(folder)): path.stat().st_size
             for path in _built_files(folder)}
    if not isinstance(files, dict) or set(files) != set(sizes) or any(
            not isinstance(entry, list) or len(entry) != 2 or entry[0] != sizes[name]
            for name, entry in files.items()):
        return False
    return all(file_digest(folder / name) == entry[1] for name, entry in files.items())
