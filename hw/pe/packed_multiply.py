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

**The UltraScale+ form.** Yosys' ``synth_xilinx -family xcup`` (0.70) packs none of these
registers into the DSP48E2 (tests/test_yosys_dsp_registers.py): each stage would be fabric
flip-flops in the estimate. So where the platform's family is UltraScale+ or UltraScale
(:data:`DSP48E2_FAMILIES`: ``"xcup"``/``"xcu"``, the boards' and Yosys' names, and
``"ultrascaleplus"``/``"ultrascale"``, Amaranth's ``XilinxPlatform.family``) and
``corrected=False``, the block *is* one hand-instantiated ``DSP48E2`` with the same three
stages in it::

    A2, B2 <- packed (27 bits sign-extended to A's 30), b (sign-extended to B's 18)
                                            (AREG = ACASCREG = 1, BREG = BCASCREG = 1,
                                             CEA2 = CEB2 = en)
    M      <- A2[26:0] * B2                 (USE_MULT "MULTIPLY", AMULTSEL "A", BMULTSEL
                                             "B", INMODE 0: no pre-adder; MREG = 1, CEM = en)
    P      <- M                             (OPMODE 9'b00_000_01_01: W = 0, Z = 0, X = Y =
                                             M; ALUMODE 0000: Z + W + X + Y + CIN;
                                             CARRYINSEL 000, CARRYIN 0; PREG = 1, CEP = en)

and ``p_lo = P[0:16]``, ``p_hi = P[18:34]`` are wires: the same latency, values and ``en``
behaviour as the fabric form (the registers start at 0, as the fabric's do). Every reset is
0, the unused registers (A1, B1, C, D, AD, INMODE, OPMODE, ALUMODE, CARRYIN, CARRYINSEL)
are off or unused with their enables 0, and ACIN, BCIN, C, D, PCIN, CARRYCASCIN, MULTSIGNIN
are tied to 0; every output is connected (Verilator's ``-Wall`` wants every pin), the unread
ones to signals Amaranth writes as ``$``-named wires, which hw/lint_waivers.vlt leaves
unchecked for use. Sources: Xilinx UG579 (UltraScale Architecture DSP Slice User Guide: the W/X/Y/Z
fields of OPMODE, ALUMODE 0000, AREG/BREG = 1 selecting A2/B2 clocked by CEA2/CEB2,
ACASCREG = AREG and BCASCREG = BREG when those are 0 or 1), UG974 (the DSP48E2 primitive's
ports and attribute defaults), and Yosys' own ``$__MUL27X18`` map (share/xilinx/
xcu_dsp_map.v: the same OPMODE 9'b000000101, INMODE, ALUMODE and CARRYINSEL, A sign-extended
from 27 to 30 bits), with every register off.

``corrected=True`` keeps the fabric form on every platform: its correction ``(P >> 18) +
P[17]`` is a 16-bit adder, which the fabric form puts before its product register; after a
DSP48E2's P it would sit in series with whatever adds the product (an accumulator), a longer
path than any the estimate has today. No design of the project uses it (a paired PE takes
``corrected=False``).

Simulating the UltraScale+ form takes a model of the primitive: ``sim/models/dsp48e2.v``
(exactly this subset, a ``$fatal`` on anything else), which
:func:`zoforge.sim.models.with_models` appends for the activity co-simulation.
"""
from __future__ import annotations

from amaranth import Cat, ClockSignal, Const, Instance, Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.engine_widths import OPERAND_BITS
from zoforge.golden.packing import FULL_BITS, HIGH_BITS, PACKED_BITS, PRODUCT_BITS, SHIFT

from .multiply import LATENCY

__all__ = ["PackedMultiplier", "LATENCY", "DSP48E2_FAMILIES", "uses_dsp48e2"]

#: Platform families (``platform.family``) whose multiplier is a DSP48E2: the boards' and
#: Yosys' names (boards/registry.py) and Amaranth's ``XilinxPlatform.family``.
DSP48E2_FAMILIES = ("xcup", "xcu", "ultrascaleplus", "ultrascale")
_A_BITS, _B_BITS, _P_BITS = 30, 18, 48         # the DSP48E2's A, B and P ports


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
        high_in = self.a_hi if self.borrowed else self.a_hi - self.a_lo[-1]
        if uses_dsp48e2(platform, self.corrected):
            self._dsp48e2(m, high_in)
            return m
        a_lo, b = (Signal(signed(OPERAND_BITS), reset_less=True, name=name)
                   for name in ("a_lo_reg", "b_reg"))
        high = Signal(signed(HIGH_BITS), reset_less=True, name="high_reg")
        packed = Signal(signed(PACKED_BITS))
        full = Signal(signed(FULL_BITS), reset_less=True, name="full_reg")
        p_lo, p_hi = (Signal(signed(PRODUCT_BITS), reset_less=True, name=name)
                      for name in ("p_lo_fabric", "p_hi_fabric"))
        # The borrow on the input side; after the registers, wiring only (module docstring).
        m.d.comb += packed.eq(_packed(a_lo, high))
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

    def _dsp48e2(self, m: Module, high_in) -> None:
        """The UltraScale+ form (module docstring): one DSP48E2, its A2/B2, M and P
        registers the three stages, ``P`` wired to the products."""
        high = high_in[:HIGH_BITS].as_signed()           # 9 bits: a_hi - borrow fits
        p = Signal(_P_BITS, name="dsp_p")
        unused = {port: Signal(width, name=f"dsp_unused_{port.lower()}") for port, width in (
            ("ACOUT", 30), ("BCOUT", 18), ("PCOUT", 48), ("CARRYCASCOUT", 1), ("CARRYOUT", 4),
            ("MULTSIGNOUT", 1), ("OVERFLOW", 1), ("UNDERFLOW", 1), ("PATTERNDETECT", 1),
            ("PATTERNBDETECT", 1), ("XOROUT", 8))}
        on = {"AREG": 1, "ACASCREG": 1, "BREG": 1, "BCASCREG": 1, "MREG": 1, "PREG": 1}
        off = ("ADREG", "DREG", "CREG", "INMODEREG", "OPMODEREG", "ALUMODEREG", "CARRYINREG",
               "CARRYINSELREG")
        ties = {"ACIN": 30, "BCIN": 18, "C": 48, "D": 27, "PCIN": 48, "CARRYCASCIN": 1,
                "MULTSIGNIN": 1, "CARRYIN": 1, "CEA1": 1, "CEB1": 1, "CEAD": 1,
                "CEALUMODE": 1, "CEC": 1, "CECARRYIN": 1, "CECTRL": 1, "CED": 1, "CEINMODE": 1,
                "RSTA": 1, "RSTB": 1, "RSTM": 1, "RSTP": 1, "RSTC": 1, "RSTD": 1,
                "RSTALLCARRYIN": 1, "RSTALUMODE": 1, "RSTCTRL": 1, "RSTINMODE": 1}
        m.submodules.dsp48e2 = Instance(
            "DSP48E2",
            **{f"p_{name}": value for name, value in on.items()},
            **{f"p_{name}": 0 for name in off},
            p_A_INPUT="DIRECT", p_B_INPUT="DIRECT", p_AMULTSEL="A", p_BMULTSEL="B",
            p_PREADDINSEL="A", p_USE_MULT="MULTIPLY", p_USE_SIMD="ONE48",
            p_USE_WIDEXOR="FALSE", p_USE_PATTERN_DETECT="NO_PATDET",
            p_AUTORESET_PATDET="NO_RESET",
            i_CLK=ClockSignal("sync"), i_CEA2=self.en, i_CEB2=self.en, i_CEM=self.en,
            i_CEP=self.en,
            i_A=Cat(_packed(self.a_lo, high), high[-1].replicate(_A_BITS - PACKED_BITS)),
            i_B=Cat(self.b, self.b[-1].replicate(_B_BITS - OPERAND_BITS)),
            i_OPMODE=Const(0b00_000_01_01, 9), i_ALUMODE=Const(0, 4), i_INMODE=Const(0, 5),
            i_CARRYINSEL=Const(0, 3),
            **{f"i_{name}": Const(0, width) for name, width in ties.items()},
            o_P=p,
            **{f"o_{port}": signal for port, signal in unused.items()})
        m.d.comb += [self.p_lo.eq(p[:PRODUCT_BITS].as_signed()),
                     self.p_hi.eq(p[SHIFT:SHIFT + PRODUCT_BITS].as_signed())]


def uses_dsp48e2(platform, corrected: bool = False) -> bool:
    """Whether :class:`PackedMultiplier` elaborates to one DSP48E2 on ``platform``: an
    UltraScale(+) family (:data:`DSP48E2_FAMILIES`) and ``corrected=False``."""
    return not corrected and getattr(platform, "family", None) in DSP48E2_FAMILIES


def _packed(a_lo, high):
    """The packed operand's 27 bits (unsigned): ``a_lo`` sign-extended to SHIFT bits under
    the 9-bit ``high`` (:func:`zoforge.golden.packing.pack_fields`)."""
    return Cat(a_lo, a_lo[-1].replicate(SHIFT - OPERAND_BITS), high)
