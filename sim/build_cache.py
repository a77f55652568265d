"""The one cache of simulation builds (cocotb's and the job server's): one key, one rule.

An entry lives under ``cache_dir()/sim/<name>-<key>``, ``key`` being
:func:`zoforge.files.content_key` of everything the build reads (sources, tool arguments,
memory files) and of this environment (``sys.prefix``: a cocotb model links against this
venv's cocotb; the C++ optimisation level, :func:`~zoforge.sim.toolchain.cxx_opt`). Builds of one entry are serialised with its lock, so parallel test workers
share them. An entry is complete once its manifest (``result.json``: the key and the size of
every file) is stored after the build succeeded, and while every file still has that size;
anything else (a build killed or failed half-way, a truncated file) is cleared and rebuilt,
so an interrupted build never poisons the cache.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Callable

from zoforge.files import RESULT, check_cache_dir, clear_entry, content_key, entry_dir, \
    load_result, locked, store_result
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
            store_result(entry, {"key": key, "files": _file_sizes(entry)})
    return entry, time.perf_counter() - started


def _file_sizes(folder: Path) -> dict[str, int]:
    """Relative path -> size of every file of a build (not the lock, the log or the
    manifest itself)."""
    return {str(path.relative_to(folder)): path.stat().st_size
            for path in sorted(folder.rglob("*"))
            if path.is_file() and path.name not in _NOT_BUILT}


def _complete(folder: Path, key: str) -> bool:
    stored = load_result(folder)
    return (isinstance(stored, dict) and stored.get("key") == key
            and stored.get("files") == _file_sizes(folder))
