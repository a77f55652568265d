"""The sweep's figures (matplotlib, PNG bytes): ours only, never the papers' numbers.

* accuracy, and the final training loss (the metric of PeZO's Fig. 4), against each
  numeric key the sweep varies (bit-width, RNG count, pool size, ...): one line per
  combination of the other varied keys, the mean over seeds with its standard deviation as
  error bars and every seed as a dot;
* accuracy against LUTs, BRAM18 and dynamic power: one marker per configuration with a
  generator, labelled with its configuration, the two-objective Pareto front of that plot
  as a step line, the configurations on the sweep's front under noise ringed, those whose
  target clock exceeds their estimated Fmax crossed in red. Power is the dynamic part on
  an axis from 0 (the static power, the same for every design on a board, is named in the
  axis label with its source). Axis labels name the numbers' sources.

A plot whose x values are all equal (a BRAM18 plot where every design uses none) says
nothing and is skipped. Text from the sweep is shown literally (``$`` is no math).
"""
from __future__ import annotations

import io
from dataclasses import dataclass

from zoforge.sweep.pareto import pareto_mask
from zoforge.sweep.results import Group
from zoforge.sweep.safe import plain
from zoforge.sweep.table import column_sources, hardware_header

__all__ = ["Plot", "sweep_plots", "COST_COLUMNS"]

#: The hardware columns accuracy is plotted against (dynamic power, else the total).
COST_COLUMNS = ("LUT", "BRAM18", "dynamic_w")


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
        for metric in _METRICS:
            figure = _metric_against(plt, groups, key, metric)
            plots.append(_png(plt, figure, f"{metric.name}-vs-{key}",
                              f"{title}: {metric.label} vs {key} (mean ± sd over seeds)"))
    sources = column_sources(groups)
    for column in COST_COLUMNS:
        if column == "dynamic_w" and column not in sources:
            column = "power_w"
        metric = _ranked(groups)
        values = {g.hardware[column].value for g in groups
                  if g.quality is not None and column in g.hardware}
        if len(values) > 1:             # all equal (or none): nothing to show
            figure = _accuracy_against_cost(plt, groups, column, sources)
            plots.append(_png(plt, figure, f"{metric.name}-vs-{column}",
                              f"{title}: {groups[0].metric.title} vs "
                              f"{hardware_header(column, sources)}, Pareto front marked"))
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


def _literal(text) -> str:
    """Sweep text as matplotlib shows it literally: one line, ``$`` not math."""
    return plain(text).replace("$", r"\$")


def _series_label(group: Group, key: str) -> str:
    rest = {k: v for k, v in group.label.items() if k != key}
    return _literal(", ".join(f"{k}={v}" for k, v in rest.items())
                    or group.config["perturbation"])


def _point_label(group: Group) -> str:
    """The configuration of a point, short: the swept values but the perturbation when
    others are swept (``n_rng=7, bits=6``)."""
    label = {k: v for k, v in group.label.items() if k != "perturbation"} or group.label
    return _literal(", ".join(f"{k}={v}" for k, v in label.items())
                    or group.config["perturbation"])


@dataclass(frozen=True)
class _Metric:
    name: str           # file-name part
    label: str          # axis label
    mean: str           # Group attributes: mean, sd, the seeds' values
    sd: str
    values: str


_METRICS = (_Metric("accuracy", "test accuracy after training (ours)", "accuracy",
                    "accuracy_sd", "accuracies"),
            _Metric("final-loss", "final training loss (ours; mean of the last 50 steps)",
                    "final_loss", "final_loss_sd", "final_losses"))


def _ranked(groups: list[Group]) -> _Metric:
    """The plotted metric that ranks ``groups`` (their task kind's :attr:`Group.metric`)."""
    field = groups[0].metric.field if groups else "accuracy_after"
    return _METRICS[0] if field == "accuracy_after" else _METRICS[1]


def _metric_against(plt, groups: list[Group], key: str, metric: _Metric):
    figure, axes = plt.subplots(figsize=(6.4, 4.0))
    series: dict[str, list[Group]] = {}
    groups = [g for g in groups if key in g.label and getattr(g, metric.mean) is not None]
    for group in groups:
        series.setdefault(_series_label(group, key), []).append(group)
    for label, members in series.items():
        members.sort(key=lambda g: g.config[key])
        xs = [g.config[key] for g in members]
        line = axes.errorbar(xs, [getattr(g, metric.mean) for g in members],
                             yerr=[getattr(g, metric.sd) or 0.0 for g in members],
                             marker="o", capsize=3, label=label)
        colour = line[0].get_color()
        for x, group in zip(xs, members):
            values = getattr(group, metric.values)
            axes.scatter([x] * len(values), values, s=10, alpha=0.35, color=colour)
    values = sorted({g.config[key] for g in groups})
    if min(values) > 0 and max(values) / min(values) >= 8:
        axes.set_xscale("log", base=2)
    axes.set_xticks(values, [str(v) for v in values])
    axes.set(xlabel=key, ylabel=metric.label)
    axes.grid(alpha=0.3)
    if len(series) > 1:
        axes.legend(fontsize=7)
    return figure


def _accuracy_against_cost(plt, groups: list[Group], column: str, sources):
    figure, axes = plt.subplots(figsize=(6.4, 4.0))
    metric, direction = _ranked(groups), groups[0].metric.direction
    priced = [g for g in groups if g.quality is not None and column in g.hardware]
    colours: dict[str, str] = {}
    for group in priced:
        perturbation = group.config["perturbation"]
        x = group.hardware[column].value
        handle = axes.errorbar([x], [group.quality], yerr=[getattr(group, metric.sd) or 0.0],
                               marker="o", capsize=3, linestyle="none",
                               color=colours.get(perturbation),
                               label=None if perturbation in colours else perturbation)
        colours.setdefault(perturbation, handle[0].get_color())
        axes.annotate(_point_label(group), (x, group.quality), textcoords="offset points",
                      xytext=(5, 4), fontsize=6)
        if group.front_noise:
            axes.scatter([x], [group.quality], s=160, facecolors="none",
                         edgecolors="black", linewidths=1.2)
        if group.over_clock():
            axes.scatter([x], [group.quality], s=90, marker="x", color="red")
    mask = pareto_mask([(g.hardware[column].value, -direction * g.quality) for g in priced])
    front = sorted((g.hardware[column].value, g.quality) for g, m in zip(priced, mask) if m)
    if front:
        axes.step([x for x, _ in front], [y for _, y in front], where="post", color="black",
                  linewidth=1, alpha=0.6, label="Pareto front (this pair)")
    axes.scatter([], [], s=160, facecolors="none", edgecolors="black",
                 label=f"on the sweep's front under noise ({groups[0].metric.title}, LUT, "
                 "power)")
    if any(g.over_clock() for g in priced):
        axes.scatter([], [], s=90, marker="x", color="red",
                     label="target clock above its estimated Fmax")
    for group in groups:        # software sources: the metric only, no generator to cost
        if group.quality is not None and not group.hardware:
            axes.axhline(group.quality, linestyle=":", color="grey",
                         label=f"{_series_label(group, '')} (software source, no generator)")
    values = [g.hardware[column].value for g in priced]
    xlabel = _literal(hardware_header(column, sources))
    if column == "dynamic_w":
        axes.set_xlim(left=0, right=max(values) * 1.15)
        static = sorted({g.hardware["static_w"].value for g in priced
                         if "static_w" in g.hardware})
        if static:
            xlabel += ("; static " + " / ".join(f"{w:.3g}" for w in static)
                       + f" W apart ({_literal(', '.join(sources.get('static_w', [])))})")
    elif values and min(values) > 0 and max(values) / min(values) >= 20:
        axes.set_xscale("log")
    axes.set(xlabel=xlabel, ylabel=metric.label)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7)
    return figure


def _png(plt, figure, name: str, title: str) -> Plot:
    figure.suptitle(_literal(title), fontsize=9)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    return Plot(name, title, buffer.getvalue())
