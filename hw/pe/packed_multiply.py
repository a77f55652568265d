"""Two INT8 products that share an operand from one DSP48E2 multiply (Xilinx WP486):
``p_lo = a_lo * b`` and ``p_hi = a_hi * b`` :data:`LATENCY` cycles after the operands, exact,
with the pipeline and enable of :class:`~.multiply.PipelinedMultiplier` (so a pair of
processing elements can take it in place of two of those).

The arithmetic, bit for bit, is :mod:`zoforge.golden.packing`'s::

    cycle 1:  a_lo, high, b        <- a_lo, a_hi - [a_lo < 0], b   (the DSP's A and B
                                                                     input registers)
              packed = high * 2^18 + (a_lo mod 2^18)   (27-bit signed, = a_hi * 2^18 + a_lo:
                                                        wiring, a_lo's sign bit repeated)
    cycle 2:  full   <- packed * b                  (45-bit signed: MREG)
    cycle 3:  p_lo   <- full[0:18] sign-extended    (its register in the fabric, after
              p_hi   <- full[18:] + full[17]         the correction of the low sign)

so no adder stands between the operand registers and the multiply (Yosys does not use the
DSP48E2's pre-adder: an addition there is a carry chain in LUTs on the multiplier's input
path). The 9-bit ``high = a_hi - borrow`` (:func:`~zoforge.golden.packing.borrowed_high`)
is computed on the input side of the register; with ``borrowed=True`` the block takes it
ready on its ``a_hi`` port (9 bits): a paired systolic array subtracts it once per pair-row
at its left edge and forwards ``(a_lo, high)`` along the row.

With ``corrected=False`` the block leaves the correction to its user: ``p_hi`` is the high
field as it is, ``full[18:34]`` = ``a_hi * b - borrow`` (16 bits hold it), and the borrow is
``p_lo``'s sign bit (``full[17]`` = ``full[15]``: ``|p_lo| <= 2^14``). A
:class:`~.pe_pair.ProcessingPair` adds it as its high row's accumulator's carry-in, so no
adder of its own is needed: the 16-bit increment maps to no LUT in Yosys' count, but 15 of
its carry chain's select inputs, driven straight from registers, would each take a LUT in a
real UltraScale+ slice (the CARRY8's S inputs come from the LUTs' O6 outputs, UG574), so
folding it saves about 15 LUTs per pair on the device (and one in Yosys' count).

Two products per DSP48E2 is what fills an UltraScale+ board (2,520 DSPs x 2 MACs); an ECP5's
MULT18X18D has no 27-bit port, so that target keeps one product per multiplier
(:class:`~.multiply.PipelinedMultiplier`). The registers have no reset (data only).
"""
from __future__ import annotations

from amaranth import Cat, Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.engine_widths import OPERAND_BITS
from zoforge.golden.packing import FULL_BITS, HIGH_BITS, PACKED_BITS, PRODUCT_BITS, SHIFT

from .multiply import LATENCY

__all__ = ["PackedMultiplier", "LATENCY"]


class PackedMultiplier(wiring.Component):
    """``p_lo = a_lo * b``, ``p_hi = a_hi * b`` (signed INT8 operands) through one packed
    multiply (module docstring); ``en`` moves the whole pipeline, as in
    :class:`~.multiply.PipelinedMultiplier`; ``corrected=False``: ``p_hi`` without the low
    sign's correction, ``a_hi * b - (p_lo < 0)`` (module docstring); ``borrowed=True``:
    ``a_hi`` is the 9-bit high field ``a_hi - [a_lo < 0]``, computed by the user."""

    def __init__(self, corrected: bool = True, borrowed: bool = False):
        self.corrected, self.borrowed = bool(corrected), bool(borrowed)
        operand, product = signed(OPERAND_BITS), signed(PRODUCT_BITS)
        high = signed(HIGH_BITS) if self.borrowed else operand
        super().__init__({"a_lo": In(operand), "a_hi": In(high), "b": In(operand),
                          "en": In(1, init=1), "p_lo": Out(product), "p_hi": Out(product)})

    def elaborate(self, platform):
        m = Module()
        a_lo, b = (Signal(signed(OPERAND_BITS), reset_less=True, name=name)
                   for name in ("a_lo_reg", "b_reg"))
        high = Signal(signed(HIGH_BITS), reset_less=True, name="high_reg")
        packed = Signal(signed(PACKED_BITS))
        full = Signal(signed(FULL_BITS), reset_less=True, name="full_reg")
        p_lo, p_hi = (Signal(signed(PRODUCT_BITS), reset_less=True, name=name)
                      for name in ("p_lo_fabric", "p_hi_fabric"))
        # The borrow on the input side; after the registers, wiring only (module docstring).
        high_in = self.a_hi if self.borrowed else self.a_hi - self.a_lo[-1]
        m.d.comb += packed.eq(Cat(a_lo, a_lo[-1].replicate(SHIFT - OPERAND_BITS), high))
        low_sign = full[SHIFT - 1]
        with m.If(self.en):
            m.d.sync += [a_lo.eq(self.a_lo), high.eq(high_in), b.eq(self.b),
                         full.eq(packed * b),
                         p_lo.eq(full[:SHIFT].as_signed())]
            if self.corrected:
                m.d.sync += p_hi.eq((full >> SHIFT) + low_sign)
            else:               # a_hi * b - low_sign, which fits PRODUCT_BITS bits
                m.d.sync += p_hi.eq(full[SHIFT:SHIFT + PRODUCT_BITS].as_signed())
        m.d.comb += [self.p_lo.eq(p_lo), self.p_hi.eq(p_hi)]
        return m
