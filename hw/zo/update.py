"""The update unit: walks the trained matrix word by word (the branches' read order).

Two jobs (see :mod:`zoforge.golden.zolayer.model` for the arithmetic), per lane::

    accumulate:  D <- D + g * z                        (one generator transfer per word)
    apply:       delta = (D * eta_mult + ((1 << eta_shift) >> 1)) >> eta_shift
                 T <- clamp(T - delta, -2^23, 2^23 - 1);  D <- 0

The memories belong to the parent; this unit drives a read address (word ``w`` is read in
the cycle ``rd_en`` is high, data back one cycle later) and writes two cycles after that
(``wr_*``). Words are issued one per cycle in :class:`~.walk.PanelWalk` order over ``outer``
features (R per panel) and ``inner`` k-steps (on ``z.valid`` when accumulating); ``done``
pulses with the last write.
"""
from __future__ import annotations

from amaranth import Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.zolayer.config import Formats

from .walk import PanelWalk

__all__ = ["UpdateUnit"]


class UpdateUnit(wiring.Component):
    def __init__(self, rows: int, z_lanes: int, z_width: int, dim_bits: int, addr_bits: int):
        self.rows, self.z_width = rows, z_width
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
            "rd_en": Out(1), "rd_addr": Out(addr_bits),
            "t_rdata": In(master), "d_rdata": In(accum),
            "wr_en": Out(1), "wr_addr": Out(addr_bits),
            "t_wdata": Out(master), "d_wdata": Out(accum), "t_we": Out(1),
            "busy": Out(1), "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.walk = walk = PanelWalk(self.rows, self.dim_bits, self.addr_bits)
        apply, issued_all = Signal(), Signal()
        with m.If(self.start):
            m.d.sync += [self.busy.eq(1), issued_all.eq(0), apply.eq(self.apply)]
        issuing = self.busy & ~issued_all
        issue = issuing & (apply | self.z.valid)
        m.d.comb += [walk.restart.eq(self.start), walk.advance.eq(issue),
                     walk.inner.eq(self.inner), walk.outer.eq(self.outer),
                     self.rd_en.eq(issue), self.rd_addr.eq(walk.flat),
                     self.z.ready.eq(issuing & ~apply)]
        with m.If(issue & walk.last):
            m.d.sync += issued_all.eq(1)

        # stage 1: memory data back; the transfer's values and the word's address registered
        valid1, valid2 = Signal(), Signal()
        addr1, addr2 = Signal.like(self.rd_addr), Signal.like(self.rd_addr)
        last1, last2 = Signal(), Signal()
        z1 = Signal(self.rows * self.z_width)
        m.d.sync += [valid1.eq(issue), addr1.eq(walk.flat), last1.eq(issue & walk.last),
                     z1.eq(self.z.payload[:self.rows * self.z_width]),
                     valid2.eq(valid1), addr2.eq(addr1), last2.eq(valid1 & last1)]
        # stage 2: products registered; stage 3 (combinational into the write ports)
        top = (1 << (Formats.MASTER_BITS - 1)) - 1
        for i in range(self.rows):
            z = z1[i * self.z_width:(i + 1) * self.z_width].as_signed()
            d1 = self.d_rdata[i]
            prod = Signal(signed(self.acc_bits + Formats.ETA_MULT_BITS + 1), name=f"prod_{i}")
            d2 = Signal(signed(self.acc_bits), name=f"d_{i}")
            t2 = Signal(signed(Formats.MASTER_BITS), name=f"t_{i}")
            m.d.sync += [prod.eq(Mux(apply, d1 * self.eta_mult, self.g * z)), d2.eq(d1),
                         t2.eq(self.t_rdata[i])]
            rounded = (prod + (Const(1, 1) << self.eta_shift)[1:]) >> self.eta_shift
            new_t = Signal(signed(len(prod) + 2), name=f"new_t_{i}")
            m.d.comb += [new_t.eq(t2 - rounded),
                         self.t_wdata[i].eq(Mux(new_t > top, top,
                                                Mux(new_t < -top - 1, -top - 1, new_t))),
                         self.d_wdata[i].eq(Mux(apply, 0, d2 + prod))]
        m.d.comb += [self.wr_en.eq(valid2), self.wr_addr.eq(addr2),
                     self.t_we.eq(valid2 & apply),
                     self.done.eq(valid2 & last2)]
        with m.If(valid2 & last2):
            m.d.sync += self.busy.eq(0)
        return m
