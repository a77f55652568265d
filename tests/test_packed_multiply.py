"""Two INT8 MACs per DSP48E2 (issue 32): the packing's golden model (``golden/packing.py``)
against the plain products over every operand triple, and the hardware block
(``hw/pe/packed_multiply.py``) against the plain products with its latency and enable
in Amaranth's simulator; synthesized for the ZCU102 it is one DSP48E2 where two plain
multipliers are two. These are the platform-less (fabric) form's; its UltraScale+ form, one
hand-instantiated DSP48E2, is tests/test_packed_multiply_dsp48e2.py's."""
import random

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.sim import Simulator

from test_multiply import expected_products
from zoforge.golden.packing import (B_BITS, FULL_BITS, HIGH_BITS, PACKED_BITS, PRODUCT_BITS,
                                    SHIFT, borrowed_high, pack, pack_fields, packed_products,
                                    split)
from zoforge.hw.pe.multiply import PipelinedMultiplier
from zoforge.hw.pe.packed_multiply import LATENCY, PackedMultiplier

INT8 = np.arange(-128, 128, dtype=np.int64)
CORNERS = [-128, -127, -1, 0, 1, 126, 127]


def test_every_operand_triple_gives_both_plain_products():
    """All 2^24 (a_lo, a_hi, b): the packed multiply split with the correction is exactly
    (a_lo * b, a_hi * b), and every intermediate fits the DSP48E2's ports."""
    a_lo, a_hi = (g.ravel() for g in np.meshgrid(INT8, INT8, indexing="ij"))
    packed = pack(a_lo, a_hi)
    assert packed.min() >= -(1 << (PACKED_BITS - 1)) and packed.max() < 1 << (PACKED_BITS - 1)
    for b in range(-128, 128):
        p_lo, p_hi = packed_products(a_lo, a_hi, np.full_like(a_lo, b))
        np.testing.assert_array_equal(p_lo, a_lo * b)
        np.testing.assert_array_equal(p_hi, a_hi * b)
        full = packed * b
        assert full.min() >= -(1 << (FULL_BITS - 1)) and full.max() < 1 << (FULL_BITS - 1)
    assert -128 >= -(1 << (B_BITS - 1))                    # b sign-extends into the B port


def test_the_packed_operand_is_wiring_of_a_lo_and_the_borrowed_high_field():
    """All 2^16 (a_lo, a_hi), against plain integers: ``a_hi * 2^18 + a_lo`` is
    ``(a_hi - [a_lo < 0]) * 2^18 + (a_lo mod 2^18)``, whose high field fits 9 signed bits
    (-129 at a_hi = -128 with a negative a_lo) and whose low 18 bits are a_lo's 8 bits with
    its sign bit repeated: no addition of overlapping bits (what a paired array forwards)."""
    assert HIGH_BITS == 9 and PACKED_BITS == SHIFT + HIGH_BITS
    a_lo, a_hi = (g.ravel() for g in np.meshgrid(INT8, INT8, indexing="ij"))
    high = borrowed_high(a_lo, a_hi)
    np.testing.assert_array_equal(high, a_hi - (a_lo < 0))
    assert (high.min(), high.max()) == (-129, 127)
    packed = pack_fields(a_lo, high)
    np.testing.assert_array_equal(packed, a_hi * 2 ** 18 + a_lo)
    np.testing.assert_array_equal(packed, pack(a_lo, a_hi))
    bits = packed % 2 ** PACKED_BITS                         # its 27 bits, unsigned
    np.testing.assert_array_equal(bits % 2 ** SHIFT,
                                  (a_lo % 2 ** 8) | np.where(a_lo < 0, 1023 << 8, 0))
    np.testing.assert_array_equal(bits >> SHIFT, high % 2 ** HIGH_BITS)
    for a_lo, a_hi in [(-1, -128), (-128, 127), (0, -128), (127, 127), (-128, -128)]:
        assert int(pack_fields(a_lo, borrowed_high(a_lo, a_hi))) == a_hi * 2 ** 18 + a_lo
    with pytest.raises(ValueError, match="high"):
        pack_fields(0, 256)


def test_the_correction_is_needed_exactly_when_the_low_product_is_negative():
    """Without the correction the high product is one short exactly where a_lo * b < 0 (the
    borrow WP486 describes), so the split's correction term is the one that makes it exact."""
    a_lo, a_hi, b = (g.ravel() for g in np.meshgrid(INT8, INT8, np.array(CORNERS),
                                                    indexing="ij"))
    full = pack(a_lo, a_hi) * b
    uncorrected = full >> SHIFT
    np.testing.assert_array_equal(a_hi * b - uncorrected, (a_lo * b < 0).astype(np.int64))
    p_lo, p_hi = split(full)
    np.testing.assert_array_equal(p_hi, a_hi * b)
    np.testing.assert_array_equal(p_lo, a_lo * b)


def test_products_fit_their_ports_at_both_ends():
    """-128 x -128 = 2^14 is the largest product, -128 x 127 the smallest: both need the
    16 bits of the product ports, and both come out exact in either field."""
    assert (-128 * -128) == 1 << (PRODUCT_BITS - 2) and -128 * 127 >= -(1 << (PRODUCT_BITS - 1))
    for a_lo, a_hi, b in [(-128, -128, -128), (-128, 127, -128), (127, -128, -128),
                          (-128, -128, 127), (127, 127, 127), (0, -128, -128), (-128, 0, -1)]:
        assert tuple(map(int, packed_products(a_lo, a_hi, b))) == (a_lo * b, a_hi * b)


@pytest.mark.parametrize("values", [[128], [-129], [1000]])
def test_operands_outside_int8_are_refused(values):
    with pytest.raises(ValueError, match="INT8"):
        packed_products(values, [0], [0])
    with pytest.raises(ValueError, match="INT8"):
        packed_products([0], [0], values)


def simulate(dut, triples, en=None) -> list[tuple[int, int]]:
    """``(p_lo, p_hi)`` after each cycle of Amaranth's simulator, ``dut``'s operands one
    triple ``(a_lo, a_hi, b)`` a cycle (and its ``en``, where given)."""
    got = []

    async def bench(ctx):
        for index, (a_lo, a_hi, b) in enumerate(triples):
            ctx.set(dut.a_lo, a_lo)
            ctx.set(dut.a_hi, a_hi)
            ctx.set(dut.b, b)
            if en is not None:
                ctx.set(dut.en, en[index])
            await ctx.tick()
            got.append((ctx.get(dut.p_lo), ctx.get(dut.p_hi)))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got


def test_rtl_gives_both_products_with_the_plain_multipliers_latency_and_enable():
    """Amaranth's simulator: every corner triple, then random ones, under a random enable:
    p_lo and p_hi each follow the plain product's pipeline (:func:`expected_products`)."""
    rng = random.Random(32)
    triples = [(x, y, z) for x in CORNERS for y in CORNERS for z in CORNERS]
    triples += [tuple(rng.randint(-128, 127) for _ in range(3)) for _ in range(300)]
    en = [rng.random() < 0.8 for _ in triples]
    got = simulate(PackedMultiplier(), triples, en)
    a_lo, a_hi, b = zip(*triples)
    assert [lo for lo, _ in got] == expected_products(a_lo, b, en)
    assert [hi for _, hi in got] == expected_products(a_hi, b, en)
    assert LATENCY == 3


def test_rtl_borrowed_form_has_no_adder_before_the_multiply_and_gives_both_products():
    """``borrowed=True`` (a paired PE's multiplier): its RTLIL has a multiply and no adder or
    subtractor (the packed operand is wiring of its registers; the default block subtracts
    the borrow before its registers), and every corner triple fed as ``(a_lo, a_hi - [a_lo
    < 0])`` gives ``a_lo * b`` and the uncorrected ``a_hi * b - [a_lo * b < 0]``."""
    from amaranth.back import rtlil

    def cells(dut):
        return {line.split()[1] for line in rtlil.convert(dut).splitlines()
                if line.strip().startswith("cell ")}

    borrowed = cells(PackedMultiplier(corrected=False, borrowed=True))
    assert "$mul" in borrowed and not borrowed & {"$add", "$sub"}, borrowed
    assert "$sub" in cells(PackedMultiplier(corrected=False))
    triples = [(x, y, z) for x in CORNERS for y in CORNERS for z in CORNERS]
    fed = [(a_lo, int(borrowed_high(a_lo, a_hi)), b) for a_lo, a_hi, b in triples]
    got = simulate(PackedMultiplier(corrected=False, borrowed=True),
                   fed + [(0, 0, 0)] * LATENCY)
    got = got[LATENCY - 1:LATENCY - 1 + len(triples)]
    assert got == [(a_lo * b, a_hi * b - (a_lo * b < 0)) for a_lo, a_hi, b in triples]


@pytest.mark.slow
@pytest.mark.ci
def test_one_dsp48e2_for_two_products_where_plain_multipliers_take_two():
    """Yosys ``synth_xilinx -family xcup``: the packed block maps to one DSP48E2; two plain
    INT8 multipliers (what a pair of processing elements has today) map to two."""
    from amaranth import signed
    from amaranth.hdl import Module
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out

    from zoforge.reports.synth import synthesize

    class TwoPlain(wiring.Component):
        a_lo: In(signed(8))
        a_hi: In(signed(8))
        b: In(signed(8))
        p_lo: Out(signed(16))
        p_hi: Out(signed(16))

        def elaborate(self, platform):
            m = Module()
            m.submodules.lo = lo = PipelinedMultiplier(signed(8), signed(8))
            m.submodules.hi = hi = PipelinedMultiplier(signed(8), signed(8))
            m.d.comb += [lo.a.eq(self.a_lo), hi.a.eq(self.a_hi), lo.b.eq(self.b),
                         hi.b.eq(self.b), self.p_lo.eq(lo.p), self.p_hi.eq(hi.p)]
            return m

    packed = synthesize(verilog.convert(PackedMultiplier(), name="packed"), "packed",
                        netlist=False)
    plain = synthesize(verilog.convert(TwoPlain(), name="plain"), "plain", netlist=False)
    assert packed.resources["DSP"] == 1
    assert plain.resources["DSP"] == 2



def test_rtl_uncorrected_high_product_is_one_short_where_the_low_one_is_negative():
    """``corrected=False`` (what a paired PE takes): every corner triple, ``p_hi`` is
    ``a_hi * b - (a_lo * b < 0)`` and that borrow is ``p_lo``'s sign bit, with the same
    latency; ``p_lo`` as before."""
    triples = [(x, y, z) for x in CORNERS for y in CORNERS for z in CORNERS]
    got = simulate(PackedMultiplier(corrected=False), triples + [(0, 0, 0)] * LATENCY)
    got = got[LATENCY - 1:LATENCY - 1 + len(triples)]
    assert [lo for lo, _ in got] == [a_lo * b for a_lo, _, b in triples]
    assert [hi for _, hi in got] == [a_hi * b - (a_lo * b < 0) for a_lo, a_hi, b in triples]
    assert any(a_lo * b < 0 for a_lo, _, b in triples)
