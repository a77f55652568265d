"""The sweep's tables: Markdown (configurations, then every run) and CSV (every run).

Every hardware number is shown with its source label: in the column header when the whole
column has one source, else beside each value (``123 [nextpnr]``); the CSV has a
``<column>_source`` column beside each hardware column.
"""
from __future__ import annotations

import csv
import io

from zoforge.sweep.results import HARDWARE, Group, Run, shown_keys

__all__ = ["markdown", "csv_text", "fmt", "column_sources", "hardware_header",
           "configuration_table", "run_table", "failures"]

_TRAIN_COLUMNS = ("accuracy_before", "accuracy_after", "final_loss", "steps_per_s", "d")


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


def column_sources(items) -> dict[str, list[str]]:
    """Hardware column -> the source labels its values carry (items: runs or groups)."""
    out: dict[str, list[str]] = {}
    for item in items:
        for column, measure in item.hardware.items():
            out.setdefault(column, [])
            if measure.source not in out[column]:
                out[column].append(measure.source)
    return out


def hardware_header(column: str, sources: dict[str, list[str]]) -> str:
    found = sources.get(column, [])
    unit = HARDWARE[column][0]
    name = column if unit == "count" else column.rsplit("_", 1)[0] + f" {unit}"
    return f"{name} ({found[0]})" if len(found) == 1 else name


def _hardware_cell(item, column: str, sources: dict[str, list[str]]) -> str:
    measure = item.hardware.get(column)
    if measure is None:
        return "-"
    text = fmt(measure.value)
    return text if len(sources.get(column, [])) == 1 else f"{text} [{measure.source}]"


def _markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(row) + " |" for row in rows] + [""])


def configuration_table(runs: list[Run], groups: list[Group]):
    """``(header, rows)`` of the configurations: mean ± sd over seeds, hardware, front."""
    keys = [k for k in shown_keys(runs) if k != "seed"]
    sources = column_sources(runs)
    columns = [c for c in HARDWARE if c in sources]
    rows = []
    for group in groups:
        accuracy = fmt(group.accuracy)
        if group.accuracy_sd is not None:
            accuracy += f" ± {group.accuracy_sd:.3f}"
        rows.append([fmt(group.config.get(k)) for k in keys]
                    + [str(len(group.accuracies)), accuracy, fmt(group.final_loss)]
                    + [_hardware_cell(group, c, sources) for c in columns]
                    + ["*" if group.front else ""])
    return (keys + ["seeds", "accuracy after", "final loss"]
            + [hardware_header(c, sources) for c in columns] + ["front"]), rows


def run_table(runs: list[Run]):
    """``(header, rows)`` of every run."""
    keys = shown_keys(runs)
    sources = column_sources(runs)
    columns = [c for c in HARDWARE if c in sources]
    rows = [[str(run.index)] + [fmt(run.config.get(k)) for k in keys] + [run.status]
            + [fmt(None if run.train is None else run.train.get(c)) for c in _TRAIN_COLUMNS]
            + [_hardware_cell(run, c, sources) for c in columns] for run in runs]
    return (["#"] + keys + ["status", *_TRAIN_COLUMNS]
            + [hardware_header(c, sources) for c in columns]), rows


def failures(runs: list[Run]) -> list[str]:
    """One line per failed task: the point and the error."""
    return [f"point {run.index}: {error}" for run in runs
            for error in (run.train_error, run.report_error) if error]


def markdown(title: str, runs: list[Run], groups: list[Group], notes: list[str]) -> str:
    lines = [f"# {title}", ""] + [line for note in notes for line in (note, "")]
    lines += ["## Configurations (mean ± sd over seeds; * on the Pareto front)", ""]
    lines += _markdown_table(*configuration_table(runs, groups))
    lines += ["## Runs", ""] + _markdown_table(*run_table(runs))
    failed = failures(runs)
    if failed:
        lines += ["## Failed tasks (run again with --retry-failed)", ""]
        lines += [f"- {line}" for line in failed] + [""]
    return "\n".join(lines)


def csv_text(runs: list[Run]) -> str:
    keys = shown_keys(runs)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    header = (["index"] + keys + ["status", *_TRAIN_COLUMNS]
              + [name for c in HARDWARE for name in (c, f"{c}_source")]
              + ["train_key", "hw_key", "error"])
    writer.writerow(header)
    for run in runs:
        hardware = []
        for column in HARDWARE:
            measure = run.hardware.get(column)
            hardware += [None, None] if measure is None else [measure.value, measure.source]
        writer.writerow([run.index] + [run.config.get(k) for k in keys] + [run.status]
                        + [None if run.train is None else run.train.get(c)
                           for c in _TRAIN_COLUMNS]
                        + hardware + [run.train_key, run.hw_key,
                                      run.train_error or run.report_error])
    return out.getvalue()
