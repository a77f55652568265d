"""The report's power and Fmax models, pinned.

The coefficient and delay tables below were reviewed by hand (value AND unit, against each
entry's stated physical basis and docs/reports.md) and are written out here, not read from
``reports/``: a coefficient 1000x off, or in another unit, fails. Then one end-to-end
``zoforge build`` of a tiny generator (on-the-fly, n = 3, b = 5, ZCU102 at 250 MHz) must
report a power and an Fmax within the stated tolerance of values computed here by hand from
the report's own resource counts, toggle rate and critical path and the reviewed tables.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from zoforge.boards.registry import get_board
from zoforge.cli import main
from zoforge.reports import fmax_calibration
from zoforge.reports.fmax import DELAYS
from zoforge.reports.power import COEFFICIENTS

DOC = Path(__file__).resolve().parent.parent / "docs" / "reports.md"

# -- reviewed tables ---------------------------------------------------------------------
# Energies (pJ), each checked against the basis its source states:
#   E_lut      0.28 pF at 0.85 V: C V^2 / 2 = 0.101 pJ                       -> 0.10 pJ
#   E_ff       half of E_lut                                                 -> 0.05 pJ
#   E_carry    1.5 x E_lut per 4-bit block                                   -> 0.15 pJ
#   E_dsp      ~1 mW at 100 MHz, toggle rate 1: 1e-3 W / 1e8 Hz = 10 pJ      -> 10 pJ
#   E_clk_ff   ~50 fF at 0.85 V: C V^2 / 2 = 0.018 pJ                        -> 0.02 pJ
#   E_bram     ~0.8 mW per BRAM18 at 100 MHz: 8 pJ                           -> 8 pJ
#   E_clk_tree ~2 mW at 100 MHz: 20 pJ                                       -> 20 pJ
REVIEWED_ENERGIES = {"E_lut": (0.10, "pJ"), "E_ff": (0.05, "pJ"), "E_carry": (0.15, "pJ"),
                     "E_dsp": (10.0, "pJ"), "E_clk_ff": (0.02, "pJ"), "E_bram": (8.0, "pJ"),
                     "E_clk_tree": (20.0, "pJ")}
# Delays (ns), typical UltraScale+ -2 orders of magnitude; F_clock_max is a frequency (MHz)
# kept in the same table (its field is called ``ns`` there: see test_delay_table_is_pinned).
# T_fanout: the ECP5 calibration fit's growth per doubling of the loads relative to its
# base net (recorded by benchmarks/bench_fmax_model.py --write), times this table's base
# net (T_net 0.30 ns), to 3 decimals; T_carry, T_chain: one CARRY8.
ECP5_NET, ECP5_FANOUT = fmax_calibration.NET_FIT
XCUP_FANOUT = round(0.30 * ECP5_FANOUT / ECP5_NET, 3)
REVIEWED_DELAYS_NS = {"T_cko": 0.10, "T_setup": 0.05, "T_lut": 0.10, "T_net": 0.30,
                      "T_fanout": XCUP_FANOUT, "T_mux": 0.08, "T_carry": 0.20,
                      "T_chain": 0.06, "T_dsp": 1.80, "T_bram_co": 0.90, "T_margin": 0.10}
REVIEWED_CLOCK_MAX_MHZ = 775.0
REVIEWED_ZCU102_STATIC_W = 0.59

PJ = 1e-12                     # J per pJ
NS = 1e-9                      # s per ns
# Tolerance of the end-to-end figures against the hand computation: the report and this
# test do the same arithmetic on the same counts, so only float rounding may differ.
REL_TOLERANCE = 1e-6

# the small design built end to end
CLOCK_MHZ = 250.0
N_RNG, BITS = 3, 5


def test_power_coefficients_are_pinned_with_units():
    assert set(COEFFICIENTS) == set(REVIEWED_ENERGIES)
    for symbol, (value, unit) in REVIEWED_ENERGIES.items():
        coefficient = COEFFICIENTS[symbol]
        assert (coefficient.value, coefficient.unit) == (value, unit), symbol


def test_the_energies_follow_from_their_stated_physical_basis():
    volts = 0.85
    assert 0.28e-12 * volts ** 2 / 2 / PJ == pytest.approx(REVIEWED_ENERGIES["E_lut"][0],
                                                          rel=0.05)
    assert 50e-15 * volts ** 2 / 2 / PJ == pytest.approx(REVIEWED_ENERGIES["E_clk_ff"][0],
                                                        rel=0.15)
    for symbol, milliwatts in (("E_dsp", 1.0), ("E_bram", 0.8), ("E_clk_tree", 2.0)):
        assert milliwatts * 1e-3 / 100e6 / PJ == pytest.approx(REVIEWED_ENERGIES[symbol][0])
    assert REVIEWED_ENERGIES["E_ff"][0] == REVIEWED_ENERGIES["E_lut"][0] / 2
    assert REVIEWED_ENERGIES["E_carry"][0] == pytest.approx(1.5 * REVIEWED_ENERGIES["E_lut"][0])


def test_delay_table_is_pinned():
    assert set(DELAYS) == set(REVIEWED_DELAYS_NS) | {"F_clock_max"}
    for symbol, ns in REVIEWED_DELAYS_NS.items():
        assert DELAYS[symbol].ns == ns, symbol
    clock = DELAYS["F_clock_max"]
    assert clock.ns == REVIEWED_CLOCK_MAX_MHZ and "MHz" in clock.meaning


def test_board_static_power_is_pinned():
    assert get_board("zcu102").static_power_w == REVIEWED_ZCU102_STATIC_W


def test_docs_table_states_the_reviewed_values():
    rows = {}
    for line in DOC.read_text().splitlines():
        match = re.match(r"\| (E_\w+) \| ([\d.]+) (\w+) \|", line)
        if match:
            rows[match[1]] = (float(match[2]), match[3])
    assert rows == REVIEWED_ENERGIES
    assert "| P_static (ZCU102, from the board) | 0.59 W |" in DOC.read_text()


# -- end to end ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("pinned")
    code = main(["build", "--board", "zcu102", "--design", "rng", "--strategy", "onthefly",
                 "--n-rng", str(N_RNG), "--bits", str(BITS), "--clock-mhz", str(CLOCK_MHZ),
                 "--activity-cycles", "500", "--out", str(out), "--quiet"])
    assert code == 0
    return json.loads((out / "report.json").read_text())


def hand_power_w(counts: dict, alpha: float, mhz: float) -> tuple[float, float]:
    """(static, dynamic) in W, from the documented model and the reviewed tables."""
    e = {symbol: value * PJ for symbol, (value, _) in REVIEWED_ENERGIES.items()}
    per_cycle = (alpha * (counts["LUT"] * e["E_lut"] + counts["FF"] * e["E_ff"]
                          + counts["CARRY"] * e["E_carry"] + counts["DSP"] * e["E_dsp"])
                 + counts["FF"] * e["E_clk_ff"] + counts["BRAM18"] * e["E_bram"]
                 + e["E_clk_tree"])
    return REVIEWED_ZCU102_STATIC_W, mhz * 1e6 * per_cycle


def test_built_power_is_the_hand_computed_one(built):
    counts, alpha = built["resources"]["total"], built["activity"]["toggle_rate"]
    # the counts the hand computation uses are this design's: n*b lane FFs, b tracker FFs,
    # the 2-bit LUT read register (k in 0..3 for n = 3, b = 5) and the stream's valid flag
    assert counts["FF"] == N_RNG * BITS + BITS + 2 + 1
    assert counts["DSP"] == counts["BRAM18"] == counts["CARRY"] == 0 and counts["LUT"] > 0
    assert 0.0 < alpha < 1.0
    static, dynamic = hand_power_w(counts, alpha, CLOCK_MHZ)
    power = built["power"]
    assert power["frequency_mhz"] == CLOCK_MHZ and power["toggle_rate"] == alpha
    assert power["static_w"] == pytest.approx(static, rel=REL_TOLERANCE)
    assert power["dynamic_w"] == pytest.approx(dynamic, rel=REL_TOLERANCE)
    assert power["total_w"] == pytest.approx(static + dynamic, rel=REL_TOLERANCE)
    # by hand for this design: the clock tree is 20 pJ x 250 MHz = 5 mW of ~5.5 mW
    assert 5.0e-3 < dynamic < 6.5e-3
    for symbol, (value, unit) in REVIEWED_ENERGIES.items():
        assert (power["coefficients"][symbol]["value"],
                power["coefficients"][symbol]["unit"]) == (value, unit)


def test_built_fmax_is_the_hand_computed_one(built):
    fmax = built["fmax"]
    d = REVIEWED_DELAYS_NS
    path = fmax["path"]
    # a register, then the combinational cells of the critical path (this design: LUTs)
    assert re.match(r"FD[CPRS]E", path[0]) and all(c.startswith("LUT") for c in path[1:])
    assert fmax["logic_levels"] == len(path) - 1 and 1 <= fmax["logic_levels"] <= 3
    loads = fmax["path_loads"]
    assert len(loads) == len(path) and all(n >= 1 for n in loads)

    def net(n):               # the documented fan-out term
        return d["T_net"] + d["T_fanout"] * math.log2(n)
    through = d["T_cko"] + sum(net(n) + d["T_lut"] for n in loads[:-1])
    to_register = through + net(loads[-1]) + d["T_setup"] + d["T_margin"]
    to_port = through + d["T_margin"]                  # an output port: no net, no setup
    critical = fmax["critical_ns"]
    assert min(abs(critical - to_register), abs(critical - to_port)) <= REL_TOLERANCE * critical
    hand_mhz = min(1.0 / (critical * NS) / 1e6, REVIEWED_CLOCK_MAX_MHZ)
    assert fmax["fmax_mhz"] == pytest.approx(hand_mhz, rel=REL_TOLERANCE)
    assert math.isclose(fmax["fmax_mhz"], 1000.0 / critical, rel_tol=REL_TOLERANCE)
    for symbol, ns in d.items():
        assert fmax["delays"][symbol]["ns"] == ns
