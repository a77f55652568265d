"""Amaranth building blocks shared by the PeZO generators: the LFSR step, state saving, and
port naming for components that are connected inside another design."""
from __future__ import annotations

from types import SimpleNamespace

from amaranth import Cat, Module, ShapeCastable, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.rng.lfsr import taps

__all__ = ["lfsr_next", "drive_state", "snapshot_members", "snapshot_stream_members",
           "drive_valid", "snapshot_ports", "private_ports", "named_ports"]


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


def snapshot_stream_members(snapshot: bool) -> dict:
    """A stream generator's snapshot ports: ``save``/``restore`` (:func:`snapshot_members`)
    and ``offered: Out(1)``, ``out.valid`` but for the restore: ``out.valid = offered &
    ~restore`` (:func:`drive_valid`). A consumer that takes no transfer in a restore cycle
    may use ``offered`` as the valid: the restore pulse (a net to every state bit) is then
    not on its path."""
    return {**snapshot_members(True), "offered": Out(1)} if snapshot else {}


def drive_valid(m: Module, top: wiring.Component, offered: Value) -> None:
    """A stream generator's ``out.valid``: ``offered``, low in a restore cycle with the
    snapshot option (``top.offered`` is then ``offered``, :func:`snapshot_stream_members`)."""
    if top.snapshot:
        m.d.comb += [top.offered.eq(offered), top.out.valid.eq(offered & ~top.restore)]
    else:
        m.d.comb += top.out.valid.eq(offered)


def snapshot_ports(component) -> tuple[Value | None, Value | None]:
    """A generator's (``save``, ``restore``) ports, or (None, None) without a snapshot."""
    if not component.snapshot:
        return None, None
    return component.save, component.restore


def private_ports(component: wiring.Component) -> None:
    """Give ``component`` private port signals (``name=""``, same shape and initial value; a
    ``data.View`` where the member's shape is a layout). Call it at the end of ``__init__``.

    Amaranth names a signal in every module that uses it, and gives a signal whose shape is a
    layout one extra wire per field. A parent that connects two components
    (``m.d.comb += shift.lanes.eq(core.lanes)``) would therefore hold two names for one net,
    one of them an unread alias, and every module would hold unread per-field wires: Verilator
    ``-Wall`` flags both (``UNUSEDSIGNAL``). With private ports the parent names nothing of the
    component, and :func:`named_ports` names each port once, inside the component's module.
    (Converted to Verilog on its own, as the top, such a component keeps an unread copy of
    each input, since a top's port names come from its signature: wrap it in a component.)
    """
    for name, member in component.signature.members.items():
        assert member.is_port and not member.dimensions
        port = Value.cast(getattr(component, name))
        private = Signal(port.shape(), name="", init=port.init)
        setattr(component, name,
                member.shape(private) if isinstance(member.shape, ShapeCastable) else private)


def named_ports(m: Module, component: wiring.Component, *names: str,
                **renamed: str) -> SimpleNamespace:
    """Plain signals named after ``component``'s (private) ports ``names``, connected to them in
    ``m`` (the component's own module): an input's copy follows the port, an output's copy drives
    it (a register's copy is the register; it has the port's initial value). The module's ports
    then carry these names, and no wire is left unread. ``renamed`` (port=name) gives a copy
    another name, e.g. where the port's name is the module's instance name (Verilator
    ``VARHIDDEN``). See :func:`private_ports`."""
    named = {}
    for name in (*names, *renamed):
        member = component.signature.members[name]
        port = Value.cast(getattr(component, name))
        signal = Signal(len(port), name=renamed.get(name, name), init=port.init)
        m.d.comb += signal.eq(port) if member.flow == In else port.eq(signal)
        named[name] = signal
    return SimpleNamespace(**named)
