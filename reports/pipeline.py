"""From an elaborated design to a report: the steps behind ``zoforge build``.

:func:`build_report` writes the design's Verilog, then (board permitting)

* the Yosys ``synth_xilinx`` resource estimate, per block (:mod:`.synth`),
* the Fmax estimate from the synthesized netlist (:mod:`.fmax`; on an ECP5 board from the
  netlist nextpnr placed, beside nextpnr's own), with the model's measured error,
* switching activity from a Verilator co-simulation, as SAIF (:mod:`.activity`),
* the activity-model power estimate (:mod:`.power`),
* the Vivado project that reproduces all of it for real (:mod:`zoforge.boards.harness`),
  with the co-simulation's SAIF re-rooted beside it (:func:`write_vivado_saif`),
* post-route numbers from nextpnr on an open-toolchain board (:mod:`.nextpnr`),
* parsed Vivado reports if the user has them (:mod:`.vivado`),

and returns the typed :class:`~zoforge.reports.model.Report`; :mod:`.render` writes it out.
Every slow step is cached, so a repeated build takes seconds.

:func:`build_design` is what ``zoforge build`` calls: a registered design and its
configuration -> a report. A design made of replicated units (``Design.units``) is, on a
Xilinx board, written whole (Verilog, Vivado project) but estimated from one
:func:`build_report` of each distinct unit (in ``units/<unit>/``, cached like any build),
composed as count x unit (:mod:`.compose`); on an ECP5 board the whole top is placed and
routed, since routing is what gives a real Fmax there (:data:`.compose.RULE`).

On a Xilinx board the Verilog written (and estimated, and co-simulated for activity) is
elaborated for the board's family (:func:`design_family`,
:func:`zoforge.hw.export.to_verilog`), so blocks with a vendor form use it: e.g. a paired
array's multipliers are DSP48E2 instances with their register stages inside
(:mod:`zoforge.hw.pe.packed_multiply`), which Yosys' ``synth_xilinx`` does not infer. Yosys
is given the primitives' ``(* blackbox *)`` declarations besides
(:func:`zoforge.sim.models.with_blackbox_stubs`: the synthesis script checks the hierarchy
before ``synth_xilinx`` reads its cell library, which replaces them); the activity
co-simulation appends the primitives' models (:func:`zoforge.sim.models.with_models`, in
:func:`zoforge.reports.activity.measure_activity`). The Vivado project elaborates with the
board's real platform, whose family selects the same forms.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

from zoforge import __version__
from zoforge.boards.harness import DUT, SAIF_NAME, SAIF_ROOT, TOP, write_vivado_project
from zoforge.boards.registry import Board
from zoforge.errors import check_int_range
from zoforge.files import atomic_write_text, content_key
from zoforge.hw.accel.plan import check_unit_fits
from zoforge.hw.designs import Design, Elaborated, Units, get_design
from zoforge.hw.export import write_design
from zoforge.outputs import make_dirs, make_out_dir
from zoforge.reports import activity as activity_mod
from zoforge.reports.compose import UnitReport, compose
from zoforge.reports.fmax import DELAY_MODELS, FAMILIES, MODEL, estimate_fmax, measured_error
from zoforge.reports.model import (ACTIVITY, LABELS, NEXTPNR, VIVADO, YOSYS, BoardFacts, Fmax,
                                   Power, PostRoute, Report, ReportFiles, Resources,
                                   SwitchingActivity, VivadoFigures, VivadoPower,
                                   VivadoTiming)
from zoforge.reports.nextpnr import place_and_route
from zoforge.reports.power import COEFFICIENTS, TOOL as POWER_TOOL, estimate_power
from zoforge.reports.render import write_report
from zoforge.reports.saif import rewrite_root
from zoforge.reports.synth import synthesize
from zoforge.reports.vivado import VivadoReports, read_vivado_reports
from zoforge.sim.models import with_blackbox_stubs, with_models

__all__ = ["build_design", "build_report", "write_vivado_saif", "design_family", "Progress",
           "LABELS", "UNITS_DIR"]

#: Sub-folder of a composed build's output holding each distinct unit's own build.
UNITS_DIR = "units"

_XILINX = ("xcup", "xcu", "xc7")


def design_family(board: Board) -> str | None:
    """The family the board's build elaborates its Verilog for: the board's on a Xilinx
    board (the estimate's and the activity co-simulation's Verilog), None (platform-less)
    elsewhere (an ECP5 build's nextpnr run elaborates with the board's platform itself)."""
    return board.family if board.family in _XILINX else None


class Progress:
    """Prints ``[step] text (elapsed)`` lines to stderr (or nothing when quiet)."""

    def __init__(self, quiet: bool = False, prefix: str = ""):
        self.quiet, self.prefix = quiet, prefix
        self.started = time.perf_counter()

    def step(self, name: str):
        def report(text: str) -> None:
            if not self.quiet:
                elapsed = time.perf_counter() - self.started
                print(f"[{self.prefix}{name} {elapsed:6.1f}s] {text}", file=sys.stderr,
                      flush=True)
        return report

    def within(self, prefix: str) -> Progress:
        """The same clock, each step named ``prefix/step`` (a unit's build)."""
        inner = Progress(self.quiet, f"{self.prefix}{prefix}/")
        inner.started = self.started
        return inner


def build_design(board: Board, entry: Design, config, out_dir: Path | str, clock_mhz: float,
                 progress: Progress | None = None, **options) -> Report:
    """The report of ``config`` of the registered design ``entry`` on ``board``, with the
    design's own activity stimulus (``entry.activity_bench``); ``options`` are
    :func:`build_report`'s.

    A design that declares its units (``entry.units``) is composed on a Xilinx board: the
    whole top's Verilog and Vivado project are written, and its resources, Fmax and power
    come from one :func:`build_report` per distinct unit (``out_dir/units/<unit>/``), count
    x unit (:func:`zoforge.reports.compose.compose`), with the design's margins checked. On
    an ECP5 board (nextpnr) the whole top is built as any design: routing it is what gives
    a real Fmax there, so keep such designs small (a scaled-down variant).
    """
    progress = progress or Progress()
    board.check_clock(clock_mhz)
    check_unit_fits(board, config)
    design = entry.elaborate(config)
    if entry.units is None or board.family not in _XILINX:
        return build_report(board, design, out_dir, clock_mhz, progress=progress,
                            bench=_bench(entry, config, design), **options)
    return _composed(board, design, entry.units(config), out_dir, clock_mhz, progress,
                     options)


def _bench(entry: Design, config, design: Elaborated) -> tuple[str, dict] | None:
    """The design's own activity stimulus, ``(cocotb module, args)``, or None (generic)."""
    own = entry.activity_bench
    return own(config, design) if own is not None else None


def _composed(board: Board, design: Elaborated, units: Units, out_dir: Path | str,
              clock_mhz: float, progress: Progress, options: dict) -> Report:
    """:func:`build_design` of a design made of ``units`` on a Xilinx board."""
    check_int_range("--activity-cycles", options.get("activity_cycles", 2000), 10, 10_000_000)
    vivado_reports = options.pop("vivado_reports", None)
    parsed = read_vivado_reports(vivado_reports) if vivado_reports is not None else None
    out = make_out_dir("--out", Path(out_dir).resolve())
    paths = write_design(design, out, family=design_family(board))
    built = []
    distinct: dict[tuple[str, str], list] = {}
    for unit in units.units:        # the same unit twice: one build, the counts added
        key = (unit.design, unit.config.stable_hash(), unit.domain)
        distinct.setdefault(key, [unit, 0])[1] += unit.count
    for unit, count in distinct.values():
        if count == 0:
            continue
        entry = get_design(unit.design)
        elaborated = entry.elaborate(unit.config)
        folder = f"{UNITS_DIR}/{elaborated.name}-{unit.config.stable_hash()[:8]}"
        progress.step("unit")(f"{unit.design} {elaborated.name} (x {count}) in {folder}")
        report = build_report(board, elaborated, out / folder, clock_mhz,
                              progress=progress.within(elaborated.name),
                              bench=_bench(entry, unit.config, elaborated),
                              vivado_project=False, **options)
        write_report(report, out / folder)
        built.append(UnitReport(report, unit.design, count, folder, unit.domain))
    progress.step("compose")(", ".join(f"{u.count} x {u.report.design}" for u in built))
    sections = compose(board, built, units.margins)
    vivado_files: list[str] = []
    if board.toolchain == "vivado":
        progress.step("vivado")("writing the Vivado project of the whole top (no SAIF: the "
                                "top is not co-simulated)")
        written = write_vivado_project(board, design.top, out / "vivado", clock_mhz)
        vivado_files = sorted(str(p.relative_to(out)) for p in written.values())
    return _report(board, design, clock_mhz, paths["verilog"].name, vivado_files, parsed,
                   sections)


def build_report(board: Board, design: Elaborated, out_dir: Path | str, clock_mhz: float,
                 activity_cycles: int = 2000, activity_mode: str = "random",
                 activity_seed: int = 1, measure_power: bool = True, run_pnr: bool = True,
                 keep_hierarchy: bool = True, vivado_reports: Path | None = None,
                 progress: Progress | None = None,
                 bench: tuple[str, dict] | None = None, ram_style: str = "auto",
                 activity_proxy: Elaborated | None = None,
                 vivado_project: bool = True) -> Report:
    """Produce every file and number of a report for ``design`` on ``board``.

    clock_mhz:      the target clock, within the board's ``clock_range_mhz``
    bench:          the design's own activity stimulus (cocotb module, args), see
                    :func:`zoforge.reports.activity.measure_activity`; default generic
    activity_proxy: a smaller configuration of the same design (e.g. fewer identical
                    lanes) whose measured toggle rates stand in for the design's, when
                    simulating the full design is too slow; the report says so
    vivado_project: write the Vivado project on a Vivado board (a unit of a composed
                    build: no, the whole top's is written)
    """
    progress = progress or Progress()
    check_int_range("--activity-cycles", activity_cycles, 10, 10_000_000)
    board.check_clock(clock_mhz)
    parsed = None
    if vivado_reports is not None:     # parse first: a bad folder fails before slow steps
        parsed = read_vivado_reports(vivado_reports)
    out = make_out_dir("--out", Path(out_dir).resolve())  # absolute: the simulator runs elsewhere
    paths = write_design(design, out, family=design_family(board))
    verilog = paths["verilog"].read_text()
    sections: dict = {}
    activity = None
    if measure_power and board.family in _XILINX:    # the power model is UltraScale+'s
        progress.step("activity")(f"co-simulating {activity_cycles} cycles (Verilator SAIF)")
        simulated, simulated_verilog = design, verilog
        if activity_proxy is not None:
            simulated = activity_proxy
            simulated_verilog = write_design(activity_proxy, out / "proxy",
                                             family=design_family(board))["verilog"]
            simulated_verilog = simulated_verilog.read_text()
        activity = _activity(simulated_verilog, simulated, out / "activity", activity_cycles,
                             activity_mode, activity_seed, clock_mhz, bench)
        if activity_proxy is not None:
            activity = replace(activity, proxy=activity_proxy.name,
                               mode=f"{activity.mode}, measured on the smaller "
                                    f"configuration {activity_proxy.name}")
        sections["activity"] = activity
    if board.family in _XILINX:
        # the primitives the Verilog instantiates (a DSP48E2), declared for the script's
        # hierarchy check (synth_xilinx replaces them with its own cell library's)
        synth = synthesize(with_blackbox_stubs(verilog), design.name, family=board.family,
                           keep_hierarchy=keep_hierarchy, blocks=list(design.blocks) or None,
                           progress=progress.step("synth"), ram_style=ram_style)
        sections["resources"] = _resources(board, synth, ram_style)
        progress.step("fmax")("longest path over the synthesized netlist")
        family = board.family if board.family in FAMILIES else "xcup"
        clocks = design_clocks(design.top)
        sections["fmax"] = _fmax(estimate_fmax(synth.netlist_path, top=design.name,
                                               family=family), synth.tool_version,
                                 {clock: estimate_fmax(synth.netlist_path, top=design.name,
                                                       family=family, clock=clock).fmax_mhz
                                  for clock in clocks})
        if activity is not None:
            power = estimate_power(synth.resources, clock_mhz, activity.toggle_rate,
                                   block_resources=synth.block_resources,
                                   block_rates=activity.block_rates, board=board)
            sections["power"] = Power(
                frequency_mhz=power.frequency_mhz, toggle_rate=power.toggle_rate,
                static_w=power.static_w, static_source=power.static_source,
                dynamic_w=power.dynamic_w, breakdown_w=power.breakdown_w,
                block_dynamic_w=power.block_dynamic_w, coefficients=dict(COEFFICIENTS),
                source=ACTIVITY, tool=POWER_TOOL)
    vivado_files: list[str] = []
    if board.toolchain == "vivado" and vivado_project:
        progress.step("vivado")("writing the Vivado project (Verilog, XDC, Tcl)")
        written = write_vivado_project(board, design.top, out / "vivado", clock_mhz)
        if activity is not None and activity_proxy is None:
            written["saif"] = write_vivado_saif(Path(activity.saif).read_text(), design.name,
                                                out / "vivado")
        vivado_files = sorted(str(p.relative_to(out)) for p in written.values())
    elif board.toolchain == "nextpnr-ecp5" and run_pnr:
        pnr = place_and_route(board, design.top, clock_mhz, progress=progress.step("pnr"))
        sections["nextpnr"] = PostRoute(
            resources=_nextpnr_resources(pnr.utilization), fmax_mhz=pnr.fmax_mhz,
            constraint_mhz=pnr.constraint_mhz, utilization=pnr.utilization,
            log_path=str(pnr.log_path), seconds=pnr.seconds, cached=pnr.cached,
            source=NEXTPNR, tool=pnr.tool_version)
        # the same model on the netlist nextpnr placed (board harness included, its I/O
        # left out as nextpnr's clock Fmax leaves it out): the estimate beside the real one
        progress.step("fmax")("longest path over the placed netlist (ECP5 delays)")
        sections["fmax"] = _fmax(estimate_fmax(Path(pnr.log_path).parent / f"{TOP}.json",
                                               top=TOP, family="ecp5", ports_registered=False),
                                 pnr.tool_version.split(", ")[0] + " synth_ecp5")
    return _report(board, design, clock_mhz, paths["verilog"].name, vivado_files, parsed,
                   sections)


def _report(board: Board, design: Elaborated, clock_mhz: float, verilog: str,
            vivado_files: list[str], parsed, sections: dict) -> Report:
    """The typed report of ``design`` from its sections (and the parsed Vivado reports, if
    the user gave them): the one place both build paths assemble it."""
    if parsed is not None:
        sections["vivado"] = _vivado(parsed)
    return Report(design=design.name, board=BoardFacts.of(board), clock_mhz=clock_mhz,
                  files=ReportFiles(verilog=verilog, vivado=vivado_files),
                  config=json.loads(json.dumps(design.summary(), default=str)),
                  blocks=dict(design.blocks), **sections)


def write_vivado_saif(saif_text: str, instance: str, vivado_dir: Path | str) -> Path:
    """Write the co-simulation's SAIF beside the Vivado project as ``activity.saif``,
    ``instance`` (the design's top in the SAIF) re-rooted at the board harness's ``dut``,
    so that the project's ``read_saif -strip_path`` matches it."""
    path = Path(vivado_dir) / SAIF_NAME
    atomic_write_text(path, rewrite_root(saif_text, instance, [SAIF_ROOT, DUT]))
    return path


def _resources(board: Board, synth, ram_style: str) -> Resources:
    return Resources(
        source=YOSYS, method=synth.source, tool=synth.tool_version,
        family=synth.family, ram_style=ram_style, total=synth.resources,
        percent=board.utilization(synth.resources),
        blocks=synth.block_resources, cells=synth.cells,
        missing_blocks=list(synth.missing_blocks), cached=synth.cached,
        seconds=round(synth.seconds, 1),
        notes=["carry chains counted as Yosys maps them (CARRY4; UltraScale+ has CARRY8, "
               "as which the Fmax model times them)",
               "an accumulator after a multiply stays in LUT+CARRY+FF (Yosys does not pack "
               "it into DSP48E2 on xcup)",
               "memories are counted in the block that holds them (Amaranth inlines them)"])


def design_clocks(top) -> tuple[str, ...]:
    """The clock ports of a top with clock domains besides ``sync`` (its ``clock_domains``:
    ``clk`` and ``<domain>_clk``, hw/export.to_verilog's names); none for one clock."""
    domains = sorted(set(getattr(top, "clock_domains", ())) - {"sync"})
    return ("clk", *(f"{domain}_clk" for domain in domains)) if domains else ()


def _fmax(fmax, synth_tool: str, by_clock: dict[str, float] | None = None) -> Fmax:
    return Fmax(
        by_clock=dict(by_clock or {}),
        fmax_mhz=fmax.fmax_mhz, critical_ns=fmax.critical_ns,
        logic_levels=fmax.logic_levels, path=list(fmax.path), limited_by=fmax.limited_by,
        path_loads=list(fmax.path_loads),
        unresolved_cells=fmax.unresolved_cells, delays=dict(DELAY_MODELS[fmax.family].delays),
        model=MODEL, method=fmax.source, family=fmax.family, error=measured_error(),
        source=YOSYS, tool=f"zoforge {__version__} netlist delay model on the {synth_tool} "
                           "netlist")


def _vivado(parsed: VivadoReports) -> VivadoFigures:
    return VivadoFigures(
        folder=str(parsed.folder), files=dict(parsed.files), utilization=parsed.utilization,
        hierarchy=parsed.hierarchy,
        timing=VivadoTiming.from_json(parsed.timing, "vivado.timing") if parsed.timing
        else None,
        power=VivadoPower.from_json(parsed.power, "vivado.power") if parsed.power else None,
        source=VIVADO, tool=parsed.tool or "Vivado (version not stated in the reports)")


def _nextpnr_resources(utilization: dict) -> dict:
    def used(name):
        return int(utilization.get(name, {}).get("used", 0))
    return {"LUT": used("TRELLIS_COMB"), "FF": used("TRELLIS_FF"),
            "BRAM18": used("DP16KD"), "DSP": used("MULT18X18D"),
            "LUTRAM": used("TRELLIS_RAMW")}


def _activity(verilog: str, design: Elaborated, folder: Path, cycles: int, mode: str,
              seed: int, clock_mhz: float, bench: tuple[str, dict] | None
              ) -> SwitchingActivity:
    """Measured activity, reused from ``folder`` when the inputs are unchanged."""
    top = design.name
    key = content_key(with_models(verilog), top, str(cycles), mode, str(seed),
                      f"{clock_mhz:.6f}",
                      json.dumps(bench, sort_keys=True, default=str))
    stored = folder / "activity.json"
    data = None
    if stored.exists():
        data = json.loads(stored.read_text())
        if data.get("key") != key or not Path(data["saif"]).exists():
            data = None
    if data is None:
        make_dirs(folder.parent, folder)    # inside --out: never through a link
        measured = activity_mod.measure_activity(
            verilog, top, cycles=cycles, mode=mode, seed=seed, clock_ns=1000.0 / clock_mhz,
            data_dir=folder, bench=bench, extra_files=design.memory_files)
        data = dict(asdict(measured), saif=str(measured.saif), key=key, source=ACTIVITY,
                    method=measured.source, tool=activity_mod.simulator_version())
        atomic_write_text(stored, json.dumps(data, indent=1))
    return SwitchingActivity(
        toggle_rate=data["toggle_rate"], cycles=data["cycles"],
        block_rates=data["block_rates"], saif=data["saif"], top=data["top"],
        clock_ns=data["clock_ns"], nets=data["nets"], mode=data["mode"],
        method=data["method"], source=ACTIVITY,
        # activity stored before the tool was recorded: the installed simulator made it
        tool=data.get("tool") or activity_mod.simulator_version())
