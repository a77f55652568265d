"""GEMM engine benchmark: PE utilization and co-simulation speed (printed, never asserted).

    .venv/bin/python benchmarks/bench_gemm.py [--rows 8 --cols 8 --sizes 32,64,128]

1. PE utilization = ideal_cycles / cycles with ideal = ceil(M*K*N / (R*C)), for square
   GEMMs of each size (all dimensions >= 4x the array's when size >= 4*max(R, C)), run back
   to back in one co-simulation; every result is checked bit-exact against the golden model.
2. Co-simulation speed: the same job (--speed-size) through three testbenches:
   * bulk Verilog (zoforge.sim.gemm_bulk + benches/gemm_bulk.sv): no Python or cocotb in
     the simulation; the bench generates the clock, plays the host's register program and
     $readmemh stream images, writes the output beats to a file. Speed = cycles per
     wall-clock second of the whole simulation binary (start-up and file I/O included),
     the median of --repeat runs;
   * cocotbext-axi (zoforge.sim.benches.gemm): whole frames, cocotb's GPI clock, awaiting
     completion;
   * per-cycle Python (zoforge.sim.benches.gemm_percycle): one `await RisingEdge` per
     cycle, handshakes by hand.
   For the two cocotb benches speed = cycles per wall-clock second inside the simulator
   process, measured by the bench (excluding the ~2 s process start-up, printed as
   process s). The ratio is bulk Verilog / per-cycle Python.

Results are written to --out (JSON) as they come, so an interrupted run keeps them.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from zoforge.sim.gemm_cosim import GemmCosim, random_job


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--cols", type=int, default=8)
    parser.add_argument("--pack", type=int, default=2)
    parser.add_argument("--sizes", default="32,64,128", help="square GEMM sizes M=K=N")
    parser.add_argument("--speed-size", type=int, default=64)
    parser.add_argument("--simulator", default="verilator")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5,
                        help="runs of the bulk Verilog bench (the median is reported)")
    parser.add_argument("--out", type=Path, default=Path("bench_gemm.json"))
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    limit = max(sizes + [args.speed_size])
    cosim = GemmCosim(args.rows, args.cols, args.pack, max_m=limit, max_k=limit, max_n=limit,
                      simulator=args.simulator)
    rng = np.random.default_rng(args.seed)
    record: dict = {"command": " ".join(["benchmarks/bench_gemm.py"] + sys.argv[1:]),
                    "rows": args.rows, "cols": args.cols, "pack": args.pack}

    def save():
        args.out.write_text(json.dumps(record, indent=2) + "\n")

    print(f"[1/4] utilization: {args.rows}x{args.cols} array, sizes {sizes} "
          f"(building {cosim.top} if not cached)...", flush=True)
    jobs = [random_job(rng, s, s, s, per_channel=True) for s in sizes]
    results, info = cosim.run(jobs)
    record["utilization"] = [
        {"m": r.shape[0], "k": r.shape[1], "n": r.shape[2], "bit_exact": r.bit_exact,
         "cycles": r.cycles, "ideal_cycles": r.ideal_cycles, "array_cycles": r.array_cycles,
         "pe_utilization": round(r.pe_utilization, 4)} for r in results]
    record["build_s"] = round(info["build_s"], 1)
    save()
    print(f"{'M=K=N':>6} {'cycles':>8} {'ideal':>8} {'PE util':>8} {'bit-exact':>9}")
    for row in record["utilization"]:
        print(f"{row['m']:>6} {row['cycles']:>8} {row['ideal_cycles']:>8} "
              f"{100 * row['pe_utilization']:>7.1f}% {str(row['bit_exact']):>9}")

    speed_job = [random_job(rng, args.speed_size, args.speed_size, args.speed_size,
                            per_channel=True)]
    speeds = {}
    print(f"[2/4] speed, bulk Verilog: {args.speed_size}^3 GEMM x {args.repeat} "
          "(building the bulk bench if not cached)...", flush=True)
    runs = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        results, info = cosim.run_bulk(speed_job)
        runs.append((info["cycles_per_s"], results[0], info, time.perf_counter() - started))
    runs.sort(key=lambda run: run[0])
    rate, result, info, host = runs[len(runs) // 2]
    speeds["bulk Verilog"] = {
        "bit_exact": all(run[1].bit_exact for run in runs), "cycles": result.cycles,
        "sim_cycles": info["sim_cycles"], "sim_wall_s": round(info["wall_s"], 3),
        "cycles_per_s": round(rate, 1), "process_s": round(info["wall_s"], 3),
        "host_wall_s": round(host, 2), "build_s": round(info["build_s"], 1),
        "all_cycles_per_s": [round(run[0], 1) for run in runs]}
    record["speed"] = speeds
    save()
    for step, (label, bench) in enumerate((("cocotbext-axi", "zoforge.sim.benches.gemm"),
                                           ("per-cycle Python",
                                            "zoforge.sim.benches.gemm_percycle")), start=3):
        print(f"[{step}/4] speed, {label}: {args.speed_size}^3 GEMM...", flush=True)
        started = time.perf_counter()
        results, info = cosim.run(speed_job, bench=bench)
        speeds[label] = {"bit_exact": results[0].bit_exact, "cycles": results[0].cycles,
                         "sim_cycles": info["sim_cycles"], "sim_wall_s": round(info["wall_s"], 3),
                         "cycles_per_s": round(info["cycles_per_s"], 1),
                         "process_s": round(info["run_s"], 2),
                         "host_wall_s": round(time.perf_counter() - started, 2)}
        record["speed"] = speeds
        save()
    slow = speeds["per-cycle Python"]["cycles_per_s"]
    ratios = {label: round(row["cycles_per_s"] / slow, 2) if slow else 0.0
              for label, row in speeds.items()}
    record["speedup_vs_per_cycle"] = ratios
    save()
    print(f"{'testbench':<18} {'cycles/s':>10} {'vs per-cycle':>12} {'sim wall s':>10} "
          f"{'process s':>9} {'exact':>6}")
    for label, row in speeds.items():
        print(f"{label:<18} {row['cycles_per_s']:>10.0f} {ratios[label]:>11.1f}x "
              f"{row['sim_wall_s']:>10.3f} {row['process_s']:>9.2f} {str(row['bit_exact']):>6}")
    print(f"co-simulation speed-up (cycles/s, bulk Verilog vs per-cycle Python): "
          f"{ratios['bulk Verilog']:.1f}x")
    print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
