"""The build report as one typed, versioned value.

:func:`zoforge.reports.pipeline.build_report` returns a :class:`Report`; the renderers, the
``zoforge build`` summary and ``benchmarks/table6.py`` read its fields. A report is frozen
data: sections for what was produced (``None`` where a step did not run), and every section
names the *source* of its figures (one of :data:`LABELS`, or for static power the board's
stated source) and the *tool* with its version that produced them. :meth:`Report.figures`
lists every headline figure with its source and tool.

JSON (``report.json``): :meth:`Report.to_json` writes the fields under their own names plus
``"schema_version"`` (:data:`SCHEMA_VERSION`; bump it whenever a field is renamed, removed or
changes meaning) and derived values such as ``power.total_w``; an absent section is left out.
:meth:`Report.from_json` reads it back and rejects another schema version, or a missing or
unknown field, with a one-line :class:`~zoforge.errors.ConfigError`.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import ClassVar

from zoforge import __version__
from zoforge.boards.registry import Board
from zoforge.errors import ConfigError
from zoforge.reports.fmax import Delay, ModelError
from zoforge.reports.power import Coefficient, StepEnergy, step_energy

__all__ = ["SCHEMA_VERSION", "LABELS", "YOSYS", "ACTIVITY", "NEXTPNR", "VIVADO",
           "PER_UNIT", "per_unit", "RESOURCE_KEYS", "Figure", "BoardFacts", "ReportFiles",
           "Resources", "Fmax", "SwitchingActivity", "Power", "PostRoute", "VivadoTiming",
           "VivadoPower", "VivadoFigures", "ComposedUnit", "Margin", "Composition", "Report"]

SCHEMA_VERSION = 1

# The source labels every figure of a report carries.
YOSYS = "yosys-estimate"        # Yosys synth_xilinx mapping; the netlist Fmax model
ACTIVITY = "activity-model"     # switching activity from co-simulation; the power model
NEXTPNR = "nextpnr"             # post-route, real for that (open-toolchain) board
VIVADO = "vivado"               # parsed Vivado reports
LABELS = (YOSYS, ACTIVITY, NEXTPNR, VIVADO)
# A label's qualifier for a figure composed from one build of each distinct unit of a
# design (:mod:`zoforge.reports.compose`): ``yosys-estimate (per unit x count)``.
PER_UNIT = "(per unit x count)"


def per_unit(label: str) -> str:
    """``label`` qualified as composed per unit x count (:data:`PER_UNIT`)."""
    return f"{label} {PER_UNIT}"

RESOURCE_KEYS = ("LUT", "FF", "CARRY", "BRAM18", "DSP", "URAM")


@dataclass(frozen=True)
class Figure:
    """One number of a report with where it comes from.

    name:   dotted path in the report (``power.static_w``, ``resources.blocks.core.LUT``)
    source: a label of :data:`LABELS`, or the board's stated source (static power)
    tool:   the tool and its version that produced it
    """

    name: str
    value: float | int | None
    unit: str
    source: str
    tool: str


class _Json:
    """JSON for a frozen dataclass whose fields are JSON values, sections or typed tables.

    _nested:  field name -> ("one", type) for a section or ``None``, ("dict", type) for a
              name -> typed entry table, ("list", type) for a list of typed entries
    _derived: properties written to JSON too (ignored when reading)
    """

    _nested: ClassVar[dict[str, tuple[str, type]]] = {}
    _derived: ClassVar[tuple[str, ...]] = ()

    def to_json(self) -> dict:
        out = {f.name: _plain(getattr(self, f.name)) for f in fields(self)}
        for name in self._derived:
            out[name] = getattr(self, name)
        return out

    @classmethod
    def from_json(cls, data: dict, where: str = "report"):
        return _load(cls, data, where)


def _plain(value):
    """``value`` as JSON-able data (sections, tables, tuples and paths converted)."""
    if isinstance(value, (_Json, ModelError)):
        return value.to_json()
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def _load(cls: type, data, where: str):
    """An instance of dataclass ``cls`` from ``data`` (a JSON object read at ``where``)."""
    if not isinstance(data, dict):
        raise ConfigError(where, "a JSON object", type(data).__name__)
    nested = getattr(cls, "_nested", {})
    derived = getattr(cls, "_derived", ())
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known) - set(derived))
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}", f"a field of report schema version "
                          f"{SCHEMA_VERSION} (unknown field)")
    values = {}
    for name, spec in known.items():
        if name not in data:
            if spec.default is MISSING and spec.default_factory is MISSING:
                raise ConfigError(f"{where}.{name}", f"present (report schema version "
                                  f"{SCHEMA_VERSION})", "missing")
            continue
        value = data[name]
        if name in nested and value is not None:
            how, kind = nested[name]
            if how == "one":
                value = _load(kind, value, f"{where}.{name}")
            elif how == "list":
                if not isinstance(value, list):
                    raise ConfigError(f"{where}.{name}", "a JSON array", type(value).__name__)
                value = [_load(kind, entry, f"{where}.{name}[{index}]")
                         for index, entry in enumerate(value)]
            else:
                if not isinstance(value, dict):
                    raise ConfigError(f"{where}.{name}", "a JSON object",
                                      type(value).__name__)
                value = {key: _load(kind, entry, f"{where}.{name}.{key}")
                         for key, entry in value.items()}
        values[name] = value
    return cls(**values)


@dataclass(frozen=True)
class BoardFacts(_Json):
    """What the report used of the board (see :class:`zoforge.boards.registry.Board`)."""

    name: str
    part: str
    family: str
    toolchain: str
    capacities: dict[str, int]
    capacity_source: str
    toolchain_args: list[str] = field(default_factory=list)
    default_mhz: float | None = None
    clock_range_mhz: list[float] = field(default_factory=list)
    static_power_w: float | None = None
    static_power_source: str = ""

    @classmethod
    def of(cls, board: Board) -> BoardFacts:
        return cls(name=board.name, part=board.part, family=board.family,
                   toolchain=board.toolchain, capacities=dict(board.capacities),
                   capacity_source=board.capacity_source,
                   toolchain_args=list(board.toolchain_args), default_mhz=board.default_mhz,
                   clock_range_mhz=list(board.clock_range_mhz),
                   static_power_w=board.static_power_w,
                   static_power_source=board.static_power_source)


@dataclass(frozen=True)
class ReportFiles(_Json):
    """Files of the build folder: the design's Verilog, the Vivado project (if written)."""

    verilog: str
    vivado: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Resources(_Json):
    """Resource counts of the Yosys estimate, for the design and per block.

    total / blocks: resource (LUT, FF, CARRY, BRAM18, DSP, URAM, ...) -> count
    percent:        resource -> percent of the board's capacity (None: the device has none)
    cells:          raw Xilinx primitive counts of the whole design
    """

    total: dict[str, int]
    blocks: dict[str, dict[str, int]]
    percent: dict[str, float | None] = field(default_factory=dict)
    cells: dict[str, int] = field(default_factory=dict)
    missing_blocks: list[str] = field(default_factory=list)
    family: str = "xcup"
    ram_style: str = "auto"
    notes: list[str] = field(default_factory=list)
    method: str = ""
    cached: bool = False
    seconds: float = 0.0
    source: str = YOSYS
    tool: str = ""

    def figures(self) -> Iterator[Figure]:
        for key, count in self.total.items():
            yield Figure(f"resources.total.{key}", count, "count", self.source, self.tool)
        for block, counts in self.blocks.items():
            for key, count in counts.items():
                yield Figure(f"resources.blocks.{block}.{key}", count, "count", self.source,
                             self.tool)


@dataclass(frozen=True)
class Fmax(_Json):
    """The Fmax estimate: longest path of the synthesized netlist under :attr:`delays`
    (the delay table of :attr:`family`).

    path_loads: the loads of each net along :attr:`path` (the nets into its second to last
                cell, then the net into the endpoint; a dedicated wire adds no delay)

    error: the model's measured error against a real router
           (:func:`zoforge.reports.fmax.measured_error`: per design the model's and
           nextpnr's Fmax, the commit it was measured at; JSON adds ``mean_abs_pct``,
           ``max_abs_pct`` and ``bias_pct``), None if never measured

    by_clock: a design of several clock domains: each clock port's own Fmax (the paths
              between its registers, ``estimate_fmax(clock=...)``; a crossing between
              domains is not timed); empty for one clock (``fmax_mhz`` is every path's)
    """

    _nested: ClassVar = {"delays": ("dict", Delay), "error": ("one", ModelError)}

    fmax_mhz: float
    critical_ns: float
    logic_levels: int
    path: list[str]
    limited_by: str
    unresolved_cells: int = 0
    path_loads: list[int] = field(default_factory=list)
    delays: dict[str, Delay] = field(default_factory=dict)
    model: str = ""
    method: str = ""
    family: str = "xcup"
    error: ModelError | None = None
    source: str = YOSYS
    tool: str = ""
    by_clock: dict[str, float] = field(default_factory=dict)

    def error_note(self) -> str:
        """One line on how far the model is from a real router (and, for another family's
        table, that this one is not calibrated)."""
        if self.error is None:
            return "model error not measured (benchmarks/bench_fmax_model.py --write)"
        note = self.error.summary()
        if self.error.family != self.family:
            note += f"; the {self.family} delay table itself is not calibrated against a router"
        return note

    def figures(self) -> Iterator[Figure]:
        yield Figure("fmax.fmax_mhz", self.fmax_mhz, "MHz", self.source, self.tool)
        yield Figure("fmax.critical_ns", self.critical_ns, "ns", self.source, self.tool)
        if self.error is not None:
            for name in ("mean_abs_pct", "max_abs_pct"):
                yield Figure(f"fmax.error.{name}", getattr(self.error, name), "%", NEXTPNR,
                             f"{self.error.router}, {self.error.measured_at}")


@dataclass(frozen=True)
class SwitchingActivity(_Json):
    """Toggle rates measured in co-simulation (toggles per clock cycle per net bit).

    saif:  the SAIF file recorded; proxy: the smaller configuration it was measured on, if
    the design itself was not simulated
    """

    toggle_rate: float
    cycles: int
    block_rates: dict[str, float] = field(default_factory=dict)
    saif: str = ""
    top: str = ""
    clock_ns: float = 0.0
    nets: int = 0
    mode: str = "random"
    proxy: str | None = None
    method: str = ""
    source: str = ACTIVITY
    tool: str = ""

    def figures(self) -> Iterator[Figure]:
        yield Figure("activity.toggle_rate", self.toggle_rate, "toggles/cycle", self.source,
                     self.tool)
        for block, rate in self.block_rates.items():
            yield Figure(f"activity.block_rates.{block}", rate, "toggles/cycle", self.source,
                         self.tool)


@dataclass(frozen=True)
class Power(_Json):
    """The activity-model power estimate: dynamic power, and the board's static power kept
    apart with its source (every writer shows both parts; ``total_w`` is their sum).

    static_source: where :attr:`static_w` comes from (the board's stated source)
    breakdown_w:   dynamic power by resource; block_dynamic_w: per block (no clock tree)
    coefficients:  every energy the model used, with its source
    """

    _nested: ClassVar = {"coefficients": ("dict", Coefficient)}
    _derived: ClassVar = ("total_w",)

    frequency_mhz: float
    toggle_rate: float
    static_w: float
    dynamic_w: float
    breakdown_w: dict[str, float]
    static_source: str = ""
    block_dynamic_w: dict[str, float] = field(default_factory=dict)
    coefficients: dict[str, Coefficient] = field(default_factory=dict)
    source: str = ACTIVITY
    tool: str = ""

    @property
    def total_w(self) -> float:
        """Static plus dynamic; shown only beside both parts and the static source."""
        return self.static_w + self.dynamic_w

    def step_energy(self, cycles: float, mhz: float) -> StepEnergy:
        """A step of ``cycles`` at ``mhz``: time, and energy static and dynamic apart with
        the dynamic power taken to ``mhz`` (:func:`zoforge.reports.power.step_energy`)."""
        return step_energy(cycles, mhz, self.static_w, self.dynamic_w, self.frequency_mhz,
                           self.static_source, self.source)

    def figures(self) -> Iterator[Figure]:
        yield Figure("power.total_w", self.total_w, "W", self.source, self.tool)
        yield Figure("power.static_w", self.static_w, "W", self.static_source, self.tool)
        yield Figure("power.dynamic_w", self.dynamic_w, "W", self.source, self.tool)
        for block, watts in self.block_dynamic_w.items():
            yield Figure(f"power.block_dynamic_w.{block}", watts, "W", self.source, self.tool)


@dataclass(frozen=True)
class PostRoute(_Json):
    """nextpnr's post-route numbers (whole chip, board harness included).

    resources:   LUT, FF, BRAM18, DSP, LUTRAM used; utilization: nextpnr's own cell types
    fmax_mhz:    clock -> achieved Fmax; constraint_mhz: clock -> constraint
    """

    resources: dict[str, int]
    fmax_mhz: dict[str, float | None]
    constraint_mhz: dict[str, float | None]
    utilization: dict[str, dict[str, int]] = field(default_factory=dict)
    log_path: str = ""
    seconds: float = 0.0
    cached: bool = False
    source: str = NEXTPNR
    tool: str = ""

    def figures(self) -> Iterator[Figure]:
        for key, count in self.resources.items():
            yield Figure(f"nextpnr.resources.{key}", count, "count", self.source, self.tool)
        for clock, mhz in self.fmax_mhz.items():
            yield Figure(f"nextpnr.fmax_mhz.{clock}", mhz, "MHz", self.source, self.tool)


@dataclass(frozen=True)
class VivadoTiming(_Json):
    """From ``report_timing_summary``: slack, the clock period and the Fmax it implies."""

    wns_ns: float
    tns_ns: float
    met: bool
    whs_ns: float | None = None
    clock: str | None = None
    period_ns: float | None = None
    fmax_mhz: float | None = None


@dataclass(frozen=True)
class VivadoPower(_Json):
    """From ``report_power``: totals, on-chip components and the SAIF match rate."""

    total_w: float
    dynamic_w: float | None = None
    static_w: float | None = None
    confidence: str | None = None
    activity_file: str | None = None
    components_w: dict[str, float] = field(default_factory=dict)
    nets_matched: list[int] | None = None


@dataclass(frozen=True)
class VivadoFigures(_Json):
    """Parsed Vivado reports (``zoforge build --vivado-reports DIR``).

    files:       role (utilization, hierarchy, timing, power) -> file name in :attr:`folder`
    utilization: whole chip, resource -> count; hierarchy: instance path -> resources
    """

    _nested: ClassVar = {"timing": ("one", VivadoTiming), "power": ("one", VivadoPower)}

    folder: str
    files: dict[str, str]
    utilization: dict[str, int] | None = None
    hierarchy: dict[str, dict[str, int]] | None = None
    timing: VivadoTiming | None = None
    power: VivadoPower | None = None
    source: str = VIVADO
    tool: str = ""

    def figures(self) -> Iterator[Figure]:
        for key, count in (self.utilization or {}).items():
            yield Figure(f"vivado.utilization.{key}", count, "count", self.source, self.tool)
        if self.timing is not None:
            yield Figure("vivado.timing.wns_ns", self.timing.wns_ns, "ns", self.source,
                         self.tool)
            yield Figure("vivado.timing.fmax_mhz", self.timing.fmax_mhz, "MHz", self.source,
                         self.tool)
        if self.power is not None:
            for name in ("total_w", "static_w", "dynamic_w"):
                yield Figure(f"vivado.power.{name}", getattr(self.power, name), "W",
                             self.source, self.tool)


@dataclass(frozen=True)
class ComposedUnit(_Json):
    """One distinct unit of a composed report: its own build and how many copies count.

    name:   the unit's Verilog top; design: its registered design; folder: its own report,
            relative to the composed report's folder
    total:  the unit's resources (its own ``resources.total``), one copy
    domain: the clock domain its copies run in (``sync``: the design's clock)
    """

    name: str
    design: str
    count: int
    folder: str
    total: dict[str, int]
    fmax_mhz: float | None = None
    dynamic_w: float | None = None
    toggle_rate: float | None = None
    cached: bool = False
    domain: str = "sync"


@dataclass(frozen=True)
class Margin(_Json):
    """One resource against the device and the design's margin on it.

    budget: the most the margin allows (``floor(available x margin_pct / 100)``);
    over:   ``used > budget``
    """

    used: int
    available: int
    percent: float
    margin_pct: float
    budget: int
    over: bool


@dataclass(frozen=True)
class Composition(_Json):
    """How a report of a design made of replicated units was composed
    (:mod:`zoforge.reports.compose`): the units, the margins against the device, and what
    the composition leaves out.

    margins: resource -> :class:`Margin` (those the design states a margin for)
    over:    resources over their margin (empty: the design fits with its margins)
    """

    _nested: ClassVar = {"units": ("list", ComposedUnit), "margins": ("dict", Margin)}

    units: list[ComposedUnit]
    margins: dict[str, Margin]
    over: list[str] = field(default_factory=list)
    rule: str = ""
    notes: list[str] = field(default_factory=list)
    source: str = per_unit(YOSYS)
    tool: str = ""

    def figures(self) -> Iterator[Figure]:
        for key, margin in self.margins.items():
            yield Figure(f"composition.margins.{key}.percent", margin.percent, "%",
                         self.source, self.tool)


_SECTIONS = ("resources", "fmax", "activity", "power", "nextpnr", "vivado", "composition")


@dataclass(frozen=True)
class Report(_Json):
    """Everything ``zoforge build`` found out about one design on one board.

    design:   the Verilog top's name; config: the design's configuration and derived facts
              (``Elaborated.summary()``); blocks: block name -> one-line description
    sections: :attr:`resources`, :attr:`fmax`, :attr:`activity`, :attr:`power`,
              :attr:`nextpnr`, :attr:`vivado`, each ``None`` where that step did not run;
              :attr:`composition` where the figures were composed from the design's units
              (then :attr:`activity` is ``None``: each unit's is in its own report)
    """

    _nested: ClassVar = {"board": ("one", BoardFacts), "files": ("one", ReportFiles),
                         "resources": ("one", Resources), "fmax": ("one", Fmax),
                         "activity": ("one", SwitchingActivity), "power": ("one", Power),
                         "nextpnr": ("one", PostRoute), "vivado": ("one", VivadoFigures),
                         "composition": ("one", Composition)}

    design: str
    board: BoardFacts
    clock_mhz: float
    files: ReportFiles
    config: dict = field(default_factory=dict)
    blocks: dict[str, str] = field(default_factory=dict)
    resources: Resources | None = None
    fmax: Fmax | None = None
    activity: SwitchingActivity | None = None
    power: Power | None = None
    nextpnr: PostRoute | None = None
    vivado: VivadoFigures | None = None
    composition: Composition | None = None
    zoforge_version: str = __version__

    def figures(self) -> Iterator[Figure]:
        """Every figure of the report, each with its source label and tool."""
        for name in _SECTIONS:
            section = getattr(self, name)
            if section is not None:
                yield from section.figures()

    def to_json(self) -> dict:
        """The report as JSON data, with ``"schema_version"``; absent sections left out."""
        data = super().to_json()
        for name in _SECTIONS:
            if data[name] is None:
                del data[name]
        return {"schema_version": SCHEMA_VERSION, **data}

    @classmethod
    def from_json(cls, data: dict, where: str = "report") -> Report:
        """Read :meth:`to_json`'s data; another schema version is a ConfigError."""
        if not isinstance(data, dict):
            raise ConfigError(where, "a JSON object", type(data).__name__)
        version = data.get("schema_version", "missing")
        if version != SCHEMA_VERSION:
            raise ConfigError(f"{where} schema_version", f"{SCHEMA_VERSION} (the report "
                              f"schema zoforge {__version__} reads; rebuild the report)",
                              version)
        return _load(cls, {k: v for k, v in data.items() if k != "schema_version"}, where)

    @classmethod
    def read(cls, path: Path | str) -> Report:
        """A report from its ``report.json``."""
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as error:
            raise ConfigError(str(path), "a report.json written by zoforge build",
                              f"invalid JSON: {error.msg}") from None
        return cls.from_json(data, where=str(path))
