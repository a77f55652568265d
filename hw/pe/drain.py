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

``shift`` is a register (it drives every PE's ``res``: R x C x the result width loads): its
value for the next cycle is computed from the counters' next state (:func:`_window`), the
same cycles as the window's own test of its row count.
"""
from __future__ import annotations

from amaranth import Cat, Module, Mux, ResetInserter, Signal, Value
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
        taps = [self.capture] + delay                 # taps[n + 1] is taps[n] a cycle later
        m.d.sync += [d.eq(prev) for d, prev in zip(delay, taps)]
        bank = Signal(self.bank_bits)       # wraps at the (power of two) bank count
        # the writes: rows written, bottom row first, from the capture's last tap
        drain, row, shift = _window(m, R, taps[-1], taps[-2], "row")
        m.d.comb += [self.res_wr.en.eq(drain),
                     self.res_wr.addr.eq(Cat((R - 1 - row)[:len(row)], bank)),
                     self.res_wr.data.eq(self.res)]
        if self.shift_lead:     # the shifts' own window, shift_lead taps earlier
            tap = len(taps) - 1 - self.shift_lead
            _, _, shift = _window(m, R, taps[tap], taps[tap - 1], "shifted")
        m.d.comb += self.shift.eq(shift)
        # ``drained`` a plain assignment, not set inside an ``If`` (a process that Icarus
        # Verilog first runs when one of its inputs changes: until a tile was drained its
        # output was x, which stalled the engine's output stage there from the first cycle)
        m.d.comb += self.drained.eq(drain & (row == R - 1))
        with m.If(self.drained):
            m.d.sync += bank.eq(bank + 1)
        return ResetInserter(self.start)(m)


def _window(m: Module, rows: int, tap: Value, tap_next: Value, name: str):
    """A window of ``rows`` cycles opened by ``tap`` (``tap_next``: its value in the next
    cycle), counting its cycles from 0; returns (open, count, shift): ``shift`` is ``open &
    (count != rows - 1)`` (every cycle but the last), as a register whose next value comes
    from the window's next state (the same values, no logic between it and its loads)."""
    running = Signal(name=f"{name}_running")
    count = Signal(address_bits(rows), name=name)
    shift = Signal(name=f"{name}_shift")
    opened = tap | running
    last = count == rows - 1
    with m.If(opened):
        m.d.sync += [count.eq(count + 1), running.eq(1)]
        with m.If(last):
            m.d.sync += [count.eq(0), running.eq(0)]
    if rows > 1:
        # the next cycle's running and last (its count: 0 after the last, else count + 1)
        running_next = Mux(opened, ~last, running)
        last_next = Mux(opened, ~last & (count == rows - 2), last)
        m.d.sync += shift.eq((tap_next | running_next) & ~last_next)
    return opened, count, shift
