"""``zoforge generate engine`` and ``zoforge cosim gemm``: the tiled INT8 GEMM engine."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from zoforge.errors import check_int_range

__all__ = ["register"]


def register(tree) -> None:
    from zoforge.hw.pe.designs import add_engine_arguments

    gen = tree.subcommand("generate", "engine",
                          help="tiled INT8 GEMM engine (systolic array, AXI4-Lite/Stream)",
                          formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_engine_arguments(gen)
    gen.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    gen.set_defaults(func=_generate)

    cos = tree.subcommand("cosim", "gemm",
                          help="random GEMM through the engine's RTL (cocotb + cocotbext-axi, "
                               "or the Verilog-only bulk bench), checked bit-exact against "
                               "the golden model; prints JSON",
                          formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_engine_arguments(cos)
    cos.add_argument("--m", type=int, default=16, help="rows of X (and Y)")
    cos.add_argument("--k", type=int, default=16, help="columns of X, rows of W")
    cos.add_argument("--n", type=int, default=16, help="columns of W (and Y)")
    cos.add_argument("--seed", type=int, default=0, help="seed of the random operands")
    cos.add_argument("--simulator", default="verilator", help="verilator or icarus")
    cos.add_argument("--bench", choices=("cocotb", "bulk"), default="cocotb",
                     help="cocotb: cocotbext-axi drives the AXI ports (checks the protocol); "
                          "bulk: a Verilog testbench plays files from the host, no Python in "
                          "the simulation loop (Verilator only, much faster)")
    cos.add_argument("--output", choices=("int8", "raw"), default="int8",
                     help="requantized int8 or raw int32 results")
    cos.add_argument("--per-channel", action="store_true",
                     help="per-output-column multiplier/shift (default: per tensor)")
    cos.add_argument("--relu", action="store_true", help="ReLU after requantization")
    cos.add_argument("--no-bias", action="store_true", help="no bias")
    cos.add_argument("--backpressure", type=float, default=0.0,
                     help="probability that the output stream's tready is low in a cycle")
    cos.add_argument("--jobs", type=int, default=1,
                     help="back-to-back jobs of the same shape (different operands)")
    cos.set_defaults(func=_cosim)


def _generate(args: argparse.Namespace) -> int:
    from zoforge.cli._generate import generate_design

    generate_design("engine", args)
    return 0


def _cosim(args: argparse.Namespace) -> int:
    import numpy as np

    from zoforge.sim.gemm_cosim import GemmCosim, random_job

    check_int_range("--jobs", args.jobs, 1, 1000)
    if not 0.0 <= args.backpressure < 1.0:
        from zoforge.errors import ConfigError
        raise ConfigError("--backpressure", "a probability with 0 <= p < 1", args.backpressure)
    cosim = GemmCosim(args.rows, args.cols, args.pack, args.max_m, args.max_k, args.max_n,
                      simulator=args.simulator)
    cosim.check_shape(args.m, args.k, args.n)
    rng = np.random.default_rng(args.seed)
    jobs = [random_job(rng, args.m, args.k, args.n, raw=args.output == "raw",
                       bias=not args.no_bias, per_channel=args.per_channel, relu=args.relu)
            for _ in range(args.jobs)]
    for job in jobs:
        cosim.check_job(job)
    if args.bench == "bulk":
        if args.simulator != "verilator":
            from zoforge.errors import ConfigError
            raise ConfigError("--simulator", "verilator with --bench bulk", args.simulator)
        results, info = cosim.run_bulk(jobs, backpressure=args.backpressure, seed=args.seed)
    else:
        results, info = cosim.run(jobs, backpressure=args.backpressure, seed=args.seed)
    cycles = sum(r.cycles for r in results)
    ideal = sum(r.ideal_cycles for r in results)
    report = {
        "bit_exact": all(r.bit_exact for r in results),
        "mismatches": sum(r.mismatches for r in results),
        "m": args.m, "k": args.k, "n": args.n, "rows": args.rows, "cols": args.cols,
        "pack": args.pack, "output": args.output, "jobs": args.jobs, "bench": args.bench,
        "cycles": cycles, "ideal_cycles": ideal,
        "pe_utilization": round(ideal / cycles, 4) if cycles else 0.0,
        "array_cycles": sum(r.array_cycles for r in results),
        "cycles_per_s": round(info.get("cycles_per_s", 0.0), 1),
        "sim_cycles": info.get("sim_cycles"), "sim_wall_s": round(info.get("wall_s", 0), 3),
        "build_s": round(info["build_s"], 2), "run_s": round(info["run_s"], 2),
        "simulator": info["simulator"],
    }
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0 if report["bit_exact"] else 1
