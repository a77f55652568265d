"""Grid against NSGA-II search: how many trainings each needs, and how close the search's
Pareto front (accuracy up, LUT down, power down) comes to the grid's.

    .venv/bin/python benchmarks/bench_sweep_search.py --store runs/bench-search
    .venv/bin/python benchmarks/bench_sweep_search.py --preset pezo-fig4 --store runs/fig4

The space (default: the on-the-fly generator, n_rng in {7, 15, 31, 63} x bits in
{7, 8, 10, 12}, two seeds, the PeZO presets' head training; with the presets' store its
points at n = 31 or b = 8 are already there) is run as a full grid first
(resumable; every training and report lands in the store), then searched with NSGA-II for
several sampler seeds. The search runs through the same store, so its trainings are the
grid's and cost nothing: what it is charged with is the number of *distinct trainings it
asked for*. Fronts are compared in objectives normalised to [0, 1] over the grid's
configurations: the hypervolume ratio HV(search front) / HV(grid front) (reference point
1.1 in every objective; 1.0 = as good as the grid), the IGD (mean distance from each grid
front point to the search's front; 0 = every grid front point found) and the share of the
grid's front configurations the search found, after each generation.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import replace
from pathlib import Path

from zoforge.errors import ConfigError
from zoforge.sweep.executors import make_executor
from zoforge.sweep.pareto import hypervolume, igd, normaliser
from zoforge.sweep.presets import preset
from zoforge.sweep.results import group_runs, objectives, read_runs
from zoforge.sweep.runner import register_scope, run_scope
from zoforge.sweep.search import search_generations
from zoforge.sweep.spec import SearchOptions, sweep_from_dict
from zoforge.sweep.store import Store

SPACE = {
    "name": "bench-search",
    "description": "On-the-fly generator: RNG count x bit-width, two seeds.",
    "train": {**preset("pezo-fig4")["train"], "perturbation": "pezo-onthefly"},
    "grid": {"n_rng": [7, 15, 31, 63], "bits": [7, 8, 10, 12], "seed": [0, 1]},
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--preset", default=None,
                        help="search a preset's space instead of the default one")
    parser.add_argument("--population", type=int, default=4)
    parser.add_argument("--trials", type=int, default=None,
                        help="trials per search (default: half the grid's configurations; "
                             "the search evaluates the whole space when it has no more "
                             "configurations than trials)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4],
                        help="sampler seeds, one search each")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    try:
        data = preset(args.preset) if args.preset else dict(SPACE)
        sweep = sweep_from_dict(data, source=args.preset or "bench-search")
    except ConfigError as error:
        print(f"bench_sweep_search: error: {error}", file=sys.stderr)
        return 2

    store = Store(args.store)
    executor = make_executor("local", args.jobs)
    try:
        register_scope(store, sweep.name, sweep, sweep.points)
        run_scope(store, sweep.name, executor)
        grid = [g for g in group_runs(read_runs(store, sweep.name)) if objectives(g)]
        grid_trainings = len({p.train_key for p in sweep.points})
        scale = normaliser([objectives(g) for g in grid])
        grid_front = [scale(objectives(g)) for g in grid if g.front]
        front_labels = {_label(g) for g in grid if g.front}
        reference = (1.1,) * len(grid_front[0])
        grid_hv = hypervolume(grid_front, reference)
        print(f"space: {sweep.name}, {len(grid)} configurations with hardware, "
              f"{grid_trainings} trainings for the grid; grid front: {len(grid_front)} "
              f"configurations, normalised hypervolume {grid_hv:.4f}")
        print("| sampler seed | generation | trials | trainings asked | HV ratio | IGD | "
              "grid front found |")
        print("|---|---|---|---|---|---|---|")
        finals = []
        for seed in args.seeds:
            trials = args.trials or max(1, len(grid) // 2)
            searched = replace(sweep, search=SearchOptions(trials=trials,
                                                           population=args.population,
                                                           seed=seed))
            for generation, result in enumerate(search_generations(searched, store, executor,
                                                                   progress=False), 1):
                front = [scale(objectives(g)) for g in result.front]
                ratio = hypervolume(front, reference) / grid_hv
                found = len(front_labels & {_label(g) for g in result.front})
                row = (seed, generation, result.trials, result.trainings, ratio,
                       igd(grid_front, front), found)
                print(f"| {seed} | {generation} | {result.trials} | {result.trainings} | "
                      f"{ratio:.3f} | {row[5]:.3f} | {found}/{len(front_labels)} |",
                      flush=True)
            finals.append(row)
        print()
        print(f"grid: {grid_trainings} trainings; search (mean over {len(finals)} sampler "
              f"seeds, {args.population} per generation): "
              f"{statistics.fmean(r[3] for r in finals):.1f} trainings, HV ratio "
              f"{statistics.fmean(r[4] for r in finals):.3f}, IGD "
              f"{statistics.fmean(r[5] for r in finals):.3f}, grid front found "
              f"{statistics.fmean(r[6] for r in finals):.1f}/{len(front_labels)}")
    finally:
        executor.close()
        store.close()
    return 0


def _label(group) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(group.label.items()))


if __name__ == "__main__":
    sys.exit(main())
