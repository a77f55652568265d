"""Configuration errors that the command line prints as one line, never a traceback.

Every parameter check in zoforge raises :class:`ConfigError`, naming the parameter and the
allowed values. Library code names a configuration field (``n_rng``) or a key where it was
written (``grid.n_rng in SWEEP.toml``); the command line shows a field that is one of its
options as the flag (:mod:`zoforge.cli._flags`)::

    zoforge: error: --n-rng must be of the form 2^k - 1 with 3 <= value <= 255 (got 8)

The message is one line whatever it echoes: control characters (newlines, terminal escapes)
in a value or a key are shown escaped (:func:`printable`).
"""
from __future__ import annotations

from collections.abc import Iterable

__all__ = ["ConfigError", "printable", "check_int_range", "check_choice", "check_mersenne",
           "os_fault", "fault_line"]


def printable(text: str) -> str:
    """``text`` with every character that is not printable (newlines, tabs, terminal
    escapes, line separators) written as its Python escape: one line, nothing forged."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class ConfigError(ValueError):
    """An invalid parameter. ``str(error)`` is the complete one-line message (the
    attributes keep the raw values; :meth:`renamed` makes the same error with another
    parameter name)."""

    def __init__(self, parameter: str, allowed: str, got: object = None):
        self.parameter = parameter
        self.allowed = allowed
        self.got = got
        message = f"{parameter} must be {allowed}"
        if got is not None:
            message += f" (got {got})"
        super().__init__(printable(message))

    def __reduce__(self):
        """Pickled by its fields (the message alone cannot rebuild it): an error raised in a
        worker process crosses back to the coordinator as itself."""
        return type(self), (self.parameter, self.allowed, self.got)

    def renamed(self, parameter: str) -> "ConfigError":
        """This error naming ``parameter`` instead (a flag, or a key where it was written)."""
        return ConfigError(parameter, self.allowed, self.got)


def os_fault(parameter: str, path: object, error: OSError,
             allowed: str = "a folder where zoforge can write") -> ConfigError:
    """The one-line error for a failed write (no space left, a read-only file system, no
    permission): ``PARAMETER must be ALLOWED (got PATH: No space left on device)``."""
    return ConfigError(parameter, allowed, f"{path}: {error.strerror or error}")


def fault_line(error: BaseException) -> str:
    """One escaped line for an operating-system fault that no check turned into a
    :class:`ConfigError` (the command line's last resort): ``PATH: REASON``."""
    reason = getattr(error, "strerror", None) or str(error) or type(error).__name__
    where = getattr(error, "filename", None)
    return printable(f"{where}: {reason}" if where is not None else reason)


def check_int_range(parameter: str, value: object, low: int, high: int | None = None) -> int:
    """Return ``value`` if it is an int in ``[low, high]`` (``high`` None: unbounded)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(parameter, _range_text(low, high), value)
    if value < low or (high is not None and value > high):
        raise ConfigError(parameter, _range_text(low, high), value)
    return value


def check_choice(parameter: str, value: object, choices: Iterable[object]) -> object:
    """Return ``value`` if it is one of ``choices``."""
    choices = list(choices)
    if value not in choices:
        raise ConfigError(parameter, "one of " + ", ".join(map(str, choices)), value)
    return value


def check_mersenne(parameter: str, value: object, low: int, high: int) -> int:
    """Return ``value`` if it is of the form 2^k - 1 and within ``[low, high]``."""
    allowed = f"of the form 2^k - 1 with {low} <= value <= {high}"
    if (isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high
            or (value + 1) & value):
        raise ConfigError(parameter, allowed, value)
    return value


def _range_text(low: int, high: int | None) -> str:
    if high is None:
        return f"an integer >= {low}"
    return f"an integer with {low} <= value <= {high}"
