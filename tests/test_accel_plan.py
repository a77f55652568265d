"""The planner (hw/accel/plan.py) against a by-hand budget: the device's capacities from the
data sheets (XCZU9EG: 2,520 DSP48E2, 274,080 LUT, 548,160 FF, 1,824 BRAM18; LFE5U-85F: 156
multipliers, 83,640 LUT4/FF, 208 EBR) times the margins, and the units' resources from the
per-block synthesis figures written out here."""
import pytest

from zoforge.errors import ConfigError
from zoforge.hw.accel import AcceleratorConfig
from zoforge.boards.registry import get_board
from zoforge.hw.accel.plan import budget, estimate_resources, plan_accelerator
from zoforge.reports.model_shape import ModelShape

ZCU102 = {"DSP": 2520 * 8 // 10, "BRAM18": 1824 * 8 // 10, "LUT": 274080 * 7 // 10,
          "FF": 548160 * 7 // 10}
ULX3S = {"DSP": 156 * 8 // 10, "BRAM18": 208 * 8 // 10, "LUT": 83640 * 7 // 10,
         "FF": 83640 * 7 // 10}


def _xcup_lut(engines: int, rows: int, cols: int) -> float:
    """LUTs by hand: engine = the 8 x 8 paired build's rest 1,095 + its array's 4,416 per 64
    PEs + its requantizer and output stage's 4,224 per 8 columns; the ZO layer 4 x 4: 2,111
    + 1,040 (array) + 1,435 (update) + 1,809 (requant) = 6,395."""
    return engines * (1095 + 4416 * rows * cols / 64 + 4224 * cols / 8) + 6395


def _fits(config, budget) -> bool:
    total = estimate_resources(config)["total"]
    return all(total[key] <= budget[key] for key in budget)


def test_budgets_are_the_margins_of_the_data_sheet_capacities():
    assert budget(get_board("zcu102")) == ZCU102
    assert budget(get_board("ulx3s-85f")) == ULX3S


def test_zcu102_plan_is_lut_bound_and_maximal():
    config = plan_accelerator("zcu102")
    assert config.paired and config.layers == 1
    assert (config.engines, config.engine_rows, config.engine_cols) == (2, 32, 32)
    # by hand: DSP 2 x (32 x 32 / 2 + 2 x 32) + (16 + 8 + 16) = 1,192 of 2,016
    assert config.dsp == 2 * 576 + 40 == 1192 <= ZCU102["DSP"]
    assert round(_xcup_lut(2, 32, 32)) == 183689 <= ZCU102["LUT"]
    # one engine more, or a larger array of the same count, is over the LUT budget
    assert _xcup_lut(3, 32, 32) > ZCU102["LUT"] and _xcup_lut(2, 64, 32) > ZCU102["LUT"]
    assert _fits(config, ZCU102)
    assert not _fits(config.replace(engines=3), ZCU102)


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
