"""AXI4-Lite target: turns bus transactions into single-cycle register writes and reads.

Writes: the address and data channels are taken together (``awready``/``wready`` high in the
cycle both are valid and no response is pending); the write reaches the register file as a
one-cycle ``wr_en`` pulse, but only for full-word writes (``wstrb == 0b1111``; partial writes
are acknowledged and ignored). Reads: ``rd_addr`` follows ``araddr`` and ``rd_data`` (from
the register file, combinational) is registered into ``rdata``. Responses are always OKAY.
"""
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AxiLiteTarget", "axil_members"]


def axil_members(addr_bits: int, prefix: str = "") -> dict:
    """Signature members of an AXI4-Lite target port (32-bit data), named ``prefix + name``."""
    members = {"awaddr": In(addr_bits), "awvalid": In(1), "awready": Out(1),
               "wdata": In(32), "wstrb": In(4), "wvalid": In(1), "wready": Out(1),
               "bresp": Out(2), "bvalid": Out(1), "bready": In(1),
               "araddr": In(addr_bits), "arvalid": In(1), "arready": Out(1),
               "rdata": Out(32), "rresp": Out(2), "rvalid": Out(1), "rready": In(1)}
    return {prefix + name: member for name, member in members.items()}


class AxiLiteTarget(wiring.Component):
    def __init__(self, addr_bits: int):
        self.addr_bits = addr_bits
        super().__init__({
            **axil_members(addr_bits),
            "wr_en": Out(1), "wr_addr": Out(addr_bits), "wr_data": Out(32),
            "rd_addr": Out(addr_bits), "rd_data": In(32),
        })

    def elaborate(self, platform):
        m = Module()
        take_write = self.awvalid & self.wvalid & ~self.bvalid
        m.d.comb += [self.awready.eq(take_write), self.wready.eq(take_write),
                     self.wr_en.eq(take_write & (self.wstrb == 0b1111)),
                     self.wr_addr.eq(self.awaddr), self.wr_data.eq(self.wdata)]
        with m.If(take_write):
            m.d.sync += self.bvalid.eq(1)
        with m.Elif(self.bready):
            m.d.sync += self.bvalid.eq(0)
        m.d.comb += [self.arready.eq(~self.rvalid), self.rd_addr.eq(self.araddr)]
        with m.If(self.arvalid & ~self.rvalid):
            m.d.sync += [self.rdata.eq(self.rd_data), self.rvalid.eq(1)]
        with m.Elif(self.rready):
            m.d.sync += self.rvalid.eq(0)
        return m
