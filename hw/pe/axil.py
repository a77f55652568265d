"""AXI4-Lite target: turns bus transactions into single-cycle register writes and reads.

Writes: the address and data channels are taken together (``awready``/``wready`` high in the
cycle both are valid and no response is pending, so they may arrive in either order); the
write reaches the register file (``regs``, :class:`RegisterPortSignature`) as a one-cycle
``wr_en`` pulse, but only for full-word writes
(``wstrb == 0b1111``). A partial write (any strobe low) changes nothing and is answered
SLVERR: AXI4-Lite lets a target either use the strobes, or ignore them and write the whole
word, or reject the strobe patterns it does not support with an error response; this target
does the last (the register file has no byte lanes, and an OKAY for a write that did nothing
would hide the host's mistake). With ``write_addresses`` the target also decodes the write
address itself: ``wr_hit[i]`` is the same pulse as ``wr_en``, set only when the address is
``write_addresses[i]``, from a register of its own (the AXI side's compare and the
handshake in front of it, not in the register file's logic behind it: a register file
that tests ``wr_hit`` has no bus decode between the target's registers and its own). Reads: ``rd_addr`` follows ``araddr`` and ``rd_data`` (from
the register file) is taken into a register of its own every cycle, then into ``rdata`` (the
register file's decode and the response's enable are not one path): a read's data comes
:data:`READ_CYCLES` + 1 cycles after its address; read responses are OKAY.
"""
import operator
from functools import reduce

from amaranth import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .bus import AxiLiteSignature

__all__ = ["AxiLiteTarget", "RegisterPortSignature", "read_select", "field_word", "OKAY", "SLVERR",
           "READ_CYCLES"]

OKAY, SLVERR = 0b00, 0b10      # AXI response codes (bresp / rresp)
READ_CYCLES = 2                # cycles the register file has for a read (see the port)


class RegisterPortSignature(wiring.Signature):
    """A register file's port (the bus target's view): single-cycle writes ``wr_en`` /
    ``wr_addr`` / ``wr_data`` (from registers), reads: ``rd_addr`` (a register) holds for
    :data:`READ_CYCLES` cycles and ``rd_data`` is taken in the last (a register file may
    register its read decode once). With ``write_addresses`` (byte addresses), ``wr_hit``:
    one flag each, ``wr_en`` at that address, decoded by the target (a register)."""

    def __init__(self, addr_bits: int, write_addresses: tuple[int, ...] = ()):
        self.addr_bits = addr_bits
        self.write_addresses = tuple(write_addresses)
        for address in self.write_addresses:
            if not 0 <= address < 1 << addr_bits:
                raise ValueError(f"write address {address:#x} outside {addr_bits} bits")
        hits = {"wr_hit": Out(len(self.write_addresses))} if self.write_addresses else {}
        super().__init__({"wr_en": Out(1), "wr_addr": Out(addr_bits), "wr_data": Out(32),
                          **hits, "rd_addr": Out(addr_bits), "rd_data": In(32)})

    def hit(self, port, address: int):
        """``port``'s write flag for ``address`` (one of ``write_addresses``)."""
        return port.wr_hit[self.write_addresses.index(address)]

    def __eq__(self, other):
        return (type(other) is type(self) and other.addr_bits == self.addr_bits
                and other.write_addresses == self.write_addresses)

    def __repr__(self):
        extra = f", {self.write_addresses}" if self.write_addresses else ""
        return f"RegisterPortSignature({self.addr_bits}{extra})"


def field_word(bits: dict[str, int], values: dict) -> Value:
    """A register word with ``values[name]`` at bit ``bits[name]`` (0 elsewhere): a
    register file's CTRL or STATUS read back."""
    at = {bits[name]: value for name, value in values.items()}
    return Cat(*(at.get(position, Const(0, 1)) for position in range(max(bits.values()) + 1)))


def read_select(m: Module, rd_addr: Value, words: dict[str, tuple[int, Value]]) -> Value:
    """A register file's ``rd_data`` in :data:`READ_CYCLES` = 2 cycles: the address decode
    registered (one hit flag per register, ``words``: name -> (byte address, value)), then
    the selected word (an OR of the words whose flag is set; 0 at an unmapped address)."""
    selected = []
    for name, (address, value) in words.items():
        hit = Signal(name=f"read_{name.lower()}")
        m.d.sync += hit.eq(rd_addr == address)
        selected.append(Mux(hit, value, 0))
    return reduce(operator.or_, selected)


class AxiLiteTarget(wiring.Component):
    """``bus`` (AXI4-Lite, 32-bit data) on one side, the register file's port ``regs`` on
    the other (``write_addresses``: the writes it decodes, :class:`RegisterPortSignature`)."""

    def __init__(self, addr_bits: int, write_addresses: tuple[int, ...] = ()):
        self.addr_bits = addr_bits
        super().__init__({
            "bus": In(AxiLiteSignature(addr_bits)),
            "regs": Out(RegisterPortSignature(addr_bits, write_addresses)),
        })

    def elaborate(self, platform):
        m = Module()
        bus, regs = self.bus, self.regs
        take_write = bus.awvalid & bus.wvalid & ~bus.bvalid
        full_word = bus.wstrb == 0b1111
        # the write reaches the register file one cycle later, from registers (the bus
        # decode and the register file's decode are not one path)
        m.d.comb += [bus.awready.eq(take_write), bus.wready.eq(take_write)]
        m.d.sync += [regs.wr_en.eq(take_write & full_word), regs.wr_addr.eq(bus.awaddr),
                     regs.wr_data.eq(bus.wdata)]
        for i, address in enumerate(regs.signature.write_addresses):
            m.d.sync += regs.wr_hit[i].eq(take_write & full_word & (bus.awaddr == address))
        with m.If(take_write):
            m.d.sync += [bus.bvalid.eq(1), bus.bresp.eq(Mux(full_word, OKAY, SLVERR))]
        with m.Elif(bus.bready):
            m.d.sync += bus.bvalid.eq(0)
        # a read: the address into a register, held while the register file answers (it
        # may register its decode); its data, taken every cycle, READ_CYCLES cycles after
        # the address, goes to ``rdata`` in the next
        pending = Signal(range(READ_CYCLES + 2))
        rd_addr, rd_data = Signal.like(regs.rd_addr), Signal.like(regs.rd_data)
        m.d.comb += [bus.arready.eq(~bus.rvalid & (pending == 0)), regs.rd_addr.eq(rd_addr)]
        m.d.sync += rd_data.eq(regs.rd_data)
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += [rd_addr.eq(bus.araddr), pending.eq(READ_CYCLES + 1)]
        with m.Elif(pending == 1):
            m.d.sync += [bus.rdata.eq(rd_data), bus.rvalid.eq(1), pending.eq(0)]
        with m.Elif(pending != 0):
            m.d.sync += pending.eq(pending - 1)
        with m.Elif(bus.rready):
            m.d.sync += bus.rvalid.eq(0)
        return m
