"""The sweep's tables: Markdown (what to build, the configurations, every run) and CSV (one
row per configuration and one per run, told apart by the ``row`` column).

Every hardware number is shown with its source label: in the column header when the whole
column has one source, else beside each value (``123 [nextpnr]``); the CSV has a
``<column>_source`` column beside each hardware column. Static power comes from the board's
stated figure (label ``board-stated``; the page quotes the statement). A report whose target
clock exceeds its estimated Fmax is flagged in the ``timing`` column, with its power at the
achievable clock beside it. Every text cell goes through :mod:`zoforge.sweep.safe`.
"""
from __future__ import annotations

import csv
import io

from zoforge.reports.model import LABELS
from zoforge.sweep.recommend import SAME, Recommendation, commands, describe
from zoforge.sweep.results import METRICS, HARDWARE, Group, Run, column_title, shown_keys
from zoforge.sweep.safe import csv_cell, markdown_text

__all__ = ["markdown", "csv_text", "fmt", "column_sources", "hardware_header",
           "configuration_table", "run_table", "failures", "source_label", "BOARD_STATED",
           "timing_text", "CONFIGURATIONS_HEADING"]

_TRAIN_COLUMNS = ("accuracy_before", "accuracy_after", "final_loss", "steps_per_s", "d")
#: The label of a figure whose source is a board's own statement (static power).
BOARD_STATED = "board-stated"
CONFIGURATIONS_HEADING = ("Configurations (mean ± sd over seeds; front: * on the Pareto front "
                          "of the means; front (noise): * on the front under noise)")


def fmt(value, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def source_label(source: str) -> str:
    """A figure's source as a short label (a board's statement is ``board-stated``)."""
    return source if source in LABELS else BOARD_STATED


def column_sources(items) -> dict[str, list[str]]:
    """Hardware column -> the source labels its values carry (items: runs or groups)."""
    out: dict[str, list[str]] = {}
    for item in items:
        for column, measure in item.hardware.items():
            out.setdefault(column, [])
            label = source_label(measure.source)
            if label not in out[column]:
                out[column].append(label)
    return out


def hardware_header(column: str, sources: dict[str, list[str]]) -> str:
    found = sources.get(column, [])
    name = column_title(column)
    return f"{name} ({found[0]})" if len(found) == 1 else name


def timing_text(item) -> str:
    """``""``, or the flag of a run or configuration whose clock exceeds its Fmax."""
    if not item.over_clock():
        return ""
    fmax = item.hardware["fmax_mhz"].value
    clock = (item.report_options or {}).get("clock_mhz")
    return f"Fmax {fmax:.0f} MHz below the {clock:g} MHz clock"


def _hardware_cell(item, column: str, sources: dict[str, list[str]]) -> str:
    measure = item.hardware.get(column)
    if measure is None:
        return "-"
    text = fmt(measure.value)
    return (text if len(sources.get(column, [])) == 1
            else f"{text} [{source_label(measure.source)}]")


def _mean_sd(mean, sd) -> str:
    return fmt(mean) + ("" if sd is None else f" ± {sd:.3f}")


def _timing_columns(items):
    """The timing flag and power-at-Fmax columns, when any item exceeds its Fmax."""
    if not any(item.over_clock() for item in items):
        return [], lambda item: []
    return (["timing", "power at Fmax W (activity-model, scaled)"],
            lambda item: [timing_text(item) or "ok", fmt(item.power_at_fmax())])


def configuration_table(runs: list[Run], groups: list[Group]):
    """``(header, rows)`` of the configurations: mean ± sd over seeds, hardware, fronts."""
    keys = [k for k in shown_keys(runs) if k != "seed"]
    sources = column_sources(runs)
    columns = [c for c in HARDWARE if c in sources]
    timing, timing_cells = _timing_columns(groups)
    rows = []
    for group in groups:
        rows.append([fmt(group.config.get(k)) for k in keys]
                    + [str(group.n), _mean_sd(group.accuracy, group.accuracy_sd),
                       _mean_sd(group.final_loss, group.final_loss_sd)]
                    + [_hardware_cell(group, c, sources) for c in columns]
                    + timing_cells(group)
                    + ["*" if group.front else "", "*" if group.front_noise else ""])
    return (keys + ["seeds", *_metric_titles(groups)]
            + [hardware_header(c, sources) for c in columns] + timing
            + ["front", "front (noise)"]), rows


def _metric_titles(groups: list[Group]) -> list[str]:
    """The titles of the accuracy and final-loss columns, the ranking metric's named so."""
    titles = {"accuracy_after": "accuracy after", "final_loss": "final loss"}
    metric = groups[0].metric if groups else METRICS["train"]
    if metric.field != METRICS["train"].field:
        titles[metric.field] = f"{metric.title} (the metric, {metric.better} is better)"
    return list(titles.values())


def run_table(runs: list[Run]):
    """``(header, rows)`` of every run."""
    keys = shown_keys(runs)
    sources = column_sources(runs)
    columns = [c for c in HARDWARE if c in sources]
    timing, timing_cells = _timing_columns(runs)
    rows = [[str(run.index)] + [fmt(run.config.get(k)) for k in keys] + [run.status]
            + [fmt(None if run.train is None else run.train.get(c)) for c in _TRAIN_COLUMNS]
            + [_hardware_cell(run, c, sources) for c in columns] + timing_cells(run)
            for run in runs]
    return (["#"] + keys + ["status", *_TRAIN_COLUMNS]
            + [hardware_header(c, sources) for c in columns] + timing), rows


def failures(runs: list[Run]) -> list[str]:
    """One line per failed task: the point and the error."""
    return [f"point {run.index}: {error}" for run in runs
            for error in (run.train_error, run.report_error) if error]


def _markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    def line(cells):
        return "| " + " | ".join(markdown_text(c) for c in cells) + " |"
    return [line(header), "|" + "---|" * len(header)] + [line(row) for row in rows] + [""]


def recommendation_markdown(recommendation: Recommendation) -> list[str]:
    """The "What to build" section (Markdown lines)."""
    lines = ["## What to build", ""]
    for pick, repeated in recommendation.picks():
        text = SAME if repeated else describe(pick.group)
        lines.append(f"**{markdown_text(pick.role)}**: {markdown_text(text)}"
                     f" ({markdown_text(pick.why)})")
        lines += [""] + ([] if repeated else ["    " + command
                                              for command in commands(pick.group)] + [""])
    if recommendation.unmet:
        lines += [markdown_text(recommendation.unmet), ""]
    if recommendation.front:
        lines.append("Front under noise (" + markdown_text(recommendation.noise_test) + "):")
        lines += [""] + [f"- {markdown_text(describe(g))}" for g in recommendation.front]
    else:
        lines.append("No configuration with a generator has finished yet.")
    return lines + [""]


def markdown(title: str, runs: list[Run], groups: list[Group], notes: list[str],
             recommendation: Recommendation) -> str:
    lines = [f"# {markdown_text(title)}", ""]
    lines += [line for note in notes for line in (markdown_text(note), "")]
    lines += recommendation_markdown(recommendation)
    lines += [f"## {markdown_text(CONFIGURATIONS_HEADING)}", ""]
    lines += _markdown_table(*configuration_table(runs, groups))
    lines += ["## Runs", ""] + _markdown_table(*run_table(runs))
    failed = failures(runs)
    if failed:
        lines += ["## Failed tasks (run again with --retry-failed)", ""]
        lines += [f"- {markdown_text(line)}" for line in failed] + [""]
    return "\n".join(lines)


def csv_text(runs: list[Run], groups: list[Group]) -> str:
    """One ``configuration`` row per configuration (mean, sd and n over its seeds, the
    fronts) and one ``run`` row per point; ``configuration`` numbers a run's row's group."""
    keys = shown_keys(runs)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    header = (["row", "configuration", "index"] + keys + ["status", "n", "accuracy_mean",
              "accuracy_sd", "final_loss_mean", "final_loss_sd", "front", "front_noise",
              *_TRAIN_COLUMNS]
              + [name for c in HARDWARE for name in (c, f"{c}_source")]
              + ["clock_mhz", "over_clock", "power_at_fmax_w", "train_key", "hw_key",
                 "error"])
    writer.writerow(header)
    blank_train = [None] * len(_TRAIN_COLUMNS)
    number = {id(run): n for n, group in enumerate(groups) for run in group.runs}
    for n, group in enumerate(groups):
        statuses = {run.status for run in group.runs}
        status = next((s for s in ("failed", "running", "pending") if s in statuses), "done")
        writer.writerow([csv_cell(v) for v in (
            ["configuration", n, None] + [group.config.get(k) if k != "seed" else None
                                          for k in keys]
            + [status, group.n, group.accuracy, group.accuracy_sd, group.final_loss,
               group.final_loss_sd, group.front, group.front_noise] + blank_train
            + _hardware_values(group)
            + [(group.report_options or {}).get("clock_mhz"),
               group.over_clock() if group.hardware else None, group.power_at_fmax(),
               None, None, None])])
    for run in runs:
        writer.writerow([csv_cell(v) for v in (
            ["run", number.get(id(run)), run.index] + [run.config.get(k) for k in keys]
            + [run.status, None, None, None, None, None, None, None]
            + [None if run.train is None else run.train.get(c) for c in _TRAIN_COLUMNS]
            + _hardware_values(run)
            + [run.clock_mhz, run.over_clock() if run.hardware else None,
               run.power_at_fmax(), run.train_key, run.hw_key,
               run.train_error or run.report_error])])
    return out.getvalue()


def _hardware_values(item) -> list:
    values = []
    for column in HARDWARE:
        measure = item.hardware.get(column)
        values += ([None, None] if measure is None
                   else [measure.value, source_label(measure.source)])
    return values
