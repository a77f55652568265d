"""AcceleratorConfig (hw/accel/config.py): round trip, every range at its boundary with a
one-line error naming the field, the board's packing rule, and the DSP count by hand."""
import pytest

from zoforge.config import config_from_dict, dump_config, load_config
from zoforge.errors import ConfigError
from zoforge.hw.accel import AcceleratorConfig


def _error(**fields) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        AcceleratorConfig(**fields)
    assert "\n" not in str(info.value)
    return info.value


def test_round_trip_dict_toml_json(tmp_path):
    config = AcceleratorConfig(board="zcu102", engines=3, engine_rows=32, engine_cols=16,
                               engine_max_m=512, engine_max_k=1536, engine_max_n=512,
                               layers=2, layer_rows=8, layer_cols=4, layer_mode="full",
                               branch_lanes=2, layer_max_m=128, layer_max_k=384,
                               layer_max_n=64, layer_max_r=16, gelu_engines=2,
                               softmax_units=3, softmax_lanes=16, softmax_max_len=256,
                               softmax_min_scale=2.0 ** -20)
    values = config.to_dict()
    assert (values["gelu_engines"], values["softmax_units"], values["softmax_lanes"]) == \
        (2, 3, 16)
    assert values["kind"] == "accelerator"
    assert config_from_dict(values, [AcceleratorConfig]) == config
    for name in ("a.toml", "a.json"):
        assert load_config(dump_config(config, tmp_path / name), [AcceleratorConfig]) == config


@pytest.mark.parametrize("field, low, high", [("engines", 1, 256), ("layers", 1, 256),
                                              ("engine_cols", 1, 64), ("layer_cols", 1, 32),
                                              ("softmax_units", 0, 256),
                                              ("softmax_lanes", 1, 64),
                                              ("softmax_max_len", 1, 1024)])
def test_unit_counts_and_sides_at_their_bounds(field, low, high):
    assert getattr(AcceleratorConfig(**{field: low}), field) == low
    # a ZO layer's max_m is a multiple of its columns
    extra = {"layer_max_m": 2 * high} if field == "layer_cols" else {}
    assert getattr(AcceleratorConfig(**{field: high}, **extra), field) == high
    for bad in (low - 1, high + 1):
        error = _error(**{field: bad}, **extra)
        assert error.parameter == field and str(bad) in str(error)


def test_engine_rows_bounds_paired_and_not():
    assert AcceleratorConfig(engine_rows=64, engine_max_m=64).engine_rows == 64
    assert _error(engine_rows=65, engine_max_m=65).parameter == "engine_rows"
    assert AcceleratorConfig(engine_rows=1, paired=False).engine_rows == 1
    error = _error(engine_rows=7)                   # paired (the zcu102 default): R even
    assert error.parameter == "engine_rows" and "even" in str(error)
    assert AcceleratorConfig(engine_rows=7, paired=False).dsp == 7 * 8 + 16 + 40


def test_paired_only_on_a_dsp48e2_board():
    error = _error(board="ulx3s-85f")               # paired defaults to true
    assert error.parameter == "paired" and "ecp5" in str(error)
    assert not AcceleratorConfig(board="ulx3s-85f", paired=False).paired
    assert _error(board="no-such-board").parameter == "board"


def test_unit_checks_name_the_accelerators_field():
    # the engine's X buffer holds at least R rows: 8 is the boundary
    assert AcceleratorConfig(engine_max_m=8).engine_max_m == 8
    assert _error(engine_max_m=7).parameter == "engine_max_m"
    # max_n at most the parameter tables: (1024 >> log2 C) * C = 1024 for C = 8
    assert AcceleratorConfig(engine_max_n=1024).engine_max_n == 1024
    assert _error(engine_max_n=1025).parameter == "engine_max_n"
    assert _error(layer_max_m=63).parameter == "layer_max_m"      # a multiple of cols = 4
    assert _error(layer_max_r=6).parameter == "layer_max_r"       # a multiple of rows = 4
    assert _error(branch_lanes=2).parameter == "branch_lanes"     # lora-fa: 1 only
    assert AcceleratorConfig(layer_mode="full", branch_lanes=2).branch_lanes == 2
    assert _error(layer_mode="half").parameter == "layer_mode"
    assert _error(layer_max_k=4097).parameter == "layer_max_k"


def test_units_and_dsp_by_hand():
    config = AcceleratorConfig(engines=3, engine_rows=32, engine_cols=16, layers=2,
                               layer_rows=8, layer_cols=4, layer_max_r=16)
    engine, layer = config.engine_config(), config.layer_config()
    assert (engine.rows, engine.cols, engine.paired) == (32, 16, True)
    assert (layer.rows, layer.cols, layer.max_r, layer.mode) == (8, 4, 16, "lora-fa")
    # engine: 32 x 16 / 2 products per pair + 2 per requantizer column; layer: 8 x 4 array,
    # 2 per requantizer column, 2 x 2 chunk products per update row
    per_engine, per_layer = 32 * 16 // 2 + 2 * 16, 8 * 4 + 2 * 4 + 4 * 8
    assert config.dsp == 3 * per_engine + 2 * per_layer == 3 * 288 + 2 * 72
    unpaired = config.replace(paired=False)
    assert unpaired.dsp == 3 * (32 * 16 + 32) + 2 * 72


def test_gelu_engines_at_most_the_engines():
    assert AcceleratorConfig(engines=3, gelu_engines=3).gelu_engines == 3
    assert AcceleratorConfig(engines=3, gelu_engines=0).gelu_engines == 0
    for bad, engines in ((4, 3), (-1, 3), (257, 256)):
        error = _error(engines=engines, gelu_engines=bad)
        assert error.parameter == "gelu_engines" and str(bad) in str(error)


def test_softmax_unit_fields_are_the_units():
    """``softmax_X`` is SoftmaxConfig's ``X``: its defaults (8 lanes, rows of 128, MiniLM's
    scale 2^-15) and its range (scales 2^-24 .. 2^-7), named as the accelerator's field."""
    config = AcceleratorConfig(softmax_units=1)
    unit = config.softmax_config()
    assert (unit.lanes, unit.max_len, unit.min_scale) == (8, 128, 2.0 ** -15)
    assert AcceleratorConfig(softmax_min_scale=2.0 ** -24).softmax_min_scale == 2.0 ** -24
    for bad in (2.0 ** -25, 2.0 ** -6):
        assert _error(softmax_min_scale=bad).parameter == "softmax_min_scale"


def test_nonlinear_dsp_by_hand():
    # a GELU engine: 8 columns x (3 i-GELU + 2 requantizer) = 40 more; a softmax unit at
    # MiniLM's scale 2^-15 (the default) 2 a lane: 16 for 8 lanes, 32 for 16; made for
    # finer scores (2^-16 .. 2^-24) 3 a lane
    base = AcceleratorConfig(engines=2)
    assert base.replace(gelu_engines=1).dsp == base.dsp + 40
    assert base.replace(softmax_units=2).dsp == base.dsp + 2 * 16
    assert base.replace(softmax_units=1, softmax_lanes=16).dsp == base.dsp + 32
    for scale, per_lane in ((2.0 ** -15, 2), (2.0 ** -14, 2), (2.0 ** -16, 3), (2.0 ** -24, 3)):
        assert base.replace(softmax_units=1, softmax_min_scale=scale).dsp == \
            base.dsp + 8 * per_lane
