"""Guarded input: the one way zoforge opens a file it was given (configurations, data,
checkpoints, stores).

* :func:`open_regular` / :func:`read_bytes` accept a **regular file only** (after resolving
  links): a folder, a FIFO, a socket or a device is refused before it is opened, and the
  file is opened without blocking and checked again once open (a FIFO swapped in between
  cannot hang the read), refused unread if larger than its limit (:data:`MAX_DATA_BYTES`
  for data files). :func:`read_bytes` reads at most ``limit`` bytes (a larger file is
  refused before it is read: nothing reads without bound); :func:`read_text` decodes it as
  UTF-8 (one line if it is not).
* :func:`read_table` is the one strict reader of configuration files (TOML or JSON, at most
  :data:`MAX_FILE_BYTES`): it refuses, each with a one-line
  :class:`~zoforge.errors.ConfigError` naming the parameter (``--config``) and the file,
  bytes that are not UTF-8, malformed TOML or JSON, a key given twice (JSON as TOML),
  ``NaN``/``Infinity``, nesting deeper than :data:`MAX_DEPTH` tables or lists, a string (or
  a key) with a control, format or line-breaking character (a newline, a tab, a terminal
  escape, a bidi override: a value is always shown on one line) and a top level that is not
  a table.

Every message escapes what it quotes (:func:`zoforge.errors.printable`), so it is one line.
"""
from __future__ import annotations

import json
import os
import stat
import tomllib
import unicodedata
from pathlib import Path
from typing import Any, BinaryIO

from zoforge.errors import ConfigError

__all__ = ["open_regular", "read_bytes", "read_text", "read_table", "check_values",
           "MAX_FILE_BYTES", "MAX_DEPTH", "MAX_DATA_BYTES"]

#: Largest configuration file read, 1 MiB (a larger one is refused before it is read).
MAX_FILE_BYTES = 1 << 20
#: Largest data file read (``--data``, compressed or not), 1 GiB.
MAX_DATA_BYTES = 1 << 30
#: Deepest nesting of tables and lists in a configuration file (zoforge's use 2).
MAX_DEPTH = 16


def _refusal(parameter: str, what: str, path: Path):
    def refused(reason: str) -> ConfigError:
        return ConfigError(parameter, what, f"{str(path)!r}: {reason}")
    return refused


def open_regular(path: Path | str, parameter: str, what: str = "a readable regular file",
                 limit: int | None = None) -> BinaryIO:
    """``path`` opened for reading in binary, if it is a regular file (links resolved) of
    at most ``limit`` bytes (None: any size); a one-line :class:`ConfigError` naming
    ``parameter`` (``must be WHAT``) otherwise."""
    path = Path(path)
    refused = _refusal(parameter, what, path)
    try:
        before = os.stat(path)
    except (OSError, ValueError) as error:      # ValueError: a NUL byte in the path
        raise refused(getattr(error, "strerror", None) or str(error)) from None
    if not stat.S_ISREG(before.st_mode):
        raise refused("not a regular file")
    if limit is not None and before.st_size > limit:
        raise refused(f"{before.st_size} bytes, more than {_size(limit)}")
    try:    # without blocking: a FIFO swapped in after the check cannot hang the open
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as error:
        raise refused(error.strerror or type(error).__name__) from None
    handle = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        handle.close()
        raise refused("not a regular file")
    return handle


def read_bytes(path: Path | str, parameter: str, limit: int,
               what: str | None = None) -> bytes:
    """The bytes of the regular file ``path`` (see :func:`open_regular`), at most ``limit``
    of them (a larger file is refused, unread)."""
    path = Path(path)
    what = what or f"a readable regular file of at most {_size(limit)}"
    refused = _refusal(parameter, what, path)
    with open_regular(path, parameter, what, limit) as handle:
        try:
            data = handle.read(limit + 1)       # bounded, whatever the file became
        except OSError as error:
            raise refused(error.strerror or type(error).__name__) from None
    if len(data) > limit:
        raise refused(f"more than {limit} bytes")
    return data


def read_text(path: Path | str, parameter: str, limit: int, what: str | None = None) -> str:
    """The UTF-8 text of the regular file ``path`` of at most ``limit`` bytes (see
    :func:`read_bytes`); bytes that are not UTF-8 are refused (one line)."""
    what = what or f"a readable UTF-8 text file of at most {_size(limit)}"
    data = read_bytes(path, parameter, limit, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _refusal(parameter, what, Path(path))(
            f"not UTF-8 text (byte {error.start})") from None


def _size(limit: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if limit >= 1 << shift and limit % (1 << shift) == 0:
            return f"{limit >> shift} {unit}"
    return f"{limit} bytes"


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list) -> dict:
    out = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def read_table(path: Path | str, parameter: str = "config", syntax: str | None = None
               ) -> dict:
    """The table of keys and values in a TOML or JSON file (``syntax``; by default TOML for
    a ``.toml`` file, else JSON), read strictly (see the module docstring)."""
    path = Path(path)
    kind = syntax or ("TOML" if path.suffix == ".toml" else "JSON")
    what = f"a readable {kind} file of at most {_size(MAX_FILE_BYTES)}"
    refused = _refusal(parameter, what, path)
    data = read_bytes(path, parameter, MAX_FILE_BYTES, what)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise refused(f"not UTF-8 text (byte {error.start})") from None
    try:
        if kind == "TOML":
            values = tomllib.loads(text)
        else:
            values = json.loads(text, object_pairs_hook=_no_duplicates,
                                parse_constant=_no_constant)
    except _DuplicateKey as error:
        raise ConfigError(f"key {error.args[0]!r} in {path}", "given once", None) from None
    except RecursionError:
        raise refused("nested too deeply") from None
    except ValueError as error:
        raise refused(str(error).splitlines()[0] if str(error) else "malformed") from None
    if not isinstance(values, dict):
        raise ConfigError(f"the top level of {path}", "a table of keys and values",
                          type(values).__name__)
    check_values(values, f" in {path}", refused)
    return values


def _printable(text: str) -> bool:
    """No control, format or line-breaking character (spaces such as U+00A0 are fine)."""
    return all(c.isprintable() or unicodedata.category(c) == "Zs" for c in text)


def check_values(values: Any, where: str = "", refused=None) -> None:
    """Refuse nesting deeper than :data:`MAX_DEPTH` (``refused(reason)`` makes that error)
    and a string or key with a character that is not printable (the error names the key
    path and ``where``, `` in FILE``). Iterative: any depth is checked without recursion."""
    stack: list[tuple[str, Any, int]] = [("", values, 0)]
    while stack:
        name, value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth >= MAX_DEPTH:
                if refused is None:
                    raise ConfigError(f"{name or 'the top level'}{where}",
                                      f"nested at most {MAX_DEPTH} levels deep")
                raise refused(f"nested more than {MAX_DEPTH} levels deep")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str) and not _printable(key):
                    raise ConfigError(f"key {key!r}{where}", "printable characters only "
                                      "(no control characters)")
                label = f"{name}.{key}" if isinstance(key, str) and name else (
                    f"{name}[{key}]" if isinstance(key, int) else str(key))
                stack.append((label, item, depth + 1))
        elif isinstance(value, str) and not _printable(value):
            raise ConfigError(f"{name}{where}", "a string of printable characters (no "
                              "control characters: newlines, tabs, terminal escapes)",
                              repr(value))
