"""PeZO on-the-fly generator in hardware: rotated LFSR lanes, scale LUT, power-of-two shift.

Matches :class:`zoforge.golden.rng.OnTheFlyGolden` bit for bit. Two reusable components and
a stream top that connects them:

* :class:`OnTheFlyCore` (submodule ``core``): the n lane registers and the scale look-up.
  Signature: ``step: In(1)`` (advance one cycle), ``save``/``restore: In(1)`` (snapshot
  option), ``lanes: Out(ArrayLayout(unsigned(b), n))`` (the lane states in position order),
  ``shift: Out(unsigned(s))`` (``k(t) - k_min``, only when the LUT is not constant) and
  ``primed: Out(1)`` (lanes and shift show a valid cycle; absent with external priming).
  Rotation is pure wiring: position p loads ``step(lanes[(p + 1) mod n])``, so position p
  always holds lane ``(p + t) mod n``; each step costs one XOR (one LUT) per lane. The LUT
  (a memory with a synchronous read port, i.e. block RAM, entries ``k - k_min``, only
  ``s = ceil(log2(k_max - k_min + 1))`` bits wide) is addressed by a tracker register that
  runs lane 0's LFSR one cycle ahead (``S(t + 1)``), so the synchronous read port delivers
  ``k(t)`` exactly when the lanes show cycle t; after reset the registers hold cycle -1 and
  one priming step fills the read register. When the LUT is constant (e.g. n = 31, b = 8)
  there is no memory, no tracker and no priming: the shift is fixed and folded into F.
* :class:`ScaleShift` (submodule ``shift``): ``lanes: In(ArrayLayout(unsigned(b), n))``,
  ``shift: In(unsigned(s))`` (non-constant LUT) and
  ``values: Out(ArrayLayout(signed(W), n))``, ``value_p = (lane_p - 2^(b-1)) << shift``
  (the subtraction is the MSB inverted); pure wiring when the LUT is constant.
* :class:`OnTheFlyGenerator`: the stream top. ``out.payload`` is n W-bit two's-complement
  values, position 0 in the least-significant bits (the bits of ``values``); the state
  advances only on a transfer.

Priming. By default the core primes itself: a ``primed`` flag register, and the state steps
on ``step | ~primed``, so ``step`` only counts once ``primed`` is high (one flip-flop and one
gate, and nothing at all for a constant LUT). A parent that already has such a flag can
build the core with ``external_priming=True``: no ``primed`` port, ``step`` is then the raw
step enable and the parent steps ``priming_steps`` times (0 or 1) after reset before using
the outputs. The stream top does this without ``snapshot``: ``out.valid`` is a flip-flop set
one cycle after reset and the step enable is ``out.ready | ~out.valid`` (the same as a
transfer once primed), so the core's logic is only the n lane feedbacks and the tracker's.

Save/restore (``snapshot=True``): ``save`` copies the whole state (lanes, tracker, priming
flag, the current shift) into shadow registers, ``restore`` copies it back and wins over a
step, so that the cycles after the save are regenerated exactly (the stream top holds
``out.valid`` low in the restore cycle); ``save`` and ``restore`` are never high in the same
cycle. It doubles the state flip-flops and adds a 2:1 multiplexer per state bit, so the
paper-comparable core is built without it; reset (``rst``) always returns to cycle 0.

Ports and Verilog. The components' port signals are private and each module names its ports
itself (:func:`~zoforge.hw.rng.lfsr.private_ports`, :func:`~zoforge.hw.rng.lfsr.named_ports`):
a parent that connects them (this stream top, or any other design) holds no unread alias
wires and no per-lane field wires, so ``verilator -Wall`` needs no waiver. The named signals
are the hardware itself (``lanes`` is the lane flip-flops; without a snapshot ``shift`` is the
LUT's read register and ``step`` its enable), so the blocks synthesize to exactly what they
did when they shared their neighbours' signals.
"""
from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.hdl import MemoryData, MemoryInstance
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.rng import OnTheFlyConfig, scale_lut
from zoforge.hw.rng.lfsr import (drive_state, drive_valid, lfsr_next, named_ports,
                                 private_ports, snapshot_members, snapshot_stream_members)

__all__ = ["OnTheFlyCore", "ScaleShift", "OnTheFlyGenerator", "LaneStreamTop", "lut_memory_init"]


def lut_memory_init(n_rng: int, bits: int) -> list[int]:
    """LUT memory contents: ``LUT[s] - k_min`` for every state s (entry 0 unused)."""
    lut = scale_lut(n_rng, bits)
    return [int(k) - int(lut.min()) for k in lut]


class OnTheFlyCore(wiring.Component):
    """LFSR lanes with rotation and the scale look-up (see the module docstring).

    Members (``config`` is an :class:`~zoforge.golden.rng.OnTheFlyConfig`; n = ``n_rng``,
    b = ``bits``, s = :attr:`shift_bits`):

    ``step: In(1)``        advance one cycle; with the core's own priming it counts once
                           ``primed`` is high; ``restore`` wins over it
    ``save: In(1)``        (``config.snapshot``) copy the state into the shadow registers
    ``restore: In(1)``     (``config.snapshot``) copy the shadow registers back (never in
                           the same cycle as ``save``)
    ``lanes: Out(ArrayLayout(unsigned(b), n))``  the lane registers, in position order
    ``shift: Out(unsigned(s))``  ``k(t) - k_min`` (only when s > 0, a non-constant LUT)
    ``primed: Out(1)``     lanes and shift show a valid cycle (constant 1 for a constant
                           LUT; no such port with ``external_priming``)

    ``external_priming=True`` (not with a snapshot, whose priming flag is saved state):
    the parent owns the priming flag, ``step`` is the raw step enable, and after reset the
    parent steps :attr:`priming_steps` times before the outputs are valid.
    """

    def __init__(self, config: OnTheFlyConfig, *, external_priming: bool = False):
        if external_priming and config.snapshot:
            raise ValueError("external_priming: with a snapshot the priming flag is saved "
                             "state and lives in the core")
        self.config = config
        self.golden = config.golden()
        self.n_rng, self.bits, self.snapshot = config.n_rng, config.bits, config.snapshot
        self.external_priming = external_priming
        #: bits of the shift amount ``k - k_min`` (0: constant LUT, no memory, no shift port)
        self.shift_bits = (self.golden.k_max - self.golden.k_min).bit_length()
        self.constant = not self.shift_bits
        #: steps after reset before the outputs are valid (the LUT read register's fill)
        self.priming_steps = 0 if self.constant else 1
        start = 0 if self.constant else self.golden.modulus - 1      # cycle -1 when priming
        init = self.golden.cycle_table(start, 1)["raw"][0] + (1 << (config.bits - 1))
        members = {"step": In(1), **snapshot_members(config.snapshot),
                   "lanes": Out(data.ArrayLayout(unsigned(config.bits), config.n_rng),
                                init=[int(state) for state in init])}
        if self.shift_bits:
            members["shift"] = Out(unsigned(self.shift_bits))
        if not external_priming:
            members["primed"] = Out(1)
        super().__init__(members)
        private_ports(self)

    def elaborate(self, platform):
        m = Module()
        n, b = self.n_rng, self.bits
        port = named_ports(m, self, "step", "lanes",
                           *(("save", "restore") if self.snapshot else ()),
                           *(("shift",) if self.shift_bits else ()),
                           *(("primed",) if self.shift_bits and not self.external_priming
                             else ()))
        save, restore = (port.save, port.restore) if self.snapshot else (None, None)
        # Rotation: position p loads the LFSR step of position p + 1.
        lanes = data.View(self.lanes.shape(), port.lanes)
        pairs = [(port.lanes, Cat(lfsr_next(lanes[(p + 1) % n], b) for p in range(n)))]
        if self.constant:
            drive_state(m, pairs, port.step, save, restore)
            if not self.external_priming:
                m.d.comb += self.primed.eq(1)
            return m

        # The LUT's read port: address = the tracker, which runs lane 0's LFSR one step ahead
        # (S(t + 1)); enable = the step; data = k(t) - k_min when the lanes show cycle t.
        tracker = Signal(b, name="tracker", init=1)
        pairs.append((tracker, lfsr_next(tracker, b)))
        if self.external_priming:
            advance = port.step
        else:
            advance = Signal(name="advance")
            m.d.comb += advance.eq(port.step | ~port.primed)
            pairs.append((port.primed, Const(1)))
        drive_state(m, pairs, advance, save, restore)
        read_data = port.shift if not self.snapshot else Signal(self.shift_bits, name="lut_data")
        lut = MemoryInstance(data=MemoryData(shape=unsigned(self.shift_bits), depth=1 << b,
                                             init=lut_memory_init(n, b)))
        lut.read_port(domain="sync", addr=tracker, data=read_data, en=advance,
                      transparent_for=())
        m.submodules.lut = lut
        if self.snapshot:
            # After a restore the read register is stale until the next step: use the saved k.
            saved_shift = Signal(self.shift_bits, name="shift_saved")
            use_saved = Signal(name="use_saved_shift")
            m.d.comb += port.shift.eq(Mux(use_saved, saved_shift, read_data))
            with m.If(save):
                m.d.sync += saved_shift.eq(port.shift)
            with m.If(restore):
                m.d.sync += use_saved.eq(1)
            with m.Elif(advance):
                m.d.sync += use_saved.eq(0)
        return m


class ScaleShift(wiring.Component):
    """``value_p = (lane_p - 2^(b-1)) << shift`` as W-bit two's complement (combinational).

    Members: ``lanes: In(ArrayLayout(unsigned(bits), n))``, ``shift: In(unsigned(shift_bits))``
    (only when ``shift_bits`` > 0; 0 means a constant LUT, whose shift is folded into F) and
    ``values: Out(ArrayLayout(signed(width), n))``.
    """

    def __init__(self, bits: int, width: int, n: int, shift_bits: int = 0):
        self.bits, self.width, self.n, self.shift_bits = bits, width, n, shift_bits
        members = {"lanes": In(data.ArrayLayout(unsigned(bits), n))}
        if shift_bits:
            members["shift"] = In(unsigned(shift_bits))
        members["values"] = Out(data.ArrayLayout(signed(width), n))
        super().__init__(members)
        private_ports(self)

    def elaborate(self, platform):
        m = Module()
        b, w = self.bits, self.width
        # (the shift amount's port is not called `shift` in a module instantiated as `shift`)
        port = named_ports(m, self, "lanes", "values",
                           **({"shift": "amount"} if self.shift_bits else {}))
        lanes = data.View(self.lanes.shape(), port.lanes)
        values = data.View(self.values.shape(), port.values)
        for p in range(self.n):
            state = lanes[p]
            sign = ~state[b - 1]
            # state - 2^(b-1) (the MSB inverted), sign-extended to W bits
            value = Cat(state[:b - 1], sign, *([sign] * (w - b)))
            for stage in range(self.shift_bits):                # barrel shift, W bits wide
                step = 1 << stage
                if step < w:
                    value = Mux(port.shift[stage], Cat(Const(0, step), value[:w - step]), value)
            # one assignment per lane: `values` is then a cell of its own, so that this
            # module's output port is all of it even where a bit is a lane bit passed through
            m.d.comb += values[p].eq(value)
        return m


class LaneStreamTop(wiring.Component):
    """What the lane generators' stream tops share: ``config`` (``n_rng`` lanes of ``bits``,
    ``snapshot``), its golden model, and the signature: ``out``, a stream of ``n_rng`` values
    of the golden model's ``width`` (lane 0 in the low bits), plus the snapshot port."""

    def __init__(self, config):
        self.config = config
        self.golden = config.golden()
        self.n_rng, self.bits, self.snapshot = config.n_rng, config.bits, config.snapshot
        self.width = self.golden.width
        super().__init__({"out": Out(stream.Signature(config.n_rng * self.width)),
                          **snapshot_stream_members(config.snapshot)})


class OnTheFlyGenerator(LaneStreamTop):
    """Stream top of the on-the-fly generator: ``core`` and ``shift`` connected, plus the
    stream control (see the module docstring)."""

    def __init__(self, config: OnTheFlyConfig):
        super().__init__(config)

    def elaborate(self, platform):
        m = Module()
        # Without a snapshot the priming flag is out.valid, a register the stream needs anyway.
        m.submodules.core = core = OnTheFlyCore(self.config, external_priming=not self.snapshot)
        m.submodules.shift = shift = ScaleShift(self.bits, self.width, self.n_rng,
                                                core.shift_bits)
        m.d.comb += shift.lanes.eq(core.lanes)
        if core.shift_bits:
            m.d.comb += shift.shift.eq(core.shift)
        m.d.comb += self.out.payload.eq(shift.values)
        if self.snapshot:
            # The core primes itself; restore wins over a step, and out.valid is low then.
            m.d.comb += [core.step.eq(self.out.ready), core.save.eq(self.save),
                         core.restore.eq(self.restore)]
            drive_valid(m, self, core.primed)
        elif not core.priming_steps:
            m.d.comb += [core.step.eq(self.out.ready), self.out.valid.eq(1)]
        else:
            # Priming (stream control): the first cycle after reset steps once to load the
            # LUT's read register; out.valid (a register, here the priming flag) follows.
            m.d.comb += core.step.eq(self.out.ready | ~self.out.valid)
            m.d.sync += self.out.valid.eq(1)
        return m
