"""A scope's results, read back from the store: one :class:`Run` per point (a training
joined with its generator's report on the stable keys) and one :class:`Group` per
configuration (the runs that differ only in the seed), with the Pareto front marked.

Hardware numbers come out of the stored report (``Report.from_json(...).figures()``) with
the source label of each (``yosys-estimate``, ``activity-model``, ``nextpnr``, ``vivado``):
:data:`HARDWARE` names which figure each column takes, a real (post-route) figure before an
estimate. Each task kind ranks its configurations by one quality :class:`Metric`
(:data:`METRICS`: a head-level ``train`` by the test accuracy, higher is better; a
``finetune`` by the final few-shot training loss, lower is better); a scope mixing kinds
is refused. The front is over the configurations with a generator: the best mean metric,
fewest LUTs and (if measured) least power. Two fronts are marked: :attr:`Group.front`
on the exact means, and :attr:`Group.front_noise`, where a configuration is dominated only
when another is no worse in every objective and it is worse beyond the seeds' spread in one
(:func:`metric_tolerance`: two means differ when their gap exceeds twice its standard
error; the hardware figures are exact). The front under noise holds the exact front and
the configurations that only a difference within the noise removed from it.

A report whose target clock exceeds its estimated Fmax is flagged (:meth:`Run.over_clock`)
and its power re-evaluated at the achievable clock (:meth:`Run.power_at_fmax`: the static
power plus the dynamic power scaled by Fmax / clock).
"""
from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field

from zoforge.errors import ConfigError
from zoforge.reports.model import Report
from zoforge.sweep.pareto import pareto_mask, pareto_mask_within
from zoforge.sweep.store import Store

__all__ = ["Measure", "Run", "Group", "read_runs", "group_runs", "HARDWARE", "OBJECTIVES",
           "objectives", "mark_front", "shown_keys", "metric_tolerance", "accuracy_tolerance",
           "NOISE_TEST", "noise_test", "column_title", "Metric", "METRICS"]

#: column -> (unit, figure names in order of preference; a name ending in "." is a prefix)
HARDWARE = {
    "LUT": ("count", ("vivado.utilization.LUT", "nextpnr.resources.LUT", "resources.total.LUT")),
    # the generator's core and its shift stage apart (docs/table6.md: PeZO's Table 6 counts
    # the core); only reports whose design has these blocks (the on-the-fly generator)
    "LUT_core": ("count", ("resources.blocks.core.LUT",)),
    "LUT_shift": ("count", ("resources.blocks.shift.LUT",)),
    "FF": ("count", ("vivado.utilization.FF", "nextpnr.resources.FF", "resources.total.FF")),
    "BRAM18": ("count", ("nextpnr.resources.BRAM18", "resources.total.BRAM18")),
    "DSP": ("count", ("nextpnr.resources.DSP", "resources.total.DSP")),
    "power_w": ("W", ("vivado.power.total_w", "power.total_w")),
    "static_w": ("W", ("vivado.power.static_w", "power.static_w")),
    "dynamic_w": ("W", ("vivado.power.dynamic_w", "power.dynamic_w")),
    "fmax_mhz": ("MHz", ("vivado.timing.fmax_mhz", "nextpnr.fmax_mhz.", "fmax.fmax_mhz")),
}


@dataclass(frozen=True)
class Metric:
    """What ranks a task kind's configurations: ``field`` of its training result, with
    ``direction`` +1 when higher is better and -1 when lower is; ``title`` names it in
    every sentence, ``plural`` in "two mean ...s"."""

    field: str
    direction: int
    title: str
    plural: str

    @property
    def better(self) -> str:
        return "higher" if self.direction > 0 else "lower"


#: Task kind (a training spec's ``task``; none: ``train``) -> its metric. A fine-tuning
#: ranks by the final training loss, not its ratio to the first: the protocol's metric
#: (PeZO Fig. 4's), present in every result, and the first loss is the same for every
#: configuration of one seed (same model, data and zero-initialised adapters).
METRICS = {"train": Metric("accuracy_after", 1, "accuracy", "accuracies"),
           "finetune": Metric("final_loss", -1, "final training loss", "final losses")}
#: The search's and the front's objectives: (column, +1 maximise / -1 minimise);
#: ``quality`` is the group's metric with its direction (:attr:`Group.metric`).
OBJECTIVES = (("quality", 1), ("LUT", -1), ("power_w", -1))


def noise_test(metric: Metric) -> str:
    """How the front under noise compares two means of ``metric`` (stated on the page)."""
    return ("a configuration is dominated only by one that is no worse in every "
            f"objective and better beyond the noise in one; two mean {metric.plural} differ "
            "only when their gap exceeds twice its standard error, "
            "sqrt(sd_a^2/n_a + sd_b^2/n_b) (Welch; about 95 % for normal errors); a "
            "configuration with one seed has no spread and is compared exactly; the "
            "hardware figures are exact")


#: The head-level sweeps' noise test (:func:`noise_test` of the accuracy).
NOISE_TEST = noise_test(METRICS["train"])


def column_title(column: str) -> str:
    """A hardware column's name for people: ``LUT core``, ``power W``, ``static power W``,
    ``fmax MHz``."""
    unit = HARDWARE[column][0]
    if unit == "count":
        return column.replace("_", " ")
    name = column.rsplit("_", 1)[0].replace("_", " ")
    return f"{name} power W" if unit == "W" and name != "power" else f"{name} {unit}"


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
    report_options: dict | None = None   # the sweep's [report] options of its report

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

    @property
    def task(self) -> str:
        """The training's task kind (:data:`METRICS`' keys)."""
        return self.config.get("task", "train")

    @property
    def metric(self) -> Metric:
        return METRICS[self.task]

    @property
    def quality(self) -> float | None:
        """The run's metric value (None before its training is done)."""
        return None if self.train is None else self.train.get(self.metric.field)

    @property
    def clock_mhz(self) -> float | None:
        return None if self.report_options is None else self.report_options["clock_mhz"]

    def over_clock(self) -> bool:
        """True when the report's target clock exceeds its (estimated) Fmax."""
        fmax = self.hardware.get("fmax_mhz")
        return (fmax is not None and self.clock_mhz is not None
                and fmax.value < self.clock_mhz)

    def power_at_fmax(self) -> float | None:
        """Static + dynamic power at the achievable clock (Fmax) when the target clock
        exceeds it, else None."""
        if not self.over_clock() or not {"static_w", "dynamic_w"} <= set(self.hardware):
            return None
        scale = self.hardware["fmax_mhz"].value / self.clock_mhz
        return self.hardware["static_w"].value + self.hardware["dynamic_w"].value * scale


def _mean(values: list[float]) -> float | None:
    """The mean over the seeds, None with none."""
    return statistics.fmean(values) if values else None


def _sd(values: list[float]) -> float | None:
    """The sample standard deviation over the seeds, None with fewer than two."""
    return statistics.stdev(values) if len(values) > 1 else None


@dataclass
class Group:
    """The runs of one configuration (all its seeds)."""

    label: dict             # the swept values without the seed
    runs: list[Run]
    front: bool = False         # on the Pareto front of the exact means
    front_noise: bool = False   # on the front under noise (NOISE_TEST)

    @property
    def accuracies(self) -> list[float]:
        return [r.accuracy for r in self.runs if r.accuracy is not None]

    @property
    def n(self) -> int:
        """The number of seeds with a finished training."""
        return len(self.accuracies)

    @property
    def accuracy(self) -> float | None:
        return _mean(self.accuracies)

    @property
    def accuracy_sd(self) -> float | None:
        return _sd(self.accuracies)

    @property
    def metric(self) -> Metric:
        """The metric of the group's task kind (one kind per scope: :func:`group_runs`)."""
        return self.runs[0].metric

    @property
    def qualities(self) -> list[float]:
        return [r.quality for r in self.runs if r.quality is not None]

    @property
    def quality(self) -> float | None:
        """The mean of the metric over the seeds."""
        return _mean(self.qualities)

    @property
    def quality_sd(self) -> float | None:
        return _sd(self.qualities)

    @property
    def final_losses(self) -> list[float]:
        return [r.train["final_loss"] for r in self.runs
                if r.train is not None and r.train["final_loss"] is not None]

    @property
    def final_loss(self) -> float | None:
        return _mean(self.final_losses)

    @property
    def final_loss_sd(self) -> float | None:
        return _sd(self.final_losses)

    @property
    def hardware(self) -> dict[str, Measure]:
        return self._report_run.hardware if self._report_run else {}

    @property
    def _report_run(self) -> Run | None:
        return next((r for r in self.runs if r.hardware), None)

    @property
    def generator(self) -> dict | None:
        return next((r.generator for r in self.runs if r.generator), None)

    @property
    def report_options(self) -> dict | None:
        return next((r.report_options for r in self.runs if r.report_options), None)

    def over_clock(self) -> bool:
        return self._report_run is not None and self._report_run.over_clock()

    def power_at_fmax(self) -> float | None:
        return None if self._report_run is None else self._report_run.power_at_fmax()

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
            generator=None if report is None else report["spec"]["generator"],
            report_options=None if report is None else report["spec"]["report"]))
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
    :attr:`Group.front` marking the Pareto front. Runs of different task kinds are refused
    (their metrics do not compare)."""
    kinds = sorted({run.task for run in runs})
    if len(kinds) > 1:
        raise ConfigError("sweep task", "one task kind per sweep (their metrics differ)",
                          " and ".join(kinds))
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
    no metric yet. Power counts only if every grouped configuration has it."""
    quality = group.quality
    values = {"quality": None if quality is None else group.metric.direction * quality,
              **{k: m.value for k, m in group.hardware.items()}}
    if values["quality"] is None or "LUT" not in values:
        return None
    return tuple(-sign * values[name] for name, sign in OBJECTIVES if name in values)


def metric_tolerance(a: Group, b: Group) -> float:
    """The gap below which the mean metrics of ``a`` and ``b`` count as equal
    (:func:`noise_test`)."""
    variance = sum((g.quality_sd or 0.0) ** 2 / len(g.qualities) for g in (a, b)
                   if g.qualities)
    return 2.0 * math.sqrt(variance)


#: The name the head-level sweeps' tests and callers know it by.
accuracy_tolerance = metric_tolerance


def mark_front(groups: list[Group]) -> None:
    """Set :attr:`Group.front` (exact means) and :attr:`Group.front_noise` of ``groups``."""
    costs = {id(g): objectives(g) for g in groups}
    width = min((len(c) for c in costs.values() if c is not None), default=0)
    candidates = [g for g in groups if costs[id(g)] is not None]
    vectors = [costs[id(g)][:width] for g in candidates]
    mask = pareto_mask(vectors)
    noisy = pareto_mask_within(vectors, lambda i, j, k: metric_tolerance(
        candidates[i], candidates[j]) if k == 0 else 0.0)
    for group in groups:
        group.front = group.front_noise = False
    for group, on_front, on_noisy in zip(candidates, mask, noisy):
        group.front, group.front_noise = on_front, on_noisy


def shown_keys(runs: list[Run]) -> list[str]:
    """The configuration keys a table shows: the perturbation, what the sweep varies, the
    seed."""
    swept = [k for run in runs for k in run.swept if k not in ("perturbation", "seed")]
    return ["perturbation", *dict.fromkeys(swept), "seed"]
