"""``zoforge generate``: Verilog, memory files and the configuration of any registered design.

``zoforge generate DESIGN [flags] --out DIR`` elaborates a configuration given as flags (and
optionally ``--config FILE``); ``zoforge generate --config FILE [--out DIR]`` elaborates a
saved configuration (the ``design.toml`` a previous run wrote; by default into the file's
own folder). ``zoforge generate accelerator --board B`` plans the sizes not given as flags
for the board's budget (:func:`zoforge.hw.accel.plan.plan_from_fields`). Every registered design appears here with flags generated from its
configuration types, when ``zoforge generate DESIGN`` is used (listing the designs imports
none of them).

Before any work: ``--out`` must be a writable folder or creatable (not an existing file, not
empty), and the design's size within the limits of :mod:`zoforge.cli._limits` (a design's
memories: at most 131,072 words and 32 Mbit). Files are written atomically and
never through a symbolic link inside ``--out`` (one there is an error).
"""
from __future__ import annotations

import argparse
import functools
from pathlib import Path

from zoforge.errors import ConfigError

__all__ = ["register"]

def register(tree) -> None:
    from zoforge.cli._limits import MAX_BITS, MAX_WORDS
    from zoforge.hw.designs import designs

    parser = tree.command("generate",
                          epilog="Reproduce a saved design: zoforge generate --config "
                                 "DIR/design.toml [--out DIR2]. Limit: a design's memories "
                                 f"hold at most {MAX_WORDS} words and {MAX_BITS >> 20} Mbit "
                                 "(larger ones take minutes and gigabytes to generate).")
    parser.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS,
                        help="a saved configuration (design.toml); names its design")
    parser.add_argument("--out", metavar="DIR", default=argparse.SUPPRESS,
                        help="output folder (with --config alone: the file's folder)")
    sub = parser.add_subparsers(dest="design", metavar="DESIGN")
    for design in designs().values():
        design_parser = sub.add_parser(design.name, help=design.help,
                                       description=design.help)
        design_parser.defer(functools.partial(_add_design_flags, design))
    parser.set_defaults(func=run)


def _add_design_flags(design, parser) -> None:
    """The flags of ``design``'s configuration, and ``--out``."""
    from zoforge.cli._options import add_config_flags

    add_config_flags(parser, design.configs)
    parser.add_argument("--out", metavar="DIR", required=True, help="output folder")


def run(args: argparse.Namespace) -> int:
    from zoforge.cli._limits import check_design_size
    from zoforge.cli._options import config_from_args
    from zoforge.config import load_config
    from zoforge.hw.designs import designs, get_design
    from zoforge.hw.export import write_design
    from zoforge.outputs import check_out_dir

    if args.design is not None:
        out = check_out_dir("--out", args.out)
        design = get_design(args.design)
        if design.name == "accelerator" and getattr(args, "config", None) is None:
            # sizes not given are planned for the board's budget (hw/accel/plan.py)
            from zoforge.cli._options import given_fields
            from zoforge.hw.accel.plan import plan_from_fields
            config = plan_from_fields(given_fields(args, design.configs))
        else:
            config = config_from_args(args, design.configs)
    elif getattr(args, "config", None) is not None:
        out = check_out_dir("--out", getattr(args, "out", Path(args.config).parent))
        every_type = [t for d in designs().values() for t in d.configs]
        config = load_config(args.config, every_type)
        design = get_design(config.kind)
    else:
        raise ConfigError("DESIGN", "a design (one of " + ", ".join(designs()) + ") or "
                          "--config FILE")
    check_design_size(config)
    elaborated = design.elaborate(config)
    for role, path in write_design(elaborated, out).items():
        print(f"{role}: {path}")
    facts = elaborated.facts
    if "W" in facts and "F" in facts:
        print(f"W={facts['W']} F={facts['F']}"
              + (" (constant LUT: fixed shift, no memory)" if facts.get("constant_shift")
                 else ""))
    return 0
