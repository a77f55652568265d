"""Output folders (``--out``): checked before any work, written without following links.

* :func:`check_out_dir` validates an output folder given on the command line before any
  work starts: not an empty string, not an existing file, and either an existing writable
  folder or one that can be created (its nearest existing ancestor is a writable folder).
  Writability is tested by creating and removing a temporary file there, because
  permission bits say nothing for root or a read-only file system. It creates nothing.
* :func:`make_out_dir` creates the folder (a one-line error if that fails; no probe).
* :func:`check_targets` refuses output files that are symbolic links (or folders), and
  symbolic links among the folders between the output folder and a file: zoforge never
  writes through a link inside ``--out`` (a link there could point anywhere).
* :func:`write_text` and :func:`output_path` write a file so that readers see the old file
  or the complete new one: the new content goes to a temporary file created beside it with
  ``O_EXCL | O_NOFOLLOW`` (never an existing file or link) and is renamed over the target,
  which replaces a link itself, never what it points to; a link at the target is refused
  (:func:`zoforge.files.atomic_path` with the link checks around it).

Errors are :class:`~zoforge.errors.ConfigError` naming the flag (``--out`` by default).
"""
from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from zoforge.errors import ConfigError
from zoforge.files import atomic_path

__all__ = ["check_out_dir", "make_out_dir", "check_targets", "write_text", "output_path"]

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
    if not _writable(existing):
        raise ConfigError(flag, "a writable folder" + ("" if existing == path else
                          f" (cannot create folders in {existing})"), path)
    return path


def _writable(folder: Path) -> bool:
    probe = folder / f".zoforge-probe-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError:
        return False
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return True


def make_out_dir(flag: str, path: str | os.PathLike) -> Path:
    """Create the output folder ``path`` (and its parents); a one-line error if that fails."""
    if not str(os.fspath(path)).strip():
        raise ConfigError(flag, "a folder path (not empty; use . for the current folder)",
                          repr(os.fspath(path)))
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError(flag, "a folder that can be created",
                          f"{path}: {error.strerror or error}") from None
    return path


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
    with atomic_path(path) as tmp:
        yield tmp
        check_targets(root, [path], flag)


def write_text(path: str | os.PathLike, text: str, root: str | os.PathLike | None = None,
               flag: str = "--out") -> Path:
    """Write ``text`` to ``path`` atomically, never through a symbolic link (see
    :func:`output_path`)."""
    with output_path(path, root, flag) as tmp:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
    return Path(path)
