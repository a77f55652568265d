"""The engine's output path in a ``gelu`` build (:attr:`~.config.EngineConfig.gelu`): the
requantizer, and behind it the GELU job's i-GELU and second requantizer.

Per output column ``n`` (a lane), with the semantics of
:func:`zoforge.golden.engine_gelu.engine_gemm_gelu`::

    q   = requantize(acc + bias, into, bits=16)    the requantizer (``wide``: saturating
                                                   to int16 while ``gelu``; MULT/SHIFT or
                                                   COL_MULT/COL_SHIFT, as for int8 jobs)
    y   = int_gelu(q, gelu)                        C lanes of GeluUnit (GELU_* registers)
    out = requantize(y, out)                       a second requantizer: OUT_MULT/OUT_SHIFT
                                                   per column, no bias, no ReLU

With ``gelu`` low (or ``raw`` high) the path is the requantizer alone, as in a build
without ``gelu``: the same values and cycles. ``gelu`` and the configuration inputs must not
change while rows are in flight (the register file changes them only while idle); the path
follows ``gelu`` and ``raw`` a cycle later (a register).

The rows (``i``, :func:`row_layout`) carry the second requantizer's per-column multiplier
and shift (``out_mult``, ``out_shift``: side reads of the output stage, like the first
one's); they wait in a FIFO (:data:`PARAM_ROWS` rows, each row's pushed as it enters the
requantizer, popped as its GELU values enter the second one) instead of travelling through
the stages: a LUT RAM with two pointers and no level (:class:`_ParamFifo`; a row's entry is
written more than 20 cycles before the row reaches the slice, so it is never read empty). Between the GeluUnit and the second requantizer a register slice (two rows,
:class:`_Slice`) puts registers in front of the FIFO's read. Back-pressure: each stage takes
it by its credits (:mod:`zoforge.hw.pe.credits`), the slice by its ready (a register); the
FIFO holds every row in flight between the two requantizers' inputs (at most the first's
and the GeluUnit's buffers and the slice), so it never fills.
Latency of a GELU job's row: :data:`GELU_EXTRA_LATENCY` cycles more than an int8 job's.
"""
from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from zoforge.golden.engine_widths import MULT_BITS, SHIFT_BITS
from zoforge.golden.finetune.integer_params import INPUT_BITS
from zoforge.hw.nonlinear import gelu
from zoforge.hw.pe import requant
from zoforge.hw.pe.requant import RequantStream, input_layout, output_layout
from zoforge.hw.pe.signatures import ModeSignature

from .regmap import GELU_TABLES

__all__ = ["GeluPath", "row_layout", "PARAM_ROWS", "GELU_EXTRA_LATENCY"]

#: Rows the register slice between the GeluUnit and the second requantizer holds.
SLICE_ROWS = 2
#: The most rows between the two requantizers' inputs (the first's and the GeluUnit's
#: buffers and the slice): the parameter FIFO holds as many (its depth: the next power of 2).
PARAM_ROWS = requant.BUFFER_ROWS + gelu.BUFFER_BEATS + SLICE_ROWS
#: Cycles a GELU job's row takes more than an int8 job's: the GeluUnit, the slice and the
#: second requantizer (each passes a row on after its latency when the output is ready).
GELU_EXTRA_LATENCY = gelu.LATENCY + 1 + requant.LATENCY


def row_layout(lanes: int) -> data.StructLayout:
    """The rows of a gelu build's output stage: the requantizer's :func:`~zoforge.hw.pe.
    requant.input_layout` and the fields of :data:`~.regmap.GELU_TABLES`."""
    return data.StructLayout({
        **dict(input_layout(lanes).members),
        **{table.field: data.ArrayLayout(table.shape, lanes) for table in GELU_TABLES.values()},
    })


class GeluPath(wiring.Component):
    """Rows (``i``) -> results (``o``) of a gelu build (module docstring); ``gelu``: the
    CTRL mode bit, ``config``: the i-GELU's constants."""

    def __init__(self, lanes: int):
        self.lanes = lanes
        super().__init__({
            "i": In(stream.Signature(row_layout(lanes))),
            "o": Out(stream.Signature(output_layout(lanes))),
            "mode": In(ModeSignature()),
            "gelu": In(1),
            "config": In(gelu.config_signature()),
        })

    def elaborate(self, platform):
        m = Module()
        lanes, mode = self.lanes, self.mode
        m.submodules.into = into = RequantStream(lanes, wide=True)
        m.submodules.unit = unit = gelu.GeluUnit(lanes)
        m.submodules.out = out = RequantStream(lanes)
        m.submodules.params = params = _ParamFifo(lanes * (MULT_BITS + SHIFT_BITS))
        # a GELU job: gelu, not raw; a register (the mode bits change only while idle, rows
        # come many cycles after a job's start), so no logic between them and the muxes
        active = Signal()
        m.d.sync += active.eq(self.gelu & ~mode.raw)

        # rows -> the requantizer (its parameters, mode); the GELU job's OUT_* to the FIFO
        i = self.i
        m.d.comb += [into.i.valid.eq(i.valid), i.ready.eq(into.i.ready),
                     into.sat16.eq(active)]
        m.d.comb += [into.i.payload[name].eq(i.payload[name])
                     for name in input_layout(lanes).members]
        m.d.comb += [getattr(into.mode, name).eq(getattr(mode, name))
                     for name in ModeSignature().members]
        m.d.comb += [params.w_en.eq(active & i.valid & i.ready),
                     params.w_data.eq(Cat(i.payload.out_mult, i.payload.out_shift))]
        wiring.connect(m, wiring.flipped(self.config), unit.config)

        # the requantizer -> the i-GELU (a GELU job) or the output
        m.d.comb += [unit.i.valid.eq(into.o.valid & active),
                     unit.i.payload.last.eq(into.o.payload.last),
                     into.o.ready.eq(Mux(active, unit.i.ready, self.o.ready))]
        m.d.comb += [unit.i.payload.q[j].eq(into.o.payload.data[j][:INPUT_BITS])
                     for j in range(lanes)]

        # the i-GELU -> a register slice -> the second requantizer (per column, from the
        # FIFO): the FIFO's read follows registers only (the slice's valid, the
        # requantizer's credits), not the GeluUnit's output buffer
        m.submodules.slice = skid = _Slice(gelu.output_layout(lanes))
        wiring.connect(m, unit.o, skid.i)
        mult = params.r_data[:lanes * MULT_BITS]
        shift = params.r_data[lanes * MULT_BITS:]
        m.d.comb += [out.i.valid.eq(skid.o.valid),
                     skid.o.ready.eq(out.i.ready),
                     params.r_en.eq(skid.o.valid & out.i.ready),
                     out.i.payload.last.eq(skid.o.payload.last),
                     out.mode.per_channel.eq(1)]
        for j in range(lanes):
            m.d.comb += [out.i.payload.acc[j].eq(skid.o.payload.y[j]),
                         out.i.payload.mult[j].eq(mult[j * MULT_BITS:(j + 1) * MULT_BITS]),
                         out.i.payload.shift[j].eq(
                             shift[j * SHIFT_BITS:(j + 1) * SHIFT_BITS])]

        # the output: the second requantizer's rows in a GELU job, else the first's
        o = self.o
        # (valid: an OR, the second requantizer's rows only come in a GELU job; one LUT
        # with the requantizers' buffers' registers in front of the packer)
        m.d.comb += [o.valid.eq(out.o.valid | (into.o.valid & ~active)),
                     o.payload.eq(Mux(active, out.o.payload, into.o.payload)),
                     out.o.ready.eq(o.ready & active)]
        return m


class _Slice(wiring.Component):
    """A two-row register slice (a skid buffer): ``o.valid`` and ``i.ready`` are registers,
    a row passes in one cycle, one a cycle while ``o.ready`` is high."""

    def __init__(self, layout):
        self.layout = layout
        super().__init__({"i": In(stream.Signature(layout)),
                          "o": Out(stream.Signature(layout))})

    def elaborate(self, platform):
        m = Module()
        i, o = self.i, self.o
        main, spare = Signal(self.layout, name="main"), Signal(self.layout, name="spare")
        main_valid, spare_valid = Signal(), Signal()
        m.d.comb += [o.valid.eq(main_valid), o.payload.eq(main), i.ready.eq(~spare_valid)]
        take_in, take_out = i.valid & ~spare_valid, main_valid & o.ready
        with m.If(take_out):
            with m.If(spare_valid):
                m.d.sync += [main.eq(spare), spare_valid.eq(0)]
            with m.Elif(take_in):
                m.d.sync += main.eq(i.payload)
            with m.Else():
                m.d.sync += main_valid.eq(0)
        with m.Elif(take_in):
            with m.If(main_valid):
                m.d.sync += [spare.eq(i.payload), spare_valid.eq(1)]
            with m.Else():
                m.d.sync += [main.eq(i.payload), main_valid.eq(1)]
        return m


class _ParamFifo(wiring.Component):
    """The second requantizer's parameters of the rows in flight: a memory of
    ``2^ceil(log2 PARAM_ROWS)`` words, written at ``w_en`` (a row enters the first
    requantizer), read (``r_data``, combinational: LUT RAM) at the read pointer, which
    ``r_en`` moves on. No level: it never holds more than PARAM_ROWS entries (the credits in
    front of it) and is never read empty (an entry is written more than 20 cycles before
    its row reaches the slice), so ``r_en`` reaches only the read pointer."""

    def __init__(self, width: int):
        self.width = width
        super().__init__({"w_en": In(1), "w_data": In(width), "r_en": In(1),
                          "r_data": Out(width)})

    def elaborate(self, platform):
        m = Module()
        depth = 1 << (PARAM_ROWS - 1).bit_length()
        m.submodules.storage = storage = Memory(shape=self.width, depth=depth, init=[])
        write, read = storage.write_port(), storage.read_port(domain="comb")
        produce, consume = Signal(range(depth)), Signal(range(depth))   # wrap at depth
        m.d.comb += [write.addr.eq(produce), write.data.eq(self.w_data),
                     write.en.eq(self.w_en), read.addr.eq(consume),
                     self.r_data.eq(read.data)]
        with m.If(self.w_en):
            m.d.sync += produce.eq(produce + 1)
        with m.If(self.r_en):
            m.d.sync += consume.eq(consume + 1)
        return m
