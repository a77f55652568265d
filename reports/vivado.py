"""Parse Vivado's text reports (``report_utilization``, ``report_timing_summary``,
``report_power``) so that ``zoforge build --vivado-reports DIR`` can put the real numbers
beside the estimates.

Vivado prints ASCII tables bordered by ``+----+`` lines with a header row; columns are
found by header name (Vivado versions add columns such as ``Prohibited``). Numbers such as
``<0.001`` are read as their bound. Every parsed number is labelled ``vivado``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from zoforge.errors import ConfigError
from zoforge.inputs import read_text

__all__ = ["parse_utilization", "parse_hierarchical_utilization", "parse_timing_summary",
           "parse_power", "parse_tool_version", "VivadoReports", "read_vivado_reports",
           "SOURCE"]

#: Largest Vivado report read (a hierarchical utilization report is a few MB).
MAX_REPORT_BYTES = 64 << 20

SOURCE = "vivado"


def tables(text: str) -> list[list[list[str]]]:
    """Every ``+---+``-bordered table in ``text`` as rows of cell strings (header first)."""
    found, current = [], None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("+") and set(stripped) <= {"+", "-", "="}:
            if current is None:
                current = []
            continue
        if stripped.startswith("|") and current is not None:
            current.append([cell.rstrip() for cell in stripped.strip("|").split("|")])
            continue
        if current:
            found.append(current)
        current = None
    if current:
        found.append(current)
    return found


def _number(text: str) -> float | None:
    match = re.search(r"[-+]?\d+(?:\.\d+)?", text.replace(",", ""))
    return float(match.group()) if match else None


def _keyed(table: list[list[str]], column: str) -> dict[str, float]:
    header = [cell.strip() for cell in table[0]]
    if column not in header:
        return {}
    index = header.index(column)
    out = {}
    for row in table[1:]:
        if len(row) > index:
            value = _number(row[index])
            if value is not None:
                out[row[0].strip()] = value
    return out


def parse_utilization(text: str) -> dict[str, int]:
    """Resources used from ``report_utilization`` (flat): LUT, LUTRAM, FF, CARRY, BRAM18,
    DSP, URAM (BRAM18 = 2 x RAMB36 + RAMB18). Rows are read from the ``Site Type`` tables
    (the first table naming a row wins); CARRY from the ``Primitives`` table (``Ref Name``)
    where no site table lists it (7-series)."""
    used: dict[str, float] = {}
    primitives: dict[str, float] = {}
    for table in tables(text):
        header = [c.strip() for c in table[0]] if table else []
        if "Site Type" in header:
            for key, value in _keyed(table, "Used").items():
                used.setdefault(key, value)
        elif "Ref Name" in header:
            primitives.update(_keyed(table, "Used"))
    if not used:
        raise ValueError("no utilization table (Site Type / Used) found")

    def get(*names, table=used):
        for name in names:
            if name in table:
                return int(table[name])
        return 0
    # 7-series reports list CARRY4 only among the primitives (Ref Name / Used)
    carry = get("CARRY8", "CARRY4") or get("CARRY8", "CARRY4", table=primitives)
    return {
        "LUT": get("CLB LUTs", "Slice LUTs", "CLB LUTs*", "Slice LUTs*"),
        "LUTRAM": get("LUT as Memory"),
        "FF": get("CLB Registers", "Slice Registers"),
        "CARRY": carry,
        "BRAM18": 2 * get("RAMB36/FIFO*", "RAMB36/FIFO") + get("RAMB18"),
        "DSP": get("DSPs"),
        "URAM": get("URAM"),
    }


def parse_hierarchical_utilization(text: str) -> dict[str, dict[str, int]]:
    """Instance path ("top/dut/core") -> resources, from ``report_utilization -hierarchical``."""
    for table in tables(text):
        header = [cell.strip() for cell in table[0]]
        if "Instance" not in header:
            continue
        columns = {"LUT": "Total LUTs", "FF": "FFs", "RAMB36": "RAMB36", "RAMB18": "RAMB18",
                   "DSP": "DSP Blocks", "URAM": "URAM", "LUTRAM": "LUTRAMs"}
        out, stack = {}, []
        for row in table[1:]:
            raw = row[0]
            # "| top", "|   dut", "|     core": one space of padding, two per level
            depth = max(len(raw) - len(raw.lstrip(" ")) - 1, 0) // 2
            stack = stack[:depth] + [raw.strip()]
            path = "/".join(stack)
            values = {}
            for key, column in columns.items():
                if column in header:
                    value = _number(row[header.index(column)])
                    values[key] = int(value) if value is not None else 0
            values["BRAM18"] = 2 * values.pop("RAMB36", 0) + values.pop("RAMB18", 0)
            out[path] = values
        return out
    raise ValueError("no hierarchical utilization table (Instance column) found")


def parse_timing_summary(text: str) -> dict:
    """WNS/TNS/WHS, the clock period and the Fmax it implies (1 / (period - WNS))."""
    lines = text.splitlines()
    result: dict = {}
    for index, line in enumerate(lines):
        if re.match(r"\s*WNS\(ns\)\s+TNS\(ns\)", line):
            names = re.split(r"\s{2,}", line.strip())
            for values_line in lines[index + 1:index + 4]:
                if re.match(r"\s*-?\d+\.\d+\s+-?\d+\.\d+", values_line):
                    values = values_line.split()
                    table = dict(zip(names, values))
                    result["wns_ns"] = float(table["WNS(ns)"])
                    result["tns_ns"] = float(table["TNS(ns)"])
                    if "WHS(ns)" in table:
                        result["whs_ns"] = float(table["WHS(ns)"])
                    break
            break
    clocks = re.search(r"^Clock\s+Waveform\(ns\)\s+Period\(ns\)\s+Frequency\(MHz\)\s*\n"
                       r"[-\s]+\n((?:\S+\s+\{[^}]*\}\s+[\d.]+\s+[\d.]+\s*\n?)+)",
                       text, re.MULTILINE)
    if clocks:
        first = clocks.group(1).splitlines()[0].split()
        result["clock"] = first[0]
        result["period_ns"] = float(clocks.group(1).splitlines()[0].split("}")[1].split()[0])
    if "wns_ns" not in result:
        raise ValueError("no Design Timing Summary (WNS/TNS) found")
    result["met"] = "All user specified timing constraints are met" in text
    if "period_ns" in result:
        result["fmax_mhz"] = 1000.0 / (result["period_ns"] - result["wns_ns"])
    return result


def parse_power(text: str) -> dict:
    """Total, dynamic and static power, the on-chip components, and the SAIF match rate."""
    summary: dict[str, str] = {}
    components: dict[str, float] = {}
    for table in tables(text):
        if not table:
            continue
        first = table[0][0].strip()
        if first.startswith("Total On-Chip Power") or any(
                row[0].strip().startswith("Total On-Chip Power") for row in table):
            for row in table:
                if len(row) >= 2:
                    summary[row[0].strip()] = row[1].strip()
        elif first == "On-Chip":
            components = _keyed(table, "Power (W)")
    if "Total On-Chip Power (W)" not in summary:
        raise ValueError("no power summary (Total On-Chip Power) found")
    result = {
        "total_w": _number(summary["Total On-Chip Power (W)"]),
        "dynamic_w": _number(summary.get("Dynamic (W)", "")),
        "static_w": _number(summary.get("Device Static (W)", "")),
        "confidence": summary.get("Confidence Level"),
        "activity_file": summary.get("Simulation Activity File"),
        "components_w": components,
    }
    matched = summary.get("Design Nets Matched", "")
    fraction = re.search(r"\((\d+)\s*/\s*(\d+)\)", matched)
    if fraction:
        result["nets_matched"] = [int(fraction.group(1)), int(fraction.group(2))]
    return result


def parse_tool_version(text: str) -> str | None:
    """``Vivado v.2020.1`` from a report's ``| Tool Version : ...`` header line, or None."""
    match = re.search(r"^\|\s*Tool Version\s*:\s*(Vivado\s+v\.?\s*[\w.]+)", text,
                      re.MULTILINE)
    return " ".join(match.group(1).split()) if match else None


@dataclass
class VivadoReports:
    """Parsed reports. tool: the Vivado version their headers state (None: not stated)."""

    folder: Path
    utilization: dict | None = None
    hierarchy: dict | None = None
    timing: dict | None = None
    power: dict | None = None
    files: dict[str, str] = field(default_factory=dict)
    tool: str | None = None
    source: str = SOURCE


def read_vivado_reports(folder: Path | str) -> VivadoReports:
    """Parse the reports found in ``folder`` (names as the generated Tcl writes them).

    Prefers post-route/placement reports over post-synthesis ones.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError("vivado_reports", "an existing folder of Vivado .rpt files", folder)
    reports = VivadoReports(folder=folder)
    files = sorted(folder.glob("*.rpt"))

    def pick(*patterns):
        for pattern in patterns:
            for path in files:
                if re.search(pattern, path.name):
                    return path
        return None
    choices = {
        "utilization": pick(r"utilization_place", r"(?<!hierarchical_)utilization(?!_hier)"),
        "hierarchy": pick(r"utilization_hierarchical_place", r"utilization_hierarchical"),
        "timing": pick(r"_timing\.rpt$", r"timing_summary", r"timing"),
        "power": pick(r"power"),
    }
    parsers = {"utilization": parse_utilization, "hierarchy": parse_hierarchical_utilization,
               "timing": parse_timing_summary, "power": parse_power}
    for role, path in choices.items():
        if path is not None:
            # a regular file of bounded size only (zoforge.inputs): a FIFO never hangs
            text = read_text(path, "vivado_reports", MAX_REPORT_BYTES,
                             "a folder of readable Vivado text reports (.rpt) of at most "
                             "64 MiB each")
            setattr(reports, role, parsers[role](text))
            reports.files[role] = path.name
            reports.tool = reports.tool or parse_tool_version(text)
    if not reports.files:
        raise ConfigError("vivado_reports", "a folder holding Vivado reports (*.rpt)", folder)
    return reports
