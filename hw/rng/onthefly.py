"""PeZO on-the-fly generator in hardware: rotated LFSR lanes, scale LUT, power-of-two shift.

Matches :class:`zoforge.golden.rng.OnTheFlyGolden` bit for bit. Three components:

* :class:`OnTheFlyCore` (submodule ``core``): the n lane registers and the scale look-up.
  Rotation is pure wiring: position register p loads ``step(reg[(p + 1) mod n])``, so
  position p always holds lane ``(p + t) mod n``; each step costs one XOR (one LUT) per
  lane. The LUT (an ``amaranth.lib.memory`` block RAM, entries ``k - k_min``, only
  ``ceil(log2(k_max - k_min + 1))`` bits wide) is addressed by a tracker register that runs
  lane 0's LFSR one cycle ahead (``S(t + 1)``), so the synchronous read port delivers
  ``k(t)`` exactly when the lanes show cycle t; after reset the registers hold cycle -1 and
  one priming step (output not valid) fills the read register. Without ``snapshot`` the
  priming is stream control and lives in the top: ``out.valid`` is a flip-flop set one cycle
  after reset and the step enable is ``out.ready | ~out.valid`` (one gate), so the core's
  logic is only the n lane feedbacks and the tracker's. When the LUT is constant
  (e.g. n = 31, b = 8) there is no memory, no tracker and no priming: the shift is fixed
  and folded into F.
* :class:`ScaleShift` (submodule ``shift``): ``value_p = (state_p - 2^(b-1)) << (k - k_min)``
  (the subtraction is the MSB inverted); pure wiring when the LUT is constant.
* :class:`OnTheFlyGenerator`: the stream top. ``out.payload`` is n W-bit two's-complement
  values, position 0 in the least-significant bits; the state advances only on a transfer.

Save/restore (``snapshot=True``): ``save`` copies the whole state (lanes, tracker, the
current shift) into shadow registers, ``restore`` copies it back, so that the cycles after
the save are regenerated exactly (``out.valid`` is low in the restore cycle). It doubles the
state flip-flops and adds a 2:1 multiplexer per state bit, so the paper-comparable core is
built without it; reset (``rst``) always returns to cycle 0.
"""
from __future__ import annotations

from amaranth import Cat, Const, Elaboratable, Module, Mux, Signal, Value, unsigned
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import Out

from zoforge.golden.rng import OnTheFlyConfig, OnTheFlyGolden, scale_lut
from zoforge.hw.rng.lfsr import drive_state, lfsr_next, snapshot_members, snapshot_ports

__all__ = ["OnTheFlyCore", "ScaleShift", "OnTheFlyGenerator", "lut_memory_init"]


def lut_memory_init(n_rng: int, bits: int) -> list[int]:
    """LUT memory contents: ``LUT[s] - k_min`` for every state s (entry 0 unused)."""
    lut = scale_lut(n_rng, bits)
    return [int(k) - int(lut.min()) for k in lut]


class OnTheFlyCore(Elaboratable):
    """LFSR lanes with rotation and the scale look-up (see the module docstring).

    Inputs (signals given by the parent): ``ready`` (the consumer's ``out.ready``: the state
    steps when it is high, and once after reset to prime the LUT read) and, with
    ``snapshot``, ``save``/``restore`` (restore wins over a step). Outputs (created here):
    ``lanes`` (the n b-bit lane registers in position order), ``shift`` (``k(t) - k_min``,
    None for a constant LUT), ``primed`` (the outputs are valid; constant 1 for a constant
    LUT). Registers start at cycle 0, or at cycle -1 when a priming step must fill the LUT's
    read register. With a LUT and without ``snapshot`` the parent drives the step enable
    (``read.en``) and owns the priming flag (``primed`` is then the parent's signal). The blocks take their neighbours' signals instead of having ports of
    their own, so the generated Verilog has no dangling alias wires.
    """

    def __init__(self, n_rng: int, bits: int, ready: Value, save: Value | None = None,
                 restore: Value | None = None, primed: Signal | None = None):
        self.golden = OnTheFlyGolden(n_rng, bits)
        self.n_rng, self.bits = n_rng, bits
        self.ready, self.save, self.restore = ready, save, restore
        self.snapshot = restore is not None
        self.shift_bits = (self.golden.k_max - self.golden.k_min).bit_length()
        init = self.golden.cycle_table(0 if not self.shift_bits else self.golden.modulus - 1,
                                       1)["raw"][0] + (1 << (bits - 1))
        self.lanes = [Signal(bits, name=f"lane{p}", init=int(init[p])) for p in range(n_rng)]
        self.shift = None
        if self.shift_bits:
            self.lut = memory.Memory(shape=unsigned(self.shift_bits), depth=1 << bits,
                                     init=lut_memory_init(n_rng, bits))
            self.read = self.lut.read_port()
            # Without a snapshot, the read register is the shift output itself.
            self.shift = Signal(self.shift_bits, name="shift") if restore is not None \
                else self.read.data
        if not self.shift_bits:
            self.primed = Const(1)
        else:
            self.primed = Signal(name="primed") if primed is None else primed

    def elaborate(self, platform):
        m = Module()
        n, b = self.n_rng, self.bits
        constant = not self.shift_bits
        lanes = self.lanes
        pairs = [(lanes[p], lfsr_next(lanes[(p + 1) % n], b)) for p in range(n)]
        if constant:
            drive_state(m, pairs, self.ready, self.save, self.restore)
            return m

        # The read port's own signals serve as step enable, address and shift, so that the
        # Verilog has no unused alias wires: read.en steps the state, and the address register
        # (``read__addr``, private here) runs lane 0's LFSR one step ahead, S(t + 1).
        m.submodules.lut = self.lut
        read, primed = self.read, self.primed
        step = read.en
        # = transfer | ~primed, as out.valid is primed (restore has priority anyway); taking
        # ready directly saves a LUT.
        tracker = Signal(b, name="", init=1)
        m.d.comb += read.addr.eq(tracker)
        pairs.append((tracker, lfsr_next(tracker, b)))
        if not self.snapshot:       # the parent drives read.en and the priming flag
            drive_state(m, pairs, step)
            return m
        m.d.comb += step.eq(self.ready | ~primed)
        pairs.append((primed, Const(1)))
        drive_state(m, pairs, step, self.save, self.restore)
        # After a restore the read register is stale until the next step: use the saved k.
        saved_shift = Signal(self.shift_bits, name="shift_saved")
        use_saved = Signal(name="use_saved_shift")
        m.d.comb += self.shift.eq(Mux(use_saved, saved_shift, read.data))
        with m.If(self.save):
            m.d.sync += saved_shift.eq(self.shift)
        with m.If(self.restore):
            m.d.sync += use_saved.eq(1)
        with m.Elif(step):
            m.d.sync += use_saved.eq(0)
        return m


class ScaleShift(Elaboratable):
    """``value_p = (state_p - 2^(b-1)) << shift`` as W-bit two's complement (combinational).

    ``lanes`` (n b-bit states), ``shift`` (or None: constant LUT) and ``values`` (n*W bits,
    the output, position 0 in the LSBs) are the neighbours' signals.
    """

    def __init__(self, bits: int, width: int, lanes: list[Value], shift: Value | None,
                 values: Value):
        self.bits, self.width = bits, width
        self.lanes, self.shift, self.values = lanes, shift, values

    def elaborate(self, platform):
        m = Module()
        b, w = self.bits, self.width
        for p, state in enumerate(self.lanes):
            sign = ~state[b - 1]
            # state - 2^(b-1) (the MSB inverted), sign-extended to W bits
            value = Cat(state[:b - 1], sign, *([sign] * (w - b)))
            if self.shift is not None:                          # barrel shift, W bits wide
                for stage in range(len(self.shift)):
                    step = 1 << stage
                    if step < w:
                        value = Mux(self.shift[stage], Cat(Const(0, step), value[:w - step]),
                                    value)
            m.d.comb += self.values[p * w:(p + 1) * w].eq(value)
        return m


class OnTheFlyGenerator(wiring.Component):
    """Stream top of the on-the-fly generator (see the module docstring)."""

    def __init__(self, config: OnTheFlyConfig):
        self.config = config
        self.golden = config.golden()
        n_rng = self.n_rng = config.n_rng
        self.bits, self.snapshot = config.bits, config.snapshot
        self.width = self.golden.width
        super().__init__({"out": Out(stream.Signature(n_rng * self.width)),
                          **snapshot_members(config.snapshot)})

    def elaborate(self, platform):
        m = Module()
        save, restore = snapshot_ports(self)
        # Without a snapshot the core's primed flag is out.valid itself.
        primed = None if self.snapshot else self.out.valid
        m.submodules.core = core = OnTheFlyCore(self.n_rng, self.bits, self.out.ready, save,
                                                restore, primed)
        m.submodules.shift = ScaleShift(self.bits, self.width, core.lanes, core.shift,
                                        self.out.payload)
        if self.snapshot:
            m.d.comb += self.out.valid.eq(core.primed & ~restore)
        elif not core.shift_bits:
            m.d.comb += self.out.valid.eq(1)
        else:
            # Priming (stream control): the first cycle after reset steps once to load the
            # LUT's read register; out.valid (a register, here the priming flag) follows.
            m.d.comb += core.read.en.eq(self.out.ready | ~self.out.valid)
            m.d.sync += self.out.valid.eq(1)
        return m
