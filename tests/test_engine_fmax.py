"""The price's engine and ZO layer clocks by the unit's size (reports/step_price.engine_fmax,
layer_fmax), by hand: the builds' figures (engine 311.26 MHz at 64 PEs, 304.64 at 256, 330.60
at 512; ZO layer 308.78 at 16, 310.90 at 32; yosys-estimate), the clock period linear in
log2 of the PEs between them, the last segment's slope past them, never above a smaller
build's clock; and the price's clock (reports/accel_cost.design_clocks) the lower of the
two."""
import math

import pytest

from zoforge.errors import ConfigError
from zoforge.hw.accel.config import AcceleratorConfig
from zoforge.reports.accel_cost import design_clocks
from zoforge.reports.step_price import engine_fmax, fmax_by_size, layer_fmax


@pytest.mark.parametrize("pes, mhz", [
    (1, 311.26), (64, 311.26), (256, 304.64),
    (128, 1 / (1 / 311.26 + (1 / 304.64 - 1 / 311.26) / 2)),   # log2 128 halfway 6 .. 8
    # past 256 the 64x8's own build at the priced sizes (330.60, 2026-11-28, 4f32494) times
    # faster: every larger unit is priced at the 32x8's 304.64 (interpolated, extrapolated)
    (362, 304.64), (512, 304.64), (1024, 304.64), (4096, 304.64)])
def test_engine_clock_by_size(pes, mhz):
    got, source = engine_fmax("zcu102", pes)
    assert got == pytest.approx(mhz, rel=1e-12)
    assert source.startswith("yosys-estimate")
    assert ("extrapolated" in source) == (pes > 512)


# the engine's table no longer has a slower build past its second point (330.60 at 512 is
# capped): the interpolation and extrapolation past it on builds that slow down with size
SLOWING = {"b": ((64, 300.0), (256, 280.0), (1024, 250.0))}


@pytest.mark.parametrize("pes, mhz", [
    (512, 1 / (1 / 280 + 0.5 * (1 / 250 - 1 / 280))),     # log2 512 halfway 8 .. 10
    (1024, 250.0),
    (2048, 1 / (1 / 280 + 1.5 * (1 / 250 - 1 / 280))),    # the last segment's slope, on
    (128, 1 / (1 / 300 + 0.5 * (1 / 280 - 1 / 300)))])
def test_the_clock_between_and_past_slowing_builds(pes, mhz):
    got, source = fmax_by_size(SLOWING, "engine", "b", pes)
    assert got == pytest.approx(mhz, rel=1e-12)
    assert ("extrapolated" in source) == (pes > 1024)


def test_a_larger_build_is_never_priced_faster():
    """Over every size, the clock never rises with the PEs (the ZO layer's builds' own
    figures do: 308.78, 310.90)."""
    for clock in (engine_fmax, layer_fmax):
        clocks = [clock("zcu102", pes)[0] for pes in range(1, 5000, 7)]
        assert all(b <= a for a, b in zip(clocks, clocks[1:]))


@pytest.mark.parametrize("pes, mhz", [
    (4, 308.78), (16, 308.78), (32, 308.78),      # the 4x8's build times faster: held
    (64, 308.78), (128, 308.78)])
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
    assert design_clocks("zcu102", small)[0] == 308.78          # the 4x4 ZO layer's, lower
    big = small.replace(engine_rows=32)
    mhz, softmax, source = design_clocks("zcu102", big)
    assert (mhz, softmax) == (304.64, 249.0) and "engine's builds" in source
    priced = big.replace(layer_cols=8)                          # the 4x8 layer: 308.78
    assert design_clocks("zcu102", priced)[:2] == (304.64, 249.0)
    assert design_clocks("zcu102", big, 250.0)[0] == 250.0      # a given clock wins
    wide_layer = small.replace(layer_cols=32)                   # 128 PEs: the layer binds
    mhz, _, source = design_clocks("zcu102", wide_layer)
    assert mhz == layer_fmax("zcu102", 128)[0] == 308.78 and "ZO layer's builds" in source
