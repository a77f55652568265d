"""Mutation testing of a sample of zoforge's modules within a time budget (issues 23, 31).

Cosmic Ray (``cosmic-ray``, a dev dependency) mutates one module at a time in place (an
operator flipped, a constant changed, a comparison replaced, ...) and runs that module's
tests on each mutant: a mutant the tests fail on is *killed*, one they pass on *survived*
(a change no test notices), one that cannot even be imported *incompetent*. For each
module of :data:`TARGETS` the script draws up to ``--mutants`` of its mutants (seeded),
runs them until the module's share of ``--budget`` seconds is spent, restores the module
byte for byte (also on Ctrl-C) and prints the counts and the kill rate (killed over killed +
survived: an incompetent mutant, one that cannot be imported, says nothing about the tests);
``--survivors`` prints each survivor's diff. Not part of the test suite (docs/verification.md
quotes its counts and what was done about each survivor).

A module argument may be a folder prefix (``golden/finetune/``, ``reports/``): every module
of :data:`TARGETS` under it.

    python benchmarks/mutation.py                       # every target, 600 s
    python benchmarks/mutation.py --budget 120 --mutants 10 sweep/pareto.py
    python benchmarks/mutation.py --budget 2400 golden/finetune/ reports/ sweep/

The modules must be unmodified in git before it starts (it will not overwrite work in
progress). Exit status 0 (the counts are the result, not a verdict).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: module -> the tests that should kill its mutants (fast ones: each mutant runs them).
TARGETS = {
    "sweep/pareto.py": ("tests/test_sweep_store.py::test_pareto_helpers",
                        "tests/test_readback_sweep.py"),
    "golden/engine.py": ("tests/test_engine_golden.py",),
    "sweep/spec.py": ("tests/test_sweep_spec.py",),
    "golden/engine_widths.py": ("tests/test_engine_golden.py",),
    # issue 31's scopes: the fine-tuning step, the reports, the sweep's numbers, the guarded
    # input and output paths, the cycle models
    "golden/finetune/calls.py": ("tests/test_finetune_golden.py",
                                 "tests/test_finetune_step_pinned.py"),
    "golden/finetune/model.py": ("tests/test_finetune_golden.py",
                                 "tests/test_finetune_step_pinned.py"),
    "golden/finetune/train.py": ("tests/test_finetune_step_pinned.py",
                                 "tests/test_finetune_learning.py",
                                 "tests/test_finetune_fewshot.py"),
    "golden/finetune/fewshot.py": ("tests/test_finetune_fewshot.py",),
    "golden/packing.py": ("tests/test_packed_multiply.py", "tests/test_pair_carry_in.py"),
    "reports/unit_calls.py": ("tests/test_finetune_cost.py", "tests/test_cycle_models.py"),
    "reports/step_price.py": ("tests/test_finetune_cost.py",),
    "reports/step_memory.py": ("tests/test_finetune_cost.py",),
    "reports/nextpnr.py": ("tests/test_parsers_fragments.py", "tests/test_reports_pnr.py"),
    "reports/synth.py": ("tests/test_parsers_fragments.py",
                         "tests/test_reports_synth_cells.py"),
    "reports/vivado.py": ("tests/test_parsers_fragments.py", "tests/test_reports_vivado.py"),
    "reports/saif.py": ("tests/test_parsers_fragments.py", "tests/test_reports_saif.py"),
    "reports/power.py": ("tests/test_reports_pinned.py", "tests/test_reports_power.py"),
    "reports/fmax.py": ("tests/test_reports_pinned.py", "tests/test_reports_fmax.py"),
    "sweep/results.py": ("tests/test_readback_sweep.py", "tests/test_sweep_outputs.py"),
    "sweep/recommend.py": ("tests/test_readback_sweep.py", "tests/test_sweep_outputs.py",
                           "tests/test_sweep_flags.py"),
    "sweep/table.py": ("tests/test_readback_sweep.py", "tests/test_sweep_outputs.py"),
    "sweep/store.py": ("tests/test_sweep_store.py",),
    "zoforge/inputs.py": ("tests/test_limits_boundary.py", "tests/test_config_loader.py"),
    "zoforge/outputs.py": ("tests/test_outputs_paths.py", "tests/test_faults.py"),
    "hw/zolayer/cycles.py": ("tests/test_cycle_models.py",),
}


def _config(module: str, tests: tuple[str, ...], timeout: float) -> str:
    command = " ".join([sys.executable, "-m", "pytest", "-x", "-q", "-n", "0",
                        "-p", "no:cacheprovider", *tests])
    return (f'[cosmic-ray]\nmodule-path = "{module}"\ntimeout = {timeout}\n'
            f'excluded-modules = []\ntest-command = "{command}"\n\n'
            f'[cosmic-ray.distributor]\nname = "local"\n')


def _sample(db: Path, count: int, seed: int) -> int:
    """Mark all but ``count`` drawn work items skipped; returns how many are left."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    with use_db(str(db), WorkDB.Mode.open) as work_db:
        items = sorted(item.job_id for item in work_db.pending_work_items)
        keep = set(random.Random(seed).sample(items, min(count, len(items))))
        skipped = [job for job in items if job not in keep]
        if skipped:
            work_db.set_multiple_results(skipped, WorkResult(
                worker_outcome=WorkerOutcome.SKIPPED, output="not drawn"))
        return len(keep)


def _counts(db: Path) -> tuple[dict[str, int], list[str]]:
    """Outcome -> count over the mutants run, and the survivors' diffs."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome

    counts = {"killed": 0, "survived": 0, "incompetent": 0, "timeout/error": 0}
    survivors = []
    with use_db(str(db), WorkDB.Mode.open) as work_db:
        for _, result in work_db.results:
            if result.worker_outcome == WorkerOutcome.SKIPPED:
                continue
            if result.worker_outcome != WorkerOutcome.NORMAL or result.test_outcome is None:
                counts["timeout/error"] += 1
            else:
                counts[str(result.test_outcome.value)] += 1
                if result.test_outcome.value == "survived":
                    survivors.append(result.diff or "")
    return counts, survivors


def mutate(module: str, tests: tuple[str, ...], mutants: int, budget: float, seed: int,
           timeout: float) -> tuple[dict[str, int], list[str], int, float]:
    """Run up to ``mutants`` drawn mutants of ``module`` within ``budget`` seconds:
    (counts, survivors' diffs, mutants drawn, seconds)."""
    path = ROOT / module
    original = path.read_bytes()
    started = time.perf_counter()
    cosmic = [sys.executable, "-m", "cosmic_ray.cli"]
    with tempfile.TemporaryDirectory(prefix="zoforge-mutation-") as scratch:
        config, db = Path(scratch) / "config.toml", Path(scratch) / "session.sqlite"
        config.write_text(_config(module, tests, timeout))
        subprocess.run([*cosmic, "init", str(config), str(db)], cwd=ROOT, check=True,
                       capture_output=True)
        drawn = _sample(db, mutants, seed)
        run = subprocess.Popen([*cosmic, "exec", str(config), str(db)], cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
        try:
            run.wait(timeout=budget)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGTERM)
            run.wait()
        finally:
            if path.read_bytes() != original:      # a mutant still on disk: put it back
                path.write_bytes(original)
        counts, survivors = _counts(db)
    return counts, survivors, drawn, time.perf_counter() - started


def select(names: list[str]) -> list[str]:
    """The modules of :data:`TARGETS` that ``names`` name, in order (every target when
    ``names`` is empty): a module itself, or a folder prefix ending in ``/``."""
    chosen: list[str] = []
    for name in names or list(TARGETS):
        found = ([m for m in TARGETS if m.startswith(name)] if name.endswith("/")
                 else [name] if name in TARGETS else [])
        if not found:
            raise ValueError(f"unknown {name} (a module or a folder/ of {', '.join(TARGETS)})")
        chosen += [m for m in found if m not in chosen]
    return chosen


def kill_rate(counts: dict[str, int]) -> float | None:
    """Killed over killed + survived; None when neither ran."""
    decided = counts.get("killed", 0) + counts.get("survived", 0)
    return counts.get("killed", 0) / decided if decided else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help=f"modules (default: {', '.join(TARGETS)})")
    parser.add_argument("--budget", type=float, default=600.0,
                        help="seconds for the whole run, shared equally by the modules")
    parser.add_argument("--mutants", type=int, default=25, help="mutants drawn per module")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draw")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds one mutant's tests may take")
    parser.add_argument("--survivors", action="store_true", help="print survivors' diffs")
    args = parser.parse_args(argv)
    if importlib.util.find_spec("cosmic_ray") is None:
        print("error: cosmic-ray is not installed (pip install -e '.[dev]')", file=sys.stderr)
        return 2
    try:
        modules = select(args.modules)
    except ValueError as error:
        print(f"error: modules: {error}", file=sys.stderr)
        return 2
    dirty = subprocess.run(["git", "status", "--porcelain", "--", *modules], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    if dirty:
        print(f"error: modules to mutate have uncommitted changes:\n{dirty}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))     # still restore the module
    totals: dict[str, int] = {}
    print(f"{'module':34} {'drawn':>5} {'killed':>6} {'survived':>8} {'incompetent':>11} "
          f"{'timeout/error':>13} {'time':>7}")
    for module in modules:
        counts, survivors, drawn, seconds = mutate(
            module, TARGETS[module], args.mutants, args.budget / len(modules), args.seed,
            args.timeout)
        for name, value in counts.items():
            totals[name] = totals.get(name, 0) + value
        print(f"{module:34} {drawn:5} {counts['killed']:6} {counts['survived']:8} "
              f"{counts['incompetent']:11} {counts['timeout/error']:13} {seconds:6.0f}s",
              flush=True)
        if args.survivors:
            for diff in survivors:
                print(diff)
    run = sum(totals.values())
    rate = kill_rate(totals)
    print(f"{run} mutants run: {totals.get('killed', 0)} killed, "
          f"{totals.get('survived', 0)} survived, {totals.get('incompetent', 0)} incompetent, "
          f"{totals.get('timeout/error', 0)} timed out or errors")
    print("kill rate: " + ("n/a (no mutant decided)" if rate is None else f"{100 * rate:.1f} %"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
