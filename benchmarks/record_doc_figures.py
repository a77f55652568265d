"""Record the measured figures the docs quote, in ``docs/figures.json``.

Usage::

    python benchmarks/record_doc_figures.py [--only demo build busy zolayer engine]
                                            [--demo-summary FILE] [--build-report FILE]

Each part measures its figures with the command its doc names and stores them, with the
command, the commit and the date, under its key of ``docs/figures.json`` (the other keys are
kept). ``tests/test_docs_figures.py`` parses the docs' tables and holds every measured
figure in them against this record (and the derived columns against the record's numbers
by hand), so a doc that quotes a stale number fails the default test run; re-run the part
and update the doc together.

* ``demo`` (``docs/demo.md``, "Measured"): ``zoforge demo`` on its defaults: cycles per
  step, accuracies, losses, the board report's resources and Fmax
  (``--demo-summary FILE``: record the ``summary.json`` such a run wrote instead).
* ``build`` (``docs/zo-layer.md``, resources): ``zoforge build --board zcu102 --design
  zo-layer --no-power``: total and per-block resources (``yosys-estimate``) and the Fmax
  estimate (``--build-report FILE``: record that command's ``report.json`` instead).
* ``busy`` (``docs/zo-layer.md``, "Keeping the array busy"): the cases of
  ``benchmarks/bench_zolayer_busy.py`` co-simulated on 2x2, 4x4 and 8x8 arrays.
* ``zolayer`` (``docs/zo-layer.md``, "Measured"): the cases of
  ``benchmarks/bench_zolayer.py`` (4 x 4, LoRA-FA).
* ``engine`` (``docs/engine.md``, "Measured"): the utilization part of
  ``benchmarks/bench_engine.py`` (8 x 8, pack 2, M = K = N = 32, 64, 128, seed 1).

Every co-simulated case must be bit-exact, or nothing is recorded for its part.
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "docs" / "figures.json"
PARTS = ("demo", "build", "busy", "zolayer", "engine")
BUILD_COMMAND = ["build", "--board", "zcu102", "--design", "zo-layer", "--no-power"]


def _bench(name: str):
    """A module of benchmarks/ (they are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                             capture_output=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=ROOT, text=True, capture_output=True).stdout.strip()
        return out + (" + uncommitted changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def demo(summary_path: Path | None) -> dict:
    if summary_path is None:
        from zoforge.cli import main
        folder = Path(tempfile.mkdtemp(prefix="zoforge-demo-"))
        summary_path = folder / "summary.json"
        if main(["demo", "--out", str(folder), "--quiet"]) != 0:
            raise SystemExit("the demo failed: nothing recorded")
    summary = json.loads(Path(summary_path).read_text())
    if not summary["bit_exact"]:
        raise SystemExit("the demo was not bit-exact: nothing recorded")
    report = json.loads((Path(summary_path).parent / "report" / "report.json").read_text())
    return {
        "command": "zoforge demo",
        "steps": summary["steps"],
        "cycles_per_step": summary["cycles_per_step"],
        "accuracy_before": summary["accuracy_before"],
        "accuracy_after": summary["accuracy_after"],
        "loss_first": summary["loss_rtl"][0], "loss_last": summary["loss_rtl"][-1],
        "resources": report["resources"]["total"],
        **{key: summary[key] for key in (
            "fmax_mhz", "seconds_per_step_at_fmax", "dynamic_w_at_fmax", "static_w",
            "dynamic_joules_per_step_at_fmax", "static_joules_per_step_at_fmax",
            "joules_per_step_at_fmax", "pytorch_seconds_per_step", "cosim_steps_per_s",
            "cosim_cycles_per_s")},
        "dynamic_w": report["power"]["dynamic_w"],
    }


def build(report_path: Path | None) -> dict:
    if report_path is None:
        from zoforge.cli import main
        folder = Path(tempfile.mkdtemp(prefix="zoforge-build-"))
        if main([*BUILD_COMMAND, "--out", str(folder), "--quiet"]) != 0:
            raise SystemExit("zoforge build failed: nothing recorded")
        report_path = folder / "report.json"
    report = json.loads(Path(report_path).read_text())
    return {
        "command": "zoforge " + " ".join(BUILD_COMMAND),
        "source": report["resources"]["source"], "tool": report["resources"]["tool"],
        "total": report["resources"]["total"],
        "blocks": report["resources"]["blocks"],
        "fmax_mhz": report["fmax"]["fmax_mhz"], "critical_ns": report["fmax"]["critical_ns"],
    }


def busy() -> dict:
    from zoforge.golden.zolayer import layer_config
    from zoforge.sim.zolayer_cosim import ZoCosimOptions, cosim_layer
    bench = _bench("bench_zolayer_busy")
    rows = []
    for case in bench.DEFAULT_CASES:
        mode, *numbers = case.split(",")
        m, k, n, r, q = (int(v) for v in numbers)
        for size in (2, 4, 8):
            k_t = r if mode == "lora-fa" else k
            b = bench.branch_lanes_for(size, n, k_t, mode, q)
            config = layer_config("onthefly", rows=size, cols=size, mode=mode, max_m=m,
                                  max_k=k, max_n=n, max_r=max(r, size), branch_lanes=b)
            summary = cosim_layer(config, ZoCosimOptions(steps=1, q=q, m=m, k=k, n=n,
                                                         r=max(r, 1), grad_shift=40))
            if not summary["bit_exact"]:
                raise SystemExit(f"busy case {case} on {size}x{size} not bit-exact")
            rows.append({"mode": mode, "m": m, "k": k, "n": n, "r": r, "q": q,
                         "array": size, "branch_lanes": b,
                         "cycles_per_step": summary["cycles_per_step"],
                         "sequential_cycles_per_step": summary["sequential_cycles_per_step"]})
            print(rows[-1], flush=True)
    return {"command": "python benchmarks/bench_zolayer_busy.py", "rows": rows}


def zolayer() -> dict:
    from zoforge.golden.zolayer import layer_config
    from zoforge.sim.zolayer_cosim import ZoCosimOptions, cosim_layer
    rows = []
    for case in _bench("bench_zolayer").DEFAULT_CASES:
        m, k, n, r, q = (int(v) for v in case.split(","))
        config = layer_config("onthefly", rows=4, cols=4, mode="lora-fa", max_m=m, max_k=k,
                              max_n=n, max_r=max(r, 4))
        summary = cosim_layer(config, ZoCosimOptions(steps=1, q=q, m=m, k=k, n=n, r=r,
                                                     grad_shift=40))
        if not summary["bit_exact"]:
            raise SystemExit(f"zolayer case {case} not bit-exact")
        rows.append({"m": m, "k": k, "n": n, "r": r, "q": q,
                     "cycles_per_step": summary["cycles_per_step"],
                     "sequential_cycles_per_step": summary["sequential_cycles_per_step"],
                     "pe_utilization": summary["pe_utilization"],
                     "branch_cycles": summary["branch_cycles"],
                     "plain_branch_cycles": summary["plain_branch_cycles"]})
        print(rows[-1], flush=True)
    return {"command": "python benchmarks/bench_zolayer.py", "rows": rows}


def engine() -> dict:
    import numpy as np

    from zoforge.hw.engine.config import EngineConfig
    from zoforge.sim.engine_cosim import EngineCosim, random_job
    sizes = [32, 64, 128]
    cosim = EngineCosim(EngineConfig(rows=8, cols=8, pack=2, max_m=128, max_k=128,
                                     max_n=128), simulator="verilator")
    rng = np.random.default_rng(1)   # bench_engine.py's --seed 1, its first draws
    results, _ = cosim.run([random_job(rng, s, s, s, per_channel=True) for s in sizes])
    if not all(result.bit_exact for result in results):
        raise SystemExit("an engine job was not bit-exact: nothing recorded")
    return {"command": "python benchmarks/bench_engine.py --speed-size 128",
            "rows": [{"m": r.shape[0], "k": r.shape[1], "n": r.shape[2], "cycles": r.cycles,
                      "array_cycles": r.array_cycles} for r in results]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--demo-summary", type=Path, help="record this demo summary.json")
    parser.add_argument("--build-report", type=Path,
                        help="record this report.json of the zo-layer build")
    args = parser.parse_args(argv)
    measure = {"demo": lambda: demo(args.demo_summary),
               "build": lambda: build(args.build_report),
               "busy": busy, "zolayer": zolayer, "engine": engine}
    record = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    for part in args.only:
        figures = measure[part]()
        figures.update(commit=_commit(), date=datetime.date.today().isoformat())
        record[part] = figures
        RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        print(f"recorded {part} in {RECORD.relative_to(ROOT)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
