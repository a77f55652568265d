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
alone (IDLE commands of 500k cycles, repeated for a second, no host between). Builds are
cached and not timed.
Wall-clock numbers depend on the machine and its load.

No rate comes from a noise-level time. The one-step run is timed twice: their difference
is the noise of a run's wall time. The extra steps' time is *resolved* when it is at least
:data:`NOISE_FACTOR` times that noise and at least :data:`MIN_EXTRA_S`; until it is, the
number of extra steps is multiplied by 4 (up to ``--max-steps``). A case whose time is not
resolved then prints ``unresolved`` instead of its rates (``cycles/step`` comes from the
simulator's counts and is always printed), and a speed-up is printed only between two
resolved rates of the same size, measured one after the other (the whole runs' ``run s``
only when both ran the same number of steps). The model alone repeats its IDLE command
for at least a second.
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
#: the extra steps' time must be this many times the noise of a run's wall time ...
NOISE_FACTOR = 10.0
#: ... and at least this long (seconds)
MIN_EXTRA_S = 0.5


def resolved(extra_s: float, noise_s: float) -> bool:
    """Whether a time difference ``extra_s`` stands out of the noise ``noise_s`` (the
    difference between two identical runs) enough to divide by."""
    return extra_s >= MIN_EXTRA_S and extra_s >= NOISE_FACTOR * noise_s


def speed_up(fast: float | None, slow: float | None) -> str:
    """``fast / slow`` as ``12.3x``, or ``-`` when either rate was not resolved."""
    return "-" if fast is None or slow is None else f"{fast / slow:.1f}x"


def _measure(config, base, steps: int, max_steps: int):
    """(extra steps, extra seconds or None if unresolved, extra cycles, longer run's
    seconds, bit-exact) of ``base`` (one step) against ``1 + steps`` steps, the steps
    multiplied by 4 until the time is resolved or ``max_steps`` is reached."""
    short_s, short_cycles, _ = _run(config, base)
    again_s, _, _ = _run(config, base)
    noise_s = abs(again_s - short_s)
    short_s = min(short_s, again_s)
    while True:
        long_s, long_cycles, exact = _run(config, base.replace(steps=1 + steps))
        extra_s = long_s - short_s
        if resolved(extra_s, noise_s) or steps * 4 > max_steps:
            break
        steps *= 4
    return (steps, extra_s if resolved(extra_s, noise_s) else None,
            long_cycles - short_cycles, long_s, exact)


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
                        help="extra steps of the longer run (at least 1; multiplied by 4 "
                             "until their time stands out of the noise)")
    parser.add_argument("--max-steps", type=int, default=1024,
                        help="most extra steps tried before a time is called unresolved")
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
    print(f"{'backend':>9} {'M=K=N':>5} {'r':>3} {'steps':>5} {'steps/s':>10} "
          f"{'cycles/s':>10} {'cycles/step':>11} {'run s':>7} exact")
    for size in args.sizes:
        rates = {}
        for backend in args.backends:
            try:
                config = layer_config(args.strategy)
                r = max(config.rows, size // 4)
                base = ZoCosimOptions(steps=1, q=args.q, m=size, k=size, n=size, r=r,
                                      grad_shift=40, source_idle=args.stalls,
                                      sink_backpressure=args.stalls, backend=backend)
                steps, extra_s, extra_cycles, long_s, exact = _measure(
                    config, base, args.steps, max(args.steps, args.max_steps))
            except ConfigError as error:
                print(f"error: {error}", file=sys.stderr)
                return 2
            if extra_s is None:
                rates[backend] = None, None, long_s, steps
                step_rate = cycle_rate = f"{'unresolved':>10}"
            else:
                rates[backend] = steps / extra_s, extra_cycles / extra_s, long_s, steps
                step_rate = f"{steps / extra_s:>10.2f}"
                cycle_rate = f"{extra_cycles / extra_s:>10,.0f}"
            print(f"{backend:>9} {size:>5} {r:>3} {steps:>5} {step_rate} {cycle_rate} "
                  f"{extra_cycles / steps:>11,.0f} {long_s:>7.2f} {exact}", flush=True)
        if len(rates) == 2:
            cocotb, server = rates["cocotb"], rates["jobserver"]
            # whole runs compare only when they ran the same number of steps
            whole = speed_up(cocotb[2], server[2]) if cocotb[3] == server[3] else "-"
            print(f"{'speed-up':>9} {size:>5} {'':>3} {'':>5} "
                  f"{speed_up(server[0], cocotb[0]):>10} {speed_up(server[1], cocotb[1]):>10} "
                  f"{'':>11} {whole:>7}", flush=True)
    if "jobserver" in args.backends:
        with LayerServer(layer_config(args.strategy)) as layer:
            commands, started = 0, time.perf_counter()
            while time.perf_counter() - started < 2 * MIN_EXTRA_S:
                layer.server.idle(MODEL_CYCLES)
                commands += 1
            seconds = time.perf_counter() - started
        print(f"the job server's model alone ({commands} IDLE commands of "
              f"{MODEL_CYCLES:,} cycles, no host): {commands * MODEL_CYCLES / seconds:,.0f} "
              f"cycles/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
