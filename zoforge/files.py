"""Caches, file locks and atomic writes: the one place sim/ and reports/ get them from.

* :func:`cache_dir` is ``$ZOFORGE_CACHE`` (default ``~/.cache/zoforge``);
  :func:`check_cache_dir` validates it before any work (absolute, characters the build
  tools accept, writable).
* A cache *entry* is a folder ``cache_dir()/<kind>/<key>/`` (:func:`entry_dir`) keyed by a
  content hash (:func:`content_key` of everything that changes the result: inputs, tool
  versions, options). :func:`content_key` is zoforge's one hash recipe: caches, sweep
  stores and configuration hashes (:func:`zoforge.config.data_hash`, of canonical JSON)
  all use it. Its ``result.json`` is written last and atomically
  (:func:`store_result`), so an entry without one is an interrupted run and is redone;
  :func:`load_result` returns None for such an entry or an unreadable one.
* :func:`file_lock` / :func:`locked` serialise parallel processes working on one entry. A
  lock is opened without blocking and must be a regular file: a FIFO, a device, a folder or
  a link planted at its name is a one-line error naming it, never a hang.
* :func:`atomic_write_text` writes a file that readers see either whole or not at all;
  :func:`atomic_path` does the same for writers that take a file name (``torch.save``,
  ``savefig(..., format=...)``; not ``np.save``, which appends ``.npy``): it yields a new
  temporary file beside the target and renames it into place only when the block succeeds.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import stat
from pathlib import Path

from zoforge.errors import ConfigError, os_fault
from zoforge.inputs import read_bytes

__all__ = ["cache_dir", "check_cache_dir", "can_write", "CACHE_PATH_CHARACTERS", "content_key",
           "entry_dir", "load_result", "store_result", "atomic_write_text", "atomic_write_bytes",
           "atomic_path", "file_lock", "locked", "RESULT", "clear_entry", "file_digest", "kind_of"]

RESULT = "result.json"


#: Characters a cache path may hold besides letters and digits: what Verilator's GNU Make
#: and the compilers accept in a path (no white space, ``$``, ``:``, ``#``, quotes...).
CACHE_PATH_CHARACTERS = "/._-+@~"
_CACHE_RULE = ("an absolute folder path of letters, digits and " + CACHE_PATH_CHARACTERS +
               " only (Verilator's GNU Make cannot build elsewhere; unset, it is "
               "~/.cache/zoforge)")


def cache_dir() -> Path:
    """``$ZOFORGE_CACHE`` (default ``~/.cache/zoforge``). A set but empty or relative value
    is refused (one-line :class:`~zoforge.errors.ConfigError` naming ``ZOFORGE_CACHE``):
    never a cache in whatever the current folder is."""
    value = os.environ.get("ZOFORGE_CACHE")
    if value is None:
        return Path.home() / ".cache" / "zoforge"
    if not value.strip() or not os.path.isabs(value):
        raise ConfigError("ZOFORGE_CACHE", _CACHE_RULE, repr(value))
    return Path(value)


def check_cache_dir() -> Path:
    """The cache folder, validated before any work: :func:`cache_dir`'s rules, only the
    characters of :data:`CACHE_PATH_CHARACTERS` besides letters and digits, and a folder
    that exists or can be created and can be written (tested by writing: permission bits
    say nothing for root or a read-only file system)."""
    path = cache_dir()
    if not all(c.isalnum() or c in CACHE_PATH_CHARACTERS for c in str(path)):
        raise ConfigError("ZOFORGE_CACHE", _CACHE_RULE, repr(str(path)))
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise os_fault("ZOFORGE_CACHE", path, error, "a folder that can be created and "
                       "written") from None
    if not path.is_dir() or not can_write(path):
        raise ConfigError("ZOFORGE_CACHE", "a writable folder", path)
    return path


def can_write(folder: Path | str) -> bool:
    """Whether a file can be created in ``folder`` (tried: a temporary file is created and
    removed)."""
    probe = Path(folder) / f".zoforge-probe-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError:
        return False
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return True


def content_key(*parts: str) -> str:
    """A 20-hex-digit hash of ``parts`` (order matters): SHA-256 of each part's UTF-8
    bytes followed by a NUL byte. The one hash recipe of zoforge's keys and labels."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:20]


def entry_dir(kind: str, key: str) -> Path:
    path = cache_dir() / kind / key
    path.mkdir(parents=True, exist_ok=True)
    return path


def clear_entry(entry: Path | str) -> None:
    """Remove everything in a cache entry but its lock (what a killed or failed run left,
    or a damaged entry), so that it is rebuilt from nothing."""
    for child in Path(entry).iterdir():
        if child.name == ".lock":
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def file_digest(path: Path | str) -> str:
    """SHA-256 of a file's bytes, in full: a checksum that validates a cached file when it
    is read (not a key; keys are :func:`content_key`)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


#: Largest cache result (``result.json``) read; a larger one is a damaged entry.
MAX_RESULT_BYTES = 16 << 20


def load_result(entry: Path) -> dict | None:
    """The stored result of a complete entry, or None (none, or not a regular file of at
    most :data:`MAX_RESULT_BYTES` holding a JSON object: a damaged entry, redone)."""
    path = Path(entry) / RESULT
    if not path.exists():
        return None
    try:
        value = json.loads(read_bytes(path, "ZOFORGE_CACHE", MAX_RESULT_BYTES))
    except (ConfigError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def store_result(entry: Path, result: dict) -> None:
    atomic_write_text(Path(entry) / RESULT, json.dumps(result, indent=1, sort_keys=True))


@contextlib.contextmanager
def atomic_path(path: Path | str, parameter: str | None = None):
    """Yield a new, empty temporary file's path beside ``path``; when the block succeeds,
    rename it to ``path`` (readers see the old file or the new one, never a part; a link at
    ``path`` is replaced, not followed), else remove it. With ``parameter`` (what the user
    gave: ``--out``, ``ZOFORGE_CACHE``), a failed write (no space, a read-only file system,
    no permission) is a one-line :class:`~zoforge.errors.ConfigError` naming it and the
    path, and nothing is left under either name."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        # created here, never an existing file or a link planted under a predictable name
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666))
        try:
            yield tmp
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
    except OSError as error:
        if parameter is None:
            raise
        raise os_fault(parameter, path, error) from None


def atomic_write_text(path: Path | str, text: str, parameter: str | None = None) -> None:
    """Write ``text`` to ``path`` so that readers see either the old or the new file."""
    atomic_write_bytes(path, text.encode("utf-8"), parameter)


def atomic_write_bytes(path: Path | str, data: bytes, parameter: str | None = None) -> None:
    """Write ``data`` to ``path`` so that readers see either the old or the new file."""
    with atomic_path(path, parameter) as tmp:
        with open(tmp, "wb") as handle:
            handle.write(data)


#: What a lock file must be, in :func:`file_lock`'s one-line error.
_LOCK_RULE = "a cache whose lock files are regular files (remove the one named)"


def _open_lock(path: Path, parameter: str) -> int:
    """A descriptor of the regular file ``path`` (created if absent), opened without
    following a link, without blocking on a FIFO and without truncating; anything else at
    that name is a one-line :class:`~zoforge.errors.ConfigError` naming ``parameter``."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as error:
        if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
            raise ConfigError(parameter, _LOCK_RULE, f"{path}: {kind_of(path)}") from None
        raise os_fault(parameter, path, error) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ConfigError(parameter, _LOCK_RULE, f"{path}: {kind_of(path)}")
    os.set_blocking(fd, True)
    return fd


def kind_of(path: Path | str) -> str:
    """What is at ``path`` (not followed if a link), in words, for an error."""
    mode = os.lstat(path).st_mode
    for test, word in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISDIR, "a folder"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return word
    return "not a regular file"


@contextlib.contextmanager
def file_lock(path: Path | str, parameter: str = "ZOFORGE_CACHE"):
    """Hold an exclusive lock on ``path`` (a file beside what parallel processes share); a
    ``path`` that is not a regular file is a one-line error naming ``parameter`` (the
    setting that chose the folder), never a hang or a write through a link."""
    fd = _open_lock(Path(path), parameter)
    with os.fdopen(fd, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def locked(entry: Path | str):
    """Hold the lock of a cache entry, so parallel runs of the same job wait for one
    another instead of both running it in the same folder."""
    return file_lock(Path(entry) / ".lock")
