"""``zoforge generate``: Verilog, memory files and the configuration of any registered design.

``zoforge generate DESIGN [flags] --out DIR`` elaborates a configuration given as flags (and
optionally ``--config FILE``); ``zoforge generate --config FILE [--out DIR]`` elaborates a
saved configuration (the ``design.toml`` a previous run wrote; by default into the file's
own folder). Every registered design appears here with flags generated from its
configuration types.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from zoforge.errors import ConfigError

__all__ = ["register"]

_HELP = "write Verilog, memory files and the configuration (design.toml) of a design"


def register(tree) -> None:
    from zoforge.cli._options import add_config_flags
    from zoforge.hw.designs import designs

    parser = tree.command("generate", help=_HELP,
                          epilog="Reproduce a saved design: zoforge generate --config "
                                 "DIR/design.toml [--out DIR2]")
    parser.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS,
                        help="a saved configuration (design.toml); names its design")
    parser.add_argument("--out", type=Path, metavar="DIR", default=argparse.SUPPRESS,
                        help="output folder (with --config alone: the file's folder)")
    sub = parser.add_subparsers(dest="design", metavar="DESIGN")
    for design in designs().values():
        design_parser = sub.add_parser(design.name, help=design.help,
                                       description=design.help)
        add_config_flags(design_parser, design.configs)
        design_parser.add_argument("--out", type=Path, metavar="DIR", required=True,
                                   help="output folder")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from zoforge.cli._options import config_from_args
    from zoforge.config import load_config
    from zoforge.hw.designs import designs, get_design
    from zoforge.hw.export import write_design

    if args.design is not None:
        design = get_design(args.design)
        config = config_from_args(args, design.configs)
        out = args.out
    elif getattr(args, "config", None) is not None:
        every_type = [t for d in designs().values() for t in d.configs]
        config = load_config(args.config, every_type)
        design = get_design(config.kind)
        out = getattr(args, "out", Path(args.config).parent)
    else:
        raise ConfigError("DESIGN", "a design (one of " + ", ".join(designs()) + ") or "
                          "--config FILE")
    elaborated = design.elaborate(config)
    for role, path in write_design(elaborated, out).items():
        print(f"{role}: {path}")
    facts = elaborated.facts
    if "W" in facts and "F" in facts:
        print(f"W={facts['W']} F={facts['F']}"
              + (" (constant LUT: fixed shift, no memory)" if facts.get("constant_shift")
                 else ""))
    return 0
