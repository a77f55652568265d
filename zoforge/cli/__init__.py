"""The ``zoforge`` command line.

Each module in this package registers its own commands: it defines
``register(tree: CommandTree)`` and is discovered automatically, so adding a command never
touches another area's file. A handler takes the parsed ``argparse.Namespace`` and returns an
exit code. :class:`~zoforge.errors.ConfigError` raised anywhere below a handler is printed as
one line (``zoforge: error: ...``) with exit code 2; so are argparse's own errors (an unknown
option, ``abc`` for a number: ``zoforge: error: argument --rows: invalid int value: 'abc'``,
raised as ``SystemExit(2)`` like ``--help``'s ``SystemExit(0)``), without the usage text,
which ``--help`` shows.

Command modules import the work they do (hardware, simulation, torch) inside their handlers,
so that ``zoforge --help`` and every ``--help`` stay fast; that is why the imports sit there.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Callable

from zoforge import __version__
from zoforge.errors import ConfigError

__all__ = ["CommandTree", "ArgumentParser", "main", "build_parser"]

Handler = Callable[[argparse.Namespace], int]

class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser with its errors on one line: ``zoforge: error: MESSAGE``, exit 2.

    Sub-command parsers are of the same class (argparse gives them their parent's)."""

    def error(self, message: str):
        message = " ".join(message.split())
        command = self.prog.removeprefix("zoforge").strip()
        hint = f" (see zoforge {command + ' ' if command else ''}--help)"
        self.exit(2, f"zoforge: error: {message}{hint}\n")


# Command groups with sub-commands contributed by several areas, and their help.
GROUPS = {
    "rng": "inspect the PeZO random-number generators' golden streams",
}


class CommandTree:
    """Where command modules add their commands."""

    def __init__(self, parser: argparse.ArgumentParser):
        self._commands = parser.add_subparsers(dest="command", metavar="COMMAND")
        self._commands.required = True
        self._groups: dict[str, argparse.Action] = {}   # sub-parser actions

    def command(self, name: str, help: str, **kwargs) -> argparse.ArgumentParser:
        """A top-level command ``zoforge NAME``; set ``func`` with ``set_defaults``."""
        return self._commands.add_parser(name, help=help, description=help, **kwargs)

    def subcommand(self, group: str, name: str, help: str, **kwargs) -> argparse.ArgumentParser:
        """A sub-command ``zoforge GROUP NAME`` of one of :data:`GROUPS`."""
        if group not in self._groups:
            parser = self._commands.add_parser(group, help=GROUPS[group], description=GROUPS[group])
            sub = parser.add_subparsers(dest=f"{group}_command", metavar="WHAT")
            sub.required = True
            self._groups[group] = sub
        return self._groups[group].add_parser(name, help=help, description=help, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="zoforge",
        description="Zeroth-order fine-tuning to FPGA hardware: generate, co-simulate, "
                    "train and report.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--version", action="version", version=f"zoforge {__version__}")
    tree = CommandTree(parser)
    for module in _command_modules():
        module.register(tree)
    return parser


def _command_modules():
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
        if not info.name.startswith("_"):
            yield importlib.import_module(f"{__name__}.{info.name}")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ConfigError as error:       # a field shown as its flag (one place: _flags)
        from zoforge.cli._flags import as_flag
        print(f"zoforge: error: {as_flag(error, parser, args)}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `zoforge rng dump ... | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("zoforge: interrupted", file=sys.stderr)
        return 130
