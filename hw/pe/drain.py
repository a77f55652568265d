"""Drain: finished tiles out of the array's shift chains into the result banks (any
:class:`~.tiles.Tiling`, :attr:`~.tiles.Tiling.result_bank_count` banks).

``capture_latency`` cycles after a tile's last k-step enters the array (``capture``), all
its sums are in the PEs' ``res`` registers; the next R cycles write the bottom row
(``res``) into the result bank, bottom row first, and shift the chains down (``shift``; not
after the top row). With ``shift_lead`` (the array's
:attr:`~.array.SystolicArray.drain_lead`, a skewed drain) the R - 1 shifts come that many
cycles before the writes (a second row counter, on an earlier tap of the capture's delay
line); the writes are unchanged. Banks are used in turn, one a tile; ``drained`` pulses when
one is complete. ``start`` clears all state.
"""
from __future__ import annotations

from amaranth import Cat, Module, ResetInserter, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .tiles import Tiling, address_bits

__all__ = ["Drain"]


class Drain(wiring.Component):
    def __init__(self, tiling: Tiling, capture_latency: int, shift_lead: int = 0):
        if not 0 <= shift_lead < capture_latency:
            raise ValueError(f"shift_lead must be from 0 to {capture_latency - 1} (the "
                             f"capture latency - 1), not {shift_lead}")
        self.rows, self.capture_latency, self.shift_lead = (tiling.rows, capture_latency,
                                                            shift_lead)
        self.bank_bits = tiling.bank_bits
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
        bank = Signal(self.bank_bits)       # wraps at the (power of two) bank count
        drain = delay[-1] | draining
        m.d.comb += [self.res_wr.en.eq(drain),
                     self.res_wr.addr.eq(Cat((R - 1 - row)[:len(row)], bank)),
                     self.res_wr.data.eq(self.res)]
        if self.shift_lead:
            shifting = Signal()
            shifted = Signal(address_bits(R))       # the shift window's rows
            window = delay[-1 - self.shift_lead] | shifting
            m.d.comb += self.shift.eq(window & (shifted != R - 1))
            with m.If(window):
                m.d.sync += [shifted.eq(shifted + 1), shifting.eq(1)]
                with m.If(shifted == R - 1):
                    m.d.sync += [shifted.eq(0), shifting.eq(0)]
        else:
            m.d.comb += self.shift.eq(drain & (row != R - 1))
        with m.If(drain):
            m.d.sync += [row.eq(row + 1), draining.eq(1)]
            with m.If(row == R - 1):
                m.d.sync += [row.eq(0), draining.eq(0), bank.eq(bank + 1)]
                m.d.comb += self.drained.eq(1)
        return ResetInserter(self.start)(m)
