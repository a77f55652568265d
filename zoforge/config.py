"""Typed, frozen configurations: the value a design, a golden model or a run is a function of.

A configuration is a frozen dataclass deriving from :class:`Config` whose fields are declared
with :func:`param`: a default, a one-line help text and a check (:class:`IntRange`,
:class:`Mersenne`, :class:`OneOf`, :class:`FloatRange`, or none for booleans). Constructing a
configuration validates it; an invalid value raises the one-line
:class:`~zoforge.errors.ConfigError` naming the parameter as a command-line flag
(``--n-rng must be of the form 2^k - 1 ...``). Cross-field rules go in :meth:`Config.check`.

Every configuration

* round-trips exactly through a dict, JSON and TOML (:meth:`Config.to_dict`,
  :func:`config_from_dict`, :func:`dump_config`, :func:`load_config`); the dict names the
  configuration's ``kind`` (the design, e.g. ``"rng"``) and, where a kind has variants, the
  variant under the kind's tag field (e.g. ``strategy = "onthefly"``);
* reads strictly: an unknown key, a value of the wrong type (``"no"`` for a boolean, ``1.5``
  for an integer) or an out-of-range value is a one-line error naming the key and the file;
* has a stable hash (:meth:`Config.stable_hash`) of its canonical JSON, the key of caches and
  result stores.

Command-line flags are generated from the fields by :mod:`zoforge.cli._options`.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import tomllib
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import tomli_w

from zoforge.errors import ConfigError
from zoforge.files import atomic_write_text

__all__ = ["Config", "param", "IntRange", "Mersenne", "OneOf", "FloatRange", "flag_name",
           "config_text",
           "config_from_dict", "load_config", "dump_config", "SCHEMA_VERSION"]

#: Version of the serialised form; a file names it as ``zoforge_config``.
SCHEMA_VERSION = 1
_VERSION_KEY = "zoforge_config"
_KIND_KEY = "kind"


def flag_name(field: str) -> str:
    """The command-line flag of a configuration field: ``n_rng`` -> ``--n-rng``."""
    return "--" + field.replace("_", "-")


# -- checks -------------------------------------------------------------------------------

class Check:
    """A field's allowed values; ``allowed`` is the text of the one-line error."""

    allowed = "any value"

    def __call__(self, flag: str, value: Any) -> None:
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class IntRange(Check):
    low: int
    high: int | None = None

    @property
    def allowed(self) -> str:
        if self.high is None:
            return f"an integer >= {self.low}"
        return f"an integer with {self.low} <= value <= {self.high}"

    def __call__(self, flag, value):
        if not self.low <= value <= (math.inf if self.high is None else self.high):
            raise ConfigError(flag, self.allowed, value)


@dataclasses.dataclass(frozen=True)
class Mersenne(Check):
    """``2^k - 1`` within ``[low, high]``."""
    low: int
    high: int

    @property
    def allowed(self) -> str:
        return f"of the form 2^k - 1 with {self.low} <= value <= {self.high}"

    def __call__(self, flag, value):
        if not self.low <= value <= self.high or (value + 1) & value:
            raise ConfigError(flag, self.allowed, value)


@dataclasses.dataclass(frozen=True)
class OneOf(Check):
    choices: tuple

    @property
    def allowed(self) -> str:
        return "one of " + ", ".join(map(str, self.choices))

    def __call__(self, flag, value):
        if value not in self.choices:
            raise ConfigError(flag, self.allowed, value)


@dataclasses.dataclass(frozen=True)
class FloatRange(Check):
    """A finite number in ``[low, high]`` (``low_open``: ``> low``; ``high_open``: ``< high``)."""
    low: float
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False

    @property
    def allowed(self) -> str:
        text = f"a finite number with {self.low:g} {'<' if self.low_open else '<='} value"
        if math.isfinite(self.high):
            text += f" {'<' if self.high_open else '<='} {self.high:g}"
        return text

    def __call__(self, flag, value):
        bad_low = value <= self.low if self.low_open else value < self.low
        bad_high = value >= self.high if self.high_open else value > self.high
        if not math.isfinite(value) or bad_low or bad_high:
            raise ConfigError(flag, self.allowed, value)


def param(default: Any, help: str, check: Check | None = None, kw_only: bool = False) -> Any:
    """A configuration field: its default, a one-line help text and its allowed values
    (``kw_only``: keyword-only in the constructor, for fields a base class shares)."""
    return dataclasses.field(default=default, kw_only=kw_only,
                             metadata={"help": help, "check": check})


# -- the base class -----------------------------------------------------------------------

_TYPES = {"int": int, "float": float, "bool": bool, "str": str}


@dataclasses.dataclass(frozen=True)
class Config:
    """Base of every configuration (see the module docstring).

    Class attributes of a subclass: ``kind`` (the design or record it configures),
    ``variant`` and ``tag`` where a kind has several variants (``tag`` is the key that names
    the variant in files and on the command line, e.g. ``"strategy"``).
    """

    kind: ClassVar[str] = ""
    variant: ClassVar[str | None] = None
    tag: ClassVar[str | None] = None

    def __post_init__(self):
        for field, kind in self.field_types().items():
            value = getattr(self, field.name)
            flag = flag_name(field.name)
            _check_type(flag, value, kind)
            if field.metadata.get("check") is not None:
                field.metadata["check"](flag, value)
        self.check()

    def check(self) -> None:
        """Cross-field rules (raise :class:`ConfigError` naming a flag); none by default."""

    @classmethod
    def field_types(cls) -> dict[dataclasses.Field, type]:
        """Each field and its Python type (int, float, bool or str)."""
        hints = typing.get_type_hints(cls)
        out = {}
        for field in dataclasses.fields(cls):
            kind = hints[field.name]
            if kind not in _TYPES.values():
                raise TypeError(f"{cls.__name__}.{field.name}: configuration fields are "
                                f"int, float, bool or str, not {kind}")
            out[field] = kind
        return out

    def to_dict(self) -> dict:
        """``{kind, [tag: variant], field: value, ...}`` (plain JSON/TOML values)."""
        out: dict[str, Any] = {_KIND_KEY: self.kind}
        if self.tag:
            out[self.tag] = self.variant
        fields = sorted(dataclasses.fields(self), key=lambda f: f.kw_only)   # shared last
        out.update((f.name, getattr(self, f.name)) for f in fields)
        return out

    def replace(self, **changes) -> "Config":
        """A copy with ``changes`` applied (validated like a new configuration)."""
        return dataclasses.replace(self, **changes)

    def canonical_json(self) -> str:
        return json.dumps({_VERSION_KEY: SCHEMA_VERSION, **self.to_dict()}, sort_keys=True,
                          separators=(",", ":"))

    def stable_hash(self, length: int = 16) -> str:
        """Hex digest of the canonical JSON: equal configurations, equal hashes, across
        processes and versions of Python."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()[:length]

    @classmethod
    def from_dict(cls, values: dict, source: str = "") -> "Config":
        """Strictly typed construction from a dict of field values (no kind or tag keys);
        errors name the key (and ``source``, a file) instead of the flag."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        where = f" in {source}" if source else ""
        for key in values:
            if key not in fields:
                raise ConfigError(f"key {key!r}{where}", "one of " + ", ".join(fields)
                                  + _variant_note(cls), None)
        try:
            return cls(**values)
        except ConfigError as error:
            raise _renamed(error, where) from None


def _variant_note(cls) -> str:
    return f" (for {cls.tag} {cls.variant})" if cls.tag else ""


def _renamed(error: ConfigError, where: str) -> ConfigError:
    """The error with its flag (``--n-rng``) named as a key (``n_rng in FILE``)."""
    parameter = error.parameter
    if parameter.startswith("--"):
        parameter = parameter[2:].replace("-", "_")
    return ConfigError(f"{parameter}{where}", error.allowed, error.got)


def _check_type(flag: str, value: Any, kind: type) -> None:
    if kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, kind)
    if not ok:
        text = {int: "an integer", float: "a number", bool: "true or false",
                str: "a string"}[kind]
        raise ConfigError(flag, text, f"{value!r} of type {type(value).__name__}")


# -- kinds, variants and files ------------------------------------------------------------

def config_from_dict(values: dict, types: Sequence[type[Config]], source: str = "") -> Config:
    """The configuration ``values`` describes, one of ``types`` (variants of one kind, or
    several kinds): ``kind`` and the tag pick the type; the remaining keys are its fields."""
    where = f" in {source}" if source else ""
    if not isinstance(values, dict):
        raise ConfigError(f"configuration{where}", "a table of keys and values",
                          type(values).__name__)
    values = dict(values)
    version = values.pop(_VERSION_KEY, SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise ConfigError(f"{_VERSION_KEY}{where}", f"{SCHEMA_VERSION} (this zoforge's "
                          "configuration format)", version)
    kinds = sorted({t.kind for t in types})
    kind = values.pop(_KIND_KEY, kinds[0] if len(kinds) == 1 else None)
    candidates = [t for t in types if t.kind == kind]
    if not candidates:
        raise ConfigError(f"{_KIND_KEY}{where}", "one of " + ", ".join(kinds), kind)
    tag = candidates[0].tag
    if tag:
        variants = [t.variant for t in candidates]
        variant = values.pop(tag, variants[0])
        candidates = [t for t in candidates if t.variant == variant]
        if not candidates:
            raise ConfigError(f"{tag}{where}", "one of " + ", ".join(variants), variant)
    return candidates[0].from_dict(values, source)


def dump_config(config: Config, path: Path | str) -> Path:
    """Write ``config`` to ``path`` as TOML (``.toml``) or JSON (any other suffix),
    atomically; :func:`load_config` reads it back to an equal configuration."""
    path = Path(path)
    atomic_write_text(path, config_text(config, path.suffix))
    return path


def config_text(config: Config, suffix: str = ".toml") -> str:
    values = {_VERSION_KEY: SCHEMA_VERSION, **config.to_dict()}
    if suffix == ".toml":
        return tomli_w.dumps(values)
    return json.dumps(values, indent=2) + "\n"


def load_config(path: Path | str, types: Sequence[type[Config]]) -> Config:
    """Read a TOML (``.toml``) or JSON file written by :func:`dump_config` (or by hand)."""
    path = Path(path)
    try:
        text = path.read_text()
        values = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as error:
        kind = "TOML" if path.suffix == ".toml" else "JSON"
        raise ConfigError("--config", f"a readable {kind} file",
                          f"{path}: {str(error).splitlines()[0]}") from None
    return config_from_dict(values, types, source=str(path))
