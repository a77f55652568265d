"""The ``zoforge`` command line.

:data:`COMMANDS` is the one table of commands: each name with its one-line help and the
modules of this package that register it. Such a module defines
``register(tree: CommandTree)``, which adds the command's arguments and its handler; it is
imported only when its command is used, so ``zoforge --help`` imports none of them. A handler
takes the parsed ``argparse.Namespace`` and returns an exit code.
:class:`~zoforge.errors.ConfigError` raised anywhere below a handler is printed as one line
(``zoforge: error: ...``, every character that is not printable escaped: the one place
nothing raw from an input reaches the terminal) with exit code 2, and so is an operating
system's fault that no check turned into one (``PATH: No space left on device``); so are argparse's own errors (an unknown option,
``abc`` for a number: ``zoforge: error: argument --rows: invalid int value: 'abc'``, raised
as ``SystemExit(2)`` like ``--help``'s ``SystemExit(0)``), without the usage text, which
``--help`` shows.

Command modules import the work they do (hardware, simulation, torch) inside their handlers,
so that ``zoforge --help`` and every ``--help`` stay fast; that is why the imports sit there.
Flags whose types are costly to import (one design's configuration) are added with
:meth:`ArgumentParser.defer`, only when their parser is used (``zoforge cosim rng ...``).
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import signal
import sys
import threading
from collections.abc import Callable
from typing import NamedTuple

from zoforge import __version__
from zoforge.errors import ConfigError, fault_line, printable

__all__ = ["COMMANDS", "Command", "CommandTree", "ArgumentParser", "main", "build_parser"]

Handler = Callable[[argparse.Namespace], int]

class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser with its errors on one line: ``zoforge: error: MESSAGE``, exit 2.
    A flag is taken only as spelled in full (no abbreviations: ``--out`` is not read as
    ``--output``, it is an unrecognized argument).

    Sub-command parsers are of the same class (argparse gives them their parent's)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self._deferred: list[Callable[[argparse.ArgumentParser], None]] = []

    def defer(self, add_arguments: Callable[[argparse.ArgumentParser], None]) -> None:
        """Call ``add_arguments(self)`` only when this parser is used (to parse, or to show
        its help), not when it is built: for arguments whose types are costly to import."""
        self._deferred.append(add_arguments)

    def complete(self) -> None:
        """Add the deferred arguments (once)."""
        deferred, self._deferred = self._deferred, []
        for add_arguments in deferred:
            add_arguments(self)

    def parse_known_args(self, args=None, namespace=None):
        if self._deferred:
            self.complete()
            # again: the deferred step may have changed the parser's class (zoforge build)
            return self.parse_known_args(args, namespace)
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self.complete()
        return super().format_help()

    def error(self, message: str):
        message = printable(" ".join(message.split()))    # an argument echoed: escaped
        command = self.prog.removeprefix("zoforge").strip()
        hint = f" (see zoforge {command + ' ' if command else ''}--help)"
        self.exit(2, f"zoforge: error: {message}{hint}\n")


class Command(NamedTuple):
    """An entry of :data:`COMMANDS`."""

    help: str                  # one line, for ``zoforge --help``
    modules: tuple[str, ...]   # the modules (``zoforge.cli.NAME``) whose register() add it


#: The commands: name -> its help and the modules that register it (a group, such as
#: ``rng``, may gather sub-commands from several). A command's module is imported, and its
#: ``register(tree)`` called, only when the command is used (parsed, or its ``--help``).
COMMANDS = {
    "build": Command("build a design for a board and report its resources, Fmax and power",
                     ("build",)),
    "cosim": Command("co-simulate a generated design against its golden model, value by "
                     "value", ("cosim",)),
    "demo": Command("fine-tune a sentiment classifier on the simulated FPGA, bit-exact "
                    "against PyTorch (--rng: the generator demo)", ("demo",)),
    "finetune": Command("fine-tune MiniLM's LoRA-FA adapters with ZO in the accelerator's "
                        "int8 arithmetic (golden, or co-simulated on the RTL)", ("finetune",)),
    "generate": Command("write Verilog, memory files and the configuration (design.toml) of "
                        "a design", ("generate",)),
    "rng": Command("inspect the PeZO random-number generators' golden streams", ("rng",)),
    "sweep": Command("design-space sweep: accuracy x area x power over generators, "
                     "bit-widths, pool sizes and training options", ("sweep",)),
    "toolchain": Command("show the simulators and synthesis tools found here",
                         ("toolchain",)),
    "train": Command("fine-tune a classifier with a zeroth-order optimizer (golden PyTorch "
                     "model)", ("train",)),
}


class CommandTree:
    """Where command modules add their commands: one parser per entry of :data:`COMMANDS`,
    filled by the command's modules when it is used."""

    def __init__(self, parser: argparse.ArgumentParser):
        commands = parser.add_subparsers(dest="command", metavar="COMMAND")
        commands.required = True
        self._parsers: dict[str, ArgumentParser] = {}
        self._groups: dict[str, argparse.Action] = {}   # sub-parser actions
        for name, command in COMMANDS.items():
            self._parsers[name] = commands.add_parser(name, help=command.help,
                                                      description=command.help)
            self._parsers[name].defer(functools.partial(self._register, command))

    def _register(self, command: Command, parser: ArgumentParser) -> None:
        for module in command.modules:
            importlib.import_module(f"{__name__}.{module}").register(self)

    def _parser(self, name: str) -> ArgumentParser:
        if name not in self._parsers:
            raise RuntimeError(f"command {name!r} is not in zoforge.cli.COMMANDS")
        return self._parsers[name]

    def command(self, name: str, help: str | None = None, **kwargs) -> ArgumentParser:
        """The parser of command ``zoforge NAME``; set ``func`` with ``set_defaults``.

        ``kwargs`` are ``ArgumentParser`` attributes (``formatter_class``, ``epilog``);
        ``help``, if given, becomes its description (the listed help is the table's)."""
        parser = self._parser(name)
        if help is not None:
            parser.description = help
        for key, value in kwargs.items():
            setattr(parser, key, value)
        return parser

    def subcommand(self, group: str, name: str, help: str, **kwargs) -> ArgumentParser:
        """A sub-command ``zoforge GROUP NAME`` of the group command ``GROUP``."""
        if group not in self._groups:
            sub = self._parser(group).add_subparsers(dest=f"{group}_command", metavar="WHAT")
            sub.required = True
            self._groups[group] = sub
        return self._groups[group].add_parser(name, help=help, description=help, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    """The ``zoforge`` parser (each command's arguments are added when it is used)."""
    parser = ArgumentParser(
        prog="zoforge",
        description="Zeroth-order fine-tuning to FPGA hardware: generate, co-simulate, "
                    "train and report.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--version", action="version", version=f"zoforge {__version__}")
    CommandTree(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    if sys.stdout is None:    # started with standard output closed: every command prints
        if sys.stderr is not None:
            print("zoforge: error: standard output must be open (it is closed; redirect it, "
                  "e.g. > FILE or > /dev/null)", file=sys.stderr)
        return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    with _sigterm_interrupts():
        return _run(parser, args)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, so that it stops as on Ctrl-C: what is
    finished is kept, workers are stopped, running work is handed back."""


@contextlib.contextmanager
def _sigterm_interrupts():
    """SIGTERM raises :class:`Terminated` while a command runs (the main thread only: a
    handler cannot be set elsewhere)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminated(signum, frame):
        raise Terminated()
    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run(parser, args) -> int:
    try:
        return int(args.func(args) or 0)
    except ConfigError as error:       # a field shown as its flag (one place: _flags)
        from zoforge.cli._flags import as_flag
        print(f"zoforge: error: {printable(str(as_flag(error, parser, args)))}",
              file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `zoforge rng dump ... | head`
        sys.stderr.close()
        return 0
    except OSError as error:  # a fault no check named (a full disk, a read-only folder)
        print(f"zoforge: error: {fault_line(error)}", file=sys.stderr)
        return 2
    except Terminated:
        print("zoforge: terminated (SIGTERM)", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("zoforge: interrupted", file=sys.stderr)
        return 130
