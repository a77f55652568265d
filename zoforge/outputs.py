"""Guarded output: the one way zoforge writes what a user asked for (``--out``, ``--json``,
``--store``): checked before any work, written atomically, never through a link.

* :func:`check_out_dir` validates an output folder given on the command line before any
  work starts: not an empty string, not an existing file, and either an existing writable
  folder or one that can be created (its nearest existing ancestor is a writable folder).
  Writability is tested by creating and removing a temporary file there, because
  permission bits say nothing for root or a read-only file system. It creates nothing.
* :func:`make_out_dir` creates the folder (a one-line error if that fails; no probe).
* :func:`check_targets` refuses output files that are symbolic links (or folders), and
  symbolic links among the folders between the output folder and a file: zoforge never
  writes through a link inside ``--out`` (a link there could point anywhere).
* :func:`make_dirs` creates folders inside the output folder, refusing a symbolic link at
  any level between the output folder and the new folder (a link there could point
  anywhere).
* :func:`set_aside` renames an unusable file (a damaged checkpoint) to ``NAME.damaged``
  beside it, keeping it for inspection.
* :func:`write_text`, :func:`write_bytes` and :func:`output_path` write a file so that
  readers see the old file or the complete new one: the new content goes to a temporary
  file created beside it with ``O_EXCL | O_NOFOLLOW`` (never an existing file or link) and
  is renamed over the target, which replaces a link itself, never what it points to; a link
  at the target, or at any folder between the output folder and it, is refused
  (:func:`zoforge.files.atomic_path` with the link checks around it). A write that fails
  (no space left, a read-only file system, no permission) is one line naming the flag and
  the file, and leaves nothing under the file's name (the old file, if any, stays whole).

Errors are :class:`~zoforge.errors.ConfigError` naming the flag (``--out`` by default).
Every writer of the code base goes through this module, :mod:`zoforge.files` (caches) or
:mod:`zoforge.inputs`' counterpart for reading; ``tests/test_faults.py`` checks that no
other module writes a file itself.
"""
from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from zoforge.errors import ConfigError, os_fault
from zoforge.files import atomic_path, can_write, kind_of

__all__ = ["check_out_dir", "check_out_file", "make_out_dir", "make_dirs", "check_targets",
           "write_text", "write_bytes", "output_path", "set_aside", "MAX_NAME_BYTES"]

#: The longest file name (in bytes) a user-named output may have (Linux's NAME_MAX).
MAX_NAME_BYTES = 255

_NO_LINKS = ("a folder in which no output file (nor a folder on the way to it) is a symbolic "
             "link: zoforge never writes through one")


def check_out_dir(flag: str, value: str | os.PathLike | None) -> Path:
    """The output folder ``value`` as a Path, if it can be written (see the module
    docstring); a one-line :class:`ConfigError` naming ``flag`` otherwise."""
    text = os.fspath(value) if value is not None else ""
    if not str(text).strip():
        raise ConfigError(flag, "a folder path (not empty; use . for the current folder)",
                          repr(text))
    path = Path(text)
    for part in path.parts:             # before any look-up: the OS refuses longer names
        if len(os.fsencode(part)) > MAX_NAME_BYTES:
            raise ConfigError(flag, f"a path whose names are at most {MAX_NAME_BYTES} bytes "
                              f"each (one is {len(os.fsencode(part))})", path)
    if path.exists() and not path.is_dir():
        raise ConfigError(flag, "a folder, or a path where one can be created (this is an "
                          "existing file)", path)
    existing = path
    while not existing.exists():
        if existing.is_symlink():          # a dangling link: mkdir would fail on it
            raise ConfigError(flag, "a folder, or a path where one can be created (a "
                              "dangling symbolic link is in the way)", existing)
        parent = existing.parent
        if parent == existing:
            break
        existing = parent
    if not existing.is_dir():
        raise ConfigError(flag, "a folder, or a path where one can be created (" +
                          f"{existing} is a file)", path)
    if not can_write(existing):
        raise ConfigError(flag, "a writable folder" + ("" if existing == path else
                          f" (cannot create folders in {existing})"), path)
    return path


def check_out_file(flag: str, value: str | os.PathLike | None,
                   taken: tuple = ()) -> Path:
    """A user-named output file (``--json FILE``), before any work: a regular file or
    absent (never a device, a FIFO, a socket, a folder or a link: ``/dev/null`` is not
    replaced), a name of at most :data:`MAX_NAME_BYTES` bytes, a folder that exists or can be
    created and written (:func:`check_out_dir`), and none of the paths ``taken`` by the
    command's other outputs; a one-line :class:`ConfigError` naming ``flag`` otherwise."""
    text = os.fspath(value) if value is not None else ""
    if not str(text).strip():
        raise ConfigError(flag, "a file path (not empty)", repr(text))
    path = Path(text)
    if len(os.fsencode(path.name)) > MAX_NAME_BYTES:
        raise ConfigError(flag, f"a file name of at most {MAX_NAME_BYTES} bytes",
                          f"{len(os.fsencode(path.name))} bytes")
    check_out_dir(flag, path.parent)
    if os.path.lexists(path):
        if not stat.S_ISREG(os.lstat(path).st_mode):
            raise ConfigError(flag, "a regular file or a new one (never a device, FIFO, "
                              "folder or link)", f"{path}: {kind_of(path)}")
    resolved = path.resolve()
    for other in taken:
        if Path(other).resolve() == resolved:
            raise ConfigError(flag, "a file no other output of the command writes", path)
    return path


def make_out_dir(flag: str, path: str | os.PathLike) -> Path:
    """Create the output folder ``path`` (and its parents); a one-line error if that fails."""
    if not str(os.fspath(path)).strip():
        raise ConfigError(flag, "a folder path (not empty; use . for the current folder)",
                          repr(os.fspath(path)))
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise os_fault(flag, path, error, "a folder that can be created") from None
    if not path.is_dir():
        raise ConfigError(flag, "a folder (this is an existing file)", path)
    return path


def make_dirs(root: str | os.PathLike, folder: str | os.PathLike, flag: str = "--out"
              ) -> Path:
    """Create ``folder`` (inside the output folder ``root``, given joined to it) and the
    folders between, refusing (one line) a symbolic link or a file at any level below
    ``root``."""
    root, folder = Path(root), Path(folder)
    current = make_out_dir(flag, root)
    for part in folder.relative_to(root).parts:
        current = current / part
        try:
            os.mkdir(current)
        except FileExistsError:
            pass
        except OSError as error:
            raise os_fault(flag, current, error) from None
        if current.is_symlink():
            raise ConfigError(flag, _NO_LINKS, f"{current} -> {os.readlink(current)}")
        if not current.is_dir():
            raise ConfigError(flag, "a folder in which zoforge's folders are not files",
                              current)
    return current


def check_targets(root: str | os.PathLike, paths, flag: str = "--out") -> None:
    """Refuse (one-line error) if any of ``paths`` (files inside the output folder ``root``,
    given joined to it, e.g. ``root / "x.v"``) is a symbolic link or a folder, or a folder
    between ``root`` and it is a symbolic link."""
    root = Path(root)
    for path in paths:
        target = Path(path)
        try:
            parts, current = target.relative_to(root).parts, root
        except ValueError:                  # not inside root: only the file itself
            parts, current = (target.name,), target.parent
        for part in parts:
            current = current / part
            if current.is_symlink():
                raise ConfigError(flag, _NO_LINKS, f"{current} -> {os.readlink(current)}")
        if target.is_dir():
            raise ConfigError(flag, "a folder in which the output files are not folders",
                              target)


@contextlib.contextmanager
def output_path(path: str | os.PathLike, root: str | os.PathLike | None = None,
                flag: str = "--out"):
    """Yield a new temporary file's path beside ``path``; when the block succeeds, rename it
    to ``path`` (refusing a symbolic link there, or between ``root`` and it), else remove it.
    For writers that take a file name (``torch.save``, ``savefig``)."""
    path = Path(path)
    root = path.parent if root is None else root
    check_targets(root, [path], flag)
    with atomic_path(path, flag) as tmp:
        yield tmp
        check_targets(root, [path], flag)


def write_text(path: str | os.PathLike, text: str, root: str | os.PathLike | None = None,
               flag: str = "--out") -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically, never through a symbolic link (see
    :func:`output_path`)."""
    return write_bytes(path, text.encode("utf-8"), root, flag)


def write_bytes(path: str | os.PathLike, data: bytes, root: str | os.PathLike | None = None,
                flag: str = "--out") -> Path:
    """Write ``data`` to ``path`` atomically, never through a symbolic link (see
    :func:`output_path`)."""
    with output_path(path, root, flag) as tmp:
        with open(tmp, "wb") as handle:
            handle.write(data)
    return Path(path)


def set_aside(path: str | os.PathLike, root: str | os.PathLike | None = None,
              flag: str = "--out", suffix: str = ".damaged") -> Path:
    """Rename ``path`` to ``path`` + ``suffix`` (replacing an earlier one; a link at either
    name, or between ``root`` and them, is refused); returns the new path."""
    path = Path(path)
    target = path.with_name(path.name + suffix)
    root = path.parent if root is None else root
    check_targets(root, [path, target], flag)
    try:
        os.replace(path, target)
    except OSError as error:
        raise os_fault(flag, path, error) from None
    return target
