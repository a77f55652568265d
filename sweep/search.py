"""Multi-objective search over a sweep's space instead of the whole grid (Optuna NSGA-II).

The space is the sweep's own: one categorical choice per grid key except ``seed``, plus the
point table (``[[points]]``) when there are several. A trial is one configuration, trained
once per seed of the sweep; its objectives are the mean test accuracy (maximised), LUTs
and, when the sweep measures it, power (minimised), the columns of
:data:`zoforge.sweep.results.OBJECTIVES`. Trials run a generation (``population`` trials) at
a time through the same store and executor as a grid, under the scope ``NAME/search``, so
every training is durable and shared with the grid: a configuration the grid (or an
earlier search) already trained costs nothing. The study itself lives in memory; with a
fixed ``[search] seed`` a rerun asks the same trials again and finds them in the store.
A configuration without a hardware generator (a software source) or with a failed task is
a failed trial.

A search cannot do worse than the grid on a small space: when the space has no more
configurations than ``trials``, every configuration is evaluated (one generation, no
sampler). Otherwise the first generation holds the space's corners (every key at its
smallest or largest value, :func:`corners`; at most ``population`` of them), and NSGA-II
goes on from there.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

from zoforge.sweep.results import OBJECTIVES, Group, group_runs, objectives, read_runs
from zoforge.sweep.runner import DEFAULT_LEASE_S, register_scope, run_scope
from zoforge.sweep.spec import Point, Sweep
from zoforge.sweep.store import Store

__all__ = ["SearchResult", "run_search", "search_generations", "search_space",
           "search_scope", "corners", "space_size"]


@dataclass(frozen=True)
class SearchResult:
    scope: str
    trials: int                 # configurations asked (repeats included)
    configurations: int         # distinct configurations evaluated
    trainings: int              # distinct trainings those needed
    front: list[Group]          # the search's Pareto front


def search_scope(sweep: Sweep) -> str:
    return f"{sweep.name}/search"


def search_space(sweep: Sweep) -> dict[str, list]:
    """Choice name -> its values (``points``: the index of a point table)."""
    space = {k: list(v) for k, v in sweep.grid.items() if k != "seed"}
    if len(sweep.entries) > 1:
        space["points"] = list(range(len(sweep.entries)))
    return space


def space_size(space: dict[str, list]) -> int:
    """The number of configurations of ``space``."""
    return math.prod(len(values) for values in space.values())


def corners(space: dict[str, list]) -> list[dict]:
    """Every key at its first or last value (numbers: the smallest or the largest), each
    combination once, the all-smallest first."""
    ends = {}
    for key, values in space.items():
        ordered = (sorted(values) if all(isinstance(v, (int, float))
                                         and not isinstance(v, bool) for v in values)
                   else list(values))
        ends[key] = list(dict.fromkeys((ordered[0], ordered[-1])))
    return [dict(zip(ends, combo)) for combo in itertools.product(*ends.values())]


def _points_of(sweep: Sweep, params: dict) -> list[Point]:
    """The sweep's points of one configuration: every seed."""
    entry = params.get("points", 0)
    found = []
    for combo, index in ((combo, index) for (number, combo), index in sweep.where.items()
                         if number == entry):
        chosen = dict(zip(sweep.grid, combo))
        if all(chosen[k] == v for k, v in params.items() if k != "points"):
            found.append(sweep.points[index])
    return list({p.train_key: p for p in found}.values())


def run_search(sweep: Sweep, store: Store, executor, *, lease_s: float = DEFAULT_LEASE_S,
               retry_failed: bool = False, progress: bool = True) -> SearchResult:
    """Run the search to its end; returns the last generation's :class:`SearchResult`."""
    result = None
    for result in search_generations(sweep, store, executor, lease_s=lease_s,
                                     retry_failed=retry_failed, progress=progress):
        pass
    return result


def search_generations(sweep: Sweep, store: Store, executor, *,
                       lease_s: float = DEFAULT_LEASE_S, retry_failed: bool = False,
                       progress: bool = True) -> Iterator[SearchResult]:
    """The search, one :class:`SearchResult` (so far) per generation."""
    # imported here for start-up time: Optuna loads only for a search
    import optuna
    from optuna.distributions import CategoricalDistribution
    from optuna.trial import TrialState

    options = sweep.search
    measured = [(name, sign) for name, sign in OBJECTIVES
                if name != "power_w" or sweep.report.power]
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        directions=["maximize" if sign > 0 else "minimize" for _, sign in measured],
        sampler=optuna.samplers.NSGAIISampler(population_size=options.population,
                                              seed=options.seed))
    space = search_space(sweep)
    distributions = {k: CategoricalDistribution(v) for k, v in space.items()}
    scope = search_scope(sweep)
    store.add_scope(scope, sweep.data, [], [])          # a fresh search: no points yet
    registered: set[str] = set()
    asked = 0
    every = space_size(space) <= options.trials     # a small space: evaluate it all
    if every:
        for params in itertools.product(*space.values()):
            study.enqueue_trial(dict(zip(space, params)))
    else:                                           # seed the first generation
        for params in corners(space)[:options.population]:
            study.enqueue_trial(params)
    budget = space_size(space) if every else options.trials
    while asked < budget:
        size = budget if every else min(options.population, budget - asked)
        trials = [study.ask(distributions) for _ in range(size)]
        asked += len(trials)
        chosen = {t.number: _points_of(sweep, t.params) for t in trials}
        new = {p.train_key: p for points in chosen.values() for p in points
               if p.train_key not in registered}
        registered.update(new)
        register_scope(store, scope, sweep, list(new.values()), append=True)
        run_scope(store, scope, executor, lease_s=lease_s, retry_failed=retry_failed,
                  progress=progress)
        runs = {run.train_key: run for run in read_runs(store, scope)}
        for trial in trials:
            group = Group(label=trial.params,
                          runs=[runs[p.train_key] for p in chosen[trial.number]])
            costs = objectives(group) if group.runs and all(
                r.status == "done" for r in group.runs) else None
            if costs is None or len(costs) < len(measured):
                study.tell(trial, state=TrialState.FAIL)
            else:           # objectives() gives costs; Optuna takes the values
                study.tell(trial, [-c if sign > 0 else c
                                   for c, (_, sign) in zip(costs, measured)])
        groups = group_runs(read_runs(store, scope))
        yield SearchResult(scope=scope, trials=asked, configurations=len(groups),
                           trainings=len(registered), front=[g for g in groups if g.front])
