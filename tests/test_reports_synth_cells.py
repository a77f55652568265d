"""The resource parsers on real Yosys netlists holding every cell class they count.

The fixtures (``tests/data/synth``, made by ``tests/synth_fixtures.py`` with the project's
flows: ``synth_xilinx -family xcup`` and ``synth_ecp5``) keep Yosys' ``stat -json`` and the
flattened netlist's cells. The expected counts are worked out here from the netlist's cells
and a table of what each primitive occupies (the vendors' libraries guides), independently of
:mod:`zoforge.reports.synth`.
"""
from __future__ import annotations

from collections import Counter

import pytest

from synth_fixtures import FAMILIES, TOP, generate, load
from zoforge.reports.synth import ecp5_resources, stat_cells, xilinx_resources

#: primitive -> {class: units per primitive}
XILINX = {
    **{f"LUT{n}": {"LUT": 1} for n in range(1, 7)}, "INV": {"LUT": 1},
    "RAM64X1S": {"LUT": 1, "LUTRAM": 1}, "SRLC32E": {"LUT": 1, "SRL": 1},
    "FDRE": {"FF": 1}, "FDSE": {"FF": 1},
    "CARRY4": {"CARRY": 1}, "CARRY8": {"CARRY": 1},
    "DSP48E2": {"DSP": 1}, "RAMB18E2": {"BRAM18": 1}, "RAMB36E2": {"BRAM18": 2},
    "URAM288": {"URAM": 1}, "MUXF7": {"MUXF": 1}, "IBUF": {"IO": 1},
}
ECP5 = {
    "LUT4": {"LUT": 1}, "TRELLIS_DPR16X4": {"LUTRAM": 1}, "TRELLIS_FF": {"FF": 1},
    "CCU2C": {"CARRY": 1}, "DP16KD": {"BRAM18": 1}, "MULT18X18D": {"DSP": 1},
    "PFUMX": {"MUXF": 1}, "L6MUX21": {"MUXF": 1},
}
PARSERS = {"xcup": (xilinx_resources, XILINX), "ecp5": (ecp5_resources, ECP5)}
#: the classes each parser counts (every one is in its fixture)
CLASSES = {"xcup": {"LUT", "LUTRAM", "SRL", "FF", "CARRY", "BRAM18", "DSP", "URAM", "MUXF",
                    "IO"},
           "ecp5": {"LUT", "LUTRAM", "FF", "CARRY", "BRAM18", "DSP", "MUXF"}}
#: the primitives each fixture must hold (CARRY8 beside Yosys' CARRY4)
MUST_HOLD = {"xcup": {"CARRY4", "CARRY8", "FDRE", "FDSE", "DSP48E2", "RAMB18E2", "RAMB36E2",
                      "LUT6", "RAM64X1S", "SRLC32E", "URAM288", "MUXF7", "IBUF"},
             "ecp5": {"CCU2C", "TRELLIS_FF", "MULT18X18D", "DP16KD", "LUT4",
                      "TRELLIS_DPR16X4", "PFUMX"}}


def _netlist_types(fixture: dict) -> Counter:
    return Counter(fixture["netlist_cells"].values())


def _expected(types: Counter, table: dict) -> dict[str, int]:
    unknown = set(types) - set(table)
    assert not unknown, f"add {sorted(unknown)} to the test's table"
    out = Counter()
    for primitive, count in types.items():
        for name, units in table[primitive].items():
            out[name] += units * count
    return dict(out)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_fixture_holds_every_class(family):
    fixture = load(family)
    types = _netlist_types(fixture)
    assert MUST_HOLD[family] <= set(types)
    assert set(_expected(types, PARSERS[family][1])) == CLASSES[family]


@pytest.mark.parametrize("family", FAMILIES)
def test_stat_cells_are_the_netlists_cells(family):
    fixture = load(family)
    assert stat_cells(fixture["stat"], fixture["top"]) == dict(_netlist_types(fixture))


@pytest.mark.parametrize("family", FAMILIES)
def test_per_class_counts_equal_an_independent_count(family):
    fixture = load(family)
    parser, table = PARSERS[family]
    got = parser(stat_cells(fixture["stat"], fixture["top"]))
    expected = _expected(_netlist_types(fixture), table)
    assert {name: n for name, n in got.items() if n} == expected
    assert "OTHER" not in got


def test_carry8_is_a_carry_block_not_a_lut():
    assert xilinx_resources({"CARRY8": 3}) == {"CARRY": 3, "LUT": 0, "FF": 0, "BRAM18": 0,
                                               "DSP": 0, "URAM": 0}


@pytest.mark.slow
@pytest.mark.ci
@pytest.mark.parametrize("family", FAMILIES)
def test_the_fixtures_are_what_yosys_makes_now(family):
    """Synthesized again: the same cells (``python tests/synth_fixtures.py`` rewrites them)."""
    fresh = generate(family)
    assert fresh["top"] == TOP
    assert _netlist_types(fresh) == _netlist_types(load(family))
    assert stat_cells(fresh["stat"], TOP) == stat_cells(load(family)["stat"], TOP)
