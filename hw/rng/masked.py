"""Masked on-the-fly generator in hardware: PeZO's rotated LFSR lanes XOR a rotating mask.

Matches :class:`zoforge.golden.rng.MaskedGolden` bit for bit. Two blocks, as for the
on-the-fly generator, so that reports list them apart:

* :class:`MaskedCore` (submodule ``core``): the n lane registers (rotation is wiring:
  position p loads the LFSR step of position p + 1, one XOR per lane), the m-bit mask
  register (one LFSR stepping in place) and the output mixing, one XOR per output bit:
  ``lanes[p]`` bit j = lane register p bit j XOR mask bit ``(p + j) mod m``. Signature:
  ``step: In(1)``, ``save``/``restore: In(1)`` (snapshot option; ``restore`` wins over a
  step) and ``lanes: Out(ArrayLayout(unsigned(b), n))``, the masked words in position
  order. There is no LUT, so nothing to prime: the registers reset to cycle 0.
* :class:`~zoforge.hw.rng.onthefly.ScaleShift` (submodule ``shift``) with no shift amount:
  ``value_p = lanes[p] - 2^(b-1)`` (the MSB inverted), W = b.
* :class:`MaskedGenerator`: the stream top; ``out.payload`` holds the n values, position 0
  in the least-significant bits; the state advances on a transfer; with the snapshot option
  ``out.valid`` is low in a restore cycle.

The ports are private and named inside each module
(:func:`~zoforge.hw.rng.lfsr.private_ports`), so ``verilator -Wall`` needs no waiver.
"""
from __future__ import annotations

from amaranth import Cat, Module, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.rng import MaskedConfig
from zoforge.hw.rng.lfsr import (drive_state, drive_valid, lfsr_next, named_ports,
                                 private_ports, snapshot_members)
from zoforge.hw.rng.onthefly import LaneStreamTop, ScaleShift

__all__ = ["MaskedCore", "MaskedGenerator"]


class MaskedCore(wiring.Component):
    """Lane registers with rotation, the mask LFSR and the output XOR (module docstring).

    Members (``config`` a :class:`~zoforge.golden.rng.MaskedConfig`; n = ``n_rng``,
    b = ``bits``): ``step: In(1)``, ``save``/``restore: In(1)`` (``config.snapshot``),
    ``lanes: Out(ArrayLayout(unsigned(b), n))`` (the masked words, position order).
    """

    def __init__(self, config: MaskedConfig):
        self.config = config
        self.golden = config.golden()
        self.n_rng, self.bits, self.snapshot = config.n_rng, config.bits, config.snapshot
        self.mask_bits = self.golden.mask_bits
        super().__init__({"step": In(1), **snapshot_members(config.snapshot),
                          "lanes": Out(data.ArrayLayout(unsigned(config.bits), config.n_rng))})
        private_ports(self)

    def elaborate(self, platform):
        m = Module()
        n, b, mb = self.n_rng, self.bits, self.mask_bits
        port = named_ports(m, self, "step", "lanes",
                           *(("save", "restore") if self.snapshot else ()))
        init = self.golden.lane_states([0])[0]
        # a plain n*b-bit register (a layout-shaped one would add unread per-lane wires)
        state = Signal(n * b, name="state",
                       init=sum(int(s) << (p * b) for p, s in enumerate(init)))
        lane = [state[p * b:(p + 1) * b] for p in range(n)]
        mask = Signal(mb, name="mask", init=int(self.golden.mask_states([0])[0]))
        pairs = [(state, Cat(lfsr_next(lane[(p + 1) % n], b) for p in range(n))),
                 (mask, lfsr_next(mask, mb))]
        save, restore = (port.save, port.restore) if self.snapshot else (None, None)
        drive_state(m, pairs, port.step, save, restore)
        lanes = data.View(self.lanes.shape(), port.lanes)
        for p in range(n):
            rotated = Cat(mask[(p + j) % mb] for j in range(b))
            m.d.comb += lanes[p].eq(lane[p] ^ rotated)
        return m


class MaskedGenerator(LaneStreamTop):
    """Stream top of the masked generator: ``core`` and ``shift`` (module docstring)."""

    def __init__(self, config: MaskedConfig):
        super().__init__(config)

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = MaskedCore(self.config)
        m.submodules.shift = shift = ScaleShift(self.bits, self.width, self.n_rng)
        m.d.comb += [shift.lanes.eq(core.lanes), self.out.payload.eq(shift.values),
                     core.step.eq(self.out.ready)]
        if self.snapshot:
            m.d.comb += [core.save.eq(self.save), core.restore.eq(self.restore)]
        drive_valid(m, self, 1)
        return m
