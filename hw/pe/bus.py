"""Bus signatures (``amaranth.lib.wiring``), from the initiator's point of view.

A target takes them flipped, e.g. a register file's ``s_axil: In(AxiLiteSignature(16))``.
Amaranth names the Verilog ports of a member after its path, joined by ``__``: that member
becomes ``s_axil__awaddr``, ``s_axil__awvalid``, ... (cocotbext-axi:
``AxiLiteBus.from_prefix(dut, "s_axil_")``, ``AxiStreamBus.from_prefix(dut, "s_axis_")``).
"""
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AxiLiteSignature", "AxiStreamSignature"]


class AxiLiteSignature(wiring.Signature):
    """AXI4-Lite with 32-bit data and ``addr_bits`` address bits (manager's view)."""

    def __init__(self, addr_bits: int):
        self.addr_bits = addr_bits
        super().__init__({
            "awaddr": Out(addr_bits), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(32), "wstrb": Out(4), "wvalid": Out(1), "wready": In(1),
            "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "araddr": Out(addr_bits), "arvalid": Out(1), "arready": In(1),
            "rdata": In(32), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
        })

    def __eq__(self, other):
        return type(other) is type(self) and other.addr_bits == self.addr_bits

    def __repr__(self):
        return f"AxiLiteSignature({self.addr_bits})"


class AxiStreamSignature(wiring.Signature):
    """AXI4-Stream with ``data_bits`` of ``tdata``, ``tvalid``/``tready`` and ``tlast``
    (transmitter's view)."""

    def __init__(self, data_bits: int):
        self.data_bits = data_bits
        super().__init__({"tdata": Out(data_bits), "tvalid": Out(1), "tready": In(1),
                          "tlast": Out(1)})

    def __eq__(self, other):
        return type(other) is type(self) and other.data_bits == self.data_bits

    def __repr__(self):
        return f"AxiStreamSignature({self.data_bits})"
