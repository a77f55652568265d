"""The price's engine and ZO layer clocks by the unit's size (reports/step_price.engine_fmax,
layer_fmax), by hand: the builds' figures (engine 367.71 MHz at 64 PEs, 356.65 at 256,
355.94 at 512, branch clk2 at ee927ae; ZO layer 355.87 at 16, 349.30 at 32, 349.30 at 64,
branch layerclk; yosys-estimate), the clock period linear in log2 of the PEs
between them, the last segment's slope past them, never above a smaller build's clock; and
the price's clock (reports/accel_cost.design_clocks) the lower of the two."""
import math

import pytest

from zoforge.errors import ConfigError
from zoforge.hw.accel.config import AcceleratorConfig
from zoforge.reports.accel_cost import design_clocks
from zoforge.reports.step_price import engine_fmax, fmax_by_size, layer_fmax


def _between(low_mhz, high_mhz, share):
    """The clock a share of the way (in log2 PEs) from one build to the next."""
    return 1 / (1 / low_mhz + share * (1 / high_mhz - 1 / low_mhz))


@pytest.mark.parametrize("pes, mhz", [
    (1, 367.71), (64, 367.71), (256, 356.65),
    (128, _between(367.71, 356.65, 0.5)),           # log2 128 halfway 6 .. 8
    (362, _between(356.65, 355.94, math.log2(362 / 256))),
    (512, 355.94),
    # past 512 the last segment's slope extended (extrapolated)
    (1024, _between(356.65, 355.94, 2.0)), (4096, _between(356.65, 355.94, 4.0))])
def test_engine_clock_by_size(pes, mhz):
    got, source = engine_fmax("zcu102", pes)
    assert got == pytest.approx(mhz, rel=1e-12)
    assert source.startswith("yosys-estimate")
    assert ("extrapolated" in source) == (pes > 512)


# the interpolation and extrapolation past the second point on builds that slow down with
# size (a table of its own)
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
    """Over every size, the clock never rises with the PEs."""
    for clock in (engine_fmax, layer_fmax):
        clocks = [clock("zcu102", pes)[0] for pes in range(1, 5000, 7)]
        assert all(b <= a for a, b in zip(clocks, clocks[1:]))


@pytest.mark.parametrize("pes, mhz", [
    (4, 355.87), (16, 355.87), (32, 349.30),
    (24, _between(355.87, 349.30, math.log2(24 / 16))),
    (64, 349.30), (128, 349.30)])          # the 4x16's build as fast as the 4x8's: held
def test_layer_clock_by_size(pes, mhz):
    got, source = layer_fmax("zcu102", pes)
    assert got == pytest.approx(mhz, rel=1e-12)
    assert source.startswith("yosys-estimate") and "ZO layer's builds" in source
    assert ("extrapolated" in source) == (pes > 64)


@pytest.mark.parametrize("clock", [engine_fmax, layer_fmax])
def test_unknown_board_is_a_one_line_error(clock):
    with pytest.raises(ConfigError) as info:
        clock("ulx3s-85f", 64)
    assert info.value.parameter == "board" and "zcu102" in str(info.value)


def test_the_price_takes_the_lower_unit_s_clock():
    small = AcceleratorConfig(engines=2, engine_rows=8, engine_cols=8)
    mhz, _, source = design_clocks("zcu102", small)
    assert mhz == 355.87 and "ZO layer's builds" in source       # the 4x4 layer's, lower
    big = small.replace(engine_rows=32)
    mhz, softmax, source = design_clocks("zcu102", big)
    assert (mhz, softmax) == (355.87, 249.0) and "ZO layer's builds" in source
    priced = big.replace(layer_cols=8)                          # the 4x8 layer: 349.30
    assert design_clocks("zcu102", priced)[:2] == (349.30, 249.0)
    assert design_clocks("zcu102", big, 250.0)[0] == 250.0      # a given clock wins
    huge = small.replace(engine_rows=64, engine_cols=64)        # 4096 PEs: the engine binds
    mhz, _, source = design_clocks("zcu102", huge)
    assert mhz == engine_fmax("zcu102", 4096)[0] < 355.87 and "engine's builds" in source


def test_the_links_clock_by_its_lanes():
    """The link's engines-side clock: each built lane count's own figure, a lane count not
    built the lowest built (343.00 MHz), an unknown board a one-line error; a linked
    design's price clock is the lowest of its engines', its ZO layer's and its links'."""
    from zoforge.reports.step_price import LINK_FIGURES, link_fmax
    built = dict(LINK_FIGURES["zcu102"]["fmax_by_lanes"])
    assert link_fmax("zcu102", 8)[0] == built[8] == 349.34
    assert link_fmax("zcu102", 6)[0] == min(built.values()) == 343.00
    assert "not built" in link_fmax("zcu102", 6)[1]
    with pytest.raises(ConfigError) as error:
        link_fmax("ulx3s-85f", 8)
    assert error.value.parameter == "board" and "\n" not in str(error.value)
    accel = AcceleratorConfig(engines=6, engine_rows=64, engine_cols=8, layer_cols=16,
                              softmax_units=2, softmax_lanes=10, link=True)
    mhz, _, source = design_clocks("zcu102", accel)
    assert mhz == 343.00 and "attention links" in source         # below the layer's 349.30
    assert design_clocks("zcu102", accel.replace(softmax_lanes=8))[0] == 349.30  # the layer's
