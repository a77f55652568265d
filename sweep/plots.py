"""The sweep's figures (matplotlib, PNG bytes): ours only, never the papers' numbers.

* accuracy against each numeric key the sweep varies (bit-width, RNG count, pool size, ...):
  one line per combination of the other varied keys, the mean over seeds with its standard
  deviation as error bars and every seed as a dot;
* accuracy against LUTs, BRAM18 and power: one marker per configuration with a generator,
  the two-objective Pareto front of that plot as a step line, the configurations on the
  sweep's full front (accuracy, LUT, power) ringed. Axis labels name the numbers' sources.
"""
from __future__ import annotations

import io
from dataclasses import dataclass

from zoforge.sweep.pareto import pareto_mask
from zoforge.sweep.results import Group
from zoforge.sweep.table import column_sources, hardware_header

__all__ = ["Plot", "sweep_plots", "COST_COLUMNS"]

#: The hardware columns accuracy is plotted against.
COST_COLUMNS = ("LUT", "BRAM18", "power_w")


@dataclass(frozen=True)
class Plot:
    name: str           # file stem
    title: str
    png: bytes


def sweep_plots(groups: list[Group], title: str) -> list[Plot]:
    # imported here for start-up time: matplotlib loads only when plots are drawn
    import matplotlib
    matplotlib.use("Agg")       # before pyplot: no display here
    import matplotlib.pyplot as plt

    plots = []
    for key in _numeric_swept(groups):
        figure = _accuracy_against(plt, groups, key)
        plots.append(_png(plt, figure, f"accuracy-vs-{key}",
                          f"{title}: accuracy vs {key} (mean ± sd over seeds)"))
    sources = column_sources(groups)
    for column in COST_COLUMNS:
        if column in sources:
            figure = _accuracy_against_cost(plt, groups, column, sources)
            plots.append(_png(plt, figure, f"accuracy-vs-{column}",
                              f"{title}: accuracy vs {hardware_header(column, sources)}, "
                              "Pareto front marked"))
    return plots


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _numeric_swept(groups: list[Group]) -> list[str]:
    """Varied keys with numeric values (in the configurations that set them)."""
    keys = dict.fromkeys(k for g in groups for k in g.label)
    out = []
    for key in keys:
        values = {g.config.get(key) for g in groups if key in g.label}
        if len(values) > 1 and all(_number(v) for v in values):
            out.append(key)
    return out


def _series_label(group: Group, key: str) -> str:
    rest = {k: v for k, v in group.label.items() if k != key}
    return ", ".join(f"{k}={v}" for k, v in rest.items()) or group.config["perturbation"]


def _accuracy_against(plt, groups: list[Group], key: str):
    figure, axes = plt.subplots(figsize=(6.4, 4.0))
    series: dict[str, list[Group]] = {}
    groups = [g for g in groups if key in g.label and g.accuracy is not None]
    for group in groups:
        series.setdefault(_series_label(group, key), []).append(group)
    for label, members in series.items():
        members.sort(key=lambda g: g.config[key])
        xs = [g.config[key] for g in members]
        line = axes.errorbar(xs, [g.accuracy for g in members],
                             yerr=[g.accuracy_sd or 0.0 for g in members], marker="o",
                             capsize=3, label=label)
        colour = line[0].get_color()
        for x, group in zip(xs, members):
            axes.scatter([x] * len(group.accuracies), group.accuracies, s=10, alpha=0.35,
                         color=colour)
    values = sorted({g.config[key] for g in groups})
    if min(values) > 0 and max(values) / min(values) >= 8:
        axes.set_xscale("log", base=2)
    axes.set_xticks(values, [str(v) for v in values])
    axes.set(xlabel=key, ylabel="test accuracy after training (ours)")
    axes.grid(alpha=0.3)
    if len(series) > 1:
        axes.legend(fontsize=7)
    return figure


def _accuracy_against_cost(plt, groups: list[Group], column: str, sources):
    figure, axes = plt.subplots(figsize=(6.4, 4.0))
    priced = [g for g in groups if g.accuracy is not None and column in g.hardware]
    colours: dict[str, str] = {}
    for group in priced:
        perturbation = group.config["perturbation"]
        x = group.hardware[column].value
        handle = axes.errorbar([x], [group.accuracy], yerr=[group.accuracy_sd or 0.0],
                               marker="o", capsize=3, linestyle="none",
                               color=colours.get(perturbation),
                               label=None if perturbation in colours else perturbation)
        colours.setdefault(perturbation, handle[0].get_color())
        if group.front:
            axes.scatter([x], [group.accuracy], s=160, facecolors="none",
                         edgecolors="black", linewidths=1.2)
    mask = pareto_mask([(g.hardware[column].value, -g.accuracy) for g in priced])
    front = sorted((g.hardware[column].value, g.accuracy) for g, m in zip(priced, mask) if m)
    if front:
        axes.step([x for x, _ in front], [y for _, y in front], where="post", color="black",
                  linewidth=1, alpha=0.6, label="Pareto front (this pair)")
    axes.scatter([], [], s=160, facecolors="none", edgecolors="black",
                 label="on the sweep's front (accuracy, LUT, power)")
    for group in groups:        # software sources: accuracy only, no generator to cost
        if group.accuracy is not None and not group.hardware:
            axes.axhline(group.accuracy, linestyle=":", color="grey",
                         label=f"{_series_label(group, '')} (software source, no generator)")
    values = [g.hardware[column].value for g in priced]
    if values and min(values) > 0 and max(values) / min(values) >= 20:
        axes.set_xscale("log")
    axes.set(xlabel=hardware_header(column, sources),
             ylabel="test accuracy after training (ours)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7)
    return figure


def _png(plt, figure, name: str, title: str) -> Plot:
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    return Plot(name, title, buffer.getvalue())
