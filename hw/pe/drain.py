"""Drain: finished tiles out of the array's read-out into the result banks (any
:class:`~.tiles.Tiling`, :attr:`~.tiles.Tiling.result_bank_count` banks).

``capture_latency`` cycles after a tile's last k-step enters the array (``capture``), all
its sums are in the PEs' ``res`` registers; the next R cycles write row ``row`` (``res``,
the array's read-out of row ``sel``) into the result bank at ``row``, top row first
(``sel`` = ``row``). With ``shift_lead`` (the array's
:attr:`~.array.SystolicArray.drain_lead`, a skewed drain) ``sel`` counts its R rows that
many cycles before the writes (a second row counter, on an earlier tap of the capture's
delay line); the writes are unchanged. Banks are used in turn, one a tile; ``drained``
pulses when one is complete. ``start`` clears all state.
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
            "sel": Out(range(self.rows)),
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
        # the writes: rows written, top row first, from the capture's last tap
        drain, row, row_last, drained_next = _window(m, R, taps[-1], "row", taps[-2])
        m.d.comb += [self.res_wr.en.eq(drain),
                     self.res_wr.addr.eq(Cat(row, bank)),
                     self.res_wr.data.eq(self.res)]
        sel = row
        if self.shift_lead:     # the reads' own window, shift_lead taps earlier
            _, sel, _, _ = _window(m, R, taps[len(taps) - 1 - self.shift_lead], "read")
        m.d.comb += self.sel.eq(sel)
        # ``drained`` a plain assignment, not set inside an ``If`` (a process that Icarus
        # Verilog first runs when one of its inputs changes: until a tile was drained its
        # output was x, which stalled the engine's output stage there from the first cycle)
        # (a register, set a cycle ahead from the capture's tap before the last: the
        # window's open and last-row logic is not in front of the output stage's and the
        # feeder's counts)
        if R > 1:
            drained = Signal(name="drained")
            m.d.sync += drained.eq(drained_next)
            m.d.comb += self.drained.eq(drained)
        else:
            m.d.comb += self.drained.eq(drain & row_last)
        with m.If(self.drained):
            m.d.sync += bank.eq(bank + 1)
        return ResetInserter(self.start)(m)


def _window(m: Module, rows: int, tap: Value, name: str, tap_next: Value | None = None):
    """A window of ``rows`` cycles opened by ``tap``, counting its cycles from 0 (0 while
    closed); returns (open, count, at_last): ``at_last`` is ``count == rows - 1``, a
    register of its own (set as the count steps to it: no comparison of the counter, which
    drives the result banks' address or the read-out's select, behind ``open``), and
    ``open & at_last`` of the next cycle, given ``tap_next`` (``tap``'s value then; None
    without it)."""
    running = Signal(name=f"{name}_running")
    count = Signal(address_bits(rows), name=name)
    if rows > 1:
        at_last = Signal(name=f"{name}_last")
    else:
        at_last = count == rows - 1
    opened = tap | running
    with m.If(opened):
        m.d.sync += [count.eq(count + 1), running.eq(1)]
        if rows > 1:
            m.d.sync += at_last.eq(count == rows - 2)           # (0 after the last)
        with m.If(at_last):
            m.d.sync += [count.eq(0), running.eq(0)]
    closing_next = None
    if tap_next is not None:
        # open next: the tap, or open now short of the last cycle; at the last next: the
        # count steps to it now, or it stays (closed: at_last is 0)
        closing_next = ((tap_next | (opened & ~at_last))
                        & Mux(opened, count == rows - 2, at_last))
    return opened, count, at_last, closing_next
