"""Power estimate: the board's static power plus dynamic power from measured switching
activity.

Model (an *activity-model* estimate, never a measurement)::

    P = P_static
      + f * [ alpha * (N_LUT * E_lut + N_FF * E_ff + N_CARRY * E_carry + N_DSP * E_dsp)
              + N_FF * E_clk_ff + N_BRAM18 * E_bram * enable + E_clk_tree ]

P_static is the board's fact (:attr:`zoforge.boards.registry.Board.static_power_w`, with its
source), f the clock frequency, alpha the mean toggle rate (toggles per cycle per net bit)
that co-simulation measured for the design or block (:mod:`zoforge.reports.activity`), N the
resource counts from synthesis, E the energies in :data:`COEFFICIENTS`. Block-RAM enable is
taken as 1 (every port enabled every cycle, the stream-ready-high stimulus), an upper bound.

Static power is the board's stated figure, kept apart from the dynamic part everywhere (a
report, the demo and the fine-tuning cost print both, each with its source): it is not
something the design's activity changes, and the ZCU102's figure is not a data-sheet value
(see its source). Every dynamic term is the clock times an energy per cycle, so the dynamic
power at another clock is exact under the model (:func:`dynamic_at`); :func:`step_energy`
prices a step of so many cycles with time and power at the same clock.

Where the coefficients come from: see each one's ``source``. None is fitted to PeZO's Table 6,
so comparing with it is a real check. They are order-of-magnitude energies for a 16 nm FinFET
fabric at VCCINT = 0.85 V (E = C V^2 / 2 per transition with the node capacitance said in
the source), the same shape of model Xilinx's XPE uses (count x clock x toggle rate x
per-resource coefficient, UG440), not XPE's own numbers, which are not published as a table.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from zoforge import __version__
from zoforge.boards.registry import Board

__all__ = ["Coefficient", "COEFFICIENTS", "PowerEstimate", "estimate_power", "SOURCE",
           "TOOL", "NO_STATIC", "StepEnergy", "step_energy", "dynamic_at"]

SOURCE = "activity-model"
TOOL = f"zoforge {__version__} power model"
NO_STATIC = "the board states no static power; 0 W assumed"


@dataclass(frozen=True)
class Coefficient:
    symbol: str
    value: float
    unit: str
    meaning: str
    source: str


COEFFICIENTS: dict[str, Coefficient] = {c.symbol: c for c in (
    Coefficient("E_lut", 0.10, "pJ", "LUT output transition incl. its routed net",
                "assumption: ~0.28 pF switched per LUT output net (LUT, routing, fan-out "
                "~3) at 0.85 V -> C V^2/2 ~ 0.1 pJ"),
    Coefficient("E_ff", 0.05, "pJ", "flip-flop output transition incl. local net",
                "assumption: half of E_lut (register outputs mostly feed nearby LUTs)"),
    Coefficient("E_carry", 0.15, "pJ", "CARRY block (4 bits as Yosys maps it) per "
                "transition of its inputs", "assumption: ~1.5 x E_lut per 4-bit block"),
    Coefficient("E_dsp", 10.0, "pJ", "DSP48E2 operation at toggle rate 1",
                "assumption: ~1 mW at 100 MHz per DSP slice fully toggling"),
    Coefficient("E_clk_ff", 0.02, "pJ", "clock pin of one flip-flop, per cycle",
                "assumption: ~50 fF of clock leaf load per FF at 0.85 V (both edges)"),
    Coefficient("E_bram", 8.0, "pJ", "one BRAM18 access (read or write)",
                "assumption: ~0.8 mW per BRAM18 at 100 MHz with the port enabled"),
    Coefficient("E_clk_tree", 20.0, "pJ", "global clock buffer and spine per cycle",
                "assumption: one BUFGCE + spine, ~2 mW at 100 MHz"),
)}


@dataclass
class PowerEstimate:
    frequency_mhz: float
    toggle_rate: float
    static_w: float
    dynamic_w: float
    breakdown_w: dict[str, float]                 # dynamic power by resource
    block_dynamic_w: dict[str, float] = field(default_factory=dict)
    static_source: str = NO_STATIC                # where static_w comes from
    source: str = SOURCE

    @property
    def total_w(self) -> float:
        return self.static_w + self.dynamic_w

    def to_json(self) -> dict:
        return dict(self.__dict__, total_w=self.total_w)


def estimate_power(resources: dict[str, int], frequency_mhz: float, toggle_rate: float,
                   block_resources: dict[str, dict[str, int]] | None = None,
                   block_rates: dict[str, float] | None = None,
                   board: Board | None = None,
                   coefficients: dict[str, Coefficient] = COEFFICIENTS) -> PowerEstimate:
    """Static + dynamic power of a design with ``resources`` at ``frequency_mhz``.

    toggle_rate: mean toggles per cycle per net bit of the design (for blocks, their own
    rates from ``block_rates``, else the design's). The clock tree is counted once for the
    design, not per block. The static power is ``board``'s (0 W, said so, for a board that
    states none, or with no board: dynamic power only).
    """
    breakdown = _dynamic(resources, frequency_mhz, toggle_rate, coefficients)
    breakdown["clock tree"] = frequency_mhz * 1e6 * coefficients["E_clk_tree"].value * 1e-12
    blocks = {}
    for name, counts in (block_resources or {}).items():
        rate = (block_rates or {}).get(name, toggle_rate)
        blocks[name] = sum(_dynamic(counts, frequency_mhz, rate, coefficients).values())
    stated = board is not None and board.static_power_w is not None
    return PowerEstimate(
        frequency_mhz=frequency_mhz, toggle_rate=toggle_rate,
        static_w=board.static_power_w if stated else 0.0,
        dynamic_w=sum(breakdown.values()), breakdown_w=breakdown, block_dynamic_w=blocks,
        static_source=board.static_power_source if stated else NO_STATIC)


def _dynamic(resources: dict[str, int], frequency_mhz: float, alpha: float,
             coefficients: dict[str, Coefficient]) -> dict[str, float]:
    f = frequency_mhz * 1e6
    pj = 1e-12
    n = {key: resources.get(key, 0) for key in ("LUT", "FF", "CARRY", "DSP", "BRAM18")}
    return {
        "LUT": f * alpha * n["LUT"] * coefficients["E_lut"].value * pj,
        "FF": f * alpha * n["FF"] * coefficients["E_ff"].value * pj,
        "CARRY": f * alpha * n["CARRY"] * coefficients["E_carry"].value * pj,
        "DSP": f * alpha * n["DSP"] * coefficients["E_dsp"].value * pj,
        "clock (FF pins)": f * n["FF"] * coefficients["E_clk_ff"].value * pj,
        "BRAM": f * n["BRAM18"] * coefficients["E_bram"].value * pj,
    }


def dynamic_at(dynamic_w: float, estimated_mhz: float, mhz: float) -> float:
    """The model's dynamic power at ``mhz``, from ``dynamic_w`` estimated at
    ``estimated_mhz`` (every term is the clock times an energy per cycle: exact)."""
    return dynamic_w * mhz / estimated_mhz


@dataclass(frozen=True)
class StepEnergy:
    """One step of ``cycles`` at ``mhz``: its time and its energy, static and dynamic
    apart, each with its source (power evaluated at the same ``mhz`` as the time)."""

    cycles: float
    mhz: float
    seconds: float
    static_w: float
    dynamic_w: float
    static_source: str
    dynamic_source: str

    @property
    def static_j(self) -> float:
        return self.static_w * self.seconds

    @property
    def dynamic_j(self) -> float:
        return self.dynamic_w * self.seconds

    @property
    def total_j(self) -> float:
        return self.static_j + self.dynamic_j

    def to_json(self) -> dict:
        return dict(self.__dict__, static_j=self.static_j, dynamic_j=self.dynamic_j,
                    total_j=self.total_j)


def step_energy(cycles: float, mhz: float, static_w: float, dynamic_w: float,
                estimated_mhz: float, static_source: str,
                dynamic_source: str = SOURCE) -> StepEnergy:
    """Time and energy of ``cycles`` at ``mhz``: static power as stated, dynamic power
    (estimated at ``estimated_mhz``) taken to ``mhz`` with :func:`dynamic_at`."""
    return StepEnergy(cycles=cycles, mhz=mhz, seconds=cycles / (mhz * 1e6),
                      static_w=static_w, dynamic_w=dynamic_at(dynamic_w, estimated_mhz, mhz),
                      static_source=static_source,
                      dynamic_source=f"{dynamic_source} (estimated at {estimated_mhz:g} MHz, "
                                     f"scaled to {mhz:g} MHz)")
