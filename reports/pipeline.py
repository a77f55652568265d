"""From an elaborated design to a report: the steps behind ``zoforge build``.

:func:`build_report` writes the design's Verilog, then (board permitting)

* the Yosys ``synth_xilinx`` resource estimate, per block (:mod:`.synth`),
* the Fmax estimate from the synthesized netlist (:mod:`.fmax`),
* switching activity from a Verilator co-simulation, as SAIF (:mod:`.activity`),
* the activity-model power estimate (:mod:`.power`),
* the Vivado project that reproduces all of it for real (:mod:`zoforge.boards.harness`),
* post-route numbers from nextpnr on an open-toolchain board (:mod:`.nextpnr`),
* parsed Vivado reports if the user has them (:mod:`.vivado`),

and returns the report as a JSON-able dict; :mod:`.render` writes it out. Every slow step is
cached, so a repeated build takes seconds.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

from zoforge.errors import check_int_range
from zoforge.hw.designs import Elaborated
from zoforge.hw.export import write_design
from zoforge.reports import activity as activity_mod
from zoforge.files import atomic_write_text, content_key
from zoforge.reports.fmax import DELAYS, MODEL, estimate_fmax
from zoforge.reports.power import COEFFICIENTS, estimate_power
from zoforge.reports.synth import synthesize

__all__ = ["build_report", "Progress", "LABELS"]

_XILINX = ("xcup", "xcu", "xc7")

# Short source labels used on every number of a report.
LABELS = {"yosys": "yosys-estimate", "activity": "activity-model", "nextpnr": "nextpnr",
          "vivado": "vivado"}


class Progress:
    """Prints ``[step] text (elapsed)`` lines to stderr (or nothing when quiet)."""

    def __init__(self, quiet: bool = False):
        self.quiet = quiet
        self.started = time.perf_counter()

    def step(self, name: str):
        def report(text: str) -> None:
            if not self.quiet:
                elapsed = time.perf_counter() - self.started
                print(f"[{name} {elapsed:6.1f}s] {text}", file=sys.stderr, flush=True)
        return report


def build_report(board, design: Elaborated, out_dir: Path | str, clock_mhz: float,
                 activity_cycles: int = 2000, activity_mode: str = "random",
                 activity_seed: int = 1, measure_power: bool = True, run_pnr: bool = True,
                 keep_hierarchy: bool = True, vivado_reports: Path | None = None,
                 progress: Progress | None = None,
                 bench: tuple[str, dict] | None = None, ram_style: str = "auto",
                 activity_proxy: Elaborated | None = None) -> dict:
    """Produce every file and number of a report for ``design`` on ``board``.

    bench:          the design's own activity stimulus (cocotb module, args), see
                    :func:`zoforge.reports.activity.measure_activity`; default generic
    activity_proxy: a smaller configuration of the same design (e.g. fewer identical
                    lanes) whose measured toggle rates stand in for the design's, when
                    simulating the full design is too slow; the report says so
    """
    progress = progress or Progress()
    check_int_range("--activity-cycles", activity_cycles, 10, 10_000_000)
    if not 1.0 <= clock_mhz <= 1000.0:
        from zoforge.errors import ConfigError
        raise ConfigError("--clock-mhz", "a frequency with 1 <= MHz <= 1000", clock_mhz)
    parsed = None
    if vivado_reports is not None:     # parse first: a bad folder fails before slow steps
        from zoforge.reports.vivado import read_vivado_reports
        parsed = read_vivado_reports(vivado_reports)
    out = Path(out_dir).resolve()    # absolute: the simulator runs in another folder
    out.mkdir(parents=True, exist_ok=True)
    paths = write_design(design, out)
    verilog = paths["verilog"].read_text()
    report: dict = {
        "design": design.name,
        "config": design.summary(),
        "blocks": design.blocks,
        "board": {"name": board.name, "part": board.part, "capacities": board.capacities,
                  "capacity_source": board.capacity_source, "toolchain": board.toolchain},
        "clock_mhz": clock_mhz,
        "files": {"verilog": paths["verilog"].name},
    }
    activity = None
    if measure_power and board.family in _XILINX:    # the power model is UltraScale+'s
        progress.step("activity")(f"co-simulating {activity_cycles} cycles (Verilator SAIF)")
        simulated, simulated_verilog = design, verilog
        if activity_proxy is not None:
            simulated = activity_proxy
            simulated_verilog = write_design(activity_proxy, out / "proxy")["verilog"].read_text()
        activity = _activity(simulated_verilog, simulated, out / "activity", activity_cycles,
                             activity_mode, activity_seed, clock_mhz, bench)
        if activity_proxy is not None:
            activity = dict(activity, proxy=activity_proxy.name,
                            mode=f"{activity['mode']}, measured on the smaller "
                                 f"configuration {activity_proxy.name}")
        report["activity"] = activity
    if board.family in _XILINX:
        synth = synthesize(verilog, design.name, family=board.family,
                           keep_hierarchy=keep_hierarchy, blocks=list(design.blocks) or None,
                           progress=progress.step("synth"), ram_style=ram_style)
        report["resources"] = _resources(board, synth, ram_style)
        progress.step("fmax")("longest path over the synthesized netlist")
        fmax = estimate_fmax(synth.netlist_path, top=design.name)
        report["fmax"] = dict(fmax.to_json(), source=LABELS["yosys"], method=fmax.source,
                              model=MODEL)
        report["fmax"]["delays"] = {k: asdict(v) for k, v in DELAYS.items()}
        if activity is not None:
            power = estimate_power(synth.resources, clock_mhz, activity["toggle_rate"],
                                   block_resources=synth.block_resources,
                                   block_rates=activity["block_rates"])
            report["power"] = dict(power.to_json(), source=LABELS["activity"],
                                   coefficients={k: asdict(v)
                                                 for k, v in COEFFICIENTS.items()})
    if board.toolchain == "vivado":
        from zoforge.boards.harness import write_vivado_project
        progress.step("vivado")("writing the Vivado project (Verilog, XDC, Tcl)")
        saif_text = (Path(activity["saif"]).read_text()
                     if activity and activity_proxy is None else None)
        vivado_files = write_vivado_project(board, design.top, out / "vivado", clock_mhz,
                                            saif_text=saif_text, saif_instance=design.name)
        report["files"]["vivado"] = sorted(str(p.relative_to(out))
                                           for p in vivado_files.values())
    elif board.toolchain == "nextpnr-ecp5" and run_pnr:
        from zoforge.reports.nextpnr import place_and_route
        pnr = place_and_route(board, design.top, clock_mhz, progress=progress.step("pnr"))
        report["nextpnr"] = dict(pnr.to_json(), source=LABELS["nextpnr"],
                                 resources=_nextpnr_resources(pnr.utilization))
    if parsed is not None:
        report["vivado"] = {"folder": str(parsed.folder), "files": parsed.files,
                            "utilization": parsed.utilization, "hierarchy": parsed.hierarchy,
                            "timing": parsed.timing, "power": parsed.power,
                            "source": LABELS["vivado"]}
    return report


def _resources(board, synth, ram_style: str) -> dict:
    return {
        "source": LABELS["yosys"], "method": synth.source, "tool": synth.tool_version,
        "family": synth.family, "ram_style": ram_style, "total": synth.resources,
        "percent": board.utilization(synth.resources),
        "blocks": synth.block_resources, "cells": synth.cells,
        "missing_blocks": synth.missing_blocks, "cached": synth.cached,
        "seconds": round(synth.seconds, 1),
        "notes": ["carry chains counted as Yosys maps them (CARRY4; UltraScale+ has CARRY8)",
                  "an accumulator after a multiply stays in LUT+CARRY+FF (Yosys does not pack "
                  "it into DSP48E2 on xcup)",
                  "memories are counted in the block that holds them (Amaranth inlines them)"],
    }


def _nextpnr_resources(utilization: dict) -> dict:
    def used(name):
        return int(utilization.get(name, {}).get("used", 0))
    return {"LUT": used("TRELLIS_COMB"), "FF": used("TRELLIS_FF"),
            "BRAM18": used("DP16KD"), "DSP": used("MULT18X18D"),
            "LUTRAM": used("TRELLIS_RAMW")}


def _activity(verilog: str, design: Elaborated, folder: Path, cycles: int, mode: str,
              seed: int, clock_mhz: float, bench: tuple[str, dict] | None) -> dict:
    """Measured activity, reused from ``folder`` when the inputs are unchanged."""
    top = design.name
    key = content_key(verilog, top, str(cycles), mode, str(seed), f"{clock_mhz:.6f}",
                      json.dumps(bench, sort_keys=True, default=str))
    stored = folder / "activity.json"
    if stored.exists():
        data = json.loads(stored.read_text())
        if data.get("key") == key and Path(data["saif"]).exists():
            return data
    folder.mkdir(parents=True, exist_ok=True)
    measured = activity_mod.measure_activity(verilog, top, cycles=cycles, mode=mode, seed=seed,
                                             clock_ns=1000.0 / clock_mhz, data_dir=folder,
                                             bench=bench, extra_files=design.memory_files)
    data = dict(asdict(measured), saif=str(measured.saif), key=key,
                source=LABELS["activity"], method=measured.source)
    atomic_write_text(stored, json.dumps(data, indent=1))
    return data
