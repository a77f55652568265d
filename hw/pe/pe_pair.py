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
product's, with no adder of its own. The drain chain passes through both: ``res_in`` (the
pair above) -> row ``2p``'s ``res`` -> row ``2p + 1``'s ``res`` = ``res_out``, the order of
two single PEs.
"""
from amaranth import Cat, Module, Signal, signed
from amaranth.lib import data, wiring

from zoforge.golden.engine_widths import ACC_BITS, OPERAND_BITS

from .packed_multiply import PackedMultiplier
from .pe import accumulate, check_acc_bits, forward, unit_members

__all__ = ["ProcessingPair"]


class ProcessingPair(wiring.Component):
    """Rows ``a[0]`` (upper) and ``a[1]`` (lower) of one column, one packed multiplier."""

    def __init__(self, acc_bits: int = ACC_BITS):
        self.acc_bits = check_acc_bits(acc_bits, OPERAND_BITS, OPERAND_BITS)
        operand = signed(OPERAND_BITS)
        pair = data.ArrayLayout(operand, 2)
        super().__init__(unit_members(pair, operand, acc_bits))

    def elaborate(self, platform):
        m = Module()
        forward(m, self)
        m.submodules.multiply = multiply = PackedMultiplier(corrected=False)
        m.d.comb += [multiply.a_lo.eq(self.a_in[0]), multiply.a_hi.eq(self.a_in[1]),
                     multiply.b.eq(self.b_in)]
        flags = Signal(3)
        m.d.sync += flags.eq(Cat(self.valid_out, self.first_out, self.last_out))
        upper = Signal(signed(self.acc_bits), name="res_upper")
        accumulate(m, multiply.p_lo, flags, self.shift, self.res_in, upper)
        accumulate(m, multiply.p_hi, flags, self.shift, upper, self.res_out,
                   carry_in=multiply.p_lo[-1])
        return m
