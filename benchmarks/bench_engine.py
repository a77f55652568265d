"""GEMM engine benchmark: PE utilization and co-simulation speed (printed, never asserted).

    .venv/bin/python benchmarks/bench_engine.py [--rows 8 --cols 8 --sizes 32,64,128]

1. PE utilization = ideal_cycles / cycles with ideal = ceil(M*K*N / (R*C)), for square
   GEMMs of each size (all dimensions >= 4x the array's when size >= 4*max(R, C)), run back
   to back in one co-simulation; every result is checked bit-exact against the golden model.
2. Co-simulation speed: the same job (--speed-size) through three testbenches:
   * job server (zoforge.sim.backends, the engine's host program on the persistent
     Verilator model driven from C++): no Python or cocotb per cycle. Speed = cycles per
     wall-clock second from the process start (start-up included), the job run
     --copies times back to back in one run so that the window is long enough to average
     out this shared machine's scheduling noise;
   * cocotbext-axi (the same host program in zoforge.sim.benches.program): whole frames,
     cocotb's GPI clock, awaiting completion;
   * per-cycle Python (zoforge.sim.benches.engine_percycle): one `await RisingEdge` per
     cycle, handshakes by hand.
   For the two cocotb benches speed = cycles per wall-clock second inside the simulator
   process, measured by the bench (excluding the process start-up, printed as process s). Each bench runs --repeat times; the best (as timeit reports) and the median
   are printed, and the ratios to the per-cycle Python bench for both.

Results are written to --out (JSON) as they come, so an interrupted run keeps them.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from zoforge.hw.engine.config import EngineConfig
from zoforge.sim.engine_cosim import EngineCosim, random_job


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--cols", type=int, default=8)
    parser.add_argument("--pack", type=int, default=2)
    parser.add_argument("--sizes", default="32,64,128", help="square GEMM sizes M=K=N")
    parser.add_argument("--speed-size", type=int, default=64)
    parser.add_argument("--simulator", default="verilator")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--copies", type=int, default=10,
                        help="the speed job back to back this many times in one job-server "
                             "run (one 128^3 job lasts only ~0.1 s there)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of each speed bench (best and median are reported)")
    parser.add_argument("--out", type=Path, default=Path("bench_engine.json"))
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    limit = max(sizes + [args.speed_size])
    cosim = EngineCosim(EngineConfig(rows=args.rows, cols=args.cols, pack=args.pack,
                                   max_m=limit, max_k=limit, max_n=limit),
                      simulator=args.simulator)
    rng = np.random.default_rng(args.seed)
    record: dict = {"command": " ".join(["benchmarks/bench_engine.py"] + sys.argv[1:]),
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
    benches = (("job server", lambda: cosim.run(speed_job * args.copies, backend="jobserver")),
               ("cocotbext-axi", lambda: cosim.run(speed_job, backend="cocotb")),
               ("per-cycle Python",
                lambda: cosim.run(speed_job, bench="zoforge.sim.benches.engine_percycle")))
    for step, (label, run) in enumerate(benches, start=2):
        copies = args.copies if step == 2 else 1
        print(f"[{step}/4] speed, {label}: {args.speed_size}^3 GEMM, {copies} per run, "
              f"{args.repeat} runs...", flush=True)
        runs = []
        for _ in range(args.repeat):
            results, info = run()
            runs.append((info["cycles_per_s"], results, info))
        rates = sorted(run[0] for run in runs)
        rate, results, info = max(runs, key=lambda run: run[0])
        result = results[0]
        speeds[label] = {
            "bit_exact": all(r.bit_exact for run in runs for r in run[1]),
            "jobs": len(runs[0][1]), "cycles": result.cycles,
            "sim_cycles": info["sim_cycles"], "sim_wall_s": round(info["wall_s"], 3),
            "cycles_per_s": round(rate, 1),
            "median_cycles_per_s": round(rates[len(rates) // 2], 1),
            "process_s": round(info["run_s"], 2), "build_s": round(info["build_s"], 1),
            "all_cycles_per_s": [round(r, 1) for r in rates]}
        record["speed"] = speeds
        save()
    ratios = {}
    for key in ("cycles_per_s", "median_cycles_per_s"):
        slow = speeds["per-cycle Python"][key]
        ratios[key] = {label: round(row[key] / slow, 2) if slow else 0.0
                       for label, row in speeds.items()}
    record["speedup_vs_per_cycle"] = ratios
    save()
    print(f"{'testbench':<18} {'best c/s':>9} {'ratio':>6} {'median c/s':>10} {'ratio':>6} "
          f"{'sim cycles':>10} {'process s':>9} {'exact':>6}")
    for label, row in speeds.items():
        print(f"{label:<18} {row['cycles_per_s']:>9.0f} "
              f"{ratios['cycles_per_s'][label]:>5.1f}x {row['median_cycles_per_s']:>10.0f} "
              f"{ratios['median_cycles_per_s'][label]:>5.1f}x {row['sim_cycles']:>10} "
              f"{row['process_s']:>9.2f} {str(row['bit_exact']):>6}")
    print(f"co-simulation speed-up, job server vs per-cycle Python (cycles/s): "
          f"{ratios['cycles_per_s']['job server']:.1f}x best of {args.repeat}, "
          f"{ratios['median_cycles_per_s']['job server']:.1f}x median")
    print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
