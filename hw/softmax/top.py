"""The integer softmax unit with the accelerator's bus interfaces: :class:`SoftmaxBusUnit`.

Host interface (what a Zynq PS sees; the register map :mod:`.regmap`):

* AXI4-Lite registers (``s_axil``): CTRL (start), STATUS (busy, done), IRQ_EN, the job's
  LENGTH (keys a row, L) and ROWS, the constants LN2, B, C, C_HI, SHIFT
  (:func:`~zoforge.hw.nonlinear.softmax.softmax_registers`), the CYCLES counter, INFO,
  MAX_LEN, WIDTHS; the job's key mask (KEY_MASK, L bits: the attention mask of one
  sequence, the same for every row of the job). Parameters are written while idle and held
  while the job runs; an interrupt ``irq`` (``done & irq_en``).
* AXI4-Stream in (``s_axis``, ``32 lanes`` bits, ``tlast`` ignored): the job's ROWS rows of
  L raw int32 scores, row after row, a row in ``ceil(L / lanes)`` beats: lane ``l`` (bits
  ``32 l .. 32 l + 31``) of the row's beat ``j`` is key ``j lanes + l``; the last beat's
  lanes past L are ignored (any value). This is the GEMM engine's raw output of a
  ``scores = Q·K^T`` job (a row of int32 a beat, column j in lane j) where ``L <= C = lanes``
  (one column tile; its zero rows past L in the last row tile, where R does not divide L,
  are rows too: count them in ROWS or drop them); for ``L > C`` the engine's tiles (column
  tiles outer) give each row in pieces, and the host puts them in row order. Beats are taken only while a job runs
  (from the cycle after the start) and until its ROWS rows are in.
* AXI4-Stream out (``m_axis``, ``32 ceil(lanes / 4)`` bits): the int8 probabilities, the
  same beats as the input (a row in ``ceil(L / lanes)`` beats): byte ``l`` of beat ``j`` is
  ``p`` of key ``j lanes + l`` (in ``[0, 127]``, scale 1/127: the P·V job's P), 0 for masked
  keys, lanes past L and the bytes past ``lanes``; ``tlast`` on the job's last beat.
  Back-pressure (``tready`` low) is taken by the unit's credits and output buffer.

Per row the unit computes ``int_softmax`` (:func:`zoforge.golden.finetune.integer_ops.
int_softmax`, ``levels`` 127) of its L scores with the key mask as ``keep``: bit for bit,
a row with no kept key all zeros (:mod:`zoforge.hw.nonlinear.softmax`'s docstring states the
integer semantics and the widths). Key ``i`` is kept where bit ``i`` of the mask is set and
``i < L``; a LENGTH of 0 or past ``max_len`` is the host's error (the host refuses it; the
RTL then cuts rows at ``max_len`` keys, and a LENGTH of 0 gives rows of one beat, all 0).

Cycles (:mod:`.cycles`): CYCLES counts from the cycle after the start to the last output
beat; with the input always valid and the output always ready, ``softmax_cycles(ROWS, L,
lanes) + 1`` (the start's register, then one beat a cycle).

Verilog ports: ``clk``, ``rst``, ``irq`` and the bus members joined by ``__``
(``s_axil__awaddr``, ``s_axis__tdata``, ``m_axis__tready``, ...; :mod:`zoforge.hw.pe.bus`).

Blocks: the AXI4-Lite target (:class:`~zoforge.hw.pe.axil.AxiLiteTarget`), the register
file (:class:`~.registers.SoftmaxRegisters`), the streaming unit
(:class:`~zoforge.hw.nonlinear.softmax.SoftmaxUnit`) and, here, the row counters between
the streams and the unit (a beat's ``keep`` and ``last`` from the key mask and L; the job's
``tlast``).
"""
from __future__ import annotations

from amaranth import C, Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.hw.nonlinear.softmax import LEVELS, SoftmaxUnit
from zoforge.hw.pe.axil import AxiLiteTarget
from zoforge.hw.pe.bus import AxiLiteSignature, AxiStreamSignature

from .config import ROW_BITS, SoftmaxConfig
from .regmap import ADDR_BITS
from .registers import SoftmaxRegisters

__all__ = ["SoftmaxBusUnit", "P_BITS"]

#: Bits of an output lane: an int8 byte.
P_BITS = 8
assert LEVELS < 1 << P_BITS


class SoftmaxBusUnit(wiring.Component):
    """The bus softmax unit (module docstring), from a :class:`SoftmaxConfig` (or its fields
    as keywords)."""

    def __init__(self, config: SoftmaxConfig | None = None, **fields):
        config = self.softmax_config = config if config is not None else SoftmaxConfig(**fields)
        super().__init__({
            "s_axil": In(AxiLiteSignature(ADDR_BITS)),
            "s_axis": In(AxiStreamSignature(32 * config.lanes)),
            "m_axis": Out(AxiStreamSignature(32 * config.out_words)),
            "irq": Out(1),
        })

    @property
    def facts(self) -> dict:
        """Derived build facts for the design's summary."""
        c = self.softmax_config
        return {"lanes": c.lanes, "max_len": c.max_len, "min_scale": c.min_scale,
                "max_beats": c.max_beats, "in_bits": 32 * c.lanes,
                "out_bits": 32 * c.out_words, "levels": LEVELS, "key_mask_words": c.mask_words}

    def elaborate(self, platform):
        m = Module()
        c = self.softmax_config
        m.submodules.axil = axil = AxiLiteTarget(ADDR_BITS)
        m.submodules.regs = regs = SoftmaxRegisters(c)
        m.submodules.unit = unit = SoftmaxUnit(c.lanes, c.max_len, c.min_scale)
        wiring.connect(m, wiring.flipped(self.s_axil), axil.bus)
        wiring.connect(m, axil.regs, regs.port)
        wiring.connect(m, regs.constants, unit.config)
        m.d.comb += self.irq.eq(regs.irq)
        # the job's start as a register (not the bus decode) clears the row counters
        go = Signal(name="job_go")
        m.d.sync += go.eq(regs.start)
        self._input(m, regs, unit, go)
        self._output(m, regs, unit, go)
        return m

    def _input(self, m: Module, regs, unit, go) -> None:
        """``s_axis`` -> the unit's rows: each beat's keep (the key mask's lanes, keys < L)
        and last (L reached, or the row's ``max_beats``-th beat)."""
        c, lanes, s = self.softmax_config, self.softmax_config.lanes, self.s_axis
        taking = Signal(name="in_taking")          # the job's rows still to come in
        rows_in = Signal(ROW_BITS, name="in_rows")
        beat = Signal(max(1, (c.max_beats - 1).bit_length()), name="in_beat")
        left = Signal(len(regs.length), name="in_left")      # keys of the row not yet in
        chunks = [Cat(*(regs.mask[j * lanes + l] if j * lanes + l < c.max_len else C(0, 1)
                        for l in range(lanes))) for j in range(c.max_beats)]
        # a shift, not an Array (Icarus: zoforge.hw.nonlinear.softmax._pick)
        chunk = Cat(*chunks).word_select(beat, lanes)
        last = (left <= lanes) | (beat == c.max_beats - 1)
        i = unit.i
        m.d.comb += [i.valid.eq(s.tvalid & taking), s.tready.eq(i.ready & taking),
                     i.payload.keep.eq(Cat(*(chunk[l] & (left > l) for l in range(lanes)))),
                     i.payload.last.eq(last)]
        m.d.comb += [i.payload.q[l].eq(s.tdata[32 * l:32 * l + 32]) for l in range(lanes)]
        with m.If(go):
            m.d.sync += [taking.eq(regs.rows != 0), rows_in.eq(0), beat.eq(0),
                         left.eq(regs.length)]
        with m.Elif(i.valid & i.ready):
            with m.If(last):
                m.d.sync += [beat.eq(0), left.eq(regs.length), rows_in.eq(rows_in + 1)]
                with m.If(rows_in == regs.rows - 1):
                    m.d.sync += taking.eq(0)
            with m.Else():
                m.d.sync += [beat.eq(beat + 1), left.eq(left - lanes)]

    def _output(self, m: Module, regs, unit, go) -> None:
        """The unit's rows -> ``m_axis``: a byte a lane, ``tlast`` on the job's last beat;
        the job ends there (or at once, for ROWS 0)."""
        lanes, o, out = self.softmax_config.lanes, unit.o, self.m_axis
        rows_out = Signal(ROW_BITS, name="out_rows")
        final = o.payload.last & (rows_out == regs.rows - 1)
        width = len(o.payload.p[0])
        m.d.comb += [out.tvalid.eq(o.valid), o.ready.eq(out.tready), out.tlast.eq(final),
                     out.tdata.eq(Cat(*(Cat(o.payload.p[l], C(0, P_BITS - width))
                                        for l in range(lanes))))]
        sent = o.valid & o.ready
        with m.If(go):
            m.d.sync += rows_out.eq(0)
        with m.Elif(sent & o.payload.last):
            m.d.sync += rows_out.eq(rows_out + 1)
        m.d.comb += regs.job_end.eq((sent & final) | (go & (regs.rows == 0)))
