"""The price's engine and ZO layer clocks by the unit's size (reports/step_price.engine_fmax,
layer_fmax), by hand: the builds' figures (engine 302.21 MHz at 64 PEs, 295.03 at 256, 260
at 512; ZO layer 300.84 at 16, 281.87 at 32; yosys-estimate), the clock period linear in
log2 of the PEs between them, the last segment's slope past them; and the price's clock
(reports/accel_cost.design_clocks) the lower of the two."""
import pytest

from zoforge.errors import ConfigError
from zoforge.hw.accel.config import AcceleratorConfig
from zoforge.reports.accel_cost import design_clocks
from zoforge.reports.step_price import engine_fmax, layer_fmax


@pytest.mark.parametrize("pes, mhz", [
    (1, 302.21), (64, 302.21), (256, 295.03), (512, 260.0),
    (128, 1 / (1 / 302.21 + (1 / 295.03 - 1 / 302.21) / 2)),   # log2 128 halfway 6 .. 8
    (362, 1 / (1 / 295.03 + (1 / 260 - 1 / 295.03) * 0.5)),    # log2 362 ~ 8.5
    (1024, 1 / (1 / 260 + (1 / 260 - 1 / 295.03))),          # one doubling past 512
    (4096, 1 / (1 / 260 + 3 * (1 / 260 - 1 / 295.03)))])
def test_engine_clock_by_size(pes, mhz):
    got, source = engine_fmax("zcu102", pes)
    assert got == pytest.approx(mhz, rel=2e-3 if pes == 362 else 1e-12)
    assert source.startswith("yosys-estimate")
    assert ("extrapolated" in source) == (pes > 512)


@pytest.mark.parametrize("pes, mhz", [
    (4, 300.84), (16, 300.84), (32, 281.87),
    (64, 1 / (1 / 281.87 + (1 / 281.87 - 1 / 300.84)))])     # one doubling past 32
def test_layer_clock_by_size(pes, mhz):
    got, source = layer_fmax("zcu102", pes)
    assert got == pytest.approx(mhz, rel=1e-12)
    assert source.startswith("yosys-estimate") and "ZO layer's builds" in source
    assert ("extrapolated" in source) == (pes > 32)


@pytest.mark.parametrize("clock", [engine_fmax, layer_fmax])
def test_unknown_board_is_a_one_line_error(clock):
    with pytest.raises(ConfigError) as info:
        clock("ulx3s-85f", 64)
    assert info.value.parameter == "board" and "zcu102" in str(info.value)


def test_the_price_takes_the_board_sized_engine_s_clock():
    small = AcceleratorConfig(engines=2, engine_rows=8, engine_cols=8)
    assert design_clocks("zcu102", small)[0] == 300.84          # the ZO layer's, lower
    big = small.replace(engine_rows=32)
    mhz, softmax, source = design_clocks("zcu102", big)
    assert (mhz, softmax) == (295.03, 249.0) and "engine's builds" in source
    priced = big.replace(layer_cols=8)                          # the 4x8 layer binds there
    assert design_clocks("zcu102", priced)[:2] == (281.87, 249.0)
    assert design_clocks("zcu102", big, 250.0)[0] == 250.0      # a given clock wins
    wide_layer = small.replace(layer_cols=16)                   # 64 PEs: the layer binds
    mhz, _, source = design_clocks("zcu102", wide_layer)
    assert mhz == layer_fmax("zcu102", 64)[0] < 300 and "ZO layer's builds" in source
