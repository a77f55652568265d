"""Back-pressure for a pipeline whose stages never stall: credits and an output buffer.

Used by :class:`~.requant.RequantStream` and :class:`zoforge.hw.nonlinear.gelu.GeluUnit`.
No enable fans out to the stages' registers (on the ECP5 such an enable was the routed
critical path, docs/accelerator.md). Instead:

* **credits** (:func:`add_credits`): ``i.ready`` is a register, high while fewer than
  ``depth`` beats are in the stages or the buffer (a thermometer code: each bit's update is
  one small function of its neighbours, no adder or comparison between ``o.ready`` and a
  register), so the buffer never overflows and no combinational path runs from ``o.ready``
  to ``i.ready``;
* **an output buffer** (:func:`output_buffer`) of ``depth`` beats behind the last stage,
  bypassed while empty, so with ``o.ready`` high every beat leaves ``latency`` cycles after
  it came, as through a stalling pipeline. ``depth`` = :func:`buffer_depth` (the stages'
  beats plus two) lets a beat be taken every cycle while ``o.ready`` is high.
"""
from __future__ import annotations

from amaranth import C, Cat, Module, Mux, Signal, Value
from amaranth.lib.memory import Memory

__all__ = ["buffer_depth", "add_credits", "output_buffer", "up_down"]


def up_down(count: Value, up: Value, down: Value) -> Value:
    """``count + up - down`` (the same value, modulo the width it is assigned to) with
    ``up`` and ``down`` only at the end: ``count + 1`` and ``count - 1`` are made from the
    register alone, and ``up`` and ``down`` pick one of them or ``count`` (a LUT behind
    whatever makes them, not an adder's operand and its carry chain)."""
    return Mux(up == down, count, Mux(up, count + 1, count - 1))


def buffer_depth(latency: int) -> int:
    """Beats the output buffer holds behind ``latency`` stages, and so the most in flight
    (at least 2)."""
    return latency + 2


def add_credits(m: Module, i, o, depth: int) -> Value:
    """Drive ``i.ready`` from the beats in flight (at most ``depth``); return the input
    transfer (``i.valid & i.ready``), the valid the stages carry."""
    taken = Signal(name="taken")
    m.d.comb += taken.eq(i.valid & i.ready)
    given = o.valid & o.ready
    held = Signal(depth, name="held")           # bit n set: more than n beats in flight
    with m.If(taken & ~given):
        m.d.sync += held.eq(Cat(C(1, 1), held[:-1]))
    with m.Elif(given & ~taken):
        m.d.sync += held.eq(Cat(held[1:], C(0, 1)))
    m.d.comb += i.ready.eq(~held[-1])
    return taken


def output_buffer(o, row, row_valid, depth: int) -> Module:
    """The buffer between the last stage's beat ``row`` (a value of ``o.payload``'s layout,
    whose top bit is the beat's ``last``; valid: ``row_valid``) and the stream ``o``: a
    first-word-fall-through FIFO of ``depth`` beats, bypassed while empty. Every valid beat
    is written at the write pointer, which moves past it only when the beat is kept (it
    cannot leave now, or beats wait before it): the memory's write enable and address are
    registers, and ``o.ready`` reaches only the pointers and the level (a beat not kept lies
    outside the held ones, and the credits leave a free slot for every beat in the stages).
    Whether beats wait, and the first waiting beat's ``last``, are registers too (each
    slot's ``last`` is kept beside the memory), so ``o.valid`` and ``o.payload.last`` follow
    registers only, not the memory's read. The slot after the read pointer is a register of
    its own (``consume_next``), so the next ``last`` is picked without the pointer's wrap
    test (the read pointer drives the memory's read multiplexer: a net of every word bit)."""
    m = Module()
    row = Value.cast(row)
    m.submodules.storage = storage = Memory(shape=len(row), depth=depth, init=[])
    write, read = storage.write_port(), storage.read_port(domain="comb")
    produce, consume = Signal(range(depth)), Signal(range(depth))
    consume_next = Signal(range(depth), init=1)     # the slot after consume (depth >= 2)
    level = Signal(range(depth + 1))
    waiting = Signal()                      # level != 0
    lasts = Signal(depth)                   # each slot's beat's last
    head_last = Signal()                    # the first waiting beat's last
    new_last = row[-1]
    keep, give = row_valid & (waiting | ~o.ready), waiting & o.ready
    m.d.comb += [write.addr.eq(produce), write.data.eq(row), write.en.eq(row_valid),
                 read.addr.eq(consume),
                 o.valid.eq(waiting | row_valid),
                 o.payload.eq(Cat(Mux(waiting, read.data, row)[:-1],
                                  Mux(waiting, head_last, new_last)))]

    def step(pointer):
        return Mux(pointer == depth - 1, 0, pointer + 1)

    with m.If(keep):
        m.d.sync += [produce.eq(step(produce)), lasts.bit_select(produce, 1).eq(new_last)]
    with m.If(give):
        m.d.sync += [consume.eq(consume_next), consume_next.eq(step(consume_next))]
    with m.If(keep & ~give):
        m.d.sync += [level.eq(level + 1), waiting.eq(1)]
    with m.Elif(give & ~keep):
        m.d.sync += [level.eq(level - 1), waiting.eq(level != 1)]
    # the next first waiting beat: the one now kept when none waits or the only one leaves,
    # else the one after the leaving beat
    with m.If(give):
        m.d.sync += head_last.eq(Mux(level == 1, new_last, lasts.bit_select(consume_next, 1)))
    with m.Elif(~waiting):
        m.d.sync += head_last.eq(new_last)
    return m
