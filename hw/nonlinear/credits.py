"""Back-pressure for a pipeline whose stages never stall: credits and an output buffer.

The scheme of :class:`zoforge.hw.pe.requant.RequantStream`, as a part a unit adds to its
module: an output buffer of ``depth`` beats (the stages' beats plus two) behind the last
stage, bypassed while it is empty (so with ``o.ready`` high every beat leaves ``latency``
cycles after it came, as through a stalling pipeline), and ``i.ready`` a register that is
high while fewer than ``depth`` beats are in the stages or the buffer: the buffer never
overflows, back-pressure reaches the upstream block from a register, and no combinational
path runs from ``o.ready`` to ``i.ready``. No enable fans out to the stages' registers.
"""
from __future__ import annotations

from amaranth import C, Cat, Module, Mux, Signal, Value
from amaranth.lib.fifo import SyncFIFO

__all__ = ["buffer_depth", "add_credits", "add_output_buffer"]


def buffer_depth(latency: int) -> int:
    """Beats the output buffer holds for a pipeline of ``latency`` stages, and so the most
    beats in flight: the stages' plus two, so that a beat can be taken every cycle while
    ``o.ready`` is high."""
    return latency + 2


def add_credits(m: Module, i, o, depth: int) -> Signal:
    """Drive ``i.ready`` from the beats in flight (at most ``depth``); return the input
    transfer (``i.valid & i.ready``), the valid the stages carry."""
    # the beats taken and not yet given, in a thermometer code (bit n set: more than n), so
    # each bit's update is one small function of its neighbours and no adder or comparison
    # lies between ``o.ready`` and a register; ``i.ready`` is the top bit's complement
    taken = Signal(name="taken")
    m.d.comb += taken.eq(i.valid & i.ready)
    given = o.valid & o.ready
    held = Signal(depth, name="held")
    with m.If(taken & ~given):
        m.d.sync += held.eq(Cat(C(1, 1), held[:-1]))
    with m.Elif(given & ~taken):
        m.d.sync += held.eq(Cat(held[1:], C(0, 1)))
    m.d.comb += i.ready.eq(~held[-1])
    return taken


def add_output_buffer(m: Module, o, row, row_valid, depth: int) -> None:
    """The buffer between the last stage's beat ``row`` (a value of ``o.payload``'s shape;
    valid: ``row_valid``) and the stream ``o``; a beat goes in when it cannot leave now or
    beats wait before it."""
    bits = Value.cast(row)
    m.submodules.buffer = buffer = SyncFIFO(width=len(bits), depth=depth)
    m.d.comb += [o.valid.eq(buffer.r_rdy | row_valid),
                 o.payload.eq(Mux(buffer.r_rdy, buffer.r_data, bits)),
                 buffer.r_en.eq(o.ready),
                 buffer.w_data.eq(bits),
                 buffer.w_en.eq(row_valid & (buffer.r_rdy | ~o.ready))]
