"""``zoforge cosim DESIGN``: co-simulate a configuration against its golden model (JSON).

Every registered design with a co-simulation appears here; its flags are generated from its
configuration types and its run options, when ``zoforge cosim DESIGN`` is used (listing the
designs imports none of them). Exit code 1 if the RTL and the golden model
disagree. Checked before any work: the design's size (:mod:`zoforge.cli._limits`) and, for
Verilator, a simulation cache (``$ZOFORGE_CACHE``) whose path has no spaces.
"""
from __future__ import annotations

import argparse
import functools
import json

__all__ = ["register"]


def register(tree) -> None:
    from zoforge.sim.runners import designs

    parser = tree.command("cosim")
    sub = parser.add_subparsers(dest="design", metavar="DESIGN")
    sub.required = True
    for design in designs().values():
        if not design.has_cosim:
            continue
        for name in (design.name, *design.aliases):
            text = design.cosim_help if name == design.name else f"the same as `{design.name}`"
            design_parser = sub.add_parser(name, help=text, description=design.cosim_help)
            design_parser.defer(functools.partial(_add_design_flags, design))
            design_parser.set_defaults(func=run, design_name=design.name)


def _add_design_flags(design, parser) -> None:
    """The flags of ``design``'s configuration and of its co-simulation's options."""
    from zoforge.cli._options import add_config_flags

    add_config_flags(parser, design.configs)
    options = parser.add_argument_group("co-simulation options")
    add_config_flags(options, (design.cosim_options,), config_file=False)


def run(args: argparse.Namespace) -> int:
    from zoforge.cli._limits import check_design_size, check_sim_cache
    from zoforge.cli._options import config_from_args
    from zoforge.sim.runners import designs

    design = designs()[args.design_name]
    config = config_from_args(args, design.configs)
    options = config_from_args(args, (design.cosim_options,), use_file=False)
    check_design_size(config)
    if getattr(options, "simulator", "verilator") == "verilator":
        check_sim_cache()
    report = design.cosim(config, options)
    print(json.dumps(report, indent=2))
    return 0 if report["bit_exact"] else 1
