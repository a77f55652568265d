"""Output stage: bias add and INT8 requantization of one result row (C lanes), pipelined.

Per lane, with the semantics of :func:`zoforge.golden.gemm.requantize`::

    sum  = acc + bias                              # 32-bit, wraps modulo 2^32 (stage 1)
    prod = sum * multiplier                        # exact 48-bit signed        (stage 2)
    y    = (prod + ((1 << shift) >> 1)) >> shift   # round half up              (stage 3)
    y    = clamp(y, -128, 127); y = max(y, 0) if relu
    out  = sum if raw else sign_extend_32(y)

``bias`` is used when ``bias_en``; ``multiplier``/``shift`` come per lane (``per_channel``)
or from the per-tensor ``tensor_mult``/``tensor_shift``. Every register advances only when
``adv`` is high (the stream's ``~valid | ready``), so back-pressure stalls the whole pipeline
and the memory read ports feeding it (their ``en`` is ``adv`` too).
"""
from amaranth import Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.gemm_widths import ACC_BITS, MULT_BITS, SHIFT_BITS

__all__ = ["RequantPipeline", "LATENCY"]

LATENCY = 3   # register stages between the inputs and out_*


class RequantPipeline(wiring.Component):
    def __init__(self, lanes: int):
        self.lanes = lanes
        acc_row = data.ArrayLayout(signed(ACC_BITS), lanes)
        super().__init__({
            "adv": In(1),
            "in_valid": In(1), "in_last": In(1),
            "acc": In(acc_row), "bias": In(acc_row),
            "mult": In(data.ArrayLayout(unsigned(MULT_BITS), lanes)),
            "shift": In(data.ArrayLayout(unsigned(SHIFT_BITS), lanes)),
            "bias_en": In(1), "per_channel": In(1), "raw": In(1), "relu": In(1),
            "tensor_mult": In(unsigned(MULT_BITS)), "tensor_shift": In(unsigned(SHIFT_BITS)),
            "out_valid": Out(1), "out_last": Out(1),
            "out_data": Out(acc_row),
        })

    def elaborate(self, platform):
        m = Module()
        adv = self.adv
        valid = [Signal(name=f"valid_s{n}") for n in (1, 2)] + [self.out_valid]
        last = [Signal(name=f"last_s{n}") for n in (1, 2)] + [self.out_last]
        with m.If(adv):
            m.d.sync += [valid[0].eq(self.in_valid), last[0].eq(self.in_last)]
            for n in (1, 2):
                m.d.sync += [valid[n].eq(valid[n - 1]), last[n].eq(last[n - 1])]
        for j in range(self.lanes):
            total = Signal(signed(ACC_BITS), name=f"sum_{j}")
            mult = Signal(unsigned(MULT_BITS), name=f"mult_{j}")
            shift1 = Signal(unsigned(SHIFT_BITS), name=f"shift_s1_{j}")
            prod = Signal(signed(ACC_BITS + MULT_BITS), name=f"prod_{j}")
            raw2 = Signal(signed(ACC_BITS), name=f"raw_s2_{j}")
            shift2 = Signal(unsigned(SHIFT_BITS), name=f"shift_s2_{j}")
            rounded = Signal(signed(ACC_BITS + MULT_BITS + 1), name=f"rounded_{j}")
            scaled = Signal(signed(ACC_BITS + MULT_BITS + 1), name=f"scaled_{j}")
            clamped = Signal(signed(8), name=f"clamped_{j}")
            rnd = (Const(1, 1) << shift2)[1:]   # (1 << shift) >> 1
            m.d.comb += [
                rounded.eq(prod + rnd),
                scaled.eq(rounded >> shift2),
                clamped.eq(Mux(scaled > 127, 127, Mux(scaled < -128, -128, scaled))),
            ]
            with m.If(adv):
                m.d.sync += [
                    total.eq(self.acc[j] + Mux(self.bias_en, self.bias[j], 0)),
                    mult.eq(Mux(self.per_channel, self.mult[j], self.tensor_mult)),
                    shift1.eq(Mux(self.per_channel, self.shift[j], self.tensor_shift)),
                    prod.eq(total * mult), raw2.eq(total), shift2.eq(shift1),
                    self.out_data[j].eq(Mux(self.raw, raw2,
                                            Mux(self.relu & clamped[7], 0, clamped))),
                ]
        return m
