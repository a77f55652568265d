"""Benchmark of the PeZO generators.

Prints (1) golden perturbation throughput, ``take_float`` of a 10-million-element
perturbation, beside ``torch.randn`` of the same size: per source the best of N interleaved
rounds and its ratio to torch.randn's elements/s (both single-threaded; randn at its default
thread count as a second reference), under the load average printed; and (2) co-simulation
cycles/s of the Table 6 generator configurations per available simulator (the testbench
loop only: one control write and one sample per cycle; build and start-up times printed
separately).

    .venv/bin/python benchmarks/bench_rng.py [--size 10000000] [--repeats 7] [--cycles 5000]
        [--no-cosim]
"""
from __future__ import annotations

import argparse
import os
import time

import torch

from zoforge.golden.rng import GaussianGolden, OnTheFlyGolden, PregenGolden


#: Throughput goals (issue 21, item 6): generator elements/s over single-threaded torch.randn's.
GOALS = {"on-the-fly": 1.0, "pre-generated": 2.0}


def golden_sources(size: int) -> list[tuple[str, int, object]]:
    """(label, torch threads, call) for the references and every generator configuration."""
    default_threads = torch.get_num_threads()
    generators = [
        ("on-the-fly n=31 b=8 (PeZO, RoBERTa)", OnTheFlyGolden(31, 8)),
        ("on-the-fly n=31 b=14 (PeZO, OPT)", OnTheFlyGolden(31, 14)),
        ("pre-generated N=4095 q=12 L=8", PregenGolden(4095, 12, 8)),
        ("Gaussian baseline n=1024 b=16 K=3", GaussianGolden(1024, 16, 3)),
    ]
    references = [("torch.randn, 1 thread (reference)", 1, lambda: torch.randn(size))]
    if default_threads != 1:
        references.append((f"torch.randn, {default_threads} threads (default)", default_threads,
                           lambda: torch.randn(size)))
    return references + [(name, 1, lambda g=g: g.take_float(size)) for name, g in generators]


def timed(threads: int, call) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of one call under ``threads`` torch threads."""
    torch.set_num_threads(threads)
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - wall, time.process_time() - cpu


def load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def golden_throughput(size: int, repeats: int) -> None:
    """Times every source once per round (rounds interleaved, so that every source sees the
    same load), keeps each one's best round, and prints the ratios to torch.randn."""
    default_threads = torch.get_num_threads()
    print(f"golden perturbation throughput: take_float({size:,}) as float32 beside "
          f"torch.randn({size:,}), best of {repeats} interleaved rounds")
    print(f"machine: {os.cpu_count()} CPU cores; load average (1/5/15 min) {load()} at the "
          "start")
    print("threads: generators 1 (numpy gathers and copies, never threaded; torch at 1 "
          f"thread), torch.randn 1 (torch.set_num_threads(1)) and, second row, its default "
          f"{default_threads}")
    print("ratio: elements/s over the 1-thread torch.randn's; 'ratio dflt': over the "
          "default-thread randn's; cpu/wall <= 1: one core at most")
    sources = golden_sources(size)
    first = [timed(threads, call)[0] for _, threads, call in sources]   # builds the tables
    rounds = [[timed(threads, call) for _, threads, call in sources] for _ in range(repeats)]
    best = [min(times[i] for times in rounds) for i in range(len(sources))]
    torch.set_num_threads(default_threads)
    reference, reference_default = best[0], best[1] if default_threads != 1 else best[0]
    print(f"load average (1/5/15 min) {load()} at the end")
    print(f"{'source':<40} {'seconds':>8} {'elements/s':>13} {'cpu/wall':>8} "
          f"{'1st call s':>10} {'ratio':>7} {'goal':>10} {'ratio dflt':>10}")
    for (name, _, _), (wall, cpu), first_s in zip(sources, best, first):
        ratio = reference[0] / wall
        goal = next((g for prefix, g in GOALS.items() if name.startswith(prefix)), None)
        verdict = "" if goal is None else f">={goal:g}x {'met' if ratio >= goal else 'MISSED'}"
        print(f"{name:<40} {wall:>8.4f} {size / wall:>13,.0f} {cpu / wall:>8.2f} "
              f"{first_s:>10.4f} {ratio:>6.2f}x {verdict:>10} "
              f"{reference_default[0] / wall:>9.2f}x")


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
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cycles", type=int, default=5000)
    parser.add_argument("--no-cosim", action="store_true")
    args = parser.parse_args()
    golden_throughput(args.size, args.repeats)
    if not args.no_cosim:
        cosim_speed(args.cycles)


if __name__ == "__main__":
    main()
