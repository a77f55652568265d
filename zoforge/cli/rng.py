"""``zoforge rng dump``: the PeZO generators' golden streams as CSV.

(``zoforge generate rng`` and ``zoforge cosim rng`` are the generic ``generate`` and
``cosim`` commands of :mod:`zoforge.cli.generate` and :mod:`zoforge.cli.cosim`.)
"""
from __future__ import annotations

import argparse
import sys

from zoforge.errors import check_int_range

__all__ = ["register", "dump_onthefly", "dump_pregen", "dump_gaussian"]


def register(tree) -> None:
    from zoforge.cli._options import add_config_flags
    from zoforge.golden.rng import GENERATOR_CONFIGS

    dump = tree.subcommand("rng", "dump", help="print a generator's golden stream as CSV",
                           formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_config_flags(dump, tuple(GENERATOR_CONFIGS.values()))
    dump.add_argument("--cycles", type=int, default=8,
                      help="onthefly/gaussian: RNG cycles to print")
    dump.add_argument("--start", type=int, default=0,
                      help="onthefly/gaussian: first RNG cycle t")
    dump.add_argument("--length", type=int, default=100,
                      help="pregen: perturbation length d")
    dump.add_argument("--count", type=int, default=2,
                      help="pregen: consecutive perturbations to print")
    dump.set_defaults(func=_dump)


def _dump(args: argparse.Namespace) -> int:
    from zoforge.cli._options import config_from_args
    from zoforge.golden.rng import GENERATOR_CONFIGS

    config = config_from_args(args, tuple(GENERATOR_CONFIGS.values()))
    golden = config.golden()
    out = sys.stdout
    if config.variant == "pregen":
        length = check_int_range("--length", args.length, 1, 1 << 30)
        count = check_int_range("--count", args.count, 1, 1_000_000)
        dump_pregen(golden, length, count, out)
    else:
        cycles = check_int_range("--cycles", args.cycles, 1, 10_000_000)
        start = check_int_range("--start", args.start, 0)
        (dump_onthefly if config.variant == "onthefly" else dump_gaussian)(golden, start,
                                                                           cycles, out)
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
    _write_rows(np.column_stack([cycle, golden.values_at(cycle)]), out)


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
