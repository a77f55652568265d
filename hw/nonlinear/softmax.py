"""The integer softmax on a stream: one row a job, ``lanes`` values a beat, bit for bit
:func:`zoforge.golden.finetune.integer_ops.int_softmax` (I-BERT's integer softmax; its module
docstring states the integer semantics this unit keeps).

**A row.** Its values arrive in beats of ``lanes``: lane ``l`` of beat ``j`` is the row's
value ``j lanes + l``, with its ``keep`` bit (False: the golden's masked entry, output 0);
the beat with ``last`` ends the row (so does the row's :attr:`SoftmaxUnit.max_beats`-th
beat: a row has at most ``max_beats = ceil(max_len / lanes)`` beats). A row of ``L`` values
takes ``ceil(L / lanes)`` beats, the last one's lanes past ``L`` sent with ``keep`` 0 (the
golden's masked entries: they change nothing and give 0). The output row has the same beats
and lanes: lane ``l`` of beat ``j`` is ``p`` of value ``j lanes + l``, ``last`` on the row's
last beat.

**Integer semantics**, per row, for the inputs ``q`` (``q_bits``-bit signed; by default
int32, the GEMM engine's raw scores S, ``|S| <= 127^2 d``; int16 scores fit too) and the
constants of :class:`~zoforge.golden.finetune.integer_ops.SoftmaxParams` (``ln2`` = the
golden's ``L``, ``b``, ``c``, ``shift`` = its ``k``)::

    top  = max of the kept q                       (q_bits)
    n    = top - q if kept else 0                  (= -d >= 0; q_bits + 1 bits)
    n    = min(n, 15 ln2)                          (the golden's clamp d >= -EXP_SHIFTS L)
    z, rem = n // ln2, n - z ln2                   (4 restoring steps: n < 16 ln2, z <= 15;
                                                    rem in [0, ln2), the golden's r = -rem)
    poly = c - rem (b - rem)     = (r + b) r + c   (b > ln2 > rem; 0 < poly <= c)
    e    = poly >> (shift + z) if kept else 0      (< 2^EXP_BITS: floor, as the golden)
    sum  = sum of e over the row                   (exact; 0 or >= 2^14: e(top) = c >> shift)
    R    = floor(levels 2^30 / sum) if sum else 0  (the row's one division, restoring;
                                                    R <= levels 2^16)
    p    = (e R + 2^29) >> 30                      (round half up; in [0, levels])

``rem (b - rem)`` and ``c - rem (b - rem)`` are the golden's ``(r + b) r + c`` with
``r = -rem`` (an identity of integers), so every ``e``, the sum, ``R`` and ``p`` are the
golden's exactly; a row with no kept value has every ``e`` 0, ``R`` 0 and ``p`` 0, as the
golden's. The golden's bounds give every width (:class:`SoftmaxWidths`, from the finest
scale the unit is made for, ``min_scale``; each constant is largest there): ``n <= 15 ln2``,
``rem < ln2``, ``b - rem <= b``, ``rem (b - rem) < c`` (so ``poly > 0``), ``e < 2^15``, and
``e(top) = c >> shift >= 2^14`` for the constants ``SoftmaxParams.of`` makes, so a row with
a kept value has ``2^14 <= sum < max_beats lanes 2^15`` and ``R`` (the quotient) has
``bits(levels) + 16`` bits; ``e R < 2^(31 + bits(levels))``. :func:`softmax_registers`
refuses, in one line, constants the unit cannot hold (a scale finer than ``min_scale``) or
that break those bounds. At ``MIN_SCALE`` (the default unit): ``ln2`` 24 bits, ``b`` 26,
``c`` 50, ``shift`` 6, ``n`` 28 (``rem (b - rem)`` in two products, ``b - rem`` split at
17 bits, as the GELU splits ``c``); a unit made for ``min_scale = 2^-15`` (MiniLM's scores
are 1.5e-4 to 1.5e-3) has ``ln2`` 15 and ``b`` 17 bits, and its ``rem (b - rem)`` is one
product that fits an 18 x 18 multiplier block.

**Buffering.** Both buffers (``lib.memory``) hold :data:`ROWS` rows, row ``k`` in slot
``k % ROWS`` of each: the row buffer ``ROWS max_beats`` words of ``lanes`` x (q, keep), the
e buffer ``ROWS max_beats`` words of ``lanes`` x 15 bits. Four processes work on the rows in
order, each waiting for the slot it needs::

    in     the row's beats into its row-buffer slot, one a cycle (once the exp pass has read
           the slot's previous row); the max of the kept values found while the row streams
           in, each compare in a stage of its own and its select in the next: a lane's even
           and odd beats into two registers (so a register's next beat comes after its
           select), then a tree over the 2 lanes registers, compare then select a level
           (:func:`reduce_cycles` after the row's last beat)
    exp    the row read again, one beat a cycle (once its max is in and the out pass has
           read the e-buffer slot's previous row), through the i-exp stages; each e written
           to the e buffer and summed (the beat's lanes, then the row)
    divide R = floor(levels 2^30 / sum), DIV_STEP = 2 quotient bits a cycle (the
           partial remainder times 4 compared with sum, 2 sum and 3 sum side by side,
           registers made at the row's load): :func:`div_cycles` a row, 13 at levels 127
    out    the e buffer read, one beat a cycle: p = (e R + 2^29) >> 30 (back-pressure taken
           by credits and an output buffer of BUFFER_BEATS beats, :mod:`zoforge.hw.pe.credits`)

So four rows can be in the unit, in four different phases; with the input always valid and
the output always ready a long stream of rows of ``n`` beats goes at one row every
``max(n, div_cycles)`` cycles (:func:`softmax_cycles`, exact against the simulation; by the
model, for rows of 1 to 40 beats and 1 to 16 lanes, exactly that but for rows of 10 to 16
beats, where the four slots bound it: at most 20 cycles a row, 13 beats on 16 lanes).
MiniLM's rows of 128 keys: 16 cycles a row on 8 lanes, 13 (the divider's) on 16.

Stages of the exp pass (:data:`EXP_LATENCY` from the read to e; each one adder, one compare
and mux, or one multiplier register)::

    1      the read (q, keep; the row's top)
    2      q, keep in registers                          (a block RAM's read is slow out)
    3      n = top - q if kept else 0
    4      n = min(n, 15 ln2)
    5-8    z and rem, one quotient bit a stage (rem >= ln2 << j: subtract, for j = 3..0)
    9      t = b - rem, shift + z
    10-12  rem t[0:17], rem t[17:]                       two PipelinedMultipliers (one,
                                                         rem t, where b has at most 17 bits)
    13     rem t = rem (b - rem)                         their sum
    14     poly = c - rem (b - rem)
    15     poly >> ((shift + z) & ~7)                    (the coarse shift, a 22-bit window)
    16     e = that >> ((shift + z) & 7), 0 if not kept  (to the e buffer)
    17...  the beat's sum, a tree of registered adders   (sum_levels(lanes) stages)
    then   the row's sum                                 (the slot's sum on its last beat)

and of the out pass (:data:`OUT_LATENCY`): the read (e, R), its register, ``e R`` in a
PipelinedMultiplier (3; with ``narrow_multipliers``, by default on an ECP5 platform, two,
R's low 17 bits and the rest, each one MULT18X18D), the product's register (there: the two
products' sum), the rounding; then the output buffer (bypassed while empty).

The constants are the inputs of :attr:`SoftmaxUnit.config` (:func:`config_signature`),
written from :func:`softmax_registers` before a job's first beat and held while its rows are
in the unit (``15 ln2`` is a register of the unit made from ``ln2``, one cycle later).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace

from amaranth import C, Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from zoforge.errors import ConfigError, check_int_range
from zoforge.golden.finetune.integer_params import (EXP_BITS, EXP_SHIFTS, MAX_SCALE, MIN_SCALE,
                                                    P_LEVELS, SOFTMAX_FRAC, SoftmaxParams)

from ..pe import multiply
from ..pe.credits import add_credits, buffer_depth, output_buffer
from ..pe.multiply import ECP5_OPERAND_BITS, PipelinedMultiplier
from .stages import lane_stages

__all__ = ["SoftmaxUnit", "SoftmaxWidths", "EXP_LATENCY", "OUT_LATENCY", "DIV_STEP",
           "BUFFER_BEATS", "ROWS", "Q_BITS", "LEVELS", "config_signature", "input_layout",
           "output_layout", "softmax_registers", "softmax_cycles", "div_cycles",
           "reduce_cycles", "sum_levels"]

#: The default input width: the GEMM engine's raw int32 scores.
Q_BITS = 32
#: The default output levels: the P.V job's int8 P.
LEVELS = P_LEVELS
#: Quotient bits the divider finds a cycle.
DIV_STEP = 2
#: Rows each buffer holds (row k in slot k % ROWS of both): the row buffer's rows being
#: written, waiting for their max, read again; the e buffer's being written, waiting for
#: their sum and R, read out.
ROWS = 4
_SLOT_BITS = (ROWS - 1).bit_length()
_Z_BITS = 4                                 # z <= EXP_SHIFTS = 15
_T_LOW = ECP5_OPERAND_BITS - 1              # b - rem's low part: unsigned, an 18-bit operand
_FINE = 8                                   # the fine shift's range (amount & 7)
_WINDOW = EXP_BITS + _FINE - 1              # the coarse shift's bits
_E_MIN_BITS = EXP_BITS - 1                  # e(top) >= 2^14

#: Register stages from the exp pass's read issue to its e's register (then the beat's sum,
#: :func:`sum_levels`, then the row's): read, its register, n, clamp, 4 division steps,
#: b - rem, the products, their sum, c - product, two shifts.
EXP_LATENCY = 1 + 1 + 1 + 1 + _Z_BITS + 1 + multiply.LATENCY + 1 + 1 + 2
#: Register stages from the out pass's read issue to the output beat: the read, its
#: register, the product e R, its register (the sum of its two halves on an ECP5), the
#: rounding.
OUT_LATENCY = 1 + 1 + multiply.LATENCY + 1 + 1
#: Beats the output buffer holds, and so the most beats in flight in the out stages.
BUFFER_BEATS = buffer_depth(OUT_LATENCY)

assert EXP_SHIFTS < 1 << _Z_BITS


@dataclass(frozen=True)
class SoftmaxWidths:
    """The widths of a unit's constants and registers for the scales ``min_scale`` to
    ``MAX_SCALE`` (each constant is largest at the finest scale), ``levels`` output levels
    and rows of ``max_beats`` beats of ``lanes``."""

    min_scale: float
    ln2: int            # ln2 (the golden's L); rem < ln2
    b: int              # b; b - rem <= b
    c: int              # c; rem (b - rem) < c, poly <= c
    shift: int          # the golden's k
    n: int              # n = min(top - q, 15 ln2) <= 15 ln2
    amount: int         # shift + z
    sum: int            # the row's sum of e < max_beats lanes 2^15
    recip: int          # R <= levels 2^16
    p: int              # p <= levels

    @classmethod
    def of(cls, min_scale: float = MIN_SCALE, levels: int = LEVELS, max_beats: int = 16,
           lanes: int = 8) -> "SoftmaxWidths":
        finest = SoftmaxParams.of(min_scale)
        return cls(min_scale, finest.ln2.bit_length(), finest.b.bit_length(),
                   finest.c.bit_length(), max(1, finest.shift.bit_length()),
                   (EXP_SHIFTS * finest.ln2).bit_length(),
                   (finest.shift + EXP_SHIFTS).bit_length(),
                   (max_beats * lanes * ((1 << EXP_BITS) - 1)).bit_length(),
                   (levels << (SOFTMAX_FRAC - _E_MIN_BITS)).bit_length(),
                   levels.bit_length())


def div_cycles(levels: int = LEVELS) -> int:
    """Cycles the divider takes a row: ceil((bits(levels) + 16) / DIV_STEP) steps, one to
    load."""
    return 1 + -(-(levels << (SOFTMAX_FRAC - _E_MIN_BITS)).bit_length() // DIV_STEP)


def _greater(a, b):
    """``a > b`` of two signed values of one width, as the unsigned compare of the two with
    their sign bits flipped (one carry chain; Yosys maps a signed compare on the ECP5 as two
    with a LUT between)."""
    top = len(a) - 1
    return Cat(a[:top], ~a[top]) > Cat(b[:top], ~b[top])


def _pick(values: list, index):
    """``values[index]`` (signals of one shape) as a shift of their concatenation: a
    continuous assignment in the Verilog, not an ``always @*`` case, which Icarus leaves at
    X where none of its inputs changes after time 0 (the slots' flags of an idle unit)."""
    word = Cat(*values).word_select(index, len(values[0]))
    return word.as_signed() if values[0].shape().signed else word


def sum_levels(lanes: int) -> int:
    """Registered adder levels of a beat's sum of ``lanes`` e: ``max(1, ceil(log2
    lanes))``."""
    return max(1, (lanes - 1).bit_length())


def reduce_cycles(lanes: int) -> int:
    """Cycles from a row's last input beat to its max being ready: the beat's register, the
    compare, the select (the tree's leaves: each lane's even and odd beats' max), two a
    level of the tree over the ``2 lanes`` leaves, the row's register."""
    return 4 + 2 * (2 * lanes - 1).bit_length()


def config_signature(min_scale: float = MIN_SCALE) -> wiring.Signature:
    """The constants of a unit made for ``min_scale`` (the driver's view): ``ln2``, ``b``,
    ``c``, ``shift``, as :func:`softmax_registers` gives them."""
    w = SoftmaxWidths.of(min_scale)
    return wiring.Signature({"ln2": Out(unsigned(w.ln2)), "b": Out(unsigned(w.b)),
                             "c": Out(unsigned(w.c)), "shift": Out(unsigned(w.shift))})


def softmax_registers(p: SoftmaxParams, min_scale: float = MIN_SCALE) -> dict[str, int]:
    """The values of :attr:`SoftmaxUnit.config` for the constants ``p`` (made by
    ``SoftmaxParams.of``) on a unit made for ``min_scale``; raises a one-line ConfigError
    where one does not fit the unit (a scale finer than the unit's) or the constants break
    the bounds the unit's widths rely on (module docstring)."""
    w = SoftmaxWidths.of(min_scale)
    values = {"ln2": p.ln2, "b": p.b, "c": p.c, "shift": p.shift}
    for name, value in values.items():
        bits = getattr(w, name)
        if not (isinstance(value, int) and 0 <= value < 1 << bits):
            raise ConfigError(f"softmax constant {name}",
                              f"an integer with 0 <= value < 2^{bits} (a unit made for "
                              f"scales {min_scale:g} to {MAX_SCALE:g})", value)
    worst = (p.ln2 - 1) * (p.b - p.ln2 + 1)          # rem (b - rem) at rem = ln2 - 1 < b / 2
    if not (1 <= p.ln2 < p.b and 2 * (p.ln2 - 1) <= p.b and worst < p.c
            and (EXP_SHIFTS * p.ln2).bit_length() <= w.n
            and (p.shift + EXP_SHIFTS).bit_length() <= w.amount
            and 1 << _E_MIN_BITS <= p.c >> p.shift < 1 << EXP_BITS):
        raise ConfigError("softmax constants", "made by SoftmaxParams.of (2 (ln2 - 1) <= b, "
                          "rem (b - rem) < c, 2^14 <= c >> shift < 2^15, 15 ln2 and shift + 15 "
                          "within the unit's widths)",
                          f"ln2={p.ln2}, b={p.b}, c={p.c}, shift={p.shift}")
    return values


def input_layout(lanes: int, q_bits: int = Q_BITS) -> data.StructLayout:
    """The payload of :attr:`SoftmaxUnit.i`: ``lanes`` scores, their ``keep`` bits (bit
    ``l``: lane ``l``) and the row's ``last``."""
    return data.StructLayout({"q": data.ArrayLayout(signed(q_bits), lanes),
                              "keep": unsigned(lanes), "last": 1})


def output_layout(lanes: int, levels: int = LEVELS) -> data.StructLayout:
    """The payload of :attr:`SoftmaxUnit.o`: ``lanes`` values ``p`` in ``[0, levels]`` and
    the row's ``last``."""
    return data.StructLayout({"p": data.ArrayLayout(unsigned(levels.bit_length()), lanes),
                              "last": 1})


def softmax_cycles(rows: int, length: int, lanes: int, levels: int = LEVELS) -> int:
    """Cycles from the first input beat's transfer to the last output beat's, both counted,
    for ``rows`` rows of ``length`` values each (``lanes`` a beat, the last beat padded),
    the input always valid and the output always ready (exact; 0 for no row): the
    processes of the module docstring, row by row (row ``k`` waits for the slots row
    ``k - ROWS`` had in the row buffer and the e buffer). ``length`` at most the unit's
    ``max_len`` (a longer row is two rows)."""
    check_int_range("rows", rows, 0)
    check_int_range("length", length, 0)
    check_int_range("lanes", lanes, 1)
    beats = math.ceil(length / lanes)
    if rows == 0 or beats == 0:
        return 0
    divide = div_cycles(levels)
    done_div = -10 ** 9
    took, issued, put_out = [], [], []
    for k in range(rows):
        # in: one beat a cycle once the row buffer's slot is free (row k - ROWS read again)
        first = 0 if k == 0 else took[-1] + 1
        if k >= ROWS:
            first = max(first, issued[k - ROWS] + 1)
        took.append(first + beats - 1)
        # exp: once the max is ready, the e buffer's slot free (row k - ROWS read out)
        start = max(took[k] + reduce_cycles(lanes), issued[-1] + 1 if k else 0)
        if k >= ROWS:
            start = max(start, put_out[k - ROWS] + 1)
        issued.append(start + beats - 1)
        # divide: once the row's sum is in (its last e summed), the divider free
        load = max(issued[k] + EXP_LATENCY + sum_levels(lanes) + 1, done_div + 1)
        done_div = load + divide - 1
        # out: one beat a cycle once R is in
        out = max(done_div + 1, put_out[-1] + 1 if k else 0)
        put_out.append(out + beats - 1)
    return put_out[-1] + OUT_LATENCY + 1


class SoftmaxUnit(wiring.Component):
    """The integer softmax of a stream of rows (module docstring): ``lanes`` values a beat,
    rows of at most ``max_len`` values, inputs of ``q_bits`` bits, outputs in ``[0,
    levels]``, for input scales ``min_scale`` to ``MAX_SCALE`` (:class:`SoftmaxWidths`).
    ``narrow_multipliers``: ``e R`` in two products of 18-bit operands (an ECP5's
    MULT18X18D) instead of one; None: on an ECP5 platform only (the same cycles either
    way)."""

    def __init__(self, lanes: int, max_len: int = 128, min_scale: float = MIN_SCALE,
                 levels: int = LEVELS, q_bits: int = Q_BITS,
                 narrow_multipliers: bool | None = None):
        try:
            self.lanes = check_int_range("lanes", lanes, 1, 64)
            self.max_len = check_int_range("max_len", max_len, 1, 1 << 16)
            self.levels = check_int_range("levels", levels, 1, 255)
            self.q_bits = check_int_range("q_bits", q_bits, 2, 48)
            if not (isinstance(min_scale, (int, float))
                    and MIN_SCALE <= min_scale <= MAX_SCALE):
                raise ConfigError("min_scale", f"a number with {MIN_SCALE:g} <= value <= "
                                  f"{MAX_SCALE:g}", min_scale)
        except ConfigError:
            self._MustUse__silence = True           # refused: nothing to elaborate
            raise
        self.min_scale = min_scale
        self.narrow_multipliers = narrow_multipliers
        self.max_beats = -(-max_len // lanes)
        self.widths = SoftmaxWidths.of(min_scale, levels, self.max_beats, lanes)
        self.index_bits = max(1, (self.max_beats - 1).bit_length())
        super().__init__({
            "i": In(stream.Signature(input_layout(lanes, q_bits))),
            "o": Out(stream.Signature(output_layout(lanes, levels))),
            "config": In(config_signature(min_scale)),
        })

    # -- the processes -------------------------------------------------------------------

    def elaborate(self, platform):
        m = Module()
        lanes, w, cfg = self.lanes, self.widths, self.config
        depth = ROWS << self.index_bits
        qword = lanes * (self.q_bits + 1)
        m.submodules.rows = rows = Memory(shape=qword, depth=depth, init=[])
        m.submodules.exps = exps = Memory(shape=lanes * EXP_BITS, depth=depth, init=[])
        self._rows_w, self._rows_r = rows.write_port(), rows.read_port()
        self._exps_w, self._exps_r = exps.write_port(), exps.read_port()
        # row k in slot k % ROWS of both buffers. Row buffer slot h: ``loaded`` (the input
        # wrote it), ``reduced`` (its max is ready); e buffer slot h (``estate``): 0 free,
        # 1 the exp pass on it, 2 its sum in, 3 its R in.
        self.loaded = [Signal(name=f"loaded_{h}") for h in range(ROWS)]
        self.reduced = [Signal(name=f"reduced_{h}") for h in range(ROWS)]
        self.estate = [Signal(2, name=f"estate_{h}") for h in range(ROWS)]
        # each row's last beat index (its beats - 1)
        self.q_last = [Signal(self.index_bits, name=f"q_last_{h}") for h in range(ROWS)]
        self.e_last = [Signal(self.index_bits, name=f"e_last_{h}") for h in range(ROWS)]
        self.top = [Signal(signed(self.q_bits), name=f"top_{h}") for h in range(ROWS)]
        self.sums = [Signal(w.sum, name=f"sum_{h}") for h in range(ROWS)]
        self.recips = [Signal(w.recip, name=f"recip_{h}") for h in range(ROWS)]
        self._input(m)
        self._exp(m)
        self._divide(m)
        self._out(m, platform)
        return m

    def _input(self, m: Module) -> None:
        """The row into the row buffer; the max of its kept values: a lane's even and odd
        beats each into a register of their own (compare in one stage, select in the next),
        then over the lanes in a tree (compare, then select, a level)."""
        lanes, qb = self.lanes, self.q_bits
        i, ptr = self.i, Signal(_SLOT_BITS, name="in_slot")
        index = Signal(self.index_bits, name="in_index")
        free = Signal(name="in_free")
        m.d.comb += [free.eq(~_pick(self.loaded, ptr)), i.ready.eq(free)]
        taken = i.valid & free
        end = i.payload.last | (index == self.max_beats - 1)
        word = Cat(*(Cat(i.payload.q[l], i.payload.keep[l]) for l in range(lanes)))
        m.d.comb += [self._rows_w.addr.eq(Cat(index, ptr)), self._rows_w.data.eq(word),
                     self._rows_w.en.eq(taken)]
        for h in range(ROWS):
            with m.If(taken & end & (ptr == h)):
                m.d.sync += [self.loaded[h].eq(1), self.q_last[h].eq(index)]
        with m.If(taken):
            m.d.sync += [index.eq(Mux(end, 0, index + 1)), ptr.eq(ptr + end)]

        # A: the beat in registers; its parity, whether it is its parity's first in the row
        # (``fresh``: the register of its parity holds another row's), whether the row ends
        # with its first beat (``single``: the odd register holds another row's)
        a_valid, a_end = Signal(name="max_valid_a"), Signal(name="max_end_a")
        a_odd, a_fresh, a_single = (Signal(name=f"max_{n}_a") for n in ("odd", "fresh",
                                                                         "single"))
        a_slot = Signal(_SLOT_BITS, name="max_slot_a")
        m.d.sync += [a_valid.eq(taken), a_end.eq(end), a_odd.eq(index[0]),
                     a_fresh.eq(index < 2), a_single.eq(index == 0), a_slot.eq(ptr)]
        # B: the compares; C: the selects (the row's last beat: both registers, masked, to
        # the tree's leaves)
        b_valid, b_end = Signal(name="max_valid_b"), Signal(name="max_end_b")
        b_odd, b_fresh, b_single = (Signal(name=f"max_{n}_b") for n in ("odd", "fresh",
                                                                         "single"))
        b_slot = Signal(_SLOT_BITS, name="max_slot_b")
        m.d.sync += [b_valid.eq(a_valid), b_end.eq(a_end), b_odd.eq(a_odd),
                     b_fresh.eq(a_fresh), b_single.eq(a_single), b_slot.eq(a_slot)]
        leaves = []
        for lane in range(lanes):
            a_q = Signal(signed(qb), name=f"max_q_a_{lane}", reset_less=True)
            a_keep = Signal(name=f"max_keep_a_{lane}", reset_less=True)
            m.d.sync += [a_q.eq(i.payload.q[lane]), a_keep.eq(i.payload.keep[lane])]
            seen = [Signal(name=f"seen_{n}_{lane}") for n in ("even", "odd")]
            best = [Signal(signed(qb), name=f"best_{n}_{lane}", reset_less=True)
                    for n in ("even", "odd")]
            # both registers compared side by side, the beat's parity picking one after
            above = [a_keep & (a_fresh | ~seen[n] | _greater(a_q, best[n])) for n in range(2)]
            b_q = Signal(signed(qb), name=f"max_q_b_{lane}", reset_less=True)
            b_keep = Signal(name=f"max_keep_b_{lane}", reset_less=True)
            b_take = Signal(name=f"max_take_b_{lane}", reset_less=True)
            m.d.sync += [b_q.eq(a_q), b_keep.eq(a_keep),
                         b_take.eq(Mux(a_odd, above[1], above[0]))]
            # the beat's register after it (the same register the compare saw: the one
            # before of its parity was selected two beats before, at the latest)
            now_seen = b_keep | (Mux(b_odd, seen[1], seen[0]) & ~b_fresh)
            now_best = Mux(b_take, b_q, Mux(b_odd, best[1], best[0]))
            for parity in range(2):
                with m.If(b_valid & (b_odd == parity)):
                    m.d.sync += [seen[parity].eq(now_seen), best[parity].eq(now_best)]
            other_seen = Mux(b_odd, seen[0], seen[1] & ~b_single)
            other_best = Mux(b_odd, best[0], best[1])
            for name, (s_new, b_new) in (("this", (now_seen, now_best)),
                                         ("other", (other_seen, other_best))):
                s_leaf = Signal(name=f"max_seen_leaf_{name}_{lane}")
                b_leaf = Signal(signed(qb), name=f"max_leaf_{name}_{lane}", reset_less=True)
                m.d.sync += [s_leaf.eq(s_new), b_leaf.eq(b_new)]
                leaves.append((s_leaf, b_leaf))
        go, slot = Signal(name="max_go_l0"), Signal(_SLOT_BITS, name="max_slot_l0")
        m.d.sync += [go.eq(b_valid & b_end), slot.eq(b_slot)]
        level, depth, stages = leaves, 0, 3
        while len(level) > 1:
            depth += 1
            nxt = []
            for n in range(0, len(level) - 1, 2):
                (sa, ba), (sb, bb) = level[n], level[n + 1]
                name = f"l{depth}_{n // 2}"
                # compare, then select
                ca, cb = Signal(name=f"max_seen_a_{name}"), Signal(name=f"max_seen_b_{name}")
                va = Signal(signed(qb), name=f"max_a_{name}", reset_less=True)
                vb = Signal(signed(qb), name=f"max_b_{name}", reset_less=True)
                pick = Signal(name=f"max_pick_{name}", reset_less=True)
                m.d.sync += [ca.eq(sa), cb.eq(sb), va.eq(ba), vb.eq(bb),
                             pick.eq(sb & (~sa | _greater(bb, ba)))]
                s_out = Signal(name=f"max_seen_{name}")
                b_out = Signal(signed(qb), name=f"max_{name}", reset_less=True)
                m.d.sync += [s_out.eq(ca | cb), b_out.eq(Mux(pick, vb, va))]
                nxt.append((s_out, b_out))
            if len(level) % 2:
                s_mid, b_mid = Signal(name=f"max_seen_mid_l{depth}"), Signal(
                    signed(qb), name=f"max_mid_l{depth}", reset_less=True)
                s_out, b_out = Signal(name=f"max_seen_odd_l{depth}"), Signal(
                    signed(qb), name=f"max_odd_l{depth}", reset_less=True)
                m.d.sync += [s_mid.eq(level[-1][0]), b_mid.eq(level[-1][1]),
                             s_out.eq(s_mid), b_out.eq(b_mid)]
                nxt.append((s_out, b_out))
            level = nxt
            for half in range(2):
                g = Signal(name=f"max_go_l{depth}_{half}")
                h = Signal(_SLOT_BITS, name=f"max_slot_l{depth}_{half}")
                m.d.sync += [g.eq(go), h.eq(slot)]
                go, slot = g, h
            stages += 2
        assert reduce_cycles(lanes) == stages + 1
        for h in range(ROWS):
            with m.If(go & (slot == h)):
                # the row's top: any kept value; a row with none gives zeros (its e are 0)
                m.d.sync += [self.reduced[h].eq(1), self.top[h].eq(level[0][1])]

    def _exp(self, m: Module) -> None:
        """The row read again: e of each value into the e buffer, and the row's sum."""
        lanes, w, cfg = self.lanes, self.widths, self.config
        slot = Signal(_SLOT_BITS, name="exp_slot")
        index = Signal(self.index_bits, name="exp_index")
        ready = _pick(self.reduced, slot) & (_pick(self.estate, slot) == 0)
        final = _pick(self.q_last, slot)
        last = index == final
        issue = Signal(name="exp_issue")
        m.d.comb += [issue.eq(ready), self._rows_r.addr.eq(Cat(index, slot))]
        with m.If(issue):
            m.d.sync += [index.eq(Mux(last, 0, index + 1)), slot.eq(slot + last)]
        for h in range(ROWS):
            with m.If(issue & last & (slot == h)):
                m.d.sync += [self.loaded[h].eq(0), self.reduced[h].eq(0),
                             self.estate[h].eq(1), self.e_last[h].eq(final)]
        # the tags, stage by stage (stage 1: the read's data)
        clamp = Signal(w.n, name="clamp")              # 15 ln2, a register
        m.d.sync += clamp.eq((cfg.ln2 << 4) - cfg.ln2)
        stages = EXP_LATENCY
        valid = [Signal(name=f"exp_valid_s{n}") for n in range(1, stages + 1)]
        layout = data.StructLayout({"slot": _SLOT_BITS, "index": self.index_bits,
                                    "first": 1, "last": 1})
        tags = [Signal(layout, name=f"exp_tag_s{n}", reset_less=True)
                for n in range(1, stages + 1)]
        first = Signal(init=1, name="exp_first")
        with m.If(issue):
            m.d.sync += first.eq(last)
        m.d.sync += [valid[0].eq(issue),
                     tags[0].eq(Cat(slot, index, first, last))]
        m.d.sync += [d.eq(s) for d, s in zip(valid[1:] + tags[1:], valid[:-1] + tags[:-1])]
        top = Signal(signed(self.q_bits), name="exp_top_s1", reset_less=True)
        top2 = Signal(signed(self.q_bits), name="exp_top_s2", reset_less=True)
        m.d.sync += [top.eq(_pick(self.top, slot)), top2.eq(top)]
        es = []
        for lane in range(lanes):
            es.append(self._exp_lane(m, lane, top2, clamp))
        # the row's sum: the beat's lanes, then the row's
        tag, ok = tags[-1], valid[-1]
        m.d.comb += [self._exps_w.addr.eq(Cat(tag.index, tag.slot)),
                     self._exps_w.data.eq(Cat(*es)), self._exps_w.en.eq(ok)]
        # the beat's sum: a tree of registered adders, one level a stage
        level, depth = list(es), 0
        bvalid, btag = ok, tag
        while depth == 0 or len(level) > 1:
            depth += 1
            width = EXP_BITS + depth
            nxt = []
            for n in range(0, len(level), 2):
                part = Signal(width, name=f"beat_sum_l{depth}_{n // 2}", reset_less=True)
                m.d.sync += part.eq(sum(level[n:n + 2]))
                nxt.append(part)
            level = nxt
            v = Signal(name=f"sum_valid_l{depth}")
            t = Signal(tag.shape(), name=f"sum_tag_l{depth}")
            m.d.sync += [v.eq(bvalid), t.eq(btag)]
            bvalid, btag = v, t
        assert depth == sum_levels(lanes)
        beat_sum = level[0]
        total = Signal(w.sum, name="row_sum", reset_less=True)
        now = Mux(btag.first, 0, total) + beat_sum
        with m.If(bvalid):
            m.d.sync += total.eq(now)
        for h in range(ROWS):
            with m.If(bvalid & btag.last & (btag.slot == h)):
                m.d.sync += [self.sums[h].eq(now), self.estate[h].eq(2)]

    def _exp_lane(self, m: Module, lane: int, top, clamp):
        """The i-exp stages of lane ``lane``; its gated e (a register of the last stage)."""
        w, cfg, qb = self.widths, self.config, self.q_bits
        reg, delayed = lane_stages(m, lane)

        base = lane * (qb + 1)
        # 2: the read's data in registers of its own (a block RAM's read is slow to come out)
        q = reg(signed(qb), 2, "q")
        keep = reg(unsigned(1), 2, "keep")
        m.d.sync += [q.eq(self._rows_r.data[base:base + qb].as_signed()),
                     keep.eq(self._rows_r.data[base + qb])]
        # 3: n = top - q (kept), else 0
        n = reg(signed(qb + 1), 3, "n")
        m.d.sync += n.eq(Mux(keep, top - q, 0))
        # 4: the clamp n <= 15 ln2
        rem = reg(unsigned(w.n), 4, "clamped")
        m.d.sync += rem.eq(Mux(n > clamp, clamp, n))           # n >= 0
        # 5 to 8: z = n // ln2, rem = n - z ln2, one quotient bit a stage
        z = None
        for step, bit in enumerate(reversed(range(_Z_BITS))):
            stage = 5 + step
            part = cfg.ln2 << bit
            fits = rem >= part
            nxt = reg(unsigned(w.n), stage, f"rem{bit}")
            zn = reg(unsigned(_Z_BITS - bit), stage, f"z{bit}")
            m.d.sync += [nxt.eq(Mux(fits, rem - part, rem)),
                         zn.eq(fits if z is None else Cat(fits, z))]
            rem, z = nxt, zn
        # 9: b - rem (> 0), shift + z
        t = reg(unsigned(w.b), 9, "t")
        amount = reg(unsigned(w.amount), 9, "amount")
        small = reg(unsigned(w.ln2), 9, "rem")
        m.d.sync += [t.eq(cfg.b - rem), amount.eq(cfg.shift + z), small.eq(rem)]
        # 10 to 12: rem (b - rem) in two products where b - rem is wider than an 18-bit
        # operand (its low 17 bits, the rest), one multiplier block each; 13: their sum
        low = PipelinedMultiplier(unsigned(w.ln2), unsigned(min(w.b, _T_LOW)))
        m.submodules[f"exp_low_{lane}"] = low
        m.d.comb += [low.a.eq(small), low.b.eq(t[:_T_LOW])]
        prod = reg(unsigned(w.ln2 + w.b), 13, "prod")
        if w.b > _T_LOW:
            high = PipelinedMultiplier(unsigned(w.ln2), unsigned(w.b - _T_LOW))
            m.submodules[f"exp_high_{lane}"] = high
            m.d.comb += [high.a.eq(small), high.b.eq(t[_T_LOW:])]
            m.d.sync += prod.eq(Cat(low.p[:_T_LOW], low.p[_T_LOW:] + high.p))
        else:
            m.d.sync += prod.eq(low.p)
        # 14: poly = c - rem (b - rem)
        poly = reg(unsigned(w.c), 14, "poly")
        m.d.sync += poly.eq(cfg.c - prod)                      # in (0, c]: exact
        amount = delayed(amount, 10, 14, "amount")
        # 15, 16: e = poly >> amount, coarse (multiples of 8) then fine, gated by keep
        coarse = reg(unsigned(_WINDOW), 15, "coarse")
        m.d.sync += coarse.eq(poly >> Cat(C(0, 3), amount[3:]))
        fine = delayed(amount[:3], 15, 15, "fine")
        kept = delayed(keep, 3, 15, "kept")
        e = reg(unsigned(EXP_BITS), 16, "e")
        m.d.sync += e.eq(Mux(kept, coarse >> fine, 0))
        return e

    def _divide(self, m: Module) -> None:
        """R = floor(levels 2^30 / sum), DIV_STEP quotient bits a cycle."""
        w = self.widths
        bits = DIV_STEP * (div_cycles(self.levels) - 1)
        ptr, busy = Signal(_SLOT_BITS, name="div_slot"), Signal(name="div_busy")
        count = Signal(range(div_cycles(self.levels)), name="div_count")
        radix = 1 << DIV_STEP
        # the divisor's multiples k sum, k = 1 .. radix - 1 (registers made at the load)
        multiples = [Signal(w.sum + DIV_STEP, name=f"divisor_x{k}", reset_less=True)
                     for k in range(1, radix)]
        rem = Signal(w.sum, name="div_rem", reset_less=True)
        quotient = Signal(bits, name="quotient", reset_less=True)
        zero = Signal(name="div_zero", reset_less=True)
        state, total = _pick(self.estate, ptr), _pick(self.sums, ptr)
        # the dividend's bits below the quotient's are 0 (bits <= SOFTMAX_FRAC), and its
        # top part levels 2^(30 - bits) < 2^14 <= sum: the quotient fits ``bits`` bits
        assert bits <= SOFTMAX_FRAC
        # one step: the next DIV_STEP dividend bits (0) shifted in, rem' = rem radix; the
        # digit is the largest k with k sum <= rem' (rem < sum, so k < radix), compared
        # with every multiple side by side; the new rem = rem' - digit sum (< sum)
        shifted = Cat(C(0, DIV_STEP), rem)
        digit, r = C(0, DIV_STEP), shifted
        for k, multiple in enumerate(multiples, start=1):
            fits = shifted >= multiple                 # a thermometer: the largest wins
            digit = Mux(fits, k, digit)
            r = Mux(fits, shifted - multiple, r)
        nq = Cat(digit, quotient[:-DIV_STEP])
        with m.If(~busy & (state == 2)):
            m.d.sync += [busy.eq(1), count.eq(0), zero.eq(total == 0),
                         rem.eq(self.levels << (SOFTMAX_FRAC - bits))]
            for k, multiple in enumerate(multiples, start=1):     # shifts and adds
                m.d.sync += multiple.eq(sum(total << j for j in range(DIV_STEP) if k >> j & 1))
        with m.Elif(busy):
            m.d.sync += [rem.eq(r), quotient.eq(nq), count.eq(count + 1)]
            with m.If(count == div_cycles(self.levels) - 2):
                m.d.sync += [busy.eq(0), ptr.eq(ptr + 1)]
                for h in range(ROWS):
                    with m.If(ptr == h):
                        m.d.sync += [self.recips[h].eq(Mux(zero, 0, nq[:w.recip])),
                                     self.estate[h].eq(3)]

    def _out(self, m: Module, platform) -> None:
        """The e buffer read out: p = (e R + 2^29) >> 30, through the output buffer."""
        lanes, w = self.lanes, self.widths
        ptr = Signal(_SLOT_BITS, name="out_slot")
        index = Signal(self.index_bits, name="out_index")
        issue = SimpleNamespace(valid=Signal(name="out_want"), ready=Signal(name="out_credit"))
        m.d.comb += issue.valid.eq(_pick(self.estate, ptr) == 3)
        taken = add_credits(m, issue, self.o, BUFFER_BEATS)
        last = index == _pick(self.e_last, ptr)
        m.d.comb += self._exps_r.addr.eq(Cat(index, ptr))
        with m.If(taken):
            m.d.sync += [index.eq(Mux(last, 0, index + 1)), ptr.eq(ptr + last)]
        for h in range(ROWS):
            with m.If(taken & last & (ptr == h)):
                m.d.sync += self.estate[h].eq(0)
        valid = [Signal(name=f"out_valid_s{n}") for n in range(1, OUT_LATENCY + 1)]
        lasts = [Signal(name=f"out_last_s{n}") for n in range(1, OUT_LATENCY + 1)]
        m.d.sync += [valid[0].eq(taken), lasts[0].eq(last)]
        m.d.sync += [d.eq(s) for d, s in zip(valid[1:] + lasts[1:], valid[:-1] + lasts[:-1])]
        recip1 = Signal(w.recip, name="out_recip_s1", reset_less=True)
        recip = Signal(w.recip, name="out_recip_s2", reset_less=True)
        m.d.sync += [recip1.eq(_pick(self.recips, ptr)), recip.eq(recip1)]
        row = Signal(output_layout(lanes, self.levels), name="out_row")
        m.d.comb += row.last.eq(lasts[-1])
        half = 1 << (SOFTMAX_FRAC - 1)
        # e R in one product (a DSP48E2 takes 27 x 18 bits), or, with narrow multipliers (by
        # default on an ECP5) where R is wider than an 18-bit operand, in two (R's low 17
        # bits, the rest), one MULT18X18D each; their sum (or the one product) a register
        # stage either way
        narrow = self.narrow_multipliers
        if narrow is None:
            narrow = getattr(platform, "family", None) == "ecp5"
        split = narrow and w.recip > _T_LOW
        for lane in range(lanes):
            # the read's data in a register of its own (a block RAM's read is slow out)
            e = Signal(EXP_BITS, name=f"out_e_s2_{lane}", reset_less=True)
            m.d.sync += e.eq(self._exps_r.data[lane * EXP_BITS:(lane + 1) * EXP_BITS])
            low = PipelinedMultiplier(unsigned(EXP_BITS),
                                      unsigned(_T_LOW if split else w.recip))
            m.submodules[f"out_{lane}"] = low
            m.d.comb += [low.a.eq(e), low.b.eq(recip[:_T_LOW] if split else recip)]
            prod = Signal(EXP_BITS + w.recip, name=f"out_prod_{lane}", reset_less=True)
            if split:
                high = PipelinedMultiplier(unsigned(EXP_BITS), unsigned(w.recip - _T_LOW))
                m.submodules[f"out_high_{lane}"] = high
                m.d.comb += [high.a.eq(e), high.b.eq(recip[_T_LOW:])]
                m.d.sync += prod.eq(Cat(low.p[:_T_LOW], low.p[_T_LOW:] + high.p))
            else:
                m.d.sync += prod.eq(low.p)
            p = Signal(unsigned(w.p), name=f"p_{lane}", reset_less=True)
            m.d.sync += p.eq((prod + half) >> SOFTMAX_FRAC)
            m.d.comb += row.p[lane].eq(p)
        m.submodules.buffer = output_buffer(self.o, row, valid[-1], BUFFER_BEATS)
