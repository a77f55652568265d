"""``zoforge demo``: the quick-start job on embedded defaults.

Generates a PeZO on-the-fly generator (31 lanes x 8 bits, PeZO's RoBERTa configuration),
lints its Verilog, co-simulates it against the golden model with random back-pressure,
times the golden perturbation source, and prints a short summary (also written as
``DIR/summary.json``). Exits 1 if the RTL and the golden model disagree.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def register(tree) -> None:
    from zoforge.cli._options import add_config_flags
    from zoforge.golden.rng import GENERATOR_CONFIGS

    parser = tree.command("demo", help="generate a PeZO RNG design, co-simulate it against "
                          "the golden model and print a summary",
                          formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_config_flags(parser, tuple(GENERATOR_CONFIGS.values()))
    parser.add_argument("--cycles", type=int, default=5000, help="clock cycles to co-simulate")
    parser.add_argument("--simulator", default="verilator", help="verilator or icarus")
    parser.add_argument("--out", type=Path, default=Path("out/demo"), metavar="DIR",
                        help="where the Verilog, configuration and summary go")
    parser.set_defaults(func=run)


def _step(text: str) -> None:
    print(f"==> {text}", flush=True)


def run(args: argparse.Namespace) -> int:
    from zoforge.cli._options import config_from_args
    from zoforge.golden.rng import GENERATOR_CONFIGS
    from zoforge.hw.export import write_design
    from zoforge.hw.rng.designs import elaborate_generator
    from zoforge.sim.lint import lint_verilog
    from zoforge.sim.rng_cosim import RngCosimOptions, cosim_rng

    config = config_from_args(args, tuple(GENERATOR_CONFIGS.values()))
    options = RngCosimOptions(cycles=args.cycles, simulator=args.simulator)
    described = ", ".join(f"{k}={v}" for k, v in config.to_dict().items() if k != "kind")
    _step(f"generate: {described}")
    design = elaborate_generator(config)
    paths = write_design(design, args.out)
    facts = design.facts
    print(f"    Verilog {paths['verilog']}  (W={facts['W']}, F={facts['F']}"
          + (", constant LUT: fixed shift, no memory)" if facts.get("constant_shift")
             else ")"))

    _step("lint: verilator --lint-only -Wall (waivers: hw/lint_waivers.vlt)")
    lint = lint_verilog(paths["verilog"].read_text(), design.name)
    print(f"    {lint}")

    _step(f"co-simulate {args.cycles} cycles on {args.simulator} against the golden model "
          "(first build ~20-60 s, cached after)")
    cosim = cosim_rng(config, options)

    _step("golden perturbation source: 10 million elements")
    golden = config.golden()
    started = time.perf_counter()
    golden.take_float(10_000_000)
    golden_s = time.perf_counter() - started

    summary = {"design": design.name, "config": design.summary(), "lint_clean": lint.clean,
               "cosim": cosim, "golden_elements_per_s": 10_000_000 / golden_s}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    cycles_per_s = cosim.get("cycles_per_s")
    print()
    print(f"design            {design.name} ({described})")
    print(f"lint              {'clean' if lint.clean else 'WARNINGS (see above)'}")
    print(f"bit-exact         {cosim['bit_exact']} over {cosim['cycles']} cycles "
          f"on {cosim['simulator']}"
          + (f" ({cycles_per_s:,.0f} cycles/s)" if cycles_per_s else ""))
    print(f"golden source     {summary['golden_elements_per_s'] / 1e6:,.1f} M elements/s")
    print(f"files             {args.out}/")
    return 0 if cosim["bit_exact"] and lint.clean else 1
