"""A scope's results, read back from the store: one :class:`Run` per point (a training
joined with its generator's report on the stable keys) and one :class:`Group` per
configuration (the runs that differ only in the seed), with the Pareto front marked.

Hardware numbers come out of the stored report (``Report.from_json(...).figures()``) with
the source label of each (``yosys-estimate``, ``activity-model``, ``nextpnr``, ``vivado``):
:data:`HARDWARE` names which figure each column takes, a real (post-route) figure before an
estimate. The front is over the configurations with a generator: maximise the mean
accuracy, minimise LUTs and (if measured) power.
"""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field

from zoforge.reports.model import Report
from zoforge.sweep.pareto import pareto_mask
from zoforge.sweep.store import Store

__all__ = ["Measure", "Run", "Group", "read_runs", "group_runs", "HARDWARE", "OBJECTIVES",
           "objectives", "mark_front", "shown_keys"]

#: column -> (unit, figure names in order of preference; a name ending in "." is a prefix)
HARDWARE = {
    "LUT": ("count", ("vivado.utilization.LUT", "nextpnr.resources.LUT", "resources.total.LUT")),
    "FF": ("count", ("vivado.utilization.FF", "nextpnr.resources.FF", "resources.total.FF")),
    "BRAM18": ("count", ("nextpnr.resources.BRAM18", "resources.total.BRAM18")),
    "DSP": ("count", ("nextpnr.resources.DSP", "resources.total.DSP")),
    "power_w": ("W", ("vivado.power.total_w", "power.total_w")),
    "fmax_mhz": ("MHz", ("vivado.timing.fmax_mhz", "nextpnr.fmax_mhz.", "fmax.fmax_mhz")),
}
#: The search's and the front's objectives: (column, +1 maximise / -1 minimise).
OBJECTIVES = (("accuracy", 1), ("LUT", -1), ("power_w", -1))


@dataclass(frozen=True)
class Measure:
    value: float
    source: str
    tool: str


@dataclass
class Run:
    """One point of a scope (see the module docstring)."""

    index: int
    swept: dict
    config: dict            # the training's fields
    train_key: str
    hw_key: str | None
    train_status: str
    train: dict | None      # the training's result
    train_error: str | None
    report_status: str | None
    hardware: dict[str, Measure] = field(default_factory=dict)
    report_error: str | None = None
    generator: dict | None = None

    @property
    def status(self) -> str:
        statuses = {self.train_status, self.report_status or "done"}
        for status in ("failed", "running", "pending"):
            if status in statuses:
                return status
        return "done"

    @property
    def accuracy(self) -> float | None:
        return None if self.train is None else self.train["accuracy_after"]


@dataclass
class Group:
    """The runs of one configuration (all its seeds)."""

    label: dict             # the swept values without the seed
    runs: list[Run]
    front: bool = False

    @property
    def accuracies(self) -> list[float]:
        return [r.accuracy for r in self.runs if r.accuracy is not None]

    @property
    def accuracy(self) -> float | None:
        values = self.accuracies
        return statistics.fmean(values) if values else None

    @property
    def accuracy_sd(self) -> float | None:
        values = self.accuracies
        return statistics.stdev(values) if len(values) > 1 else None

    @property
    def final_loss(self) -> float | None:
        values = [r.train["final_loss"] for r in self.runs
                  if r.train is not None and r.train["final_loss"] is not None]
        return statistics.fmean(values) if values else None

    @property
    def hardware(self) -> dict[str, Measure]:
        return next((r.hardware for r in self.runs if r.hardware), {})

    @property
    def config(self) -> dict:
        return self.runs[0].config


def read_runs(store: Store, scope: str) -> list[Run]:
    """The scope's points with their results, in order."""
    points = store.points(scope)
    tasks = store.tasks({k for p in points for k in (p["train_key"], p["hw_key"]) if k})
    runs = []
    for point in points:
        train = tasks[point["train_key"]]
        report = tasks.get(point["hw_key"]) if point["hw_key"] else None
        runs.append(Run(
            index=point["ord"], swept=point["swept"], config=train["spec"],
            train_key=point["train_key"], hw_key=point["hw_key"],
            train_status=train["status"],
            train=train["result"] if train["status"] == "done" else None,
            train_error=train["error"] if train["status"] == "failed" else None,
            report_status=None if report is None else report["status"],
            hardware=(_hardware(report["result"]) if report and report["status"] == "done"
                      else {}),
            report_error=report["error"] if report and report["status"] == "failed" else None,
            generator=None if report is None else report["spec"]["generator"]))
    return runs


def _hardware(report_json: dict) -> dict[str, Measure]:
    figures = {f.name: f for f in Report.from_json(report_json).figures()}
    out = {}
    for column, (_, names) in HARDWARE.items():
        for name in names:
            found = ([f for n, f in figures.items() if n.startswith(name)] if name.endswith(".")
                     else [figures[name]] if name in figures else [])
            if found and found[0].value is not None:
                out[column] = Measure(found[0].value, found[0].source, found[0].tool)
                break
    return out


def group_runs(runs: list[Run]) -> list[Group]:
    """Runs grouped by configuration (everything but the seed), in first-seen order, with
    :attr:`Group.front` marking the Pareto front."""
    groups: dict[str, Group] = {}
    for run in runs:
        rest = {k: v for k, v in run.config.items() if k != "seed"}
        key = json.dumps(rest, sort_keys=True)
        label = {k: v for k, v in run.swept.items() if k != "seed"}
        groups.setdefault(key, Group(label=label, runs=[])).runs.append(run)
    out = list(groups.values())
    mark_front(out)
    return out


def objectives(group: Group) -> tuple | None:
    """The group's objectives as costs to minimise, or None if it has no hardware cost or
    no accuracy yet. Power counts only if every grouped configuration has it."""
    values = {"accuracy": group.accuracy, **{k: m.value for k, m in group.hardware.items()}}
    if values["accuracy"] is None or "LUT" not in values:
        return None
    return tuple(-sign * values[name] for name, sign in OBJECTIVES if name in values)


def mark_front(groups: list[Group]) -> None:
    costs = {id(g): objectives(g) for g in groups}
    width = min((len(c) for c in costs.values() if c is not None), default=0)
    candidates = [g for g in groups if costs[id(g)] is not None]
    mask = pareto_mask([costs[id(g)][:width] for g in candidates])
    for group in groups:
        group.front = False
    for group, on_front in zip(candidates, mask):
        group.front = on_front


def shown_keys(runs: list[Run]) -> list[str]:
    """The configuration keys a table shows: the perturbation, what the sweep varies, the
    seed."""
    swept = [k for run in runs for k in run.swept if k not in ("perturbation", "seed")]
    return ["perturbation", *dict.fromkeys(swept), "seed"]
