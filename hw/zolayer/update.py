"""The update unit: walks the trained matrix word by word (the branches' read order).

Two jobs (see :mod:`zoforge.golden.zolayer.model` for the arithmetic), per lane::

    accumulate:  D <- D + g * z                        (one generator transfer per word)
    apply:       delta = (D * eta_mult + ((1 << eta_shift) >> 1)) >> eta_shift
                 T <- clamp(T - delta, -2^23, 2^23 - 1);  D <- 0

The memories belong to the parent (``t_*``: the master copy T, ``d_*``: the update
accumulator D; it shares the master's ports with other units). Words are issued one per
cycle in :class:`~.walk.PanelWalk` order over ``outer`` features (``word_features`` per
panel, R by default) and ``inner`` words (on ``z.valid`` when accumulating); every word is
read when its
pipeline stage needs it and written :data:`ACCUMULATE_LATENCY` (accumulate) or
:data:`APPLY_LATENCY` (apply) cycles after its issue. Every word is read and written once,
so the pipeline needs no forwarding. ``done`` pulses with the last write.

Pipeline, per lane, in cycles after the issue (registers at the end of each)::

    0  issue; apply: read D                        accumulate: z taken
    1  a = apply ? D : z
       b = apply ? eta_mult << (7 - s % 8) : g    (s = eta_shift; one register for all lanes)
    2  a[:16] * b, a[16:] * b                      partial products, one DSP48E2 each
    3  prod = a * b (their sum)                    accumulate: read D; apply: -
    4  accumulate: D + prod                        apply: t = (prod >> 6) >> (s & ~7), read T
                                                          (= (2 * D * eta_mult) >> s)
    5  accumulate: written                         apply: n = (2 * T - t) >> 1 = T -
                                                          round_half_up(D * eta_mult / 2^s)
    6                                              apply: T = n saturated to 24 bits (from
                                                          its upper bits), written; D = 0

(The multiplier pre-scaled by ``2^(7 - s % 8)`` leaves a shift by a multiple of 8, as in
:class:`~zoforge.hw.systolic.requant.RequantStream`.)
"""
from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import ReadPort, WritePort
from amaranth.lib.wiring import In, Out

from zoforge.golden.zolayer.config import Formats

from .walk import PanelWalk

__all__ = ["UpdateUnit", "ACCUMULATE_LATENCY", "APPLY_LATENCY"]

#: Cycles from a word's issue to its write, per job.
ACCUMULATE_LATENCY = 5
APPLY_LATENCY = 6
_CHUNK = 16                 # bits of the lower operand chunks (one DSP48E2 product each)
_SCALE = 7                  # the multiplier is pre-scaled by up to 2^7


class UpdateUnit(wiring.Component):
    def __init__(self, rows: int, z_lanes: int, z_width: int, dim_bits: int, addr_bits: int,
                 word_features: int | None = None):
        self.rows, self.z_width = rows, z_width
        self.word_features = word_features or rows      # the walk's step in features
        self.dim_bits, self.addr_bits = dim_bits, addr_bits
        self.acc_bits = Formats.accumulator_bits(z_width)
        master = data.ArrayLayout(signed(Formats.MASTER_BITS), rows)
        accum = data.ArrayLayout(signed(self.acc_bits), rows)
        super().__init__({
            "start": In(1), "apply": In(1), "inner": In(dim_bits), "outer": In(dim_bits + 1),
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
        m.submodules.walk = walk = PanelWalk(self.word_features, self.dim_bits, self.addr_bits)
        apply, issued_all = Signal(), Signal()
        with m.If(self.start):
            m.d.sync += [self.busy.eq(1), issued_all.eq(0), apply.eq(self.apply)]
        issuing = self.busy & ~issued_all
        issue = issuing & (apply | self.z.valid)
        m.d.comb += [walk.restart.eq(self.start), walk.advance.eq(issue),
                     walk.inner.eq(self.inner), walk.outer.eq(self.outer),
                     self.z.ready.eq(issuing & ~apply)]
        with m.If(issue & walk.last):
            m.d.sync += issued_all.eq(1)

        # the words' valid, last and address, one register per cycle after the issue
        stages = max(ACCUMULATE_LATENCY, APPLY_LATENCY)
        valid = [Signal(name=f"valid_{s}") for s in range(stages + 1)]
        last = [Signal(name=f"last_{s}") for s in range(stages + 1)]
        addr = [Signal(self.addr_bits, name=f"addr_{s}") for s in range(stages + 1)]
        m.d.comb += [valid[0].eq(issue), last[0].eq(walk.last), addr[0].eq(walk.flat)]
        m.d.sync += [dst.eq(src) for s in range(stages)
                     for dst, src in ((valid[s + 1], valid[s]), (last[s + 1], last[s]),
                                      (addr[s + 1], addr[s]))]
        with m.If(self.start):          # words past the last job's write stage are stale
            m.d.sync += [v.eq(0) for v in valid[1:]]

        def at(accumulate, applying):
            """The stage of the job that is running."""
            return Mux(apply, applying, accumulate)

        # reads: D at the issue (apply) or in cycle 3 (accumulate), T in cycle 4 (apply)
        m.d.comb += [self.d_rd.addr.eq(at(addr[3], addr[0])),
                     self.d_rd.en.eq(at(valid[3], valid[0])),
                     self.t_rd.addr.eq(addr[4]), self.t_rd.en.eq(valid[4] & apply)]
        written = at(valid[ACCUMULATE_LATENCY], valid[APPLY_LATENCY])
        written_last = at(last[ACCUMULATE_LATENCY], last[APPLY_LATENCY])
        m.d.comb += [self.d_wr.addr.eq(at(addr[ACCUMULATE_LATENCY], addr[APPLY_LATENCY])),
                     self.d_wr.en.eq(written), self.t_wr.addr.eq(self.d_wr.addr),
                     self.t_wr.en.eq(written & apply), self.done.eq(written & written_last)]
        with m.If(self.done):
            m.d.sync += self.busy.eq(0)

        # cycle 1: the multiplier's second operand, one register for all lanes
        shift = self.eta_shift
        b = Signal(signed(Formats.ETA_MULT_BITS + _SCALE + 1))
        m.d.sync += b.eq(Mux(apply, self.eta_mult << ~shift[:_SCALE.bit_length()], self.g))
        z1 = Signal(self.rows * self.z_width)
        m.d.sync += z1.eq(self.z.payload[:self.rows * self.z_width])
        for i in range(self.rows):
            self._lane(m, i, apply, b, z1[i * self.z_width:(i + 1) * self.z_width].as_signed())
        return m

    def _lane(self, m: Module, i: int, apply, b, z) -> None:
        """The datapath of lane ``i`` (``z``: its value of the transfer taken at the issue)."""
        acc = self.acc_bits

        def reg(shape, stage, name):
            return Signal(shape, name=f"{name}_s{stage}_{i}")

        # 1: the operand
        a = reg(signed(acc), 1, "a")
        m.d.sync += a.eq(Mux(apply, self.d_rd.data[i], z))
        # 2: partial products: unsigned 16-bit chunks of a, its signed top chunk
        cuts = list(range(0, acc, _CHUNK))
        parts = []
        for n, low in enumerate(cuts):
            chunk = a[low:min(low + _CHUNK, acc)]
            chunk = chunk.as_signed() if low == cuts[-1] else chunk
            part = reg(signed(len(chunk) + len(b) + 1), 2, f"part{n}")
            m.d.sync += part.eq(chunk * b)
            parts.append((low, part))
        # 3: the product
        prod = reg(signed(acc + len(b)), 3, "prod")
        total = parts[0][1]
        for low, part in parts[1:]:
            total = total + (part << low)
        m.d.sync += prod.eq(total)
        # 4: accumulate D + prod; apply t = (prod >> 6) >> (s & ~7) = (2 * D * eta_mult) >> s
        new_d = reg(signed(acc), 4, "d")
        t = reg(signed(len(prod) - (_SCALE - 1)), 4, "t")
        m.d.sync += [new_d.eq(self.d_rd.data[i] + prod),
                     t.eq(prod[_SCALE - 1:].as_signed()
                          >> Cat(Const(0, 3), self.eta_shift[3:]))]
        # 5: n = (2 * T - t) >> 1 = T - ((t + 1) >> 1)
        n = reg(signed(len(t) + 2), 5, "n")
        m.d.sync += n.eq((Cat(Const(0, 1), self.t_rd.data[i]).as_signed() - t) >> 1)
        # 6: saturated to 24 bits: in range iff n's bits from 23 up are all equal
        top = (1 << (Formats.MASTER_BITS - 1)) - 1
        upper = n[Formats.MASTER_BITS - 1:]
        inside = (upper == 0) | (upper == (1 << len(upper)) - 1)
        m.d.comb += [self.t_wr.data[i].eq(Mux(inside, n[:Formats.MASTER_BITS],
                                                Mux(n[-1], -top - 1, top))),
                     self.d_wr.data[i].eq(Mux(apply, 0, new_d))]
