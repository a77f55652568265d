"""Bias add and INT8 requantization of one result row (``lanes`` lanes), on streams.

Per lane, with the semantics of :func:`zoforge.golden.engine.requantize`::

    sum  = acc + bias                              # 32-bit, wraps modulo 2^32
    prod = sum * mult                              # exact, 48-bit signed
    y    = (prod + ((1 << shift) >> 1)) >> shift   # round half up, arithmetic shift
    y    = clamp(y, -128, 127); y = max(y, 0) if relu
    data = sum if raw else sign_extend_32(y)

A requantizer made ``wide`` has an input ``sat16``: while it is high, ``y`` saturates to
int16, ``[-2^15, 2^15 - 1]``, instead (the engine's GELU job, :func:`~zoforge.golden.engine.
requantize` with ``bits=16``) and ReLU is off.

``bias`` is used when ``bias_en``; ``mult``/``shift`` come from the payload (``per_channel``)
or from ``tensor_mult``/``tensor_shift`` (the members of ``mode``,
:class:`~.signatures.ModeSignature`). Shifts above 47 (outside the golden model's
range) give 0. The configuration inputs must not change while payloads are in flight.

Pipeline (:data:`LATENCY` stages, one payload per cycle; raw mode uses mult 1, shift 0)::

    1  sum = acc + bias; mult, shift                  (the lane's parameters picked)
    2  sum[0:16], sum[16:32], mult                    two 16 x 16-bit products, one DSP each
    3  sum[0:16] * mult, sum[16:32] * mult            (:class:`~.multiply.PipelinedMultiplier`:
    4  (the same, in the fabric)                      stages 2 to 4 are its registers)
    5  prod = sum * mult                              their sum (48 bits)
    6  f = (prod << (7 - shift % 8))[6:]              the fine shift (0..7)
    7  t = f >> (shift & ~7)                          = (2 * prod) >> shift
    8  t in [-256, 255]? (t's upper bits all equal), t's sign and low bits (wide: also
       t in [-2^16, 2^16 - 1]?)
    9  y = (t + 1) >> 1                               = (prod + 2^(shift-1)) >> shift
       (prod for shift 0), saturated, ReLU; data

Each stage is at most one adder or one shift, so that it closes timing on a fabric without
fast carry chains (ECP5: the multipliers' own delay fills a whole stage).

The stages never stall: no enable fans out to every lane's registers (on the ECP5 that
enable was the routed critical path of the ZO layer, docs/accelerator.md). Back-pressure is
taken by credits and an output buffer of :data:`BUFFER_ROWS` rows (``LATENCY + 2``),
:mod:`.credits`: with ``o.ready`` high every row leaves ``LATENCY`` cycles after it came;
``i.ready`` is a register, and no combinational path runs from ``o.ready`` to ``i.ready``.
"""
from amaranth import C, Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.engine_widths import ACC_BITS, MULT_BITS, SHIFT_BITS

from .credits import add_credits, buffer_depth, output_buffer
from .multiply import PipelinedMultiplier
from .signatures import ModeSignature

__all__ = ["RequantStream", "LATENCY", "BUFFER_ROWS", "input_layout", "output_layout"]

#: Register stages: a payload taken at a clock edge is on ``o`` after LATENCY edges, so
#: LATENCY cycles pass between its input and its earliest output transfer.
LATENCY = 9
#: Rows the output buffer holds, and so the most rows in flight (stages and buffer): the
#: stages' rows plus two, so that a row can be taken every cycle while ``o.ready`` is high.
BUFFER_ROWS = buffer_depth(LATENCY)
_HALF = ACC_BITS // 2
_PROD_BITS = ACC_BITS + MULT_BITS       # prod = sum * mult, signed
_T_BITS = _PROD_BITS + 1               # t = (2 * prod) >> shift
_WINDOW = 9                            # t is in [-256, 255] iff t[8:] is all 0s or all 1s
_WIDE_WINDOW = 17                      # the same for int16: t[16:]


def input_layout(lanes: int) -> data.StructLayout:
    """The payload of :attr:`RequantStream.i`: one result row and its parameters."""
    return data.StructLayout({
        "acc": data.ArrayLayout(signed(ACC_BITS), lanes),
        "bias": data.ArrayLayout(signed(ACC_BITS), lanes),
        "mult": data.ArrayLayout(unsigned(MULT_BITS), lanes),
        "shift": data.ArrayLayout(unsigned(SHIFT_BITS), lanes),
        "last": 1,
    })


def output_layout(lanes: int) -> data.StructLayout:
    """The payload of :attr:`RequantStream.o`: int32 (raw) or sign-extended int8 lanes."""
    return data.StructLayout({"data": data.ArrayLayout(signed(ACC_BITS), lanes), "last": 1})


class RequantStream(wiring.Component):
    """Requantizes a stream of result rows; ``last`` travels with its row."""

    def __init__(self, lanes: int, wide: bool = False):
        self.lanes, self.wide = lanes, wide
        super().__init__({
            "i": In(stream.Signature(input_layout(lanes))),
            "o": Out(stream.Signature(output_layout(lanes))),
            "mode": In(ModeSignature()),
            **({"sat16": In(1)} if wide else {}),
        })

    def elaborate(self, platform):
        m = Module()
        taken = add_credits(m, self.i, self.o, BUFFER_ROWS)
        self._in_valid = taken
        self._in = self.i.payload
        # stages 2 to 4 of each lane's two products: multipliers with their own registers
        # (DSP blocks), never stalled
        products = []
        for j in range(self.lanes):
            low = PipelinedMultiplier(unsigned(_HALF), unsigned(MULT_BITS))
            high = PipelinedMultiplier(signed(_HALF), unsigned(MULT_BITS))
            m.submodules[f"low_{j}"], m.submodules[f"high_{j}"] = low, high
            products.append((low, high))
        self._row = row = Signal(output_layout(self.lanes), name="row")
        self._row_valid = row_valid = Signal(name="row_valid")
        m.submodules.pipeline = self._pipeline(products)
        # the output buffer, bypassed while empty; a row is kept in it when it cannot leave
        # now or rows wait before it
        m.submodules.buffer = output_buffer(self.o, row, row_valid, BUFFER_ROWS)
        return m

    def _pipeline(self, products) -> Module:
        """The stages; the last stage's row is ``_row`` (valid: ``_row_valid``)."""
        m = Module()
        p = self._in
        # valid and last through the stages; the last stage's are the row's
        valid = [Signal(name=f"valid_s{n}") for n in range(1, LATENCY)] + [self._row_valid]
        last = [Signal(name=f"last_s{n}") for n in range(1, LATENCY)] + [self._row.last]
        m.d.sync += [valid[0].eq(self._in_valid), last[0].eq(p.last)]
        m.d.sync += [dst.eq(src) for dst, src in zip(valid[1:] + last[1:],
                                                     valid[:-1] + last[:-1])]
        for j, (low, high) in enumerate(products):
            self._lane(m, j, low, high)
        return m

    def _lane(self, m: Module, j: int, low, high) -> None:
        """The registers of lane ``j`` around its multipliers ``low`` and ``high``."""
        p, mode = self._in, self.mode

        def reg(shape, stage, name):
            return Signal(shape, name=f"{name}_s{stage}_{j}")

        # 1: bias add; the lane's multiplier and shift
        mult = Mux(mode.raw, 1, Mux(mode.per_channel, p.mult[j], mode.tensor_mult))
        shift = Mux(mode.raw, 0, Mux(mode.per_channel, p.shift[j], mode.tensor_shift))
        total = reg(signed(ACC_BITS), 1, "sum")
        mult1 = reg(MULT_BITS, 1, "mult")
        shifts = [reg(SHIFT_BITS, stage, "shift") for stage in range(1, 7)]
        m.d.sync += [total.eq(p.acc[j] + Mux(mode.bias_en, p.bias[j], 0)), mult1.eq(mult),
                     shifts[0].eq(shift)]
        m.d.sync += [dst.eq(src) for dst, src in zip(shifts[1:], shifts[:-1])]
        # 2 to 4: partial products, 16 x 16 bits, one DSP each with its own registers (stage
        # 2: its operand registers, 3: the product, 4: the product in the fabric), fed from
        # registers
        m.d.comb += [low.a.eq(total[:_HALF]), low.b.eq(mult1),
                     high.a.eq(total[_HALF:].as_signed()), high.b.eq(mult1)]
        # 5: prod = sum * mult (|prod| < 2^47)
        prod = reg(signed(_PROD_BITS), 5, "prod")
        m.d.sync += prod.eq(Cat(low.p[:_HALF], high.p + low.p[_HALF:]))
        # 6: the fine shift: f = (prod << (7 - shift % 8))[6:]
        fine = reg(signed(_T_BITS), 6, "fine")
        m.d.sync += fine.eq((prod << ~shifts[4][:3])[6:6 + _T_BITS].as_signed())
        # 7: the coarse shift: t = f >> (shift & ~7) = (2 * prod) >> shift
        t = reg(signed(_T_BITS), 7, "t")
        m.d.sync += t.eq(fine >> Cat(C(0, 3), shifts[5][3:]))
        # 8: y = (t + 1) >> 1 is in int8 iff t[8:] is all 0s (and t != 255) or all 1s, else
        # it saturates by the sign: the window's tests registered with t's low bits
        inside, sign = reg(1, 8, "inside"), reg(1, 8, "sign")
        low = reg(ACC_BITS + 1, 8, "low")                       # t[0:33]
        zeros, ones = t[_WINDOW - 1:] == 0, ~t[_WINDOW - 1:] == 0
        m.d.sync += [inside.eq(ones | (zeros & (t[:8] != 0xFF))), sign.eq(t[-1]),
                     low.eq(t[:ACC_BITS + 1])]
        # 9: y, saturated; with ReLU every negative product gives 0 (y <= 0 then). Raw
        # output is t[1:33].
        y = Signal(signed(8), name=f"y_{j}")
        m.d.comb += y.eq(Mux(mode.relu & sign, 0,
                             Mux(inside, low[1:_WINDOW] + low[0], Mux(sign, -128, 127))))
        if not self.wide:
            m.d.sync += self._row.data[j].eq(Mux(mode.raw, low[1:ACC_BITS + 1], y))
            return
        # wide: the int16 window's test at stage 8 too, its result at 9
        wide_inside = reg(1, 8, "wide_inside")
        zeros, ones = t[_WIDE_WINDOW - 1:] == 0, ~t[_WIDE_WINDOW - 1:] == 0
        m.d.sync += wide_inside.eq(ones | (zeros & (t[:_WIDE_WINDOW - 1] != 0xFFFF)))
        y16 = Signal(signed(16), name=f"y16_{j}")
        m.d.comb += y16.eq(Mux(wide_inside, low[1:_WIDE_WINDOW] + low[0],
                               Mux(sign, -(1 << 15), (1 << 15) - 1)))
        m.d.sync += self._row.data[j].eq(Mux(mode.raw, low[1:ACC_BITS + 1],
                                             Mux(self.sat16, y16, y)))
