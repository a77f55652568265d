"""Write a scope's outputs from the store: ``<name>.md``, ``<name>.csv``,
``<name>-plots/*.png`` and the self-contained ``<name>.html`` (see :mod:`.table`,
:mod:`.plots`, :mod:`.html`), each opening with the recommendation (:mod:`.recommend`).
Reads only the store, so it can run at any time, also while the sweep is still running
(unfinished points show their status). Every file is written through :mod:`zoforge.outputs`
(atomically, never through a symbolic link inside ``out_dir``; a failed write is one line
naming ``--out`` and the file)."""
from __future__ import annotations

from pathlib import Path

from zoforge.outputs import check_targets, make_dirs, make_out_dir, write_bytes, write_text
from zoforge.sweep.html import page
from zoforge.sweep.plots import sweep_plots
from zoforge.sweep.recommend import Recommendation, recommend
from zoforge.sweep.results import group_runs, read_runs
from zoforge.sweep.store import Store
from zoforge.sweep.table import (BOARD_STATED, CONFIGURATIONS_HEADING, configuration_table,
                                 csv_text, failures, markdown, run_table, source_label)

__all__ = ["write_outputs", "Outputs"]


class Outputs(dict):
    """The written files' paths by kind (``markdown``, ``csv``, ``html``, ``plots``), with
    the :attr:`recommendation` they open with."""

    recommendation: Recommendation


def write_outputs(store: Store, scope: str, out_dir: Path | str, plots: bool = True,
                  budget: dict[str, float] | None = None) -> Outputs:
    """Write the outputs of ``scope`` into ``out_dir``; returns their paths by kind.
    ``budget``: hardware column -> limit (:func:`zoforge.sweep.recommend.parse_budget`)."""
    out = make_out_dir("--out", out_dir)
    data = store.scopes().get(scope, {})
    runs = read_runs(store, scope)
    groups = group_runs(runs)
    recommendation = recommend(groups, budget)
    counts = store.counts(scope)
    title = f"Sweep {scope}"
    notes = [text for text in (data.get("description", ""),) if text]
    notes.append(f"{len(runs)} points, {len(groups)} configurations; tasks: "
                 + ", ".join(f"{n} {status}" for status, n in counts.items()) + ". "
                 "Hardware numbers carry their source label; accuracy is the test accuracy "
                 "after training (ours).")
    over = [g for g in groups if g.over_clock()]
    if over:
        notes.append(f"WARNING: {len(over)} of {len(groups)} configurations' target clock "
                     "exceeds their estimated Fmax (flagged in the timing column and crossed "
                     "in red in the plots); their power at the achievable clock is beside it.")
    stem = _stem(scope)
    paths = Outputs(markdown=out / f"{stem}.md", csv=out / f"{stem}.csv",
                    html=out / f"{stem}.html")
    paths.recommendation = recommendation
    check_targets(out, list(paths.values()))      # before any file is written
    paper = data.get("paper", "")
    text_notes = notes + ([f"paper (not our measurement): {paper}"] if paper else [])
    write_text(paths["markdown"], markdown(title, runs, groups, text_notes, recommendation),
               root=out)
    write_text(paths["csv"], csv_text(runs, groups), root=out)
    figures = sweep_plots(groups, scope) if plots else []
    folder = out / f"{stem}-plots"
    if figures:
        make_dirs(out, folder)
        for figure in figures:
            write_bytes(folder / f"{figure.name}.png", figure.png, root=out)
        paths["plots"] = folder
    tables = [(CONFIGURATIONS_HEADING, *configuration_table(runs, groups)),
              ("Runs", *run_table(runs))]
    stated = sorted({m.source for run in runs for m in run.hardware.values()
                     if source_label(m.source) == BOARD_STATED})
    write_text(paths["html"], page(title, notes, paper, recommendation, tables, figures,
                                   failures(runs), stated), root=out)
    return paths


def _stem(scope: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in scope)
