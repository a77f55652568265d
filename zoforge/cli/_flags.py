"""Configuration fields shown as the command line's flags: the one place they are mapped.

Library code names what is wrong by its configuration field (``n_rng must be ...``);
:func:`as_flag` shows such an error as the flag of the command that ran
(``--n-rng must be ...``), found among that command's parser actions (dest -> option
strings), so no flag is listed by hand. A parameter that is not one of the command's
options (a key in a file, ``ZOFORGE_CACHE``) or already a flag is left as it is.
"""
from __future__ import annotations

import argparse

from zoforge.errors import ConfigError

__all__ = ["as_flag", "flag_of", "command_parser", "actions"]


def actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The parser's actions, as its usage line is given them (argparse's public formatter
    hook: no private attribute is read)."""
    found: list[argparse.Action] = []

    class Collector(argparse.HelpFormatter):
        def add_usage(self, usage, actions, groups, prefix=None):
            found.extend(actions)

    shown = parser.formatter_class
    parser.formatter_class = Collector
    try:
        parser.format_usage()
    finally:
        parser.formatter_class = shown
    return found


def command_parser(parser: argparse.ArgumentParser,
                   args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub-)parser of the command ``args`` was parsed for."""
    while True:
        chosen = None
        for action in actions(parser):
            if isinstance(action.choices, dict) and not action.option_strings:
                chosen = action.choices.get(getattr(args, action.dest, None))
        if not isinstance(chosen, argparse.ArgumentParser):
            return parser
        parser = chosen


def as_flag(error: ConfigError, parser: argparse.ArgumentParser,
            args: argparse.Namespace) -> ConfigError:
    """``error`` naming the flag of its field, if the command ``args`` ran has one."""
    return flag_of(error, command_parser(parser, args))


def flag_of(error: ConfigError, parser: argparse.ArgumentParser) -> ConfigError:
    """``error`` naming the flag of its field, if ``parser`` (a command's own parser) has
    one (e.g. an error raised while that parser is still parsing)."""
    for action in actions(parser):
        if action.dest == error.parameter and action.option_strings:
            flags = [s for s in action.option_strings if s.startswith("--")]
            return error.renamed((flags or action.option_strings)[0])
    return error
