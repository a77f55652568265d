"""The Fmax model against a real router: the netlist delay model (``reports/fmax.py``) with
its ECP5 table, on the very ``synth_ecp5`` netlist that nextpnr places and routes, against
nextpnr's post-route Fmax (ULX3S, LFE5U-85F, speed 6, at the board's default clock).

    .venv/bin/python benchmarks/bench_fmax_model.py            # the error table
    .venv/bin/python benchmarks/bench_fmax_model.py --write    # ... and record it
    .venv/bin/python benchmarks/bench_fmax_model.py --primitives   # ... and the probes

Per design it prints the model's and nextpnr's Fmax and the error (model - nextpnr) /
nextpnr. Place and route is cached by ``reports/nextpnr.py`` (minutes per design the first
time, one at a time; seconds after), so the run resumes where it stopped; the model walks
the cached netlist (seconds).

It also refits the two net-delay parameters (:func:`fit`: ``T_fanout`` the slope of
routed delay on log2(loads) over every load of every flip-flop-driven net, from nextpnr's
per-net timing; then ``T_net`` so that the model's mean log error over the designs is zero)
and prints them beside the table's values, and repeats the model with each design left out
of the fit (``leave-one-out``: the error on a design the fit never saw, the figure to
expect on a new design). ``--write`` records the rows and the commit in
``reports/fmax_calibration.py``, the one source every report quotes the error from.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

from amaranth import Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.boards.harness import TOP
from zoforge.boards.registry import get_board
from zoforge.golden.zolayer.config import layer_config
from zoforge.hw.designs import get_design
from zoforge.hw.engine.config import EngineConfig
from zoforge.reports.fmax import DELAY_MODELS, error_pct, estimate_fmax
from zoforge.reports.nextpnr import place_and_route

ROOT = Path(__file__).resolve().parent.parent
CALIBRATION = ROOT / "reports" / "fmax_calibration.py"
BOARD = "ulx3s-85f"

#: label -> (design, configuration); the issue's five and two more sizes/modes.
DESIGNS = {
    "engine 2x2": ("engine", lambda: EngineConfig(rows=2, cols=2)),
    "engine 4x4": ("engine", lambda: EngineConfig(rows=4, cols=4)),
    "engine 8x8": ("engine", lambda: EngineConfig(rows=8, cols=8)),
    "zo-layer 2x2": ("zo-layer", lambda: layer_config("onthefly", rows=2, cols=2)),
    "zo-layer 4x4": ("zo-layer", lambda: layer_config("onthefly")),
    "zo-layer 4x4 full": ("zo-layer", lambda: layer_config("onthefly", mode="full")),
}


def routed_nets(entry: Path) -> dict[str, list[tuple[float, int]]]:
    """Routed net delays (ns) with the loads of their net, from nextpnr's ``report.json``
    beside the cached netlist (written with ``--detailed-timing-report``):

    ``"fabric"``:   every load of every net a flip-flop drives: the arrival nextpnr
                    reports at the load less the flip-flop's clock-to-output (``T_cko``,
                    nextpnr's own value);
    ``"critical"``: every routed net on nextpnr's critical path of the clock (a dedicated
                    wire inside the slice, 0 ns, left out), for comparison.
    """
    report = json.loads((entry / "report.json").read_text())
    cells = json.loads((entry / f"{TOP}.json").read_text())["modules"][TOP]["cells"]
    t_cko = DELAY_MODELS["ecp5"].ns("T_cko")
    loads_of = {net["net"]: len(net["endpoints"])
                for net in report.get("detailed_net_timings", ())}
    out: dict[str, list] = {"fabric": [], "critical": []}
    for net in report.get("detailed_net_timings", ()):
        if cells.get(net["driver"], {}).get("type") == "TRELLIS_FF" and net["port"] == "Q":
            out["fabric"] += [(max(endpoint["delay"]) - t_cko, len(net["endpoints"]))
                              for endpoint in net["endpoints"]]
    for path in report["critical_paths"]:
        if path["from"].startswith("posedge") and path["to"].startswith("posedge"):
            out["critical"] += [(segment["delay"], loads_of.get(segment["net"], 1))
                                for segment in path["path"]
                                if segment["type"] == "routing" and segment["delay"] > 0]
    return out


def fanout_slope(rows: list[dict]) -> float:
    """``T_fanout``: the least-squares slope of routed delay on log2(loads) over every
    load of every flip-flop-driven net of ``rows``."""
    every = [net for row in rows for net in row["nets"]["fabric"]]
    xs = [math.log2(max(loads, 1)) for _, loads in every]
    ys = [delay for delay, _ in every]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sxx if sxx else 0.0


def _mean_base(rows: list[dict], kind: str, slope: float) -> float:
    """The mean net of ``kind`` less its fan-out growth."""
    return statistics.fmean(delay - slope * math.log2(max(loads, 1))
                            for row in rows for delay, loads in row["nets"][kind])


def linearize(row: dict, base: tuple[float, float], step: float = 0.05) -> None:
    """The model's critical path of ``row`` near ``base`` = (T_net, T_fanout) as
    a + n T_net (``row["linear"]``: two walks of its netlist)."""
    c0 = model(row, base).critical_ns
    n = (model(row, (base[0] + step, *base[1:])).critical_ns - c0) / step
    row["linear"] = (c0 - n * base[0], n)


def fit(rows: list[dict]) -> tuple[float, float]:
    """(T_net, T_fanout) from ``rows`` (each linearized): ``T_fanout`` from the routed
    nets (:func:`fanout_slope`), then ``T_net`` so that the model's mean log error against
    nextpnr's Fmax over ``rows`` is zero (bisection on their linearized critical paths)."""
    slope = fanout_slope(rows)
    target = sum(math.log(row["nextpnr_mhz"]) for row in rows)

    def excess(t_net: float) -> float:       # falls as T_net grows
        return sum(math.log(1000.0 / (a + n * t_net))
                   for a, n in (row["linear"] for row in rows)) - target
    low, high = 0.0, 10.0
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if excess(middle) > 0 else (low, middle)
    return (low + high) / 2, slope


def measure(label: str) -> dict:
    """Place and route ``label`` (cached): nextpnr's Fmax, the cache entry (placed netlist,
    ``report.json``) and its routed nets."""
    name, config = DESIGNS[label]
    board = get_board(BOARD)
    design = get_design(name).elaborate(config())
    print(f"[{label}] place and route (cached after the first run) ...", file=sys.stderr,
          flush=True)
    pnr = place_and_route(board, design.top, board.default_mhz)
    entry = Path(pnr.log_path).parent
    return {"label": label, "entry": entry,
            "nextpnr_mhz": round(min(pnr.fmax_mhz.values()), 1),   # as recorded
            "nets": routed_nets(entry), "tool": pnr.tool_version}


def model(row: dict, net: tuple[float, float] | None = None):
    """The model with the ECP5 table (``net``: (T_net, T_fanout) instead of the table's)
    on the netlist nextpnr placed, its board harness's I/O left out as nextpnr leaves it."""
    delays = dict(zip(("T_net", "T_fanout"), net)) if net else None
    return estimate_fmax(row["entry"] / f"{TOP}.json", top=TOP, family="ecp5",
                         ports_registered=False, delays=delays)


class _Adder(wiring.Component):
    """192-bit registered add: the critical path runs down a CCU2C chain."""

    def __init__(self):
        super().__init__({"a": In(192), "b": In(192), "s": Out(192)})

    def elaborate(self, platform):
        m = Module()
        a, b = Signal(192), Signal(192)
        m.d.sync += [a.eq(self.a), b.eq(self.b), self.s.eq(a + b)]
        return m


class _Multiplier(wiring.Component):
    """18x18 registered multiply: the critical path runs through an unregistered
    MULT18X18D."""

    def __init__(self):
        super().__init__({"a": In(18), "b": In(18), "p": Out(36)})

    def elaborate(self, platform):
        m = Module()
        a, b = Signal(signed(18)), Signal(signed(18))
        m.d.sync += [a.eq(self.a), b.eq(self.b), self.p.eq(a * b)]
        return m


def primitive_delays() -> None:
    """Place and route two probes and print nextpnr's cell delays on their critical paths
    (where the ECP5 table's carry and multiplier values come from)."""
    board = get_board(BOARD)
    for probe in (_Adder, _Multiplier):
        pnr = place_and_route(board, probe(), board.default_mhz)
        entry = Path(pnr.log_path).parent
        report = json.loads((entry / "report.json").read_text())
        cells = json.loads((entry / f"{TOP}.json").read_text())["modules"][TOP]["cells"]
        seen: dict[tuple, int] = {}
        for path in report["critical_paths"]:
            if not path["from"].startswith("posedge"):
                continue
            for segment in path["path"]:
                if segment["type"] in ("logic", "clk-to-q"):
                    kind = cells.get(segment["from"]["cell"], {}).get("type", "(packed)")
                    key = (segment["type"], kind, segment["from"]["port"],
                           segment["to"]["port"], round(segment["delay"], 3))
                    seen[key] = seen.get(key, 0) + 1
        print(f"{probe.__name__.lstrip('_')}: nextpnr {min(pnr.fmax_mhz.values()):.1f} MHz; "
              "cell delays on its critical path (ns):")
        for (kind, cell, source, sink, delay), count in sorted(seen.items()):
            print(f"  {kind:9} {cell:12} {source:>5} -> {sink:<5} {delay:6.3f}  x{count}")


def commit() -> str:
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True
                              ).stdout.strip()
    dirty = " (uncommitted changes)" if git("status", "--porcelain", "--", "reports",
                                            "hw", "boards") else ""
    return f"{git('rev-parse', '--short', 'HEAD')}{dirty}, {datetime.date.today()}"


def write_calibration(rows: list[dict], net: tuple[float, float], tool: str,
                      measured_at: str) -> None:
    head = CALIBRATION.read_text().split("FAMILY =")[0].rstrip("\n").splitlines()
    body = ['FAMILY = "ecp5"', f'BOARD = "{BOARD}"', f'ROUTER = "{tool}"',
            f'MEASURED_AT = "{measured_at}"',
            'COMMAND = "benchmarks/bench_fmax_model.py --write"',
            f"NET_FIT = ({net[0]}, {net[1]})",
            "ROWS: tuple[tuple[str, float, float, float], ...] = ("]
    body += [f'    ("{r["label"]}", {r["model_mhz"]:.1f}, {r["nextpnr_mhz"]:.1f}, '
             f'{r["loo_mhz"]:.1f}),' for r in rows]
    body.append(")")
    CALIBRATION.write_text("\n".join(head + body) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--designs", default=",".join(DESIGNS),
                        help="comma-separated labels (default all: " + ", ".join(DESIGNS)
                             + ")")
    parser.add_argument("--write", action="store_true",
                        help="record the rows in reports/fmax_calibration.py")
    parser.add_argument("--primitives", action="store_true",
                        help="also place and route two probes (a 192-bit adder, an 18x18 "
                             "multiplier) and print the carry and multiplier delays")
    args = parser.parse_args(argv)
    if args.primitives:
        primitive_delays()
    labels = [label.strip() for label in args.designs.split(",")]
    unknown = [label for label in labels if label not in DESIGNS]
    if unknown:
        parser.error(f"--designs: unknown {unknown[0]!r}; one of {', '.join(DESIGNS)}")
    rows = [measure(label) for label in labels]
    table = DELAY_MODELS["ecp5"]
    for row in rows:
        linearize(row, (table.ns("T_net"), fanout_slope(rows)))
    fitted = tuple(round(value, 3) for value in fit(rows))
    count = {kind: sum(len(row["nets"][kind]) for row in rows) for kind in rows[0]["nets"]}
    print(f"calibration fit: T_fanout {fitted[1]} ns per doubling of the loads (slope over "
          f"{count['fabric']} loads of flip-flop-driven nets), T_net {fitted[0]} ns (zero "
          f"mean log error over the designs; for comparison, the mean net of nextpnr's "
          f"critical paths less the growth: "
          f"{_mean_base(rows, 'critical', fitted[1]):.3f} ns); the table now: "
          f"{table.ns('T_net')}, {table.ns('T_fanout')}"
          f"{'' if args.write else ' (--write makes the fit the table)'}")
    for row in rows:
        # the model column: the table's delays, or with --write the fit it is about to take
        estimate = model(row, fitted if args.write else None)
        row.update(model_mhz=round(estimate.fmax_mhz, 1), path=estimate.path,
                   levels=estimate.logic_levels)
        others = [other for other in rows if other is not row]
        if len(others) >= 2:
            row["loo_mhz"] = round(model(row, fit(others)).fmax_mhz, 1)
    measured_at = commit()
    print(f"\nFmax model (ECP5 table) vs nextpnr, {BOARD} at "
          f"{get_board(BOARD).default_mhz:g} MHz; {rows[0]['tool']}; {measured_at}\n")
    print("| design | model MHz | nextpnr MHz | error % | leave-one-out MHz | error % |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        loo = row.get("loo_mhz")
        loo_text = (f"{loo:.1f} | {error_pct(loo, row['nextpnr_mhz']):+.1f}" if loo
                    else "- | -")
        print(f"| {row['label']} | {row['model_mhz']:.1f} | {row['nextpnr_mhz']:.1f} | "
              f"{error_pct(row['model_mhz'], row['nextpnr_mhz']):+.1f} | {loo_text} |")
    errors = [abs(error_pct(r["model_mhz"], r["nextpnr_mhz"])) for r in rows]
    print(f"\nmean |error| {statistics.fmean(errors):.1f} %, max {max(errors):.1f} %")
    loos = [abs(error_pct(r["loo_mhz"], r["nextpnr_mhz"])) for r in rows if r.get("loo_mhz")]
    if loos:
        print(f"leave-one-out: mean |error| {statistics.fmean(loos):.1f} %, max "
              f"{max(loos):.1f} %")
    for row in rows:
        print(f"  {row['label']}: model's critical path {' -> '.join(row['path'][:12])}"
              f"{' ...' if len(row['path']) > 12 else ''} ({row['levels']} LUT levels)")
    if args.write:
        if set(labels) != set(DESIGNS) or len(rows) < 3:
            parser.error("--write records every design: leave out --designs")
        write_calibration(rows, fitted, rows[0]["tool"].split(", ")[-1], measured_at)
        print(f"\nwrote {CALIBRATION.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
