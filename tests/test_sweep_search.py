"""The search cannot do worse than the grid on a small space, and starts from the corners
on a larger one. Tasks run on an executor that answers at once with known results (no
training), through the real store, runner and NSGA-II."""
from __future__ import annotations

import concurrent.futures as cf

from test_sweep_outputs import fake_report
from zoforge.sweep.results import group_runs, read_runs
from zoforge.sweep.runner import register_scope, run_scope
from zoforge.sweep.search import corners, run_search, search_generations, search_space
from zoforge.sweep.spec import sweep_from_dict
from zoforge.sweep.store import Store


def accuracy(n_rng: int, bits: int, seed: int) -> float:
    """A landscape whose only front design is an inner point (n = 15, b = 10)."""
    return 0.9 if (n_rng, bits) == (15, 10) else 0.5 + 0.001 * seed + 0.0001 * bits


def cost(n_rng: int, bits: int) -> tuple[int, float]:
    return 10 * n_rng + bits, 0.6


class InstantExecutor:
    """Runs a task as a lookup: known results, no work."""

    def __init__(self):
        self.submitted: list[tuple[str, dict]] = []

    def slots(self) -> int:
        return 4

    def submit(self, kind, key, spec, work_dir):
        self.submitted.append((kind, spec))
        future = cf.Future()
        if kind == "train":
            result = {"accuracy_before": 0.5, "final_loss": 0.5, "steps": 1,
                      "steps_per_s": 1.0, "d": 66, "test_loss_before": 0.7,
                      "test_loss_after": 0.6, "chance_accuracy": 0.5,
                      "accuracy_after": accuracy(spec["n_rng"], spec["bits"], spec["seed"])}
        else:
            generator = spec["generator"]
            result = fake_report(*cost(generator["n_rng"], generator["bits"]))
        future.set_result({"ok": True, "result": result, "seconds": 0.0})
        return future

    def wait(self, futures, timeout):
        return list(futures)

    def close(self):
        pass


def space(n_rng, bits, trials, population=4):
    return sweep_from_dict({
        "name": "space", "train": {"model": "tiny", "perturbation": "pezo-onthefly",
                                   "steps": 10},
        "grid": {"n_rng": n_rng, "bits": bits, "seed": [0, 1]},
        "search": {"trials": trials, "population": population, "seed": 0}})


def grid_front(sweep, folder) -> set:
    store = Store(folder / "grid")
    register_scope(store, sweep.name, sweep, sweep.points)
    run_scope(store, sweep.name, InstantExecutor(), progress=False, poll_s=0.01)
    return {(g.config["n_rng"], g.config["bits"]) for g in
            group_runs(read_runs(store, sweep.name)) if g.front}


def test_a_space_no_larger_than_the_trials_is_evaluated_whole(tmp_path):
    sweep = space([7, 15, 31], [8, 10], trials=6)
    executor = InstantExecutor()
    found = run_search(sweep, Store(tmp_path / "s"), executor, progress=False)
    trained = {(s["n_rng"], s["bits"]) for kind, s in executor.submitted if kind == "train"}
    assert trained == {(n, b) for n in (7, 15, 31) for b in (8, 10)}
    assert found.trials == found.configurations == 6
    front = {(g.config["n_rng"], g.config["bits"]) for g in found.front}
    assert front == grid_front(sweep, tmp_path) and (15, 10) in front


def test_corners_of_a_space():
    assert corners({"bits": [10, 6, 8], "points": [0, 1, 2]}) == [
        {"bits": 6, "points": 0}, {"bits": 6, "points": 2}, {"bits": 10, "points": 0},
        {"bits": 10, "points": 2}]
    assert corners({"layout": ["striped"]}) == [{"layout": "striped"}]


def test_a_larger_space_starts_from_its_corners(tmp_path):
    sweep = space([7, 15, 31, 63], [7, 8, 10, 12], trials=8, population=4)
    executor = InstantExecutor()
    generations = list(search_generations(sweep, Store(tmp_path / "s"), executor,
                                          progress=False))
    trained = list(dict.fromkeys((s["n_rng"], s["bits"]) for kind, s in executor.submitted
                                 if kind == "train"))
    assert set(trained[:4]) == {(7, 7), (7, 12), (63, 7), (63, 12)}    # generation 1
    assert generations[-1].trials == 8 and len(search_space(sweep)) == 2
