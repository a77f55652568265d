"""Drain: finished tiles out of the array's shift chains into the two result banks (any
:class:`~.tiles.Tiling`).

``capture_latency`` cycles after a tile's last k-step enters the array (``capture``), all
its sums are in the PEs' ``res`` registers; the next R cycles write the bottom row
(``res``) into the result bank and shift the chains down (``shift``; not after the top row),
bottom row first. Banks alternate per tile; ``drained`` pulses when one is complete.
``start`` clears all state.
"""
from __future__ import annotations

from amaranth import Cat, Module, ResetInserter, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .tiles import Tiling, address_bits

__all__ = ["Drain"]


class Drain(wiring.Component):
    def __init__(self, tiling: Tiling, capture_latency: int):
        self.rows, self.capture_latency = tiling.rows, capture_latency
        result = tiling.result_banks()
        super().__init__({
            "start": In(1),
            "capture": In(1),        # a tile's last k-step enters the array (its ``last``)
            "res": In(result.shape),
            "shift": Out(1),
            "res_wr": In(result.write_port()),
            "drained": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        R = self.rows
        delay = [Signal(name=f"delay_{n}") for n in range(self.capture_latency)]
        m.d.sync += [d.eq(prev) for d, prev in zip(delay, [self.capture] + delay[:-1])]
        draining = Signal()
        row = Signal(address_bits(R))       # rows written, bottom row first
        bank = Signal()
        drain = delay[-1] | draining
        m.d.comb += [self.res_wr.en.eq(drain),
                     self.res_wr.addr.eq(Cat((R - 1 - row)[:len(row)], bank)),
                     self.res_wr.data.eq(self.res),
                     self.shift.eq(drain & (row != R - 1))]
        with m.If(drain):
            m.d.sync += [row.eq(row + 1), draining.eq(1)]
            with m.If(row == R - 1):
                m.d.sync += [row.eq(0), draining.eq(0), bank.eq(~bank)]
                m.d.comb += self.drained.eq(1)
        return ResetInserter(self.start)(m)
