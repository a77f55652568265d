"""A report of a design made of replicated units, composed from one report of each distinct
unit (:func:`compose`; the builds themselves: :func:`zoforge.reports.pipeline.build_design`).

A design declares its units (``Design.units``: :class:`~zoforge.hw.designs.Units`); the top
itself only passes the units' ports through, so it adds no logic. The figures:

* resources, ``yosys-estimate (per unit x count)``: every resource the sum over the distinct
  units of count x the unit's own total (each unit synthesized alone); one block per unit
  (``3 x engine_...``), the top's own ``(top)`` block 0;
* Fmax, ``yosys-estimate``: the lowest of the estimates of the units in the design's clock
  (``sync``; the same netlist delay model, the model's measured error quoted as for every
  design); wiring between the units is none, so the slowest unit sets the clock. Units in
  a clock domain of their own (the accelerator's softmax units) set only theirs: the method
  names each such domain's lowest unit and its Fmax, and each unit's Fmax and domain are
  in ``composition.units``;
* power, ``activity-model (per unit x count)``: dynamic power the sum of count x each unit's
  (each from its own co-simulation's activity), its parts likewise; the board's static power
  once; the toggle rate the mean over every net bit of the copies (each unit's rate weighted
  by count x its nets);
* margins (:class:`~zoforge.reports.model.Margin`): per resource the design states a margin
  for, used / available and the budget ``floor(available x margin)``; a resource over its
  budget is listed in ``composition.over``.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import NamedTuple

from zoforge.boards.registry import Board
from zoforge.reports.model import (ACTIVITY, YOSYS, ComposedUnit, Composition, Margin, Power,
                                   Report, Resources, per_unit)

__all__ = ["UnitReport", "compose", "margins_of", "RULE", "TOP_NOTE"]

#: When a report is composed (the rule of :func:`zoforge.reports.pipeline.build_design`).
RULE = ("on a Xilinx board (Yosys estimate) each distinct unit is built once and the design "
        "composed as count x unit; on an ECP5 board the whole top is placed and routed "
        "(nextpnr), since routing is what gives a real Fmax there")
#: What the top adds to its units.
TOP_NOTE = ("the top adds nothing: its ports are the units' ports passed through (wiring "
            "only), so its own (top) block is 0")


class UnitReport(NamedTuple):
    """One distinct unit's own report, how many copies the design holds, the folder its
    report was written to (relative to the composed report's) and its clock domain."""

    report: Report
    design: str
    count: int
    folder: str
    domain: str = "sync"


def compose(board: Board, units: Sequence[UnitReport], margins: Mapping[str, float]) -> dict:
    """The composed sections (``resources``, ``fmax``, ``power``, ``composition``; a section
    ``None`` where a unit lacks it) of a design made of ``units`` on ``board``."""
    resources = _resources(board, units)
    fmax = _fmax(units)
    power = _power(units)
    checked = margins_of(board, resources.total, margins) if resources else {}
    composition = Composition(
        units=[_unit(unit) for unit in units], margins=checked,
        over=[key for key, margin in checked.items() if margin.over], rule=RULE,
        notes=[TOP_NOTE, "no co-simulation of the whole top: each unit's switching activity "
               "is its own (its report in its folder)"],
        tool=resources.tool if resources else "")
    return {"resources": resources, "fmax": fmax, "power": power, "composition": composition}


def margins_of(board: Board, total: Mapping[str, int], margins: Mapping[str, float]
               ) -> dict[str, Margin]:
    """Resource -> :class:`Margin` for each resource of ``margins`` (fraction of the device)
    that ``board`` has; the budget in exact arithmetic (0.7 of 83,640 is 58,548)."""
    out = {}
    for key, margin in margins.items():
        available = board.capacities.get(key)
        if not available:
            continue
        used = int(total.get(key, 0))
        exact = Fraction(str(margin))
        budget = math.floor(available * exact)
        out[key] = Margin(used=used, available=available, percent=100.0 * used / available,
                          margin_pct=float(100 * exact), budget=budget, over=used > budget)
    return out


def _label(unit: UnitReport) -> str:
    return f"{unit.count} x {unit.report.design}"


def _unit(unit: UnitReport) -> ComposedUnit:
    report = unit.report
    return ComposedUnit(
        name=report.design, design=unit.design, count=unit.count, folder=unit.folder,
        total=dict(report.resources.total) if report.resources else {},
        fmax_mhz=report.fmax.fmax_mhz if report.fmax else None,
        dynamic_w=report.power.dynamic_w if report.power else None,
        toggle_rate=report.power.toggle_rate if report.power else None,
        cached=bool(report.resources and report.resources.cached), domain=unit.domain)


def _scaled_sum(parts: Sequence[tuple[int, Mapping]]) -> dict:
    """Key -> sum of count x value over ``parts`` ((count, mapping) pairs)."""
    out: dict = {}
    for count, values in parts:
        for key, value in values.items():
            out[key] = out.get(key, 0) + count * value
    return out


def _resources(board: Board, units: Sequence[UnitReport]) -> Resources | None:
    if any(unit.report.resources is None for unit in units):
        return None
    first = units[0].report.resources
    total = _scaled_sum([(u.count, u.report.resources.total) for u in units])
    blocks = {_label(u): {k: u.count * v for k, v in u.report.resources.total.items()}
              for u in units}
    blocks["(top)"] = {key: 0 for key in total}
    return Resources(
        total=total, blocks=blocks, percent=board.utilization(total),
        cells=_scaled_sum([(u.count, u.report.resources.cells) for u in units]),
        family=first.family, ram_style=first.ram_style,
        notes=[TOP_NOTE, *first.notes],
        method=f"one synthesis per distinct unit, count x unit ({first.method})",
        cached=all(u.report.resources.cached for u in units),
        seconds=round(sum(u.report.resources.seconds for u in units), 1),
        source=per_unit(YOSYS), tool=first.tool)


def _clock_figures(unit: UnitReport) -> list[tuple[str, float]]:
    """``(domain, MHz)`` a unit bounds: its estimate in its own domain, or, for a unit of
    several clocks (``Fmax.by_clock``), each clock's in its domain (``clk`` the unit's
    domain, ``<domain>_clk`` that domain)."""
    fmax = unit.report.fmax
    if not fmax.by_clock:
        return [(unit.domain, fmax.fmax_mhz)]
    return [(unit.domain if clock == "clk" else clock.removesuffix("_clk"), mhz)
            for clock, mhz in fmax.by_clock.items()]


def _fmax(units: Sequence[UnitReport]):
    if any(unit.report.fmax is None for unit in units):
        return None
    by_domain: dict[str, tuple[float, UnitReport]] = {}
    for unit in units:
        for domain, mhz in _clock_figures(unit):
            if domain not in by_domain or mhz < by_domain[domain][0]:
                by_domain[domain] = (mhz, unit)
    mhz, slowest = by_domain.pop("sync", None) or by_domain.pop(min(by_domain))
    fmax = slowest.report.fmax
    clock = " (its clk paths)" if fmax.by_clock else ""
    own = "".join(f"; the {domain} domain, a clock of its own: {unit.report.design} "
                  f"{figure:.0f} MHz" for domain, (figure, unit) in sorted(by_domain.items()))
    return replace(fmax, fmax_mhz=mhz, by_clock={},
                   method=f"the lowest of the units' estimates: {slowest.report.design}"
                          f"{clock} ({fmax.method}){own}", source=YOSYS)


def _power(units: Sequence[UnitReport]) -> Power | None:
    if any(unit.report.power is None for unit in units):
        return None
    first = units[0].report.power
    weights = [u.count * (u.report.activity.nets if u.report.activity else 0) for u in units]
    rates = [u.report.power.toggle_rate for u in units]
    toggle = (sum(w * r for w, r in zip(weights, rates)) / sum(weights) if sum(weights)
              else sum(u.count * r for u, r in zip(units, rates)) / sum(u.count for u in units))
    return Power(
        frequency_mhz=first.frequency_mhz, toggle_rate=toggle, static_w=first.static_w,
        static_source=first.static_source,
        dynamic_w=sum(u.count * u.report.power.dynamic_w for u in units),
        breakdown_w=_scaled_sum([(u.count, u.report.power.breakdown_w) for u in units]),
        block_dynamic_w={_label(u): u.count * u.report.power.dynamic_w for u in units},
        coefficients=dict(first.coefficients), source=per_unit(ACTIVITY), tool=first.tool)
