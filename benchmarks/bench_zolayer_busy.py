"""Benchmark: how busy the ZO layer keeps its array, and how exact its cycle model is.

Usage::

    python benchmarks/bench_zolayer_busy.py [--arrays 2 4 8] [--cases full,16,384,2,0,4 ...]
                                            [--strategy onthefly]

For every array size R = C in ``--arrays`` and every case ``mode,M,K,N,r,q`` it co-simulates
one layer (Verilator, the job server) for one P-RGE step and one sequential step, checks
both bit-exact against the golden model, and prints the simulated cycles per step (the
layer's STEP_CYCLES register), the useful-MAC floor ``2q * M * K_t * N / (R * C)`` and the
ratio to it, the speed-up over the next smaller array, and the cycle model's prediction
(:func:`zoforge.hw.zolayer.cycles.step_cycles`) with its error for both schedules.
``branch_lanes`` is chosen per case: B = R / N for a full-mode layer narrower than the
array (its branches side by side on the rows, one panel of N features each), else 1. The
default first case is the demo's classifier head (M 16 tokens, K 384, N 2 classes, q 4).
Numbers are simulated clock cycles, not wall time.
"""
from __future__ import annotations

import argparse
import sys

from zoforge.errors import ConfigError
from zoforge.golden.zolayer import layer_config
from zoforge.golden.zolayer.config import BRANCH_LANES
from zoforge.hw.zolayer.cycles import floor_cycles, step_cycles
from zoforge.sim.zolayer_cosim import ZoCosimOptions, cosim_layer

DEFAULT_CASES = ("full,16,384,2,0,4", "full,32,256,8,0,4", "lora-fa,64,64,64,16,4")


def branch_lanes_for(rows: int, n: int, k_t: int, mode: str, q: int) -> int:
    """B = R / N for a full-mode layer narrower than the array (one panel of N features per
    branch), when the layer allows it; else 1."""
    if mode != "full" or n >= rows or rows % n:
        return 1
    b = rows // n
    ok = b in BRANCH_LANES and k_t % b == 0 and q % max(1, b // 2) == 0
    return b if ok else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--strategy", default="onthefly")
    parser.add_argument("--arrays", nargs="+", type=int, default=[2, 4, 8])
    parser.add_argument("--cases", nargs="+", default=list(DEFAULT_CASES),
                        help="mode,M,K,N,r,q per case")
    args = parser.parse_args(argv)
    try:
        cases = []
        for case in args.cases:
            mode, *numbers = case.split(",")
            m, k, n, r, q = (int(v) for v in numbers)
            cases.append((mode, m, k, n, r, q))
    except ValueError:
        print("error: --cases must be mode,M,K,N,r,q groups", file=sys.stderr)
        return 2
    print(f"ZO layer, {args.strategy} generator, simulated cycles per step (STEP_CYCLES)")
    print(f"{'mode':>7} {'M':>4} {'K':>4} {'N':>4} {'r':>3} {'q':>2} {'array':>5} {'B':>2} "
          f"{'cycles':>8} {'floor':>8} {'x floor':>7} {'speed-up':>8} {'model':>8} "
          f"{'err %':>6} {'seq':>8} {'seq model':>9} {'err %':>6} exact")
    worst = 0.0
    for mode, m, k, n, r, q in cases:
        previous = None
        for size in args.arrays:
            k_t = r if mode == "lora-fa" else k
            b = branch_lanes_for(size, n, k_t, mode, q)
            try:
                config = layer_config(args.strategy, rows=size, cols=size, mode=mode,
                                      max_m=m, max_k=k, max_n=n, max_r=max(r, size),
                                      branch_lanes=b)
                summary = cosim_layer(config, ZoCosimOptions(
                    steps=1, q=q, m=m, k=k, n=n, r=max(r, 1), grad_shift=40))
            except ConfigError as error:
                print(f"{mode:>7} {m:>4} {k:>4} {n:>4} {r:>3} {q:>2} {size}x{size}: "
                      f"skipped ({error})", flush=True)
                continue
            rank = r if mode == "lora-fa" else 0
            cycles = summary["cycles_per_step"]
            sequential = summary["sequential_cycles_per_step"]
            model = step_cycles(config, m, k, n, rank, q)
            model_seq = step_cycles(config, m, k, n, rank, q, sequential=True)
            floor = floor_cycles(config, m, k, n, rank, q)
            error = 100 * (model - cycles) / cycles
            error_seq = 100 * (model_seq - sequential) / sequential
            worst = max(worst, abs(error), abs(error_seq))
            speedup = f"{previous / cycles:.2f}" if previous else "-"
            previous = cycles
            print(f"{mode:>7} {m:>4} {k:>4} {n:>4} {r:>3} {q:>2} {size}x{size:<3} {b:>2} "
                  f"{cycles:>8.0f} {floor:>8.0f} {cycles / floor:>7.2f} {speedup:>8} "
                  f"{model:>8} {error:>+6.2f} {sequential:>8} {model_seq:>9} "
                  f"{error_seq:>+6.2f} {summary['bit_exact']}", flush=True)
    print(f"largest cycle-model error: {worst:.2f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
