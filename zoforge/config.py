"""Typed, frozen configurations: the value a design, a golden model or a run is a function of.

A configuration is a frozen dataclass deriving from :class:`Config` whose fields are declared
with :func:`param`: a default, a one-line help text and a check (:class:`IntRange`,
:class:`Mersenne`, :class:`OneOf`, :class:`FloatRange`, :class:`NonBlank`, or none for
booleans). A field's type is int, float, bool or str, or one of them ``| None`` (then
``None`` is allowed and not checked). Constructing a configuration validates it; an invalid
value raises the one-line :class:`~zoforge.errors.ConfigError` naming the field
(``n_rng must be of the form 2^k - 1 ...``; the command line shows it as its flag,
``--n-rng``). Cross-field rules go in :meth:`Config.check`. Configurations are frozen:
:meth:`Config.replace` (``dataclasses.replace``) makes a changed, validated copy.

Every configuration

* round-trips exactly through a dict, JSON and TOML (:meth:`Config.to_dict`,
  :func:`config_from_dict`, :func:`dump_config`, :func:`load_config`); the dict names the
  configuration's ``kind`` (the design, e.g. ``"rng"``) and, where a kind has variants, the
  variant under the kind's tag field (e.g. ``strategy = "onthefly"``);
* reads strictly: an unknown key (with a "did you mean"), a value of the wrong type (``"no"``
  for a boolean, ``1.5`` or ``true`` for an integer; an integer is a fine float) or an
  out-of-range value is a one-line error naming the key and the file;
* has a stable hash (:meth:`Config.stable_hash`) of its canonical JSON, the key of caches and
  result stores.

The one strict reader of configuration files, for every kind of configuration (designs,
trainings, sweeps), is :func:`read_table` (:mod:`zoforge.inputs`, the guarded input path); the one hash recipe is
:func:`zoforge.files.content_key`, applied to canonical JSON by :func:`data_hash`.

Command-line flags are generated from the fields by :mod:`zoforge.cli._options`.
"""
from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import math
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import tomli_w

from zoforge.errors import ConfigError
from zoforge.files import atomic_write_text, content_key
from zoforge.inputs import MAX_FILE_BYTES, read_table

__all__ = ["Config", "param", "IntRange", "Mersenne", "OneOf", "FloatRange", "NonBlank",
           "flag_name", "config_text", "config_from_dict", "config_type_of", "load_config",
           "dump_config", "read_table", "unknown_key", "field_of", "canonical_json",
           "data_hash", "SCHEMA_VERSION", "MAX_FILE_BYTES"]

#: Version of the serialised form; a file names it as ``zoforge_config``.
SCHEMA_VERSION = 1
_VERSION_KEY = "zoforge_config"
_KIND_KEY = "kind"


def flag_name(field: str) -> str:
    """The command-line flag of a configuration field: ``n_rng`` -> ``--n-rng``."""
    return "--" + field.replace("_", "-")


def canonical_json(data: Any) -> str:
    """``data`` as canonical JSON: sorted keys, no spaces, finite numbers only."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)


def data_hash(data: Any) -> str:
    """The stable hash of JSON data: :func:`~zoforge.files.content_key` of its canonical
    JSON (equal data, equal hashes, across processes and versions of Python)."""
    return content_key(canonical_json(data))


def unknown_key(key: str, allowed, where: str = "", note: str = "") -> ConfigError:
    """The error for a key that is not one of ``allowed`` (with the closest as a guess)."""
    allowed = list(allowed)
    guess = difflib.get_close_matches(str(key).rpartition(".")[2], allowed, n=1)
    hint = f"; did you mean {guess[0]}?" if guess else ""
    return ConfigError(f"key {key!r}{where}", "one of " + ", ".join(allowed) + note + hint)


# -- checks -------------------------------------------------------------------------------

class Check:
    """A field's allowed values; ``allowed`` is the text of the one-line error."""

    allowed = "any value"

    def __call__(self, name: str, value: Any) -> None:
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

    def __call__(self, name, value):
        if not self.low <= value <= (math.inf if self.high is None else self.high):
            raise ConfigError(name, self.allowed, value)


@dataclasses.dataclass(frozen=True)
class Mersenne(Check):
    """``2^k - 1`` within ``[low, high]``."""
    low: int
    high: int

    @property
    def allowed(self) -> str:
        return f"of the form 2^k - 1 with {self.low} <= value <= {self.high}"

    def __call__(self, name, value):
        if not self.low <= value <= self.high or (value + 1) & value:
            raise ConfigError(name, self.allowed, value)


@dataclasses.dataclass(frozen=True)
class OneOf(Check):
    choices: tuple

    @property
    def allowed(self) -> str:
        return "one of " + ", ".join(map(str, self.choices))

    def __call__(self, name, value):
        if value not in self.choices:
            raise ConfigError(name, self.allowed, value)


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

    def __call__(self, name, value):
        bad_low = value <= self.low if self.low_open else value < self.low
        bad_high = value >= self.high if self.high_open else value > self.high
        if not math.isfinite(value) or bad_low or bad_high:
            raise ConfigError(name, self.allowed, value)


@dataclasses.dataclass(frozen=True)
class NonBlank(Check):
    """A string with something besides white space (``what``: e.g. "a path")."""
    what: str = "a string"

    @property
    def allowed(self) -> str:
        return f"{self.what} (not empty)"

    def __call__(self, name, value):
        if not value.strip():
            raise ConfigError(name, self.allowed, repr(value))


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
        nullable = self.nullable_fields()
        for field, kind in self.field_types().items():
            value = getattr(self, field.name)
            if value is None and field.name in nullable:
                continue
            _check_type(field.name, value, kind, field.name in nullable)
            if field.metadata.get("check") is not None:
                field.metadata["check"](field.name, value)
        self.check()

    def check(self) -> None:
        """Cross-field rules (raise :class:`ConfigError` naming a field); none by default."""

    @classmethod
    def field_types(cls) -> dict[dataclasses.Field, type]:
        """Each field and its Python type (int, float, bool or str; ``int`` for
        ``int | None``)."""
        return {field: kind for field, (kind, _) in _field_kinds(cls).items()}

    @classmethod
    def nullable_fields(cls) -> frozenset[str]:
        """The fields that may be ``None`` (typed ``X | None``)."""
        return frozenset(f.name for f, (_, nullable) in _field_kinds(cls).items() if nullable)

    def field_values(self) -> dict:
        """``{field: value}`` of every field (no kind or tag)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

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
        return canonical_json({_VERSION_KEY: SCHEMA_VERSION, **self.to_dict()})

    def stable_hash(self) -> str:
        """:func:`data_hash` of the configuration (with the schema version): equal
        configurations, equal hashes, across processes and versions of Python."""
        return data_hash({_VERSION_KEY: SCHEMA_VERSION, **self.to_dict()})

    @classmethod
    def from_dict(cls, values: dict, source: str = "") -> "Config":
        """Strictly typed construction from a dict of field values (no kind or tag keys);
        errors name the key and ``source`` (a file): ``n_rng in FILE``."""
        where = f" in {source}" if source else ""
        cls.check_keys(values, where)
        try:
            return cls(**values)
        except ConfigError as error:
            raise error.renamed(f"{field_of(error)}{where}") from None

    @classmethod
    def check_keys(cls, values: dict, where: str = "") -> None:
        """Refuse a key of ``values`` that is not a field (``where``: `` in FILE``)."""
        fields = [f.name for f in dataclasses.fields(cls)]
        for key in values:
            if key not in fields:
                raise unknown_key(key, fields, where, _variant_note(cls))


def field_of(error: ConfigError) -> str:
    """The field an error names (``n_rng``; also from the flag form ``--n-rng`` that some
    checks outside this module still raise)."""
    parameter = error.parameter
    if parameter.startswith("--"):
        return parameter[2:].replace("-", "_")
    return parameter


def _variant_note(cls) -> str:
    return f" (for {cls.tag} {cls.variant})" if cls.tag else ""


@functools.cache
def _field_kinds(cls) -> dict[dataclasses.Field, tuple[type, bool]]:
    """Each field, its Python type and whether it may be None (once per class)."""
    hints = typing.get_type_hints(cls)
    out = {}
    for field in dataclasses.fields(cls):
        kind, nullable = hints[field.name], False
        if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
            rest = [k for k in typing.get_args(kind) if k is not type(None)]
            kind, nullable = (rest[0] if len(rest) == 1 else kind), True
        if kind not in _TYPES.values():
            raise TypeError(f"{cls.__name__}.{field.name}: configuration fields are "
                            f"int, float, bool or str (or one | None), not {hints[field.name]}")
        out[field] = (kind, nullable)
    return out


def _check_type(name: str, value: Any, kind: type, nullable: bool = False) -> None:
    if kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, kind)
    if not ok:
        text = {int: "an integer", float: "a number", bool: "true or false",
                str: "a string"}[kind] + (" (or null)" if nullable else "")
        raise ConfigError(name, text, f"{value!r} of type {type(value).__name__}")


# -- kinds, variants and files ------------------------------------------------------------

def config_from_dict(values: dict, types: Sequence[type[Config]], source: str = "") -> Config:
    """The configuration ``values`` describes, one of ``types`` (variants of one kind, or
    several kinds): ``kind`` and the tag pick the type; the remaining keys are its fields."""
    config_type, fields = config_type_of(values, types, source)
    return config_type.from_dict(fields, source)


def config_type_of(values: dict, types: Sequence[type[Config]], source: str = ""
                   ) -> tuple[type[Config], dict]:
    """The type of ``types`` that ``values`` describes (its version, ``kind`` and tag keys
    checked) and the remaining keys, its fields (not yet checked)."""
    where = f" in {source}" if source else ""
    if not isinstance(values, dict):
        raise ConfigError(f"the top level{where}", "a table of keys and values",
                          type(values).__name__)
    values = dict(values)
    version = values.pop(_VERSION_KEY, SCHEMA_VERSION)
    if type(version) is not int or version != SCHEMA_VERSION:     # not true, not 1.0
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
    return candidates[0], values


def dump_config(config: Config, path: Path | str) -> Path:
    """Write ``config`` to ``path`` as TOML (``.toml``) or JSON (any other suffix),
    atomically; :func:`load_config` reads it back to an equal configuration."""
    path = Path(path)
    atomic_write_text(path, config_text(config, path.suffix))
    return path


def config_text(config: Config, suffix: str = ".toml") -> str:
    values = {_VERSION_KEY: SCHEMA_VERSION, **config.to_dict()}
    if suffix == ".toml":
        # TOML has no null: a None field whose default is None is left out (read back as it)
        defaults = {field.name: field.default for field in dataclasses.fields(config)}
        return tomli_w.dumps({key: value for key, value in values.items()
                              if value is not None or defaults.get(key, 0) is not None})
    return json.dumps(values, indent=2) + "\n"


def load_config(path: Path | str, types: Sequence[type[Config]]) -> Config:
    """Read a TOML (``.toml``) or JSON file written by :func:`dump_config` (or by hand)."""
    return config_from_dict(read_table(path), types, source=str(path))
