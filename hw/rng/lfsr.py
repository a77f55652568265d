"""Amaranth building blocks shared by the PeZO generators: the LFSR step and state saving."""
from __future__ import annotations

from amaranth import Cat, Module, Signal, Value
from amaranth.lib.wiring import In

from zoforge.golden.rng.lfsr import taps

__all__ = ["lfsr_next", "drive_state", "snapshot_members", "snapshot_ports"]


def lfsr_next(state: Value, bits: int) -> Value:
    """``((s << 1) | XOR of s[t-1] over the XAPP052 taps t) mod 2^b``: wiring plus one XOR."""
    feedback = state[taps(bits)[0] - 1]
    for tap in taps(bits)[1:]:
        feedback = feedback ^ state[tap - 1]
    return Cat(feedback, state[:bits - 1])


def drive_state(m: Module, pairs: list[tuple[Signal, Value]], advance: Value,
                save: Value | None = None, restore: Value | None = None) -> None:
    """Registers ``reg <= next`` on ``advance``; with ``save``/``restore`` (snapshot option)
    each register gets a shadow copy: ``save`` copies the register into it, ``restore``
    copies it back (and wins over ``advance``). The snapshot costs one extra flip-flop and
    one 2:1 multiplexer per state bit, which is why it is an elaboration option."""
    if restore is None:
        with m.If(advance):
            m.d.sync += [reg.eq(nxt) for reg, nxt in pairs]
        return
    shadows = [Signal.like(reg, name=f"{reg.name}_saved") for reg, _ in pairs]
    with m.If(save):
        m.d.sync += [shadow.eq(reg) for shadow, (reg, _) in zip(shadows, pairs)]
    with m.If(restore):
        m.d.sync += [reg.eq(shadow) for shadow, (reg, _) in zip(shadows, pairs)]
    with m.Elif(advance):
        m.d.sync += [reg.eq(nxt) for reg, nxt in pairs]


def snapshot_members(snapshot: bool) -> dict:
    """The ``save``/``restore`` input ports a generator has with the snapshot option."""
    return {"save": In(1), "restore": In(1)} if snapshot else {}


def snapshot_ports(component) -> tuple[Value | None, Value | None]:
    """A generator's (``save``, ``restore``) ports, or (None, None) without a snapshot."""
    if not component.snapshot:
        return None, None
    return component.save, component.restore
