"""On-disk cache for slow tool runs (synthesis, place and route), keyed by content hash.

Each entry is a folder ``$ZOFORGE_CACHE/<kind>/<key>/`` holding ``result.json`` (written last,
atomically) and whatever logs the run produced. An entry without ``result.json`` is an
interrupted run and is simply redone. Keys hash everything that changes the result: the
Verilog text, the tool and its version, and the options.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from pathlib import Path

from zoforge.sim.cosim import cache_dir

__all__ = ["content_key", "entry_dir", "load_result", "store_result", "atomic_write_text",
           "locked"]

RESULT = "result.json"


def content_key(*parts: str) -> str:
    """A 20-hex-digit hash of ``parts`` (order matters)."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:20]


def entry_dir(kind: str, key: str) -> Path:
    path = cache_dir() / kind / key
    path.mkdir(parents=True, exist_ok=True)
    return path


def load_result(entry: Path) -> dict | None:
    """The stored result of a complete entry, or None."""
    path = entry / RESULT
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:
        return None


def store_result(entry: Path, result: dict) -> None:
    atomic_write_text(entry / RESULT, json.dumps(result, indent=1, sort_keys=True))


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see either the old or the new file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


@contextlib.contextmanager
def locked(entry: Path):
    """Hold an exclusive lock on a cache entry, so parallel runs of the same job wait for
    one another instead of both running it in the same folder."""
    with open(Path(entry) / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
