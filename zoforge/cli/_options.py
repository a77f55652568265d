"""Command-line flags generated from configuration types (:mod:`zoforge.config`).

:func:`add_config_flags` adds one flag per field of a configuration type (the union over a
kind's variants, plus the tag, e.g. ``--strategy``); :func:`config_from_args` builds the
configuration from the flags the user gave, on top of an optional ``--config FILE``. Flags
carry no argparse defaults, so the configuration type stays the one source of defaults and
checks, and a flag that does not apply to the chosen variant is an error instead of being
ignored.
"""
from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence

from zoforge.config import Config, config_from_dict, flag_name, load_config
from zoforge.errors import ConfigError

__all__ = ["add_config_flags", "config_from_args", "given_fields"]


def _fields(types: Sequence[type[Config]]) -> dict[str, list[tuple[type[Config], object, type]]]:
    """Field name -> [(type, field, python type)] over ``types``, in declaration order."""
    out: dict[str, list] = {}
    for config_type in types:
        for field, kind in config_type.field_types().items():
            out.setdefault(field.name, []).append((config_type, field, kind))
    return out


def _default_text(owners) -> str:
    defaults = {owner.variant: field.default for owner, field, _ in owners}
    if len(set(map(repr, defaults.values()))) == 1 or None in defaults:
        return f"default {next(iter(defaults.values()))}"
    return "default " + ", ".join(f"{value} ({variant})" for variant, value in defaults.items())


def add_config_flags(parser, types: Sequence[type[Config]], *, config_file: bool = True) -> None:
    """Flags for the fields of ``types`` (variants of one kind: the tag flag picks one).

    ``config_file``: also add ``--config FILE`` (a saved configuration; flags override it).
    """
    tagged = types[0].tag
    if config_file:
        parser.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS,
                            help=f"a saved {types[0].kind} configuration (TOML or JSON, as "
                                 "written by `zoforge generate`); flags override its values")
    if tagged:
        variants = [t.variant for t in types]
        parser.add_argument(flag_name(tagged), metavar="{" + ",".join(variants) + "}",
                            default=argparse.SUPPRESS,
                            help=f"{types[0].kind} variant (default {variants[0]})")
    for name, owners in _fields(types).items():
        kind = owners[0][2]
        texts = {}
        for owner, field, _ in owners:
            check = field.metadata.get("check")
            texts.setdefault(field.metadata["help"] + (f"; {check.allowed}" if check else ""),
                             []).append(owner.variant)
        if len(texts) == 1:
            text = next(iter(texts))
            if tagged and len(owners) < len(types):
                text += " [" + ", ".join(owner.variant for owner, _, _ in owners) + "]"
        else:
            text = " | ".join(f"{'/'.join(variants)}: {help_text}"
                              for help_text, variants in texts.items())
        text += f" ({_default_text(owners)})"
        text = text.replace("%", "%%")
        if kind is bool:
            parser.add_argument(flag_name(name), action=argparse.BooleanOptionalAction,
                                default=argparse.SUPPRESS, help=text)
        else:
            parser.add_argument(flag_name(name), type=kind, default=argparse.SUPPRESS,
                                help=text, metavar=name.upper())


def given_fields(args: argparse.Namespace, types: Sequence[type[Config]]) -> dict:
    """The configuration fields (and the tag) that were given as flags."""
    names = set(_fields(types)) | ({types[0].tag} if types[0].tag else set())
    return {k: v for k, v in vars(args).items() if k in names}


def config_from_args(args: argparse.Namespace, types: Sequence[type[Config]],
                     use_file: bool = True) -> Config:
    """The configuration from ``--config FILE`` (if given and ``use_file``) overridden by
    the given flags.

    Errors name the field of a value given as a flag (the command line shows it as the
    flag, :mod:`zoforge.cli._flags`), and the key and file of a value read from the file.
    """
    base: dict = {}
    source = getattr(args, "config", None) if use_file else None
    if source is not None:
        base = load_config(source, types).to_dict()
        base.pop("kind", None)
    flags = given_fields(args, types)
    tag = types[0].tag
    values = dict(base, **flags)
    if tag:
        variants = {t.variant: t for t in types}
        variant = values.get(tag, types[0].variant)
        if variant not in variants:
            raise ConfigError(tag, "one of " + ", ".join(variants), variant)
        if flags.get(tag, variant) != base.get(tag, variant):
            # another variant than the file's: keep only the fields it shares with the file's
            shared = {f.name for f in dataclasses.fields(variants[variant])}
            values = {k: v for k, v in values.items() if k in shared or k == tag}
        chosen = variants[variant]
        names = {f.name for f in dataclasses.fields(chosen)}
        for name in flags:
            if name != tag and name not in names:
                users = [t.variant for t in types
                         if name in {f.name for f in dataclasses.fields(t)}]
                raise ConfigError(name, "used only with " + " or ".join(
                    f"{flag_name(tag)} {u}" for u in users), f"{flag_name(tag)} {variant}")
    try:
        return config_from_dict(values, types)
    except ConfigError as error:      # a field: main() shows it as its flag (cli/_flags.py)
        field = error.parameter
        if source is not None and field in base and field not in flags:
            raise ConfigError(f"{field} in {source}", error.allowed, error.got) from None
        raise
