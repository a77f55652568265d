"""Benchmark: the ZO layer's P-RGE schedule against a sequential one, in RTL clock cycles.

Usage::

    python benchmarks/bench_zolayer.py [--strategy onthefly] [--rows 4] [--cols 4]
                                        [--cases 16,16,16,4,2 64,64,64,16,4 ...] [--full]

For each case ``M,K,N,r,q`` it co-simulates one layer (Verilator + cocotb) for one P-RGE
step and one sequential step (every one of the 2q forward passes reloads the batch and
recomputes X·W and X·A), checks both bit-exact against the golden model, and prints the
measured cycles per step of each schedule (the layer's STEP_CYCLES register), their ratio,
the ratio the cycle model predicts (:func:`zoforge.hw.zolayer.cycles.step_cycles`), its
P-RGE cycles and their error, the PE utilization during a branch (ARRAY_CYCLES / CYCLES of
the branch jobs) and the cycles of a perturbed against a plain branch (what the
perturbation path costs). Numbers are simulated cycles, not wall time.
"""
from __future__ import annotations

import argparse
import sys

from zoforge.errors import ConfigError
from zoforge.golden.zolayer import layer_config
from zoforge.sim.zolayer_cosim import ZoCosimOptions, cosim_layer

DEFAULT_CASES = ("16,16,16,4,2", "64,64,64,16,4", "64,128,64,16,4", "128,64,64,32,2",
                 "64,64,64,32,1")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--strategy", default="onthefly")
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--cols", type=int, default=4)
    parser.add_argument("--full", action="store_true", help="full-weight mode (r unused)")
    parser.add_argument("--cases", nargs="+", default=list(DEFAULT_CASES),
                        help="M,K,N,r,q per case")
    args = parser.parse_args(argv)
    try:
        cases = [tuple(int(v) for v in case.split(",")) for case in args.cases]
        if any(len(case) != 5 for case in cases):
            raise ValueError
    except ValueError:
        print("error: --cases must be M,K,N,r,q groups of integers", file=sys.stderr)
        return 2
    head = (f"{'M':>4} {'K':>4} {'N':>4} {'r':>3} {'q':>2} {'P-RGE':>8} {'seq':>8} "
            f"{'ratio':>6} {'pred':>6} {'model':>8} {'err %':>6} {'PE util':>7} {'branch':>7} "
            f"{'plain':>6} exact")
    print(f"ZO layer {args.rows}x{args.cols}, {args.strategy}, "
          f"{'full' if args.full else 'lora-fa'} (simulated cycles)")
    print(head)
    for m, k, n, r, q in cases:
        try:
            config = layer_config(args.strategy, rows=args.rows, cols=args.cols,
                                  mode="full" if args.full else "lora-fa", max_m=m, max_k=k,
                                  max_n=n, max_r=max(r, args.rows))
            summary = cosim_layer(config, ZoCosimOptions(steps=1, q=q, m=m, k=k, n=n, r=r,
                                                         grad_shift=40))
        except ConfigError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        print(f"{m:>4} {k:>4} {n:>4} {r:>3} {q:>2} {summary['cycles_per_step']:>8.0f} "
              f"{summary['sequential_cycles_per_step']:>8} {summary['measured_ratio']:>6.2f} "
              f"{summary['predicted_ratio']:>6.2f} {summary['predicted_cycles_per_step']:>8} "
              f"{100 * (summary['predicted_cycles_per_step'] / summary['cycles_per_step'] - 1):>+6.2f} "
              f"{summary['pe_utilization']:>7.1%} "
              f"{summary['branch_cycles']:>7} {summary['plain_branch_cycles']:>6} "
              f"{summary['bit_exact']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
