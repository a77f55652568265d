"""Benchmark of the PeZO generators.

Prints (1) golden perturbation throughput, ``take_float`` of a 10-million-element
perturbation, beside ``torch.randn`` of the same size, and (2) co-simulation cycles/s of the
Table 6 generator configurations per available simulator (the testbench loop only: one
control write and one sample per cycle; build and start-up times printed separately).

    .venv/bin/python benchmarks/bench_rng.py [--size 10000000] [--cycles 5000] [--no-cosim]
"""
from __future__ import annotations

import argparse
import time

import torch

from zoforge.golden.rng import GaussianGolden, OnTheFlyGolden, PregenGolden


def best_of(repeats: int, func) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        func()
        times.append(time.perf_counter() - started)
    return min(times)


def golden_throughput(size: int, repeats: int) -> None:
    print(f"golden perturbation throughput, {size:,} elements, float32, best of {repeats}")
    print(f"{'source':<44} {'seconds':>8} {'elements/s':>14}")
    sources = [
        ("torch.randn (reference)", lambda: torch.randn(size)),
        ("on-the-fly n=31 b=8 (PeZO, RoBERTa)", OnTheFlyGolden(31, 8).take_float),
        ("on-the-fly n=31 b=14 (PeZO, OPT)", OnTheFlyGolden(31, 14).take_float),
        ("pre-generated N=4095 q=12 L=8", PregenGolden(4095, 12, 8).take_float),
        ("Gaussian baseline n=1024 b=16 K=3", GaussianGolden(1024, 16, 3).take_float),
    ]
    for name, func in sources:
        call = func if name.startswith("torch") else (lambda f=func: f(size))
        call()                                            # warm-up (tables, caches)
        seconds = best_of(repeats, call)
        print(f"{name:<44} {seconds:>8.3f} {size / seconds:>14,.0f}")


def cosim_speed(cycles: int) -> None:
    from zoforge.golden.rng import GaussianConfig, OnTheFlyConfig, PregenConfig
    from zoforge.sim.rng_cosim import RngCosimOptions, cosim_rng
    from zoforge.sim.toolchain import available_simulators

    configs = [OnTheFlyConfig(n_rng=31, bits=8), OnTheFlyConfig(n_rng=31, bits=14),
               PregenConfig(pool_size=4095, bits=12, banks=8),
               GaussianConfig(n_rng=64, bits=12, terms=3)]
    print(f"\nco-simulation, {cycles:,} cycles, out.ready high 85 % of cycles")
    print(f"{'simulator':<10} {'configuration':<36} {'bit_exact':>9} {'cycles/s':>10} "
          f"{'build s':>8} {'run s':>7}")
    for simulator in available_simulators():
        for config in configs:
            report = cosim_rng(config, RngCosimOptions(cycles=cycles, simulator=simulator))
            label = " ".join(f"{k}={v}" for k, v in config.to_dict().items()
                             if k not in ("kind", "snapshot", "layout", "length_bits"))
            print(f"{simulator:<10} {label:<36} {str(report['bit_exact']):>9} "
                  f"{report['cycles_per_s']:>10,.0f} {report['build_s']:>8.1f} "
                  f"{report['run_s']:>7.1f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cycles", type=int, default=5000)
    parser.add_argument("--no-cosim", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    golden_throughput(args.size, args.repeats)
    if not args.no_cosim:
        cosim_speed(args.cycles)


if __name__ == "__main__":
    main()
