"""The planner (hw/accel/plan.py) against a by-hand budget: the device's capacities from the
data sheets (XCZU9EG: 2,520 DSP48E2, 274,080 LUT, 548,160 FF, 1,824 BRAM18; LFE5U-85F: 156
multipliers, 83,640 LUT4/FF, 208 EBR) times the margins, and the units' resources from the
per-block synthesis figures written out here (the nonlinear units' from their 8- and 16-lane
builds, docs/nonlinear-units.md, and the requantizer's, docs/engine.md)."""
import dataclasses

import pytest

from zoforge.errors import ConfigError
from zoforge.hw.accel import AcceleratorConfig
from zoforge.boards.registry import get_board
from zoforge.hw.accel.plan import (MARGINS, budget, estimate_resources, over_budget,
                                   plan_accelerator)
from zoforge.reports.model_shape import ModelShape

ZCU102 = {"DSP": 2520 * 8 // 10, "BRAM18": 1824 * 8 // 10, "LUT": 274080 * 7 // 10,
          "FF": 548160 * 7 // 10}
ULX3S = {"DSP": 156 * 8 // 10, "BRAM18": 208 * 8 // 10, "LUT": 83640 * 7 // 10,
         "FF": 83640 * 7 // 10}


def _skew(rows: int, cols: int) -> int:
    """The paired array's input skew by hand: unit row u (U = R / 2) delays its 17-bit packed
    operand by u registers, column j its 8-bit weight by j, and the three flags' chains,
    alike in every row, merge into one of U - 1 stages."""
    units = rows // 2
    return sum(u * 17 for u in range(units)) + sum(j * 8 for j in range(cols)) + 3 * (units - 1)


def _xcup_lut(engines: int, rows: int, cols: int, acc_bits: int = 24) -> float:
    """LUTs by hand: engine = the flattened builds of the paired engine at the board's sizes
    (26-bit accumulators; the leaner PEs, 2026-11-28: DSP48E2 primitives, a row read-out):
    32 x 8 16,223 and 64 x 8 26,420 LUT (since the clock work, 245cb42), so 10,197 per 256
    PEs, 1.375 fewer a PE for each accumulator bit below 26 (``acc_bits``: 24 for the
    default max_k 256, |sum| <= 256 x 2^14 = 2^22), the requantizer and output stage's
    4,224 per 8 columns (the 8 x 8's blocks), the rest 16,223 - 10,197 - 4,224 = 1,802; the
    ZO layer 4 x 4: 2,111 + 688 (array) + 1,435 (update) + 1,809 (requant) = 6,043."""
    per_pe = 10197 / 256 - 1.375 * (26 - acc_bits)
    return engines * (1802 + per_pe * rows * cols + 4224 * cols / 8) + 6043


def _xcup_ff(engines: int, rows: int, cols: int, acc_bits: int = 24) -> float:
    """Flip-flops by hand: the same builds, 27,719 and 52,133 FF, less their skews (2,309 and
    8,749): 17,974 per 256 PEs (2 fewer a bit below 26), 6,036 per 8 columns, the rest
    27,719 - 2,309 - 17,974 - 6,036 = 1,400, and the array's skew; the ZO layer 4 x 4:
    3,285 + 2,879 + 2,784 + 2,161 = 11,109."""
    assert (_skew(32, 8), _skew(64, 8)) == (2309, 8749)
    per_pe = 17974 / 256 - 2 * (26 - acc_bits)
    return engines * (1400 + per_pe * rows * cols + 6036 * cols / 8 + _skew(rows, cols)) + 11109


def _fits(config, budget) -> bool:
    total = estimate_resources(config)["total"]
    return all(total[key] <= budget[key] for key in budget)


def test_budgets_are_the_margins_of_the_data_sheet_capacities():
    assert budget(get_board("zcu102")) == ZCU102
    assert budget(get_board("ulx3s-85f")) == ULX3S


def test_zcu102_plan_is_bound_and_maximal():
    config = plan_accelerator("zcu102")
    assert config.paired and config.layers == 1
    assert (config.engines, config.engine_rows, config.engine_cols) == (7, 64, 8)
    assert (config.gelu_engines, config.softmax_units) == (0, 0)
    # by hand: DSP 7 x (64 x 8 / 2 + 2 x 8) + (16 + 8 + 16) = 1,944 of 2,016
    assert config.dsp == 7 * 272 + 40 == 1944 <= ZCU102["DSP"]
    # LUT 7 x (1,802 + 37.08203125 x 512 + 4,224) + 6,043 = 7 x 25,012 + 6,043
    assert _xcup_lut(7, 64, 8) == 7 * 25012 + 6043 == 181127 <= ZCU102["LUT"]
    assert estimate_resources(config)["total"]["LUT"] == 181127
    # FF 7 x (1,400 + 66.2109375 x 512 + 6,036 + skew 8,749) + 11,109
    assert round(_xcup_ff(1, 64, 8) - 11109) == 50085
    assert estimate_resources(config)["total"]["FF"] == 7 * 50085 + 11109 == 361704
    # an eighth engine is over the DSP, LUT and FF budgets; 4,096 MACs (4 x 64 x 16) over
    # the DSP budget (4 x 544 + 40 = 2,216); the same MACs as 14 x 32 x 8 over the LUT budget
    # (each engine's fixed and per-column parts)
    assert _xcup_lut(8, 64, 8) > ZCU102["LUT"] and _xcup_ff(8, 64, 8) > ZCU102["FF"]
    assert config.replace(engines=8).dsp > ZCU102["DSP"]
    assert config.replace(engines=4, engine_cols=16).dsp == 2216 > ZCU102["DSP"]
    assert _xcup_lut(14, 32, 8) > ZCU102["LUT"]
    assert _fits(config, ZCU102)
    assert not _fits(config.replace(engines=8), ZCU102)


@pytest.mark.parametrize("max_k, acc_bits", [(1, 16), (256, 24), (1536, 26), (2 ** 15, 31)])
def test_engine_logic_follows_its_accumulator_width(max_k, acc_bits):
    """The engine's LUT and FF per PE: the 32-bit figures less 1.375 LUT and 2 FF per
    accumulator bit below 32 (``accumulator_bits(max_k)``); the ECP5's fit counts none."""
    config = AcceleratorConfig(engine_max_k=max_k)
    engine = estimate_resources(config)["engine"]
    assert abs(engine["LUT"] - (_xcup_lut(1, 8, 8, acc_bits) - 6043)) <= 0.5   # rounded
    assert abs(engine["FF"] - (_xcup_ff(1, 8, 8, acc_bits) - 11109)) <= 0.5
    ecp5 = estimate_resources(config.replace(board="ulx3s-85f", paired=False))["engine"]
    assert ecp5["LUT"] == round(5604 - 16 * 8715 / 48 + 8715 / 48 * 64)


def test_ulx3s_plan_is_dsp_bound_and_unpaired():
    config = plan_accelerator("ulx3s-85f")
    assert not config.paired
    assert (config.engines, config.engine_rows, config.engine_cols) == (1, 8, 8)
    # by hand: 8 x 8 + 2 x 8 = 80 for the engine, 40 for the layer: 120 of 124
    assert config.dsp == 80 + 40 <= ULX3S["DSP"] < 2 * 80 + 40
    assert _fits(config, ULX3S)


@pytest.mark.slow
@pytest.mark.ci
def test_minilm_shape_capacities_fit_the_block_ram():
    shape = ModelShape(batch=4)
    config = plan_accelerator("zcu102", shape)
    assert config.engine_max_k == 1536 and config.layer_max_k == 384
    assert config.layer_max_m == 512 and config.layer_max_r == 8
    # the X buffer: the largest multiple of 64 rows whose BRAM fits, at most 2q x M rows
    assert 64 <= config.engine_max_m <= 2 * 2 * 512 and config.engine_max_m % 64 == 0
    assert _fits(config, ZCU102)
    assert not _fits(config.replace(engine_max_m=config.engine_max_m + 64), ZCU102)


@pytest.mark.slow
@pytest.mark.ci
def test_minilm_buffers_do_not_fit_the_ecp5():
    with pytest.raises(ConfigError) as info:
        plan_accelerator("ulx3s-85f", ModelShape(batch=4))
    assert "BRAM18" in str(info.value) and "\n" not in str(info.value)


def test_block_ram_rule_matches_the_yosys_builds():
    # yosys-estimate of the default units (zoforge build --board zcu102 --no-power):
    # engine 8 x 8 34 BRAM18, ZO layer 4 x 4 (64/64/64/16) 25 BRAM18
    resources = estimate_resources(AcceleratorConfig())
    assert resources["engine"]["BRAM18"] == 34 and resources["layer"]["BRAM18"] == 25
    assert resources["source"] == "yosys-estimate (per unit x count)"


def test_explicit_sizes_are_kept():
    config = plan_accelerator("zcu102", engines=2, engine_rows=16, engine_cols=16)
    assert (config.engines, config.engine_rows, config.engine_cols) == (2, 16, 16)
    assert config.paired
    config = plan_accelerator("zcu102", engines=5)           # the array planned for 5
    assert config.engines == 5 and _fits(config, ZCU102)
    assert not _fits(config.replace(engine_cols=2 * config.engine_cols), ZCU102)


def test_fixed_sizes_that_do_not_fit_name_the_fields_and_budget():
    with pytest.raises(ConfigError) as info:
        plan_accelerator("zcu102", engines=40, engine_rows=32, engine_cols=32)
    text = str(info.value)
    assert info.value.parameter == "engines/engine_rows/engine_cols"
    assert "2,016" in text and "DSP 40 x 576 + 40" not in text and "\n" not in text
    assert f"DSP {40 * 576 + 40:,}" in text
    with pytest.raises(ConfigError) as info:
        plan_accelerator("zcu102", engine_count=2)
    assert "engine_count" in str(info.value) and "engines" in str(info.value)


def test_nonlinear_units_resources_by_hand():
    """A GELU engine adds what the 8x8 paired engine's --gelu build adds (+6,769 LUT /
    +8,594 FF for 8 lanes: the i-GELU's fixed 109 / 70 and 832.5 / 1,065.5 a lane), 3 + 2
    DSP a lane; a softmax unit is the bus unit's build
    (8 lanes: 6,422 LUT, 9,047 FF, 16 DSP, no BRAM: its buffers, 4 x 16 words, in LUT RAM)
    and the i-softmax's 705 LUT / 751 FF / 2 DSP a lane more at 2^-15."""
    config = AcceleratorConfig(engines=3, gelu_engines=2, softmax_units=2)
    resources = estimate_resources(config)
    assert resources["gelu"] == {"LUT": 109 + 8 * 832.5, "FF": 70 + 8 * 1065.5, "BRAM18": 0,
                                 "DSP": 8 * 5}
    assert resources["gelu"]["LUT"] == 6769 and resources["gelu"]["FF"] == 8594
    assert resources["softmax"] == {"LUT": 6422, "FF": 9047, "BRAM18": 0, "DSP": 16}
    wide = estimate_resources(config.replace(softmax_lanes=16))["softmax"]
    assert (wide["LUT"], wide["FF"], wide["DSP"]) == (6422 + 8 * 705, 9047 + 8 * 751, 32)
    plain = estimate_resources(config.replace(gelu_engines=0, softmax_units=0))["total"]
    assert resources["total"]["LUT"] == plain["LUT"] + 2 * 6769 + 2 * 6422
    assert resources["total"]["DSP"] == plain["DSP"] + 2 * 40 + 2 * 16 == config.dsp
    assert "yosys-estimate" in resources["nonlinear_source"]


#: MiniLM's fastest design without nonlinear units before 2026-11-27's board-sized builds
#: (docs/accelerator-cost.md).
MINILM_DESIGN = AcceleratorConfig(engines=5, engine_rows=64, engine_cols=8, engine_max_m=192,
                                  engine_max_k=1536, engine_max_n=312, layer_cols=16,
                                  layer_max_m=512, layer_max_k=8, layer_max_n=384,
                                  layer_max_r=8)


def test_the_fit_reproduces_the_board_sized_builds_and_64_row_arrays_have_room_again():
    """5 x 64 x 8 at max_k 1,536 (26-bit accumulators, the sizes of the fit's builds): each
    engine is the 64 x 8 build exactly, 26,420 LUT / 52,133 FF (the 32 x 8 16,223 / 27,719);
    the 4 x 16 ZO layer 2,111 + 43 x 64 + 1,435 + 452.25 x 16 = 13,534: 145,634 of 191,856
    (188,462 before the leaner PEs), room for a softmax unit and a GELU path on every
    engine (+ 6,422 + 5 x 6,769)."""
    assert round(_xcup_lut(1, 64, 8, 26) - 6043) == 26420
    assert round(_xcup_ff(1, 64, 8, 26) - 11109) == 52133
    assert round(_xcup_lut(1, 32, 8, 26) - 6043) == 16223
    assert round(_xcup_ff(1, 32, 8, 26) - 11109) == 27719
    total = estimate_resources(MINILM_DESIGN)["total"]["LUT"]
    assert total == 5 * 26420 + 13534 == 145634 <= ZCU102["LUT"]
    both = MINILM_DESIGN.replace(softmax_units=1, gelu_engines=5)
    assert estimate_resources(both)["total"]["LUT"] == 145634 + 6422 + 5 * 6769 <= ZCU102["LUT"]


def test_planner_keeps_the_nonlinear_units_given():
    config = plan_accelerator("zcu102", gelu_engines=2, softmax_units=1)
    assert (config.gelu_engines, config.softmax_units) == (2, 1) and config.engines >= 2
    assert _fits(config, ZCU102) and not _fits(config.replace(engines=config.engines + 1),
                                               ZCU102)
    with pytest.raises(ConfigError) as info:
        plan_accelerator("zcu102", softmax_units=40)
    assert "softmax_units" in info.value.parameter and "\n" not in str(info.value)
    with pytest.raises(ConfigError) as info:          # no figures for the ECP5's family
        estimate_resources(AcceleratorConfig(board="ulx3s-85f", paired=False,
                                             softmax_units=1))
    assert info.value.parameter == "softmax_units"


def _board_with_budget(limits: dict):
    """The zcu102 with capacities whose budget (each times its margin, rounded down) is
    exactly ``limits``: the smallest capacity c with c x margin // 100 = the limit."""
    board = get_board("zcu102")
    capacities = dict(board.capacities)
    for key, limit in limits.items():
        percent = round(100 * MARGINS[key])
        capacities[key] = -(-limit * 100 // percent)
        assert capacities[key] * percent // 100 == limit
    return dataclasses.replace(board, capacities=capacities)


@pytest.fixture(scope="module")
def minilm_design():
    return plan_accelerator("zcu102", ModelShape(blocks=6, batch=4, seq_len=128, queries=2),
                            softmax_units=2, softmax_lanes=7)


@pytest.mark.parametrize("resource", ["LUT", "FF", "BRAM18", "DSP"])
def test_a_design_at_exactly_the_budget_fits_and_one_over_does_not(resource, minilm_design):
    """The fit test at its boundary, for each resource: a budget equal to the design's
    total keeps it (the planner returns it with every field fixed); one less in one
    resource refuses it, naming that resource and both figures."""
    config = minilm_design
    total = estimate_resources(config)["total"]
    limits = {key: total[key] for key in MARGINS}
    assert over_budget(config, limits) is None
    fields = {k: v for k, v in config.to_dict().items() if k not in ("kind", "board")}
    assert plan_accelerator(_board_with_budget(limits), **fields) == config
    short = dict(limits, **{resource: total[resource] - 1})
    assert over_budget(config, short) == f"{resource} {total[resource]:,} > {total[resource] - 1:,}"
    with pytest.raises(ConfigError, match=resource):
        plan_accelerator(_board_with_budget(short), **fields)


@pytest.mark.parametrize("limit, what", [("MAX_WORDS", "memory words"), ("MAX_BITS", "memory bits")])
def test_a_design_zoforge_would_not_generate_does_not_fit(limit, what, monkeypatch):
    """The fit test includes the generator's size limit (zoforge generate / build refuse a
    design past it): at exactly the design's words or bits it fits, one below it does not,
    named; the board's budget is checked first."""
    import zoforge.hw.accel.plan as plan
    from zoforge.hw.accel.memories import accelerator_memories
    config = AcceleratorConfig(engines=2, engine_rows=8, engine_cols=8)
    memories = accelerator_memories(config).values()
    used = sum(m.words for m in memories) if what == "memory words" else \
        sum(m.bits for m in memories)
    monkeypatch.setattr(plan, limit, used)
    assert over_budget(config, ZCU102) is None
    monkeypatch.setattr(plan, limit, used - 1)
    assert over_budget(config, ZCU102) == f"{what} {used:,} > {used - 1:,} (what zoforge generates)"
    assert over_budget(config, dict(ZCU102, DSP=1)).startswith("DSP ")


@pytest.mark.slow       # the price's whole search (tests/test_priced_step_docs.py runs it too)
@pytest.mark.ci
def test_the_minilm_price_s_design_is_one_zoforge_generates():
    """The priced MiniLM design (``fastest_accelerator``) passes the generator's size
    check (``zoforge generate accelerator --config`` of ``zoforge finetune --out``'s file)."""
    from zoforge.cli._limits import check_design_size
    from zoforge.golden.finetune.config import ADAPTED, FinetuneConfig
    from zoforge.reports.accel_cost import fastest_accelerator
    cfg = FinetuneConfig(blocks=6, batch=4, seq_len=128, queries=2)
    shape = ModelShape(blocks=6, seq_len=128, batch=4, rank=cfg.rank, adapted=len(ADAPTED),
                       queries=2, hidden=384, ffn=1536, heads=12, classes=2)
    accel = fastest_accelerator(get_board("zcu102"), shape, cfg, "split")
    check_design_size(accel)
    assert over_budget(accel, ZCU102) is None


def test_a_unit_too_big_for_the_board_is_refused_before_its_build(monkeypatch):
    """``zoforge build`` of one engine or ZO layer: its DSP at the device's capacity
    builds, one over is a one-line error before anything is elaborated (the ECP5's 156
    multipliers: an 11 x 12 engine needs 11 x 12 + 2 x 12 = 156, a 12 x 12 168)."""
    from zoforge.hw.accel.plan import check_unit_fits
    from zoforge.hw.engine.config import EngineConfig
    from zoforge.golden.zolayer.config import layer_config
    from zoforge.reports.pipeline import build_design
    from zoforge.hw.designs import get_design

    ecp5, zcu102 = get_board("ulx3s-85f"), get_board("zcu102")
    check_unit_fits(ecp5, EngineConfig(rows=11, cols=12))
    for board, config, got in ((ecp5, EngineConfig(rows=12, cols=12), "DSP 168"),
                               (zcu102, EngineConfig(rows=64, cols=64), "DSP 4,224"),
                               (ecp5, layer_config(rows=16, cols=16), "DSP 352")):
        with pytest.raises(ConfigError) as error:
            check_unit_fits(board, config)
        message = str(error.value)
        assert message.startswith("rows/cols") and got in message and "\n" not in message
    check_unit_fits(zcu102, AcceleratorConfig())           # planned designs pass through
    entry = get_design("engine")
    monkeypatch.setattr(type(entry), "elaborate", lambda *args: pytest.fail("elaborated"))
    with pytest.raises(ConfigError):
        build_design(ecp5, entry, EngineConfig(rows=12, cols=12), "/nonexistent", 50.0)


def test_link_resources_by_hand_and_the_fit_solved_again():
    """The link's LUT fit solved again from its four builds (4, 8, 10, 16 lanes on a 64 x 8
    engine: 2 write and 1, 2 or 8 read offsets), its FF line within 5 of each build;
    MiniLM's link (8 lanes): 695 LUT, 524 FF, 8 memories of 2 x 64 rows x 16 words = 4
    BRAM18 each; a selector of 4 sources x 256 bits 546 LUT; the totals add one link an
    engine and one selector a softmax unit; without link nothing."""
    import numpy as np
    from zoforge.hw.accel.plan import LINK_FIT, link_resources, select_resources
    from zoforge.hw.link.config import LinkConfig
    # lanes: (LUT, FF); terms: 1, lanes, lanes x (read offsets - 1), P x (write offsets - 1)
    builds = {4: (508, 377), 8: (695, 522), 10: (2145, 602), 16: (1685, 817)}
    terms = {4: (1, 4, 4 * 1, 0), 8: (1, 8, 0, 0), 10: (1, 10, 10 * 7, 16 * 1),
             16: (1, 16, 0, 16 * 1)}
    solved = np.linalg.solve(np.array([terms[k] for k in builds], float),
                             np.array([lut for lut, _ in builds.values()], float))
    fit = LINK_FIT["LUT"]
    assert solved == pytest.approx([fit["fixed"], fit["lane"], fit["read"], fit["write"]],
                                   abs=1e-9)
    for lanes, (lut, ff) in builds.items():
        got = link_resources(LinkConfig(lanes=lanes, max_rows=64))
        assert got["LUT"] == lut and abs(got["FF"] - ff) <= 5
        assert got["BRAM18"] == 32 and got["DSP"] == 0
    assert link_resources(LinkConfig(lanes=8, max_rows=64)) == {"LUT": 695, "FF": 524,
                                                               "BRAM18": 8 * 4, "DSP": 0}
    assert link_resources(LinkConfig(lanes=8, max_rows=128))["BRAM18"] == 8 * 8
    assert select_resources(4, 256) == {"LUT": 34 + 512, "FF": 12, "BRAM18": 0, "DSP": 0}
    config = AcceleratorConfig(engines=6, engine_rows=64, engine_cols=8, softmax_units=2,
                               softmax_lanes=8, link=True)
    linked, plain = (estimate_resources(c) for c in (config, config.replace(link=False)))
    for key in ("LUT", "FF", "BRAM18", "DSP"):
        assert linked["total"][key] == plain["total"][key] + 6 * linked["link"][key] + \
            2 * select_resources(1 + 3, 256)[key]
    assert plain["link"] == plain["select"] == {"LUT": 0, "FF": 0, "BRAM18": 0, "DSP": 0}
    with pytest.raises(ConfigError) as info:
        estimate_resources(AcceleratorConfig(board="ulx3s-85f", paired=False, softmax_units=1,
                                             link=True))
    assert info.value.parameter == "softmax_units" and "\n" not in str(info.value)   # a link
    # needs a softmax unit, which has no ecp5 figures
