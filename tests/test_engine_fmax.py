"""The price's engine clock by the engine's size (reports/step_price.engine_fmax), by hand:
the builds' figures (302.21 MHz at 64 PEs, 282 at 256, 260 at 512, yosys-estimate), the
clock period linear in log2 of the PEs between them, the last segment's slope past them;
and the price's clocks (reports/accel_cost.design_clocks) taking it where it is lower."""
import pytest

from zoforge.errors import ConfigError
from zoforge.hw.accel.config import AcceleratorConfig
from zoforge.reports.accel_cost import design_clocks
from zoforge.reports.step_price import engine_fmax


@pytest.mark.parametrize("pes, mhz", [
    (1, 302.21), (64, 302.21), (256, 282.0), (512, 260.0),
    (128, 1 / (1 / 302.21 + (1 / 282 - 1 / 302.21) / 2)),     # log2 128 halfway 6 .. 8
    (362, 1 / (1 / 282 + (1 / 260 - 1 / 282) * 0.5)),          # log2 362 ~ 8.5
    (1024, 1 / (1 / 260 + (1 / 260 - 1 / 282))),              # one doubling past 512
    (4096, 1 / (1 / 260 + 3 * (1 / 260 - 1 / 282)))])
def test_engine_clock_by_size(pes, mhz):
    got, source = engine_fmax("zcu102", pes)
    assert got == pytest.approx(mhz, rel=2e-3 if pes == 362 else 1e-12)
    assert source.startswith("yosys-estimate")
    assert ("extrapolated" in source) == (pes > 512)


def test_unknown_board_is_a_one_line_error():
    with pytest.raises(ConfigError) as info:
        engine_fmax("ulx3s-85f", 64)
    assert info.value.parameter == "board" and "zcu102" in str(info.value)


def test_the_price_takes_the_board_sized_engine_s_clock():
    small = AcceleratorConfig(engines=2, engine_rows=8, engine_cols=8)
    assert design_clocks("zcu102", small)[0] == 300.84          # the ZO layer's, lower
    big = small.replace(engine_rows=32)
    mhz, softmax, source = design_clocks("zcu102", big)
    assert (mhz, softmax) == (282.0, 249.0) and "engine's builds" in source
    assert design_clocks("zcu102", big, 250.0)[0] == 250.0      # a given clock wins
