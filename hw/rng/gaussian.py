"""Gaussian baseline in hardware: n central-limit generators (sums of K LFSR values).

Matches :class:`zoforge.golden.rng.GaussianGolden` bit for bit. Two blocks:

* :class:`GaussianLanes` (submodule ``lfsrs``): n*K b-bit LFSR registers, each stepping in
  place (``reg <= step(reg)``, one XOR per register) at its own phase;
* :func:`central_limit_sums` (in the top module): per lane, ``sum_j (state_ij - 2^(b-1))``
  as a W = b + ceil(log2 K)-bit two's-complement integer (F = b - 1), an adder tree of K
  terms.

:class:`GaussianGenerator` is the stream top: one transfer = the n lanes' values (lane 0 in
the least-significant bits); the state advances only on a transfer; ``out.valid`` is always
high (no memory, nothing to prime). ``snapshot=True`` adds ``save``/``restore`` (shadow
registers, doubling the flip-flops, as for the on-the-fly generator).
"""
from __future__ import annotations

from amaranth import Cat, Elaboratable, Module, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import Out

from zoforge.golden.rng import GaussianConfig, GaussianGolden
from zoforge.hw.rng.lfsr import (drive_state, drive_valid, lfsr_next, snapshot_ports,
                                 snapshot_stream_members)

__all__ = ["GaussianLanes", "central_limit_sums", "GaussianGenerator"]


class GaussianLanes(Elaboratable):
    """The n*K LFSR registers (``registers[i][j]``: lane i, term j), reset to cycle 0."""

    def __init__(self, golden: GaussianGolden, advance: Value, save: Value | None = None,
                 restore: Value | None = None):
        self.golden, self.advance, self.save, self.restore = golden, advance, save, restore
        init = golden.term_states(0, 1)[0]
        self.registers = [[Signal(golden.bits, name=f"lfsr{i}_{j}", init=int(init[i, j]))
                           for j in range(golden.terms)] for i in range(golden.n_rng)]

    def elaborate(self, platform):
        m = Module()
        pairs = [(reg, lfsr_next(reg, self.golden.bits))
                 for lane in self.registers for reg in lane]
        drive_state(m, pairs, self.advance, self.save, self.restore)
        return m


def central_limit_sums(golden: GaussianGolden, registers: list[list[Value]]) -> list[Value]:
    """Per lane, ``sum_j (state_ij - 2^(b-1))`` (a balanced adder tree) as W-bit values."""
    b, w = golden.bits, golden.width
    sums = []
    for lane in registers:
        terms = [Cat(reg[:b - 1], ~reg[b - 1]).as_signed() for reg in lane]   # s - 2^(b-1)
        while len(terms) > 1:
            pairs = [terms[k] + terms[k + 1] for k in range(0, len(terms) - 1, 2)]
            terms = pairs + terms[len(pairs) * 2:]
        sums.append(terms[0].as_signed()[:w] if len(lane) > 1 else terms[0])
    return sums


class GaussianGenerator(wiring.Component):
    """Stream top of the Gaussian baseline (see the module docstring)."""

    def __init__(self, config: GaussianConfig):
        self.config = config
        self.golden = config.golden()
        self.snapshot = config.snapshot
        super().__init__({"out": Out(stream.Signature(config.n_rng * self.golden.width)),
                          **snapshot_stream_members(config.snapshot)})

    def elaborate(self, platform):
        m = Module()
        save, restore = snapshot_ports(self)
        # Stepping on out.ready alone is the same as on a transfer: out.valid is high except
        # in a restore cycle, where restore wins.
        m.submodules.lfsrs = lanes = GaussianLanes(self.golden, self.out.ready, save, restore)
        # The adders sit in the top itself: as a sub-module driving the payload port, Amaranth
        # would leave an unread alias wire of the whole payload in it.
        m.d.comb += self.out.payload.eq(Cat(central_limit_sums(self.golden, lanes.registers)))
        drive_valid(m, self, 1)
        return m
