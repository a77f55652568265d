"""Benchmark: how fast the ZO layer co-simulates training, cocotb bench against job server.

Usage::

    python benchmarks/bench_zolayer_cosim_speed.py [--strategy onthefly] [--sizes 16 32 64]
                                              [--q 2] [--steps 4] [--stalls 0.0]
                                              [--backends cocotb jobserver]

For each size S (M = K = N = S, r = max(R, S / 4), the default zo-layer design: 4 x 4 array,
LoRA-FA, 64/64/64/16 capacities) and each backend it co-simulates two runs of the same
host program (:func:`zoforge.sim.zolayer_cosim.run_layer`): one P-RGE step and ``1 + steps``
P-RGE steps (each run also loads the weights, runs one sequential step and a plain branch).
It prints

* ``steps/s``: training steps per wall-clock second once running: the ``steps`` extra
  steps over the extra time (the start-up and the fixed jobs cancel out);
* ``cycles/s``: clock cycles simulated per second over the same extra time (the
  simulator's own count: cocotb's simulated time, the job server's cycle counter);
* ``cycles/step``: the extra cycles per extra step (host gaps included);
* ``run s``: the longer run's whole wall time, the simulator's start-up included;
* ``exact``: the longer run is bit-exact against the golden model;

and the job server's speed-up over cocotb; last, for reference, the job server's model
alone (500k idle cycles in one command, no host between). Builds are cached and not timed.
Wall-clock numbers depend on the machine and its load.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from zoforge.errors import ConfigError
from zoforge.golden.zolayer import layer_config
from zoforge.sim.zolayer_cosim import BACKENDS, ZoCosimOptions, golden_run, make_data, run_layer
from zoforge.sim.zolayer_jobserver import LayerServer

MODEL_CYCLES = 500_000


def _run(config, options):
    """(run seconds, simulated cycles, bit-exact) of one run of ``options``."""
    data = make_data(config, options)
    rtl, result = run_layer(config, options, data)
    if not result.passed:
        raise RuntimeError(f"{options.backend} run failed: {result.failures}")
    golden = golden_run(config, options, data)
    exact = (all(np.array_equal(rtl[name], golden[name])
                 for name in ("branches", "masters", "plain"))
             and result.results["grads"] == golden["grads"].tolist())
    return result.run_s, result.results["sim_cycles"], exact


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--strategy", default="onthefly")
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 32, 64],
                        help="M = K = N of each case")
    parser.add_argument("--q", type=int, default=2, help="queries per step")
    parser.add_argument("--steps", type=int, default=4,
                        help="extra steps of the longer run (at least 1)")
    parser.add_argument("--stalls", type=float, default=0.0,
                        help="stall probability of every stream (source idle and sink "
                             "back-pressure)")
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    args = parser.parse_args(argv)
    if args.steps < 1:
        print("error: --steps must be at least 1", file=sys.stderr)
        return 2
    print(f"ZO layer co-simulation speed: default zo-layer design ({args.strategy}), "
          f"q={args.q}, +{args.steps} steps, stalls {args.stalls}")
    print(f"{'backend':>9} {'M=K=N':>5} {'r':>3} {'steps/s':>8} {'cycles/s':>10} "
          f"{'cycles/step':>11} {'run s':>7} exact")
    for size in args.sizes:
        rates = {}
        for backend in args.backends:
            try:
                config = layer_config(args.strategy)
                r = max(config.rows, size // 4)
                base = ZoCosimOptions(steps=1, q=args.q, m=size, k=size, n=size, r=r,
                                      grad_shift=40, source_idle=args.stalls,
                                      sink_backpressure=args.stalls, backend=backend)
                short_s, short_cycles, _ = _run(config, base)
                long_s, long_cycles, exact = _run(config,
                                                  base.replace(steps=1 + args.steps))
            except ConfigError as error:
                print(f"error: {error}", file=sys.stderr)
                return 2
            extra_s, extra_cycles = max(long_s - short_s, 1e-9), long_cycles - short_cycles
            rates[backend] = args.steps / extra_s, extra_cycles / extra_s, long_s
            print(f"{backend:>9} {size:>5} {r:>3} {args.steps / extra_s:>8.2f} "
                  f"{extra_cycles / extra_s:>10,.0f} {extra_cycles / args.steps:>11,.0f} "
                  f"{long_s:>7.2f} {exact}", flush=True)
        if len(rates) == 2:
            cocotb, server = rates["cocotb"], rates["jobserver"]
            print(f"{'speed-up':>9} {size:>5} {'':>3} {server[0] / cocotb[0]:>7.1f}x "
                  f"{server[1] / cocotb[1]:>9.1f}x {'':>11} {cocotb[2] / server[2]:>6.1f}x",
                  flush=True)
    if "jobserver" in args.backends:
        with LayerServer(layer_config(args.strategy)) as layer:
            started = time.perf_counter()
            layer.server.idle(MODEL_CYCLES)
            seconds = time.perf_counter() - started
        print(f"the job server's model alone (one IDLE command, no host): "
              f"{MODEL_CYCLES / seconds:,.0f} cycles/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
