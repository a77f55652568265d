"""A multiplier between registers: ``p = a * b`` :data:`LATENCY` cycles after ``a`` and ``b``
(both taken and the product moved only while ``en``), exact, the product's shape Amaranth's.

The pattern every FPGA's multiplier block has (input registers, registered product) and
nothing else around it, so the operands' register, the multiplier and the product's register
can be one block; then one more register of the product in the fabric, so that the long
route from the (few, fixed) multiplier sites to the logic that uses the product is a path of
its own:

* on an ECP5 platform (``platform.family == "ecp5"``) it *is* one ``MULT18X18D`` with its
  input and output registers (``REG_INPUTA``/``REG_INPUTB``/``REG_OUTPUT`` on ``CLK0``,
  ``CE0 = en``): Yosys' ``synth_ecp5`` packs no register into the block itself, and the
  block's own path without them (3.9 ns in nextpnr) takes most of a cycle at 150 MHz;
  operands must fit 18-bit signed;
* elsewhere (simulation, Xilinx) two register stages around ``a * b``, which Yosys'
  ``synth_xilinx -family xc7`` packs as a DSP48E1's AREG/BREG and MREG (for DSP48E2 Yosys
  0.70 packs no registers).

The registers have no reset (data only: whoever uses ``p`` tracks its validity).
"""
from __future__ import annotations

from amaranth import ClockSignal, Const, Instance, Module, Signal, signed
from amaranth.hdl import Shape, ShapeLike
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["PipelinedMultiplier", "LATENCY", "ECP5_OPERAND_BITS"]

#: Register stages from the operands to the product.
LATENCY = 3
ECP5_OPERAND_BITS = 18            # MULT18X18D operands, signed
_ECP5_PRODUCT_BITS = 36


def _fits_ecp5(shape: Shape) -> bool:
    return shape.width + (0 if shape.signed else 1) <= ECP5_OPERAND_BITS


class PipelinedMultiplier(wiring.Component):
    def __init__(self, a_shape: ShapeLike, b_shape: ShapeLike):
        self.a_shape, self.b_shape = Shape.cast(a_shape), Shape.cast(b_shape)
        self.p_shape = (Signal(self.a_shape) * Signal(self.b_shape)).shape()
        super().__init__({"a": In(self.a_shape), "b": In(self.b_shape),
                          "en": In(1, init=1), "p": Out(self.p_shape)})

    def elaborate(self, platform):
        m = Module()
        if (getattr(platform, "family", None) == "ecp5" and _fits_ecp5(self.a_shape)
                and _fits_ecp5(self.b_shape)):
            return self._behind(m, self._mult18x18d(m))
        a, b = (Signal(self.a_shape, reset_less=True, name="a_reg"),
                Signal(self.b_shape, reset_less=True, name="b_reg"))
        p = Signal(self.p_shape, reset_less=True, name="p_reg")
        with m.If(self.en):
            m.d.sync += [a.eq(self.a), b.eq(self.b), p.eq(a * b)]
        return self._behind(m, p)

    def _behind(self, m: Module, product) -> Module:
        """The product's register in the fabric."""
        p = Signal(self.p_shape, reset_less=True, name="p_fabric")
        with m.If(self.en):
            m.d.sync += p.eq(product)
        m.d.comb += self.p.eq(p)
        return m

    def _mult18x18d(self, m: Module):
        a, b = Signal(signed(ECP5_OPERAND_BITS)), Signal(signed(ECP5_OPERAND_BITS))
        p = Signal(signed(_ECP5_PRODUCT_BITS))
        m.d.comb += [a.eq(self.a), b.eq(self.b)]
        zero, one = Const(0, 1), Const(1, 1)
        registers = {f"p_REG_{name}_{what}": f"{what}0"
                     for name in ("INPUTA", "INPUTB", "OUTPUT") for what in ("CLK", "CE", "RST")}
        unused = {f"i_{pin}{n}": zero for pin in ("CLK", "CE", "RST") for n in (1, 2, 3)}
        m.submodules.mult18x18d = Instance(
            "MULT18X18D", **registers, p_GSR="DISABLED", p_SOURCEB_MODE="B_SHIFT",
            i_SIGNEDA=one, i_SIGNEDB=one, i_SOURCEA=zero, i_SOURCEB=zero,
            i_CLK0=ClockSignal("sync"), i_CE0=self.en, i_RST0=zero, **unused,
            **{f"i_A{n}": a[n] for n in range(ECP5_OPERAND_BITS)},
            **{f"i_B{n}": b[n] for n in range(ECP5_OPERAND_BITS)},
            **{f"i_C{n}": zero for n in range(ECP5_OPERAND_BITS)},
            **{f"o_P{n}": p[n] for n in range(_ECP5_PRODUCT_BITS)})
        return p[:self.p_shape.width]
