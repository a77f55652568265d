"""Time and energy of one ZO fine-tuning step on today's units (issue 20), from the cycles
and bytes of :mod:`zoforge.reports.unit_calls`:

* **roofline**: :func:`roofline`: time = max(compute cycles / f, bytes / DDR bandwidth)
  per job, with the board's DDR fact;
* **time and energy per step** at a given clock, static and dynamic energy apart, the
  power at the clock of the time (:func:`step_time_energy`);
* **the units' clock and power**: the figures used when no ``zoforge build`` reports are
  given (:data:`UNIT_FIGURES`, estimates labelled so; the nonlinear units' clocks
  :data:`NONLINEAR_FIGURES`) or read from the reports (:func:`units_clock_power`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from zoforge.errors import ConfigError
from zoforge.reports.power import dynamic_at
from zoforge.reports.unit_calls import StepCost

__all__ = ["RooflineRow", "roofline", "step_time_energy", "UNIT_FIGURES", "NONLINEAR_FIGURES",
           "LINK_FIGURES", "link_fmax",
           "ENGINE_FMAX_BY_PES", "LAYER_FMAX_BY_PES", "engine_fmax", "layer_fmax", "fmax_by_size",
           "UnitsClockPower", "units_clock_power"]

@dataclass(frozen=True)
class RooflineRow:
    """One call kind at a clock and DDR bandwidth, seconds per call: ``compute_s`` (its
    cycles), ``memory_s`` (all its bytes), ``time_s`` (the sum over its jobs, which run one
    after the other, of max(job compute, job bytes)) and ``bound``: ``compute``,
    ``memory`` or ``mixed`` (some of its jobs memory-bound: the ZO layer's loads)."""

    name: str
    unit: str
    count: int
    compute_s: float
    memory_s: float
    time_s: float
    bound: str
    bytes_per_cycle: float


def roofline(step: StepCost, mhz: float, ddr_bytes_per_s: float,
             payload: bool = False) -> list[RooflineRow]:
    """Per call kind, each job's time = max(cycles / f, bytes / bandwidth) (stream bytes,
    or ``payload`` bytes): a job's streams move while it computes (the engine streams its
    panels while the array works; a ZO-layer load job is all stream), jobs do not overlap.
    ``ddr_bytes_per_s``: the board's :attr:`~zoforge.boards.registry.Board.ddr_bytes_per_s`
    (theoretical peak)."""
    if not mhz > 0:
        raise ConfigError("mhz", "a frequency > 0", mhz)
    if not ddr_bytes_per_s > 0:
        raise ConfigError("ddr_bytes_per_s", "a bandwidth > 0", ddr_bytes_per_s)
    hz = mhz * 1e6
    rows = []
    for call in step.calls:
        moved = call.job_payload_bytes if payload else call.job_stream_bytes
        compute = [cycles / hz for _, cycles in call.jobs]
        memory = [b / ddr_bytes_per_s for b in moved]
        slow = [m > c for c, m in zip(compute, memory)]
        bound = "memory" if all(slow) else "mixed" if any(slow) else "compute"
        rows.append(RooflineRow(call.name, call.unit, call.count, sum(compute), sum(memory),
                                sum(map(max, compute, memory)), bound,
                                sum(moved) / call.cycles))
    return rows


def step_time_energy(step: StepCost, mhz: float, static_w: float, dynamic_w: float,
                     power_mhz: float | None = None,
                     ddr_bytes_per_s: float | None = None) -> dict[str, float]:
    """Seconds and joules of one step at ``mhz``, static and dynamic energy apart: the
    static power ``static_w`` as stated, the dynamic power ``dynamic_w`` (estimated at
    ``power_mhz``, default ``mhz``) taken to ``mhz`` (:func:`zoforge.reports.power.
    dynamic_at`), so time and power are at the same clock. ``compute_*``: compute-bound
    time; with ``ddr_bytes_per_s``, ``roofline_*``: each call's time is the roofline's
    max(compute, DDR). Keys ``*_s``, ``*_static_j``, ``*_dynamic_j`` and ``*_j`` (their
    sum). DDR and host energy are not included."""
    for name, watts in (("static_w", static_w), ("dynamic_w", dynamic_w)):
        if not watts >= 0:
            raise ConfigError(name, "a power >= 0", watts)
    dynamic = dynamic_at(dynamic_w, power_mhz or mhz, mhz)
    times = {"compute": sum(row.count * row.compute_s for row in roofline(step, mhz, 1.0))}
    if ddr_bytes_per_s is not None:
        times["roofline"] = sum(row.count * row.time_s
                                for row in roofline(step, mhz, ddr_bytes_per_s))
    out = {}
    for name, seconds in times.items():
        out.update({f"{name}_s": seconds, f"{name}_static_j": seconds * static_w,
                    f"{name}_dynamic_j": seconds * dynamic,
                    f"{name}_j": seconds * (static_w + dynamic)})
    return out


#: The paired engine's yosys-estimate Fmax by its processing elements (R·C) on a board: the
#: 8x8 of :data:`UNIT_FIGURES`' note (the first point, 311.26 MHz, blocks kept) and
#: flattened builds at the board's sizes (``zoforge build --board zcu102 --design engine
#: --rows R --cols 8 --pack 2 --max-k 1536 --paired --flatten --no-power``): 32x8 (``--max-m
#: 128 --max-n 192``) 304.64 MHz and 64x8 (``--max-m 192 --max-n 312``) 314.49 MHz, all three
#: at 39a7cd2 (2026-11-27, load 2-4; the drain's ``shift`` and the output buffer's next slot
#: registers: the 32x8 was 295.03 at 46d403e, its path the shift's net of 6,656 loads, and
#: 280.43 before 46d403e's loader fix; the 64x8 260 at c870107, the 8x8 302.21 at a5660eb).
#: :func:`engine_fmax` interpolates the clock period in log2(R·C), and never prices a unit
#: above a smaller build's clock (here the 64x8 at the 32x8's).
#: Since 2026-11-28 (the leaner PEs, docs/accelerator.md): 8x8 311.26 and 32x8 304.64 MHz
#: unchanged; the 64x8 at the priced design's sizes (``--max-m 128 --max-n 256``, the
#: composed build at 92b1b33) 259.06 MHz (246.18 at ``--max-m 192 --max-n 312``: the drain's
#: row counter, the read-out's select for every column, 1,134 loads, through 6 LUT levels).
#: Since 2026-11-28 (e4ade95, 4f32494: the loader's panel ends from registers, the
#: read-out's multiplexer in two registered stages): the 64x8's point the standalone
#: ``zoforge build`` at the priced sizes (``--rows 64 --max-m 128 --max-n 256``), 330.60 MHz
#: at 4f32494 (load 2.5-3; 246.72 at ad87ea7, its path the loader's ``more`` through 6 LUT
#: levels; 285.77 at e4ade95, the read-out's select through 6), now the output stage's row
#: read; priced at the 32x8's 304.64 (rebuilt at 4f32494: 304.64, the same output-stage
#: path; the 8x8, ``--rows 8 --cols 8 --paired --no-power``, 311.26 at 4f32494 too, 7,656 LUT,
#: 12,474 FF). The composed build at 92b1b33 timed the plain-drain unit at 259.06.
#: Since 2026-11-28 (branch clk2, a6ea471..ee927ae: the output stage's tile end and the
#: drain's last row registers set with their counters, whether a drained tile waits a
#: register, the drain's ``drained`` a register set a cycle ahead, the packer's ready
#: registers from expressions of their own, the output stage's and feeder's counts
#: stepping by a pick of count +- 1; same cycles and values), all three at ee927ae, load
#: 2-3: the 8x8 (``--rows 8 --cols 8 --paired --no-power``) 367.71 MHz (7,750 LUT, 12,478
#: FF; its path the feeder's ``w_release`` to the loader's ``held``), the 32x8 at its priced
#: sizes 356.65 (15,541 LUT, 27,710 FF; 304.64 at d9a136b, the output stage's row read;
#: 339.75 with the tile end alone, then the drain's row counter; its path now the loader's
#: ``phase``), the 64x8 at its priced sizes (``--rows 64 --max-m 128 --max-n 256``) 355.94
#: (25,227 LUT, 52,124 FF; 330.60 at 4f32494, the output stage's row read; its
#: path now the loader's ``phase`` too), below the 32x8's: priced as built.
ENGINE_FMAX_BY_PES = {"zcu102": ((64, 367.71), (256, 356.65), (512, 355.94))}
#: The ZO layer's the same way: the 4x4 at its default sizes (the first point, 308.78 MHz,
#: :data:`UNIT_FIGURES`' note) and the 4x8 at the priced MiniLM design's sizes (``zoforge
#: build --board zcu102 --design zo-layer --rows 4 --cols 8 --max-m 512 --max-k 8 --max-n
#: 384 --max-r 8 --flatten --no-power``): 310.90 MHz at 2fddd95 (the feeder's one-word tile
#: end, 592de96; 305.49 at 39a7cd2 and e86c4ef, where the generator's ``offered`` took its
#: ``restore``, 252 loads through a net of 102, off the walks' path; 281.87 before it). The
#: 4x4 308.78 at 39a7cd2 with and without 592de96; so the 4x8 is priced at 308.78.
#: Since 2026-11-28 (branch clk2, ee927ae, load 2-3; the engine's blocks above and the
#: layer's: the perturbation's shift a register clamped to the z width beside the unit,
#: the requantizer's ``bias_en`` and ``raw`` registers of the control's, the update unit's
#: and the reader's end flags each one expression; same cycles and values): the 4x4 354.62
#: MHz (5,630 LUT, 10,975 FF; 308.78 at d9a136b, its path the generator's lanes through the
#: perturbation's shifter, 5 LUTs; now a DSP48E2's input), the 4x8 at the priced sizes
#: 311.76 (8,871 LUT, 15,703 FF; 310.90 at 2fddd95), and the 4x16 (``--rows 4 --cols 16``, the same sizes otherwise) 311.76 (14,878 LUT,
#: 27,277 FF; 310.90 at d57f3e7; its path the master reader's stream advance through its
#: walk's panel-end enables to ``panels_end``, 5 LUTs).
#: Since 2026-11-28 (branch layerclk, hw/zolayer/reader.py and update.py, load 3-4; same
#: cycles and values): the master reader's issue one LUT of a ``reading`` register and the stream's
#: advance (not the job's flags, ``read_all`` and the advance), and the update unit's
#: multiplier chunks cut so that ``b``'s top chunk is each product's narrower operand (its
#: sign bit, sign-extended into the DSP48E2s' B ports, drove 88 pins; now 40): the 4x8 and
#: the 4x16 at the priced sizes 349.30 MHz each (8,905 LUT, 15,703 FF; 14,911 LUT, 27,277
#: FF; 343.83 with the reader's change alone, then the 88 pins' path), their path now that
#: sign bit into the DSPs (then 350.88: a's top chunk's sign and the requantizer's shared
#: multiplier operand, 32 pins each), the 4x4 355.87 (5,668 LUT, 10,975 FF; 354.62
#: before; unflattened, its path a lane's ``a`` sign, 16 pins).
LAYER_FMAX_BY_PES = {"zcu102": ((16, 355.87), (32, 349.30), (64, 349.30))}

#: The two units' clock and power on a board when no ``zoforge build`` reports are given.
#: Fmax: the lower of the two yosys estimates (with the fan-out term of reports/fmax.py;
#: each the first point of its table above),
#: rebuilt 2026-11-27 (load 2-8): ``zoforge build --board zcu102 --design zo-layer
#: --no-power`` 308.78 MHz at e86c4ef and 39a7cd2 (300.84 at 1d6fc40..a2ee796, its path the
#: panel fetch's walk advance: the generator's restore -> z valid -> advance -> the walk's
#: enables, which the generator's ``offered`` took off; 308.94 at a5660eb, 251 before the
#: layer's timing pass, b82f57b..04738bc); ``zoforge build --board zcu102 --design engine
#: --rows 8 --cols 8 --paired --no-power`` 311.26 MHz at 39a7cd2 (302.21 at a5660eb and
#: 4f5b601, its path the output stage's tile end; 254.95 before a5660eb took the pre-adder
#: out of the packed multiply); since 2026-11-28 (branch clk2, ee927ae, load 2-3) the 4x4
#: layer 354.62 MHz (355.87 since branch layerclk) and the 8x8 engine 367.71, so the
#: layer's sets it. Power (2026-11-24, the 8x8
#: engine and the ZO layer at the board's 300 MHz): the board's static power (its own
#: source, a paper's bound) apart from both units' dynamic power (the activity model at
#: ``power_at_mhz``, taken to the clock of the time). Estimates, labelled so.
UNIT_FIGURES = {"zcu102": {"fmax_mhz": min(ENGINE_FMAX_BY_PES["zcu102"][0][1],
                                           LAYER_FMAX_BY_PES["zcu102"][0][1]),
                           "fmax_source": "yosys-estimate",
                           "static_w": 0.590, "dynamic_w": 0.1729 + 0.1043,
                           "power_source": "activity-model", "power_at_mhz": 300.0}}
#: The clocks of the fabric's nonlinear units on a board (yosys-estimate,
#: docs/nonlinear-units.md, docs/engine.md, 2026-11-27): ``gelu_fmax_mhz`` the 8x8 paired
#: GELU engine's (``zoforge build --design engine --paired --gelu``: 278 MHz at 17c1b3f),
#: which bounds the clock of a design with GELU engines; ``softmax_fmax_mhz`` the bus
#: softmax unit's (``zoforge build --design softmax``, 8 lanes x 128 at 2^-15: 249 MHz at
#: e91707a, f00076b), the softmax units' own clock.
NONLINEAR_FIGURES = {"zcu102": {"gelu_fmax_mhz": 278.0, "softmax_fmax_mhz": 249.0,
                                "fmax_source": "yosys-estimate"}}
#: The attention link's clock on a board (yosys-estimate), by its lanes: the registered
#: design's builds (``zoforge build --board zcu102 --design link --rows 64 --cols 8 --lanes
#: L --max-rows 64 --max-len 128 --no-power --flatten``, 2026-11-28 at 86834b4, after the
#: link's clock work 6ada4db), the report's ``clk`` figure (``Fmax.by_clock``: the paths
#: between the engines' clock's registers, which the link's write side shares; its
#: ``softmax_clk`` paths 373.93, 318.68, 363.77 and 316.10 MHz, above the softmax units'
#: 249; the whole netlist's estimate, crossings included, 357.73, 318.68, 325.73, 316.10).
#: Lanes not built: the lowest built. MiniLM's 8-lane link was 282.60 MHz before its clock
#: work (f2f7525, the whole netlist).
LINK_FIGURES = {"zcu102": {"fmax_by_lanes": ((4, 357.73), (8, 349.34), (10, 343.00),
                                             (16, 343.70)),
                           "fmax_source": "yosys-estimate"}}


def link_fmax(board: str, lanes: int) -> tuple[float, str]:
    """``(MHz, source)``: the estimated Fmax of the engines' side of an attention link of
    ``lanes`` lanes on ``board`` (:data:`LINK_FIGURES`; lanes not built: the lowest built)."""
    if board not in LINK_FIGURES:
        raise ConfigError("board", "one of " + ", ".join(LINK_FIGURES) + " (or give mhz)",
                          board)
    figures = LINK_FIGURES[board]
    built = dict(figures["fmax_by_lanes"])
    if lanes in built:
        return built[lanes], f"{figures['fmax_source']} (the {lanes}-lane link's build)"
    return min(built.values()), (f"{figures['fmax_source']} (the lowest of the links' "
                                 f"builds: {lanes} lanes not built)")


def engine_fmax(board: str, pes: int) -> tuple[float, str]:
    """``(MHz, source)``: the estimated Fmax of a paired engine of ``pes`` processing
    elements on ``board`` (:data:`ENGINE_FMAX_BY_PES`, :func:`fmax_by_size`)."""
    return fmax_by_size(ENGINE_FMAX_BY_PES, "engine", board, pes)


def layer_fmax(board: str, pes: int) -> tuple[float, str]:
    """``(MHz, source)``: the estimated Fmax of a ZO layer of ``pes`` processing elements
    on ``board`` (:data:`LAYER_FMAX_BY_PES`, :func:`fmax_by_size`)."""
    return fmax_by_size(LAYER_FMAX_BY_PES, "ZO layer", board, pes)


def fmax_by_size(table: dict, unit: str, board: str, pes: int) -> tuple[float, str]:
    """``(MHz, source)`` of a ``unit`` of ``pes`` processing elements on ``board`` from
    ``table``'s builds (board -> ``(pes, MHz)`` ascending): the smallest build's at or below
    it; between two builds the period linear in log2(pes); past the largest build the last
    segment's slope extended (``extrapolated`` in the source); never above a smaller build's
    clock (a unit's broadcast nets only grow with it; the estimate's path differs from build
    to build, so a larger build can time faster)."""
    points = table.get(board)
    if points is None:
        raise ConfigError("board", "one of " + ", ".join(table), board)
    source = f"yosys-estimate (the {unit}'s builds by size, interpolated in log2 PEs)"
    if pes <= points[0][0]:
        return points[0][1], source
    segments = list(zip(points, points[1:]))
    (low, low_mhz), (high, high_mhz) = next(
        (segment for segment in segments if pes <= segment[1][0]), segments[-1])
    share = (math.log2(pes) - math.log2(low)) / (math.log2(high) - math.log2(low))
    period = 1 / low_mhz + share * (1 / high_mhz - 1 / low_mhz)
    if pes > points[-1][0]:
        source = source.replace("interpolated", "extrapolated")
    return min(1 / period, *(mhz for size, mhz in points if size <= pes)), source


@dataclass(frozen=True)
class UnitsClockPower:
    """The two units on one device: the clock both meet (the lower Fmax) and, apart, the
    board's static power (once, with its source) and both units' dynamic power (with its
    source label and the clock it was estimated at)."""

    fmax_mhz: float
    fmax_source: str
    static_w: float
    static_source: str
    dynamic_w: float
    power_source: str
    power_at_mhz: float


def units_clock_power(engine_report, layer_report) -> UnitsClockPower:
    """:class:`UnitsClockPower` from the ``zoforge build`` reports
    (:class:`~zoforge.reports.model.Report`) of the engine and the ZO layer, on one board
    and clock (ConfigError otherwise, or when a report lacks Fmax or power)."""
    reports = (engine_report, layer_report)
    for name, report in zip(("engine report", "layer report"), reports):
        if report.fmax is None or report.power is None:
            raise ConfigError(name, "a report with Fmax and power (zoforge build without "
                              "--no-power)", report.design)
    if engine_report.board.name != layer_report.board.name or \
            engine_report.power.frequency_mhz != layer_report.power.frequency_mhz:
        raise ConfigError("layer report", f"on board {engine_report.board.name} at "
                          f"{engine_report.power.frequency_mhz:g} MHz like the engine's",
                          f"{layer_report.board.name} at {layer_report.power.frequency_mhz:g}")
    fmax = min(reports, key=lambda report: report.fmax.fmax_mhz).fmax
    power = engine_report.power
    return UnitsClockPower(fmax.fmax_mhz, fmax.source, power.static_w, power.static_source,
                           sum(report.power.dynamic_w for report in reports), power.source,
                           power.frequency_mhz)
