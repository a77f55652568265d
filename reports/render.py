"""Write a build report (a :class:`~zoforge.reports.model.Report`, as
:func:`zoforge.reports.pipeline.build_report` returns it) as ``report.json``, ``report.md``
and ``report.png``. Every number carries its source label.
"""
from __future__ import annotations

import json
from pathlib import Path

from zoforge.outputs import output_path, write_text
from zoforge.reports.model import RESOURCE_KEYS, Composition, Report, VivadoFigures

__all__ = ["write_report", "render_markdown", "plot_report", "summary_lines"]

_KEYS = RESOURCE_KEYS


def write_report(report: Report, out_dir: Path | str) -> dict[str, Path]:
    out = Path(out_dir)
    paths = {"json": out / "report.json", "markdown": out / "report.md"}
    write_text(paths["json"], json.dumps(report.to_json(), indent=1, sort_keys=True,
                                         default=str) + "\n", root=out)
    write_text(paths["markdown"], render_markdown(report), root=out)
    plot = plot_report(report, out / "report.png")
    if plot is not None:
        paths["plot"] = plot
    return paths


def _fmt(value, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _table(header: list[str], rows: list[list]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_fmt(cell) for cell in row) + " |" for row in rows]
    return lines + [""]


def render_markdown(report: Report) -> str:
    board = report.board
    lines = [f"# {report.design} on {board.name} ({board.part})", "",
             f"Target clock: {report.clock_mhz:g} MHz. Sources: `yosys-estimate` (Yosys "
             "synth_xilinx mapping, an estimate), `activity-model` (power from simulated "
             "switching activity, an estimate), `nextpnr` (post-route, real for that board), "
             "`vivado` (parsed Vivado reports); `(per unit x count)`: composed from one "
             "build of each distinct unit.", ""]
    if report.config:
        lines += ["Configuration: " + ", ".join(f"`{k}={v}`" for k, v
                                                in sorted(report.config.items())
                                                if not isinstance(v, (dict, list))), ""]
    resources = report.resources
    if resources:
        lines += ["## Resources", "", f"Source: `{resources.source}` ({resources.tool}, "
                  f"synth_xilinx -family {resources.family}, memories: "
                  f"{resources.ram_style}).", ""]
        rows = []
        composed = {f"{u.count} x {u.name}": f"{u.design}, its own build in `{u.folder}`"
                    for u in report.composition.units} if report.composition else {}
        for name, counts in resources.blocks.items():
            description = report.blocks.get(name, composed.get(
                name, "top-level glue" if name == "(top)" else ""))
            rows.append([f"`{name}`", description, *[counts.get(k, 0) for k in _KEYS]])
        total = resources.total
        rows.append(["**total**", "", *[total.get(k, 0) for k in _KEYS]])
        percent = resources.percent
        rows.append([f"% of {board.name}", board.capacity_source,
                     *[f"{percent[k]:.3f} %" if percent.get(k) is not None else "-"
                       for k in _KEYS]])
        lines += _table(["block", "what", *_KEYS], rows)
        if resources.missing_blocks:
            lines += ["Blocks not found as separate modules (inlined into their parent): "
                      + ", ".join(resources.missing_blocks), ""]
        lines += ["Notes: " + "; ".join(resources.notes) + ".", ""]
    if report.composition:
        lines += _composition_section(report.composition)
    fmax = report.fmax
    if fmax:
        lines += ["## Fmax", "", f"**{fmax.fmax_mhz:.0f} MHz** (`{fmax.source}`, "
                  f"{fmax.tool}; " + (f"{fmax.method}; " if report.composition else "")
                  + f"critical path {fmax.critical_ns:.2f} ns, "
                  f"{fmax.logic_levels} LUT levels, limited by {fmax.limited_by}; "
                  f"{fmax.family} delays): " + " -> ".join(fmax.path[:20]), "",
                  "Loads of the nets along it: " + ", ".join(map(str, fmax.path_loads[:20])),
                  "", *(["Per clock (the paths between one clock's registers; a crossing is "
                         "not timed): " + ", ".join(f"`{clock}` {mhz:.2f} MHz" for clock, mhz
                                                    in fmax.by_clock.items()), ""]
                        if fmax.by_clock else []),
                  "Model: " + " ".join(
                      fmax.model.split()), ""]
        lines += _table(["delay", "value", "meaning", "source"],
                        [[d.symbol, d.ns, d.meaning, d.source] for d in fmax.delays.values()])
        lines += ["How far the model is from a real router: " + fmax.error_note() + ".", ""]
        if fmax.error is not None:
            lines += [f"Measured by `{fmax.error.command}` at {fmax.error.measured_at} "
                      f"({fmax.error.router}; the {fmax.error.family} table on the netlist "
                      "nextpnr placed):", ""]
            lines += _table(["design", "model MHz", "nextpnr MHz", "error %",
                             "fitted without it, MHz", "error %"], fmax.error.rows)
    pnr = report.nextpnr
    if pnr:
        lines += ["## Post-route (nextpnr)", "", f"Source: `{pnr.source}` ({pnr.tool}), "
                  "whole chip including the board harness.", ""]
        lines += _table(["resource", "used"], [[k, v] for k, v in pnr.resources.items()])
        lines += _table(["clock", "achieved Fmax (MHz)", "constraint (MHz)"],
                        [[clock, mhz, pnr.constraint_mhz.get(clock)]
                         for clock, mhz in pnr.fmax_mhz.items()])
    power = report.power
    activity = report.activity
    if power:
        measured = (f"measured over {activity.cycles} simulated cycles ({activity.tool}), "
                    f"stimulus: {activity.mode}; SAIF: `{Path(activity.saif).name}`"
                    if activity else "each unit's measured in its own co-simulation, count x "
                    "unit (the units' reports)")
        lines += ["## Power", "", f"**Dynamic {power.dynamic_w:.4f} W** "
                  f"(`{power.source}` at {power.frequency_mhz:g} MHz, mean toggle rate "
                  f"{power.toggle_rate:.3f} per cycle {measured}).", "",
                  f"**Static {power.static_w:.3f} W**, the board's figure, not the model's: "
                  f"{power.static_source}.", "",
                  f"Static + dynamic: {power.total_w:.3f} W.", ""]
        lines += _table(["dynamic part", "W"], [[k, v] for k, v in power.breakdown_w.items()])
        if power.block_dynamic_w:
            lines += _table(["block", "toggle rate", "dynamic W (clock tree excluded)"],
                            [[f"`{name}`", activity.block_rates.get(name) if activity
                              else None, watts]
                             for name, watts in power.block_dynamic_w.items()])
        lines += [f"Coefficients (every one used above; {power.tool}):", ""]
        lines += _table(["symbol", "value", "unit", "meaning", "source"],
                        [["P_static", power.static_w, "W", f"device static power, the "
                          f"board's figure ({board.name})", power.static_source]]
                        + [[c.symbol, c.value, c.unit, c.meaning, c.source]
                           for c in power.coefficients.values()])
    if report.vivado:
        lines += _vivado_section(report, report.vivado)
    if report.files.vivado:
        lines += ["## Vivado project", "", "`vivado/build_top.sh` (or `vivado -mode batch "
                  "-source top.tcl` inside `vivado/`) synthesizes, places and routes the "
                  "design in a board harness, reads `activity.saif` and writes the reports "
                  "that `zoforge build --vivado-reports vivado/` puts beside these estimates.",
                  ""]
    return "\n".join(lines)


def _composition_section(composition: Composition) -> list[str]:
    """The units a composed report was built from, and the margins against the device."""
    lines = ["## Composition (per unit x count)", "", f"Rule: {composition.rule}.", ""]
    lines += _table(["unit", "design", "count", "LUT", "FF", "BRAM18", "DSP",
                     "Fmax MHz (yosys-estimate)", "clock", "dynamic W (activity-model)",
                     "report"],
                    [[f"`{u.name}`", u.design, u.count, *[u.total.get(k, 0) for k in
                                                           ("LUT", "FF", "BRAM18", "DSP")],
                      u.fmax_mhz, u.domain, u.dynamic_w, f"`{u.folder}/report.md`"]
                     for u in composition.units])
    lines += ["Margins against the device (the design's own: " + ", ".join(
        f"{key} <= {m.margin_pct:g} %" for key, m in composition.margins.items()) + "):", ""]
    lines += _table(["resource", "used", "available", "% used", "margin", "budget", "fits"],
                    [[key, m.used, m.available, f"{m.percent:.1f} %", f"{m.margin_pct:g} %",
                      m.budget, "**over its margin**" if m.over else "yes"]
                     for key, m in composition.margins.items()])
    lines += [("Over the margin: " + ", ".join(composition.over) if composition.over
               else "Every resource within its margin") + ".", ""]
    lines += ["Notes: " + "; ".join(composition.notes) + ".", ""]
    return lines


def _vivado_section(report: Report, vivado: VivadoFigures) -> list[str]:
    lines = ["## Vivado (parsed reports)", "", f"Source: `{vivado.source}` ({vivado.tool}; "
             f"files in `{vivado.folder}`: {', '.join(vivado.files.values())}).", ""]
    estimate = report.resources.total if report.resources else {}
    util = vivado.utilization or {}
    hierarchy = vivado.hierarchy or {}
    dut = next((v for k, v in hierarchy.items() if k.endswith("/dut")), None)
    rows = [[k, estimate.get(k), util.get(k), (dut or {}).get(k)] for k in _KEYS
            if k in util or k in estimate]
    lines += _table(["resource", "yosys-estimate", "vivado (whole chip)", "vivado (dut)"], rows)
    timing = vivado.timing
    if timing:
        estimate_fmax = report.fmax.fmax_mhz if report.fmax else None
        period = timing.period_ns if timing.period_ns is not None else "-"
        lines += [f"Timing (`vivado`): WNS {timing.wns_ns} ns at period {period} ns -> Fmax "
                  f"{_fmt(timing.fmax_mhz)} MHz; estimate {_fmt(estimate_fmax)} MHz "
                  "(`yosys-estimate`).", ""]
    power = vivado.power
    if power:
        estimate_power = report.power
        lines += _table(["power (W)", "activity-model", "vivado"], [
            ["total", estimate_power and estimate_power.total_w, power.total_w],
            ["static", estimate_power and estimate_power.static_w, power.static_w],
            ["dynamic", estimate_power and estimate_power.dynamic_w, power.dynamic_w]])
    return lines


def plot_report(report: Report, path: Path) -> Path | None:
    """Resources per block (log scale) and the dynamic power breakdown, as one PNG."""
    resources = report.resources
    if not resources:
        return None
    # imported here, not at the top: matplotlib takes a second to import and only the plot
    # needs it (the backend is chosen before pyplot loads)
    import matplotlib
    matplotlib.use("Agg")   # before pyplot loads: no display here
    import matplotlib.pyplot as plt

    power = report.power
    fig, axes = plt.subplots(1, 2 if power else 1, figsize=(11 if power else 6, 4),
                             squeeze=False)
    ax = axes[0][0]
    blocks = list(resources.blocks)
    keys = [k for k in ("LUT", "FF", "CARRY", "BRAM18", "DSP")
            if any(resources.blocks[b].get(k) for b in blocks)]
    width = 0.8 / max(len(keys), 1)
    for index, key in enumerate(keys):
        values = [max(resources.blocks[b].get(key, 0), 0) for b in blocks]
        ax.bar([i + index * width for i in range(len(blocks))], values, width, label=key)
    ax.set_xticks([i + width * (len(keys) - 1) / 2 for i in range(len(blocks))], blocks,
                  rotation=20)
    ax.set_yscale("symlog")
    ax.set_title(f"resources per block ({resources.source})")
    ax.legend(fontsize=8)
    if power:
        ax = axes[0][1]
        parts = {k: v for k, v in power.breakdown_w.items() if v > 0}
        ax.bar(["static", *parts], [power.static_w, *parts.values()])
        ax.set_yscale("log")
        ax.set_ylabel("W")
        ax.set_title(f"power at {power.frequency_mhz:g} MHz ({power.source})")
        ax.tick_params(axis="x", rotation=30)
    fig.suptitle(f"{report.design} on {report.board.name}")
    fig.tight_layout()
    with output_path(path) as tmp:
        fig.savefig(tmp, dpi=100, format=Path(path).suffix.lstrip(".") or "png")
    plt.close(fig)
    return path


def summary_lines(report: Report) -> list[str]:
    """A few lines for a terminal: resources, Fmax, power and post-route, each with its
    source label."""
    lines = [f"{report.design} on {report.board.name} at {report.clock_mhz:g} MHz"]
    if report.resources is not None:
        total = report.resources.total
        lines.append(f"  resources ({report.resources.source}): " + ", ".join(
            f"{k} {total.get(k, 0)}" for k in ("LUT", "FF", "CARRY", "BRAM18", "DSP")))
    if report.fmax is not None:
        by_clock = "".join(f", {clock} {mhz:.0f}" for clock, mhz in report.fmax.by_clock.items())
        lines.append(f"  Fmax ({report.fmax.source}, {report.fmax.family} delays): "
                     f"{report.fmax.fmax_mhz:.0f} MHz"
                     + (f" (per clock{by_clock})" if by_clock else "")
                     + f"; {report.fmax.error_note()}")
    if report.power is not None:
        power = report.power
        lines.append(f"  dynamic power ({power.source}, {power.frequency_mhz:g} MHz): "
                     f"{power.dynamic_w:.4f} W; with the static power {power.total_w:.3f} W")
        lines.append(f"  static power (the board's figure, apart): {power.static_w:.3f} W; "
                     f"{power.static_source}")
    if report.composition is not None:
        composition = report.composition
        lines.append(f"  composed ({composition.source}): " + ", ".join(
            f"{u.count} x {u.name}" for u in composition.units) + "; the top adds nothing")
        lines.append("  margins: " + ", ".join(
            f"{key} {m.used:,} / {m.available:,} = {m.percent:.1f} % (<= {m.margin_pct:g} %"
            + (", OVER" if m.over else "") + ")" for key, m in composition.margins.items()))
    if report.nextpnr is not None:
        pnr = report.nextpnr
        lines.append(f"  post-route ({pnr.source}): " + ", ".join(
            f"{k} {v}" for k, v in pnr.resources.items()) + "; Fmax " + ", ".join(
            f"{mhz:.0f} MHz" for mhz in pnr.fmax_mhz.values()))
    return lines
