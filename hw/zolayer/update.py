"""The update unit: walks the trained matrix word by word (the branches' read order).

Two jobs (see :mod:`zoforge.golden.zolayer.model` for the arithmetic), per lane::

    accumulate:  D <- D + g * z                        (one generator transfer per word)
    apply:       delta = (D * eta_mult + ((1 << eta_shift) >> 1)) >> eta_shift
                 T <- clamp(T - delta, -2^23, 2^23 - 1);  D <- 0

The memories belong to the parent (``t_*``: the master copy T, ``d_*``: the update
accumulator D; it shares the master's ports with other units, whose read data arrives
:data:`~.share.T_READ_LATENCY` cycles after the read). Words are issued one per cycle in
:class:`~.walk.PanelWalk` order over ``outer`` features (``word_features`` per panel, R by
default) and ``inner`` words (on ``z.valid`` when accumulating); every word is read
:data:`READ_LATENCY` cycles before its pipeline stage needs it (the block RAM's read, its
output register, one more register; the read ports' ``en`` high all along, so that the
registers move every cycle) and written :data:`ACCUMULATE_LATENCY` (accumulate) or
:data:`APPLY_LATENCY` (apply) cycles after its issue. Every word is read and written once,
so the pipeline needs no forwarding (nor a read of a word in the cycle it is written).
``start`` (one cycle, while not ``busy``) begins a job; ``apply``, ``inner`` and ``outer``
are taken from that cycle on (while idle, every cycle); with ``given_ends`` so are
``one_word`` (``inner <= 1``) and ``one_panel`` (``outer <= word_features``), the walk's end
tests against one step given as flags (:class:`~.walk.PanelWalk`'s ``given_ends``: the ZO
layer's job flags). ``done`` pulses with the last write.

Pipeline, per lane, in cycles after the issue (what is registered at the end of each)::

    accumulate              apply
    0   issue, z taken,     0   issue, read D
        a = z               2   a = D (from the register behind the block RAM's)
    1   a and b = g into    3   a and b = eta_mult << (7 - s % 8) into the operand
        the operand registers of the multipliers of their chunks (at most 17 bits as
        signed operands, :func:`_splits`), one DSP each
        (:class:`~zoforge.hw.pe.multiply.PipelinedMultiplier`)
    2-3 the products
                            4-5 the products
    3   read D
    4   per chunk of b, the products summed                 6;  6: read T
    5   prod = a * b (their sum)                             7
                            8   t = (prod >> 6) >> (s & ~7) = (2 * D * eta_mult) >> s,
                                from the prod register
    6   D + prod            9   2T - t (on 27 bits), whether it is past -/+ 2^24 (its upper
                                bits, or t past 26 bits)
    7   D written           10  n = (2T - t) >> 1 = T - round_half_up(D * eta_mult / 2^s),
                                saturated to 24 bits (as the compares say)
                            11  T and D = 0 written

(b is one register for all lanes.)
(The multiplier pre-scaled by ``2^(7 - s % 8)`` leaves a shift by a multiple of 8, as in
:class:`~zoforge.hw.pe.requant.RequantStream`.)

Every operand reaches a multiplier from a register (``a`` is picked between D and z in
front of its register, not behind it: the multipliers sit at DSP sites across the chip, so
the route into them is a path of its own), and the words written are registers too (the
saturation and D's zero in front of them), so no logic is behind the long routes to the
DSP sites or to the memories' write ports. Apply's t is shifted from the registered
product in a stage of its own (the products' 52-bit sum and the shift by multiples of 8 in
one stage were the ECP5's critical path: a carry chain, then the shift's multiplexers), which
costs an apply one cycle; the saturation has a stage of its own too.
"""
from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import ReadPort, WritePort
from amaranth.lib.wiring import In, Out

from zoforge.golden.zolayer.config import Formats
from zoforge.hw.pe.multiply import LATENCY as MULTIPLY_LATENCY
from zoforge.hw.pe.multiply import PipelinedMultiplier

from .walk import PanelWalk

__all__ = ["UpdateUnit", "ACCUMULATE_LATENCY", "APPLY_LATENCY", "READ_LATENCY"]

#: Cycles from a read of D or T to the register the datapath uses.
READ_LATENCY = 3
_SUMS = 2                   # register stages summing the partial products
#: Cycles from a word's issue to its write, per job: accumulate's operand z a cycle after
#: the issue, apply's D READ_LATENCY cycles; the products, their sums; then D + prod
#: (accumulate); t (from the registered product), 2T - t, and n saturated (apply).
ACCUMULATE_LATENCY = 1 + MULTIPLY_LATENCY + _SUMS + 1
APPLY_LATENCY = READ_LATENCY + MULTIPLY_LATENCY + _SUMS + 3
_CHUNK = 16                 # bits of the operands' chunks (one DSP product each)
_SCALE = 7                  # the multiplier is pre-scaled by up to 2^7


class UpdateUnit(wiring.Component):
    def __init__(self, rows: int, z_lanes: int, z_width: int, dim_bits: int, addr_bits: int,
                 word_features: int | None = None, given_ends: bool = False):
        self.rows, self.z_width, self.given_ends = rows, z_width, given_ends
        self.word_features = word_features or rows      # the walk's step in features
        self.dim_bits, self.addr_bits = dim_bits, addr_bits
        self.acc_bits = Formats.accumulator_bits(z_width)
        master = data.ArrayLayout(signed(Formats.MASTER_BITS), rows)
        accum = data.ArrayLayout(signed(self.acc_bits), rows)
        super().__init__({
            "start": In(1), "apply": In(1), "inner": In(dim_bits), "outer": In(dim_bits + 1),
            **({"one_word": In(1), "one_panel": In(1)} if given_ends else {}),
            "g": In(signed(Formats.GRAD_BITS)),
            "eta_mult": In(Formats.ETA_MULT_BITS),
            "eta_shift": In(range(Formats.ETA_SHIFT_MAX + 1)),
            "z": In(stream.Signature(z_lanes * z_width)),
            "t_rd": In(ReadPort.Signature(addr_width=addr_bits, shape=master)),
            "d_rd": In(ReadPort.Signature(addr_width=addr_bits, shape=accum)),
            "t_wr": In(WritePort.Signature(addr_width=addr_bits, shape=master)),
            "d_wr": In(WritePort.Signature(addr_width=addr_bits, shape=accum)),
            "busy": Out(1), "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.walk = walk = PanelWalk(self.word_features, self.dim_bits, self.addr_bits,
                                             self.given_ends)
        apply, issued_all = Signal(), Signal()
        # while idle the job's flag and walk are taken every cycle, the cycle of ``start``
        # among them: ``start`` itself sets ``busy`` only (one load, not the walk's and the
        # stages' registers across the unit)
        idle = ~self.busy
        with m.If(self.start):
            m.d.sync += self.busy.eq(1)
        with m.If(idle):
            m.d.sync += apply.eq(self.apply)
        issuing = self.busy & ~issued_all
        issue = issuing & (apply | self.z.valid)
        # issued_all: 0 while idle, set by the last word's issue; one expression of its
        # registers and z.valid (not the issue's fan-out in front of an enable)
        m.d.sync += issued_all.eq(self.busy & (issued_all
                                               | ((apply | self.z.valid) & walk.last)))
        m.d.comb += [walk.restart.eq(idle), walk.advance.eq(issue),
                     walk.inner.eq(self.inner), walk.outer.eq(self.outer),
                     self.z.ready.eq(issuing & ~apply)]
        if self.given_ends:
            m.d.comb += [walk.one_word.eq(self.one_word), walk.one_panel.eq(self.one_panel)]

        # the words' valid, last and address, one register per cycle after the issue
        # (``last``: valid and the job's last word, so that ``done`` picks one register)
        stages = max(ACCUMULATE_LATENCY, APPLY_LATENCY)
        valid = [Signal(name=f"valid_{s}") for s in range(stages + 1)]
        last = [Signal(name=f"last_{s}") for s in range(stages + 1)]
        addr = [Signal(self.addr_bits, name=f"addr_{s}") for s in range(stages + 1)]
        m.d.comb += [valid[0].eq(issue), last[0].eq(issue & walk.last), addr[0].eq(walk.flat)]
        m.d.sync += [dst.eq(src) for s in range(stages)
                     for dst, src in ((valid[s + 1], valid[s]), (last[s + 1], last[s]),
                                      (addr[s + 1], addr[s]))]
        with m.If(idle):                # words past the last job's write stage are stale
            m.d.sync += [v.eq(0) for v in valid[1:] + last[1:]]

        def at(accumulate, applying):
            """The stage of the job that is running."""
            return Mux(apply, applying, accumulate)

        # reads, READ_LATENCY cycles before the stage that uses them: D at the issue
        # (apply) or in cycle 3 (accumulate), T in cycle 6 (apply)
        used_d, used_t = ACCUMULATE_LATENCY - 1, APPLY_LATENCY - 2
        m.d.comb += [self.d_rd.addr.eq(at(addr[used_d - READ_LATENCY], addr[0])),
                     self.t_rd.addr.eq(addr[used_t - READ_LATENCY]),
                     self.d_rd.en.eq(1), self.t_rd.en.eq(1)]
        written = at(valid[ACCUMULATE_LATENCY], valid[APPLY_LATENCY])
        written_last = at(last[ACCUMULATE_LATENCY], last[APPLY_LATENCY])   # and written
        m.d.comb += [self.d_wr.addr.eq(at(addr[ACCUMULATE_LATENCY], addr[APPLY_LATENCY])),
                     self.d_wr.en.eq(written), self.t_wr.addr.eq(self.d_wr.addr),
                     self.t_wr.en.eq(written & apply), self.done.eq(written_last)]
        with m.If(self.done):
            m.d.sync += self.busy.eq(0)

        # the multiplier's second operand, one register for all lanes
        shift = self.eta_shift
        b = Signal(signed(Formats.ETA_MULT_BITS + _SCALE + 1))
        m.d.sync += b.eq(Mux(apply, self.eta_mult << ~shift[:_SCALE.bit_length()], self.g))
        z = self.z.payload
        for i in range(self.rows):
            self._lane(m, i, apply, b, z[i * self.z_width:(i + 1) * self.z_width].as_signed())
        return m

    def _lane(self, m: Module, i: int, apply, b, z) -> None:
        """The datapath of lane ``i`` (``z``: its value of the transfer taken at the issue)."""
        acc = self.acc_bits

        def reg(shape, stage, name):
            return Signal(shape, name=f"{name}_s{stage}_{i}")

        # the words read, READ_LATENCY cycles after their read: D behind the block RAM
        # (its output register), then one more; T from the shared port's register, then
        # one more
        d_behind, d_word = reg(signed(acc), 0, "d_behind"), reg(signed(acc), 0, "d_word")
        t_word = reg(signed(Formats.MASTER_BITS), 0, "t_word")
        m.d.sync += [d_behind.eq(self.d_rd.data[i]), d_word.eq(d_behind),
                     t_word.eq(self.t_rd.data[i])]
        # 0 (apply: 2): the operand, z or D (the same as d_word a cycle later); 1 (apply: 3):
        # into the multipliers' input registers; the products of its chunks (unsigned but
        # the top one, :func:`_splits`) with b's (the same)
        a = reg(signed(acc), 0, "a")
        m.d.sync += a.eq(Mux(apply, d_behind, z))
        columns = {}
        a_cuts, b_cuts = _splits(acc, len(b))
        for low_a, chunk_a in _chunks(a, a_cuts):
            for low_b, chunk_b in _chunks(b, b_cuts):
                multiply = PipelinedMultiplier(chunk_a.shape(), chunk_b.shape())
                m.submodules[f"multiply_{i}_{low_a}_{low_b}"] = multiply
                m.d.comb += [multiply.a.eq(chunk_a), multiply.b.eq(chunk_b)]
                columns.setdefault(low_b, []).append((low_a, multiply.p))
        # 4 (apply: 6): per chunk of b, the products of a's chunks summed; 5: the product
        sums = []
        for low_b, parts in columns.items():
            total = sum(part << low_a for low_a, part in parts)
            column = reg(total.shape(), 5, f"column{low_b}")
            m.d.sync += column.eq(total)
            sums.append((low_b, column))
        total = sum(column << low_b for low_b, column in sums)
        product = Signal(signed(acc + len(b)), name=f"product_{i}")
        prod = reg(product.shape(), 6, "prod")
        m.d.comb += product.eq(total)
        # apply 8, from the product's register: t = (prod >> 6) >> (s & ~7)
        # = (2 * D * eta_mult) >> s
        t = reg(signed(len(product) - (_SCALE - 1)), 4, "t")
        m.d.sync += [prod.eq(product),
                     t.eq(prod[_SCALE - 1:].as_signed()
                          >> Cat(Const(0, 3), self.eta_shift[3:]))]
        # 6: accumulate D + prod (apply: D = 0); apply 9: 2T - t (n = (2T - t) >> 1 = T -
        # ((t + 1) >> 1)) and whether n is past T's 24 bits: n > 2^23 - 1 iff 2T - t >=
        # 2^24, and n < -2^23 iff 2T - t < -2^24 (floor halving)
        bits = Formats.MASTER_BITS
        new_d = reg(signed(acc), 4, "d")
        twice_n = reg(bits + 1, 5, "twice_n")             # the bits n keeps, and one below
        above, below = reg(1, 5, "above"), reg(1, 5, "below")
        # 2T - t on 27 bits only (2T has 25, t is taken on 26: a short carry chain), the
        # bounds read from its bits 24-26 and, beside the subtraction (t's own bits, no
        # carry), from whether t is past 26 bits: t >= 2^25 makes 2T - t < -2^24 (below),
        # t < -2^25 makes it > 2^24 (above); within 26 bits the 27-bit difference is exact
        # (|2T - t| < 2^26): >= 2^24 iff not negative and bit 24 or 25 set, < -2^24 iff
        # negative and not both set
        narrow = bits + 2
        t_high = t[narrow - 1:]
        t_above = ~t[-1] & t_high.any()               # t >= 2^25
        t_below = t[-1] & ~t_high.all()               # t < -2^25
        diff = Signal(signed(narrow + 1), name=f"diff_{i}")
        m.d.comb += diff.eq(Cat(Const(0, 1), t_word).as_signed() - t[:narrow].as_signed())
        sign, high = diff[-1], diff[bits:narrow]
        m.d.sync += [new_d.eq(Mux(apply, 0, d_word + prod)),
                     twice_n.eq(diff[:bits + 1]),
                     above.eq(t_below | (~t_above & ~sign & high.any())),
                     below.eq(t_above | (~t_below & sign & ~high.all()))]
        # apply 10: n saturated, into the register the write port takes (one LUT per bit)
        top = (1 << (bits - 1)) - 1
        new_t = reg(signed(bits), 6, "t_new")
        m.d.sync += new_t.eq(Mux(above, top, Mux(below, -top - 1, twice_n[1:])))
        m.d.comb += [self.t_wr.data[i].eq(new_t), self.d_wr.data[i].eq(new_d)]


def _splits(acc: int, b_bits: int) -> tuple[list[int], list[int]]:
    """The chunks' offsets of ``a`` (``acc`` bits) and ``b`` (``b_bits``), as many as
    :data:`_CHUNK`-bit chunks take, each chunk unsigned but the top one (signed).

    ``a``'s top chunk as wide as an even split gives (one bit wider than those below it,
    which take a sign bit more as operands), ``b``'s top chunk as wide as ``a``'s narrowest
    operand (not narrower than its count of chunks needs): so the multiplier of two chunks
    puts ``b``'s on its narrower port (Yosys' ``mul2dsp`` puts the wider operand on A: a
    DSP48E2's A takes 30 bits, B 18), and the top chunks' sign bits, sign-extended to the
    ports' widths, drive a few pins each (``b`` is one register for all lanes: with 16-bit
    chunks its sign bit drove 11 B pins of 8 DSPs in the 4-row unit, 88 loads; now 40,
    ``a``'s 32). The values are the same: the chunks' products sum to ``a * b`` either way.
    """
    def cuts(width, top):
        offsets = [width - top]
        while offsets[0] > 0:
            offsets.insert(0, max(0, offsets[0] - _CHUNK))
        return offsets

    n_a, n_b = -(-acc // _CHUNK), -(-b_bits // _CHUNK)
    a_cuts = cuts(acc, -(-(acc + n_a - 1) // n_a))
    ends = a_cuts[1:] + [acc]
    narrowest = min(end - low + (end != acc) for low, end in zip(a_cuts, ends))
    b_cuts = cuts(b_bits, min(b_bits, max(narrowest, b_bits - _CHUNK * (n_b - 1))))
    return a_cuts, b_cuts


def _chunks(value, cuts: list[int]):
    """``(offset, chunk)`` of ``value`` cut at ``cuts``: unsigned, the top one signed."""
    ends = cuts[1:] + [len(value)]
    return [(low, value[low:end].as_signed() if end == len(value) else value[low:end])
            for low, end in zip(cuts, ends)]
