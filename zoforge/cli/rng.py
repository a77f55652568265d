"""``zoforge generate rng``, ``zoforge rng dump`` and ``zoforge cosim rng``: PeZO generators."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from zoforge.errors import ConfigError, check_int_range

__all__ = ["register", "dump_onthefly", "dump_pregen", "dump_gaussian"]


def register(tree) -> None:
    from zoforge.hw.rng.designs import add_rng_arguments

    fmt = {"formatter_class": argparse.ArgumentDefaultsHelpFormatter}
    gen = tree.subcommand("generate", "rng", help="PeZO perturbation generator: Verilog, "
                          "memory init files (.hex) and configuration JSON (with W, F)", **fmt)
    add_rng_arguments(gen)
    gen.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    gen.set_defaults(func=_generate)

    dump = tree.subcommand("rng", "dump", help="print a generator's golden stream as CSV",
                           **fmt)
    add_rng_arguments(dump)
    dump.add_argument("--cycles", type=int, default=8,
                      help="onthefly/gaussian: RNG cycles to print")
    dump.add_argument("--start", type=int, default=0,
                      help="onthefly/gaussian: first RNG cycle t")
    dump.add_argument("--length", type=int, default=100,
                      help="pregen: perturbation length d")
    dump.add_argument("--count", type=int, default=2,
                      help="pregen: consecutive perturbations to print")
    dump.set_defaults(func=_dump)

    cos = tree.subcommand("cosim", "rng", help="co-simulate one generator configuration "
                          "against its golden model; prints JSON (bit_exact, cycles, "
                          "cycles_per_s, simulator, ...)", **fmt)
    add_rng_arguments(cos)
    cos.add_argument("--cycles", type=int, default=2000, help="clock cycles to simulate")
    cos.add_argument("--simulator", default="verilator", help="verilator or icarus")
    cos.add_argument("--length", type=int, default=100,
                     help="pregen: perturbation length d (perturbations follow each other)")
    cos.add_argument("--backpressure", type=float, default=0.15,
                     help="probability that out.ready is low in a cycle")
    cos.add_argument("--stimulus-seed", type=int, default=0,
                     help="seed of the ready/save/restore stimulus")
    cos.set_defaults(func=_cosim)


def _generate(args: argparse.Namespace) -> int:
    from zoforge.cli._generate import generate_design

    design = generate_design("rng", args)
    print(f"W={design.config['W']} F={design.config['F']}"
          + (" (constant LUT: fixed shift, no memory)"
             if design.config.get("constant_shift") else ""))
    return 0


def _dump(args: argparse.Namespace) -> int:
    from zoforge.golden.rng import make_golden
    from zoforge.hw.rng.designs import rng_params

    strategy, params = rng_params(args)
    golden = make_golden(strategy, **params)
    out = sys.stdout
    if strategy == "pregen":
        length = check_int_range("--length", args.length, 1, 1 << 30)
        count = check_int_range("--count", args.count, 1, 1_000_000)
        dump_pregen(golden, length, count, out)
    else:
        cycles = check_int_range("--cycles", args.cycles, 1, 10_000_000)
        start = check_int_range("--start", args.start, 0)
        (dump_onthefly if strategy == "onthefly" else dump_gaussian)(golden, start, cycles,
                                                                     out)
    return 0


def dump_onthefly(golden, start: int, cycles: int, out) -> None:
    """``cycle,lut_index,scale_exp,v0..v{n-1}``: S(t), k(t) and raw lane values u in
    output-position order, one row per RNG cycle."""
    import numpy as np
    table = golden.cycle_table(start, cycles)
    header = ["cycle", "lut_index", "scale_exp"] + [f"v{p}" for p in range(golden.n_rng)]
    out.write(",".join(header) + "\n")
    rows = np.column_stack([table["cycle"], table["lut_index"], table["scale_exp"],
                            table["raw"]])
    _write_rows(rows, out)


def dump_gaussian(golden, start: int, cycles: int, out) -> None:
    """``cycle,v0..v{n-1}``: the emitted integers (value = v / 2^F), one row per cycle."""
    import numpy as np
    out.write(",".join(["cycle"] + [f"v{i}" for i in range(golden.n_rng)]) + "\n")
    cycle = np.arange(cycles, dtype=np.int64) + start
    _write_rows(np.column_stack([cycle, golden._take_cycles(start, cycles)]), out)


def dump_pregen(golden, length: int, count: int, out) -> None:
    """The pool (``index,value``, the stored integers), then ``count`` consecutive
    perturbations of ``length`` from pointer 0 (``perturbation,j,pool_index,value``)."""
    import numpy as np
    out.write("index,value\n")
    _write_rows(np.column_stack([np.arange(golden.pool_size), golden.pool]), out)
    out.write("perturbation,j,pool_index,value\n")
    for number in range(count):
        pointer = golden.pointer
        index = (pointer + np.arange(length)) % golden.pool_size
        values = golden.take(length)
        _write_rows(np.column_stack([np.full(length, number), np.arange(length), index,
                                     values]), out)


def _write_rows(rows, out) -> None:
    for row in rows.tolist():
        out.write(",".join(map(str, row)) + "\n")


def _cosim(args: argparse.Namespace) -> int:
    from zoforge.hw.rng.designs import rng_params
    from zoforge.sim.rng_cosim import cosim_rng

    from zoforge.sim.cosim import SIMULATORS
    from zoforge.errors import check_choice

    strategy, params = rng_params(args)
    check_choice("--simulator", args.simulator, SIMULATORS)
    if not 0.0 <= args.backpressure < 1.0:
        raise ConfigError("--backpressure", "a probability with 0 <= p < 1", args.backpressure)
    check_int_range("--cycles", args.cycles, 1, 10_000_000)
    report = cosim_rng(strategy, params, cycles=args.cycles, simulator=args.simulator,
                       snapshot=args.snapshot, layout=args.layout, length=args.length,
                       seed=args.stimulus_seed, ready_probability=1.0 - args.backpressure)
    print(json.dumps(report, indent=2))
    return 0 if report["bit_exact"] else 1
