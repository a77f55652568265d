"""Two processing elements of one column on one multiplier: rows ``2p`` and ``2p + 1`` of a
paired systolic array, whose INT8 products share the column's ``b`` and come out of one
:class:`~.packed_multiply.PackedMultiplier` (two MACs per DSP48E2, Xilinx WP486).

Integer semantics: those of two :class:`~.pe.ProcessingElement` (signed INT8 operands, exact
products, ``acc_bits`` accumulators, 32-bit by default, wrapping), with the pipeline of one: the two rows
of a pair take their steps in the same cycle (the array skews a pair's rows alike), so they
share the flags, and each row's sum is in its own ``res`` :data:`~.pe.LATENCY` cycles after
its last step. The high product (row ``2p + 1``'s, ``a[1] * b``) comes uncorrected
(``corrected=False``: less the low product's borrow, which is ``p_lo``'s sign bit) and that
row's accumulator adds the borrow back as its adder's carry-in: ``acc <- (first ? 0 : acc) +
p_hi + borrow`` (:func:`~.pe.accumulate`'s ``carry_in``;
:func:`zoforge.golden.packing.add_high` states it), the same sums as the corrected
product's, with no adder of its own. ``res[0]`` is row ``2p``'s finished sum, ``res[1]`` row
``2p + 1``'s (the order of two single PEs).

The two rows' operands come in (and are forwarded to the right) in the packed operand's
form, :data:`OPERANDS`: ``lo`` = ``a_lo`` (row ``2p``'s) and ``high`` = ``a_hi - [a_lo <
0]`` (9 bits; :func:`zoforge.golden.packing.borrowed_high`), which the array computes once
per pair-row at its left edge (:func:`pair_operands`), so the multiplier's operand register
is the packed operand's wiring (:class:`~.packed_multiply.PackedMultiplier`,
``borrowed=True``) with no adder before the multiply.
"""
from amaranth import Cat, Module, Signal, signed
from amaranth.lib import data, wiring

from zoforge.golden.engine_widths import ACC_BITS, OPERAND_BITS
from zoforge.golden.packing import HIGH_BITS

from .packed_multiply import PackedMultiplier
from .pe import accumulate, check_acc_bits, forward, unit_members

__all__ = ["ProcessingPair", "OPERANDS", "pair_operands"]

#: A pair's ``a`` operands as the array forwards them: row ``2p``'s ``a_lo`` and the packed
#: operand's high field ``a_hi - [a_lo < 0]`` (module docstring).
OPERANDS = data.StructLayout({"lo": signed(OPERAND_BITS), "high": signed(HIGH_BITS)})


def pair_operands(m: Module, a_lo, a_hi, name: str):
    """A signal of :data:`OPERANDS` (``name``) driven combinationally from the INT8 rows
    ``a_lo`` and ``a_hi``: the one subtraction of a pair-row, at the array's left edge."""
    operands = Signal(OPERANDS, name=name)
    m.d.comb += [operands.lo.eq(a_lo), operands.high.eq(a_hi - a_lo[-1])]
    return operands


class ProcessingPair(wiring.Component):
    """Rows ``a_lo`` (upper) and ``a_hi`` (lower) of one column, one packed multiplier;
    ``a_in``: the two rows as :data:`OPERANDS` (module docstring)."""

    def __init__(self, acc_bits: int = ACC_BITS):
        self.acc_bits = check_acc_bits(acc_bits, OPERAND_BITS, OPERAND_BITS)
        super().__init__(unit_members(OPERANDS, signed(OPERAND_BITS), acc_bits, rows=2))

    def elaborate(self, platform):
        m = Module()
        forward(m, self)
        m.submodules.multiply = multiply = PackedMultiplier(corrected=False, borrowed=True)
        m.d.comb += [multiply.a_lo.eq(self.a_in.lo), multiply.a_hi.eq(self.a_in.high),
                     multiply.b.eq(self.b_in)]
        flags = Signal(3)
        m.d.sync += flags.eq(Cat(self.valid_out, self.first_out, self.last_out))
        accumulate(m, multiply.p_lo, flags, self.res[0])
        accumulate(m, multiply.p_hi, flags, self.res[1], carry_in=multiply.p_lo[-1])
        return m
