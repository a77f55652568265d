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
    from zoforge.hw.rng.designs import add_rng_arguments

    parser = tree.command("demo", help="generate a PeZO RNG design, co-simulate it against "
                          "the golden model and print a summary",
                          formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_rng_arguments(parser)
    parser.add_argument("--cycles", type=int, default=5000, help="clock cycles to co-simulate")
    parser.add_argument("--simulator", default="verilator", help="verilator or icarus")
    parser.add_argument("--out", type=Path, default=Path("out/demo"), metavar="DIR",
                        help="where the Verilog, configuration and summary go")
    parser.set_defaults(func=run)


def _step(text: str) -> None:
    print(f"==> {text}", flush=True)


def run(args: argparse.Namespace) -> int:
    from zoforge.errors import check_int_range
    from zoforge.golden.rng import make_golden
    from zoforge.hw.designs import get_design
    from zoforge.hw.export import write_design
    from zoforge.hw.rng.designs import hardware_options, rng_params
    from zoforge.sim.lint import lint_verilog
    from zoforge.sim.rng_cosim import cosim_rng

    check_int_range("--cycles", args.cycles, 1, 10_000_000)
    strategy, params = rng_params(args)
    _step(f"generate: {strategy} {params}")
    design = get_design("rng").spec.elaborate(args)
    paths = write_design(design, args.out)
    print(f"    Verilog {paths['verilog']}  (W={design.config['W']}, F={design.config['F']}"
          + (", constant LUT: fixed shift, no memory)" if design.config.get("constant_shift")
             else ")"))

    _step("lint: verilator --lint-only -Wall (waivers: hw/lint_waivers.vlt)")
    lint = lint_verilog(paths["verilog"].read_text(), design.name)
    print(f"    {lint}")

    _step(f"co-simulate {args.cycles} cycles on {args.simulator} against the golden model "
          "(first build ~20-60 s, cached after)")
    options = hardware_options(strategy, args)
    cosim = cosim_rng(strategy, params, cycles=args.cycles, simulator=args.simulator,
                      snapshot=options.get("snapshot", False),
                      layout=options.get("layout", "replicated"))

    _step("golden perturbation source: 10 million elements")
    golden = make_golden(strategy, **params)
    started = time.perf_counter()
    golden.take_float(10_000_000)
    golden_s = time.perf_counter() - started

    summary = {"design": design.name, "config": design.config, "lint_clean": lint.clean,
               "cosim": cosim, "golden_elements_per_s": 10_000_000 / golden_s}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    cycles_per_s = cosim.get("cycles_per_s")
    print()
    print(f"design            {design.name} ({strategy}, {params})")
    print(f"lint              {'clean' if lint.clean else 'WARNINGS (see above)'}")
    print(f"bit-exact         {cosim['bit_exact']} over {cosim['cycles']} cycles "
          f"on {cosim['simulator']}"
          + (f" ({cycles_per_s:,.0f} cycles/s)" if cycles_per_s else ""))
    print(f"golden source     {summary['golden_elements_per_s'] / 1e6:,.1f} M elements/s")
    print(f"files             {args.out}/")
    return 0 if cosim["bit_exact"] and lint.clean else 1
