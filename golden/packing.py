"""Two INT8 products in one wide multiply: the golden model of
:class:`zoforge.hw.pe.packed_multiply.PackedMultiplier` (Xilinx WP486's shared-operand
packing for the DSP48E2's 27 x 18 multiplier).

Two products that share an operand, ``p_lo = a_lo * b`` and ``p_hi = a_hi * b`` (all three
signed INT8), come out of one multiply of a packed operand::

    packed = a_hi * 2^SHIFT + a_lo          (27-bit signed; a_lo sign-extended, so a
                                             negative a_lo borrows one from a_hi's field)
    full   = packed * b = p_hi * 2^SHIFT + p_lo                     (45-bit signed)
    p_lo   = full[0:SHIFT] as a SHIFT-bit signed number            (|p_lo| <= 2^14 < 2^17)
    p_hi   = (full >> SHIFT) + full[SHIFT - 1]                      (the correction: the
                                             borrow a negative p_lo took from p_hi's field)

with ``SHIFT`` = :data:`SHIFT` = 18 (WP486's spacing: the low field holds any INT8 x INT8
product, -128 x -128 = 2^14 included, with its sign). Both results are exact for every
operand triple; :func:`packed_products` computes them through those bit fields (the
hardware's arithmetic), so a test can hold them against the plain products.

The packed operand needs no adder: with ``borrow = [a_lo < 0]``::

    a_hi * 2^SHIFT + a_lo = (a_hi - borrow) * 2^SHIFT + (a_lo mod 2^SHIFT)

and ``a_lo mod 2^SHIFT`` is a_lo sign-extended to SHIFT bits read unsigned, so ``packed`` is
the wiring of a_lo's 8 bits (its sign bit repeated up to bit SHIFT - 1) under the
:data:`HIGH_BITS`-bit signed ``high = a_hi - borrow`` (in [-129, 127]) at bits
``[SHIFT, PACKED_BITS)``. A paired systolic array (:class:`zoforge.hw.pe.array.SystolicArray`)
subtracts the borrow once per pair-row at its left edge and forwards ``(a_lo, high)`` along
the row, so each pair's multiplier operand is that wiring of its registers.
:func:`borrowed_high` and :func:`pack_fields` state it (``pack_fields(a_lo, borrowed_high(a_lo,
a_hi)) == pack(a_lo, a_hi)`` for every INT8 pair).

The paired processing element (:class:`zoforge.hw.pe.pe_pair.ProcessingPair`) does not add
the correction to the product: it takes the high field as it is, ``high = full >> SHIFT``
(``p_hi - borrow``, with ``borrow = full[SHIFT - 1]``, also ``p_lo``'s sign bit), and its
high row's accumulator adds the borrow as the carry into its adder's bit 1, one bit wider::

    acc <- (((kept << 1) | borrow) + ((high << 1) | borrow)) >> 1     (modulo 2^acc_bits)
         = kept + high + borrow = kept + p_hi                           (kept: 0 or acc)

:func:`high_field` and :func:`add_high` state it; the sums are those of the corrected
product, for every operand triple and accumulator.
"""
from __future__ import annotations

import numpy as np

__all__ = ["SHIFT", "PACKED_BITS", "B_BITS", "FULL_BITS", "PRODUCT_BITS", "HIGH_BITS",
           "pack", "borrowed_high", "pack_fields", "split", "packed_products", "high_field",
           "add_high"]

#: Bits between the two packed operands (and the low product's field).
SHIFT = 18
#: The packed operand (the DSP48E2's A:D input of the pre-adder is 27 bits), the shared
#: operand (its B input is 18 bits; an INT8 sign-extends into it) and the product.
PACKED_BITS, B_BITS = 27, 18
FULL_BITS = PACKED_BITS + B_BITS
#: Bits of each INT8 x INT8 product (signed; -128 x -128 = 2^14 needs all 16).
PRODUCT_BITS = 16
#: Bits of the packed operand's high field ``a_hi - borrow`` (signed, in [-129, 127]):
#: the bits of ``packed`` above the low field, PACKED_BITS - SHIFT.
HIGH_BITS = PACKED_BITS - SHIFT


def _int8(name: str, values) -> np.ndarray:
    array = np.asarray(values, dtype=np.int64)
    if array.size and (array.min() < -128 or array.max() > 127):
        raise ValueError(f"{name} must be signed INT8 values in [-128, 127]")
    return array


def pack(a_lo, a_hi) -> np.ndarray:
    """The packed operand ``a_hi * 2^SHIFT + a_lo`` (int64; fits :data:`PACKED_BITS` signed)."""
    return _int8("a_hi", a_hi) * (1 << SHIFT) + _int8("a_lo", a_lo)


def borrowed_high(a_lo, a_hi) -> np.ndarray:
    """The packed operand's high field ``a_hi - [a_lo < 0]`` (int64, in [-129, 127]: fits
    :data:`HIGH_BITS` signed), what a paired array forwards in place of ``a_hi``."""
    a_lo, a_hi = _int8("a_lo", a_lo), _int8("a_hi", a_hi)
    return a_hi - (a_lo < 0)


def pack_fields(a_lo, high) -> np.ndarray:
    """The packed operand from its fields by wiring alone (module docstring): the
    :data:`HIGH_BITS`-bit ``high`` (:func:`borrowed_high`) at bit SHIFT over a_lo's bits
    sign-extended to SHIFT bits, read unsigned (no addition of overlapping bits)."""
    a_lo = _int8("a_lo", a_lo)
    high = np.asarray(high, dtype=np.int64)
    if high.size and (high.min() < -(1 << (HIGH_BITS - 1))
                      or high.max() >= 1 << (HIGH_BITS - 1)):
        raise ValueError(f"high must be signed {HIGH_BITS}-bit values")
    low = a_lo & ((1 << SHIFT) - 1)                     # sign-extended, read unsigned
    return (high << SHIFT) | low


def split(full) -> tuple[np.ndarray, np.ndarray]:
    """``(p_lo, p_hi)`` from the wide product's bits: the low field sign-extended, the high
    field plus the low field's sign bit (module docstring)."""
    full = np.asarray(full, dtype=np.int64)
    low = full & ((1 << SHIFT) - 1)
    sign = (low >> (SHIFT - 1)) & 1
    p_lo = low - (sign << SHIFT)
    p_hi = (full >> SHIFT) + sign
    return p_lo, p_hi


def packed_products(a_lo, a_hi, b) -> tuple[np.ndarray, np.ndarray]:
    """``(a_lo * b, a_hi * b)`` computed as the hardware does: one multiply of the packed
    operand by ``b``, split with the correction (module docstring)."""
    return split(pack(a_lo, a_hi) * _int8("b", b))


def high_field(full) -> tuple[np.ndarray, np.ndarray]:
    """``(high, borrow)``: the wide product's high field without the correction,
    ``full >> SHIFT``, and the low field's sign bit that :func:`split` adds to it."""
    full = np.asarray(full, dtype=np.int64)
    return full >> SHIFT, (full >> (SHIFT - 1)) & 1


def add_high(kept, high, borrow, acc_bits: int) -> np.ndarray:
    """The paired high row's accumulator step (module docstring): ``kept + high + borrow``
    through the one-bit-wider adder whose bit 0 adds ``borrow`` to itself (the carry into
    bit 1), wrapped to a signed ``acc_bits``-bit value."""
    kept, high, borrow = (np.asarray(v, dtype=np.int64) for v in (kept, high, borrow))
    wide = (((kept << 1) | borrow) + ((high << 1) | borrow)) >> 1
    modulus = 1 << acc_bits
    return (wide + (modulus >> 1)) % modulus - (modulus >> 1)
