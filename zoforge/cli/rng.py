"""``zoforge rng dump``: the PeZO generators' golden streams as CSV.

(``zoforge generate rng`` and ``zoforge cosim rng`` are the generic ``generate`` and
``cosim`` commands of :mod:`zoforge.cli.generate` and :mod:`zoforge.cli.cosim`.)
"""
from __future__ import annotations

import argparse
import sys

from zoforge.errors import ConfigError, check_int_range

__all__ = ["register", "dump_onthefly", "dump_pregen", "dump_gaussian", "MAX_DUMP_VALUES"]

#: The largest dump, in CSV values (rows x columns): about 0.5 GB of text. A larger request
#: is refused before anything is computed (ask for several ranges with ``--start``).
MAX_DUMP_VALUES = 50_000_000
#: Values computed and written at a time, so memory stays small whatever the dump's size.
CHUNK_VALUES = 1 << 18

#: The dump's own flags, the strategies they apply to, and their defaults.
_CYCLE_STRATEGIES = ("onthefly", "gaussian", "masked")
_DUMP_FLAGS = {"cycles": (_CYCLE_STRATEGIES, 8), "start": (_CYCLE_STRATEGIES, 0),
               "length": (("pregen",), 100), "count": (("pregen",), 2)}


def register(tree) -> None:
    dump = tree.subcommand("rng", "dump", help="print a generator's golden stream as CSV",
                           formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                           epilog=f"A dump holds at most {MAX_DUMP_VALUES:,} values (rows x "
                                  "columns); it is computed and written in small chunks.")
    dump.defer(_add_dump_flags)
    dump.set_defaults(func=_dump)


def _add_dump_flags(dump) -> None:
    """The generators' configuration flags and the dump's own (the configuration types
    import NumPy: added only when ``zoforge rng dump`` is used)."""
    from zoforge.cli._options import add_config_flags
    from zoforge.golden.rng import GENERATOR_CONFIGS

    add_config_flags(dump, tuple(GENERATOR_CONFIGS.values()))
    dump.add_argument("--cycles", type=int, default=argparse.SUPPRESS,
                      help="onthefly/gaussian/masked: RNG cycles to print (default 8)")
    dump.add_argument("--start", type=int, default=argparse.SUPPRESS,
                      help="onthefly/gaussian/masked: first RNG cycle t (default 0)")
    dump.add_argument("--length", type=int, default=argparse.SUPPRESS,
                      help="pregen: perturbation length d (default 100)")
    dump.add_argument("--count", type=int, default=argparse.SUPPRESS,
                      help="pregen: consecutive perturbations to print (default 2)")


def _dump(args: argparse.Namespace) -> int:
    from zoforge.cli._options import config_from_args
    from zoforge.golden.rng import GENERATOR_CONFIGS

    config = config_from_args(args, tuple(GENERATOR_CONFIGS.values()))
    values = {}
    for name, (strategies, default) in _DUMP_FLAGS.items():
        if hasattr(args, name) and config.variant not in strategies:
            raise ConfigError(f"--{name}", "used only with " + " or ".join(
                f"--strategy {s}" for s in strategies), f"--strategy {config.variant}")
        values[name] = getattr(args, name, default)
    out = sys.stdout
    if config.variant == "pregen":
        length = check_int_range("--length", values["length"], 1, 1 << 30)
        count = check_int_range("--count", values["count"], 1, 1_000_000)
        pool_values = 2 * config.pool_size
        if pool_values + 4 * length * count > MAX_DUMP_VALUES:
            most = (MAX_DUMP_VALUES - pool_values) // 4
            raise ConfigError("--length x --count", f"at most {most:,} (a dump holds at most "
                              f"{MAX_DUMP_VALUES:,} values)", f"{length} x {count}")
        dump_pregen(config.golden(), length, count, out)
    else:
        columns = config.n_rng + (3 if config.variant == "onthefly" else 1)
        most = MAX_DUMP_VALUES // columns
        cycles = check_int_range("--cycles", values["cycles"], 1, min(10_000_000, most))
        start = check_int_range("--start", values["start"], 0, 1 << 62)
        (dump_onthefly if config.variant == "onthefly" else dump_gaussian)(
            config.golden(), start, cycles, out)
    return 0


def _chunks(total: int, per_row: int):
    """``(first, count)`` row ranges of at most ``CHUNK_VALUES`` values each."""
    rows = max(1, CHUNK_VALUES // max(per_row, 1))
    for first in range(0, total, rows):
        yield first, min(rows, total - first)


def dump_onthefly(golden, start: int, cycles: int, out) -> None:
    """``cycle,lut_index,scale_exp,v0..v{n-1}``: S(t), k(t) and raw lane values u in
    output-position order, one row per RNG cycle."""
    import numpy as np
    header = ["cycle", "lut_index", "scale_exp"] + [f"v{p}" for p in range(golden.n_rng)]
    out.write(",".join(header) + "\n")
    for first, count in _chunks(cycles, len(header)):
        table = golden.cycle_table(start + first, count)
        _write_rows(np.column_stack([table["cycle"], table["lut_index"], table["scale_exp"],
                                     table["raw"]]), out)


def dump_gaussian(golden, start: int, cycles: int, out) -> None:
    """``cycle,v0..v{n-1}``: the emitted integers (value = v / 2^F), one row per cycle (the
    Gaussian and the masked generators)."""
    import numpy as np
    out.write(",".join(["cycle"] + [f"v{i}" for i in range(golden.n_rng)]) + "\n")
    for first, count in _chunks(cycles, golden.n_rng + 1):
        cycle = np.arange(count, dtype=np.int64) + (start + first)
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
        for first, size in _chunks(length, 4):
            j = np.arange(first, first + size)
            index = (pointer + j) % golden.pool_size
            _write_rows(np.column_stack([np.full(size, number), j, index,
                                         golden.pool[index]]), out)
        golden.state = golden.advance(pointer, length)


def _write_rows(rows, out) -> None:
    out.write("".join(",".join(map(str, row)) + "\n" for row in rows.tolist()))
