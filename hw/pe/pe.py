"""One processing element (PE) of the output-stationary systolic array.

Integer semantics (see :mod:`zoforge.golden.engine`): ``a`` and ``b`` are signed integers of
``a_bits`` and ``b_bits`` (INT8 by default; the ZO layer feeds 16-bit weights on ``a``); their
product (exact) is added to an ``acc_bits`` signed accumulator that wraps modulo
2^acc_bits: 32 by default, fewer (:func:`~zoforge.golden.engine_widths.accumulator_bits` of
the jobs' largest K) where no sum can wrap, so that 32 bits sign-extended are the same sums.

Pipeline: the product is a :class:`~.multiply.PipelinedMultiplier` (operand registers and
a registered product: one DSP block with its registers, ECP5 MULT18X18D or DSP48 AREG/BREG/
MREG), beside the operand registers that forward ``a`` and ``b``::

    cycle 1:  a, b, flags       <- inputs         (forwarded to the right / below; the
                                                   multiplier's own copies of a and b)
    cycle 2:  a * b                               (registered multiplier output)
    cycle 3:  prod              <- a * b          (its register in the fabric)
    cycle 4:  acc               <- (first ? 0 : acc) + prod     (when valid)
    cycle 5:  res               <- acc                           (after a valid last)

``first`` starts a new dot product, ``last`` ends it and copies the sum into ``res`` (:data:`LATENCY`
cycles after the step entered the PE). ``res`` holds it until the next capture (a register
with an enable, no logic in front of it): the array reads a column's sums out through a
row multiplexer (:class:`~.array.SystolicArray`), while ``acc`` runs the next dot product.
"""
from amaranth import Cat, Module, Signal, Mux, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from zoforge.errors import check_int_range
from zoforge.golden.engine_widths import ACC_BITS, OPERAND_BITS

from .multiply import PipelinedMultiplier

__all__ = ["ProcessingElement", "LATENCY", "accumulate", "forward", "unit_members",
           "check_acc_bits"]

#: Cycles from a step on the PE's inputs to its sum in ``res`` (when it is the last).
LATENCY = 5


class ProcessingElement(wiring.Component):
    """Signed ``a_bits`` x ``b_bits`` multiply-accumulate into a wrapping ``acc_bits``
    accumulator."""

    def __init__(self, a_bits: int = OPERAND_BITS, b_bits: int = OPERAND_BITS,
                 acc_bits: int = ACC_BITS):
        self.a_bits, self.b_bits = a_bits, b_bits
        self.acc_bits = check_acc_bits(acc_bits, a_bits, b_bits)
        super().__init__(unit_members(signed(a_bits), signed(b_bits), acc_bits, rows=1))

    def elaborate(self, platform):
        m = Module()
        forward(m, self)
        # Stages 1 to 3 of the product: the multiplier's own operand registers (beside the
        # forwarded ones) and its registered output, one DSP block, then the product's
        # register in the fabric.
        m.submodules.multiply = multiply = PipelinedMultiplier(signed(self.a_bits),
                                                               signed(self.b_bits))
        m.d.comb += [multiply.a.eq(self.a_in), multiply.b.eq(self.b_in)]
        flags = Signal(3)
        m.d.sync += flags.eq(Cat(self.valid_out, self.first_out, self.last_out))
        accumulate(m, multiply.p, flags, self.res[0])
        return m


def check_acc_bits(acc_bits: int, a_bits: int, b_bits: int) -> int:
    """``acc_bits`` if it is in [a_bits + b_bits, ACC_BITS] (at least a product's width)."""
    return check_int_range("acc_bits", acc_bits, a_bits + b_bits, ACC_BITS)


def unit_members(a_shape, b_shape, acc_bits: int = ACC_BITS, rows: int = 1) -> dict:
    """The ports of an array unit of ``rows`` PEs of one column (a PE, or a pair of them)
    with ``a`` of ``a_shape``: the operands and flags in and forwarded out, and ``res``, the
    rows' finished sums (``acc_bits`` wide), the unit's top row first."""
    return {"a_in": In(a_shape), "b_in": In(b_shape),
            "valid_in": In(1), "first_in": In(1), "last_in": In(1),
            "a_out": Out(a_shape), "b_out": Out(b_shape),
            "valid_out": Out(1), "first_out": Out(1), "last_out": Out(1),
            "res": Out(data.ArrayLayout(signed(acc_bits), rows))}


def forward(m: Module, unit) -> None:
    """Stage 1 of a unit: its operand and flag registers, forwarded to the neighbours."""
    m.d.sync += [unit.a_out.eq(unit.a_in), unit.b_out.eq(unit.b_in),
                 unit.valid_out.eq(unit.valid_in), unit.first_out.eq(unit.first_in),
                 unit.last_out.eq(unit.last_in)]


def accumulate(m: Module, prod, flags, res, carry_in=None) -> None:
    """Stages 3 to 5 of a PE on ``prod``, the product of the step whose flags
    ``Cat(valid, first, last)`` are in ``flags`` one cycle earlier (the flags of stage 2):
    the accumulator, as wide as ``res`` (wrapping), and the capture of a finished sum into
    ``res``, which holds it until the next capture.
    ``carry_in`` (one bit, optional) is added to every step's product: the accumulator's
    adder takes it as its carry-in (see below), so ``acc <- (first ? 0 : acc) + prod +
    carry_in`` costs no adder of its own (:class:`~.pe_pair.ProcessingPair`'s correction of
    the packed high product). The one copy of this logic, shared by
    :class:`ProcessingElement` and :class:`~.pe_pair.ProcessingPair`."""
    valid, first, last = Signal(), Signal(), Signal()
    m.d.sync += Cat(valid, first, last).eq(flags)
    # Stage 3: accumulate (wraps modulo 2^acc_bits) and capture finished sums. ``first`` clears
    # the addend rather than choosing after the adder, so a bit is one LUT (acc, first,
    # prod) into the carry chain, not an adder's LUT and a multiplexer's.
    shape = res.shape()
    acc, kept, total = Signal(shape), Signal(shape), Signal(shape)
    m.d.comb += kept.eq(Mux(first, 0, acc))
    if carry_in is None:
        m.d.comb += total.eq(prod + kept)
    else:
        # A third, one-bit addend as the carry into the adder's bit 1: one bit wider,
        # (2 kept + carry_in) + (2 prod + carry_in) = 2 (kept + prod + carry_in), so bits
        # [1, 1 + width) of the sum are kept + prod + carry_in modulo 2^width; bit 0 adds
        # carry_in to itself, a constant select and no LUT (Yosys makes no carry-in of a
        # one-bit operand written as such: a second adder).
        wide = Signal(signed(shape.width + 2))
        m.d.comb += [wide.eq(Cat(carry_in, kept).as_signed()
                             + Cat(carry_in, prod).as_signed()),
                     total.eq(wide[1:shape.width + 1])]
    with m.If(valid):
        m.d.sync += acc.eq(total)
    # Stage 4: a finished sum from the accumulator register into res (the adder drives
    # only the accumulator; ``capture`` is the register's enable, no logic in front of it)
    capture = Signal()
    m.d.sync += capture.eq(valid & last)
    with m.If(capture):
        m.d.sync += res.eq(acc)
