"""PeZO pre-generated pool in hardware: L block-RAM banks read L values per cycle.

Matches :class:`zoforge.golden.rng.PregenGolden` bit for bit. A perturbation of length d
(``length``, sampled when ``start`` is accepted while idle) streams
``pool[(p + j) mod N]``, j = 0..d-1, L values per transfer (lane 0 in the least-significant
bits; in the last transfer only the first ``d - L*floor((d-1)/L)`` lanes belong to the
perturbation, the rest carry the values that follow), and leaves the pointer at
``(p + d) mod N`` for the next perturbation.

Two bank layouts (elaboration option ``layout``):

* ``replicated`` (default, as in PeZO's Table 6: 8 BRAMs for 8 values per cycle): bank l
  holds the whole pool rotated by l, ``bank_l[a] = pool[(a + l) mod N]``; all banks read the
  same address p, lane l is bank l: no crossbar, no address arithmetic per bank, but L*N*q
  bits of memory.
* ``striped``: the pool extended by its first L-1 values is dealt over the banks
  (``bank_m[a] = ext[a*L + m]``), N+L-1 values in all; bank m reads address
  ``p div L + (m < p mod L)`` and a rotation by ``p mod L`` puts the values in lane order.
  L times less memory, paid for with L adders and an L x L crossbar of q-bit multiplexers.

Memory reads are synchronous (BRAM): the read
registers always hold the values at the current pointer; one fetch cycle after reset or a
restore fills them. ``snapshot=True`` adds ``save``/``restore``: ``save`` copies the pointer
into a shadow register, ``restore`` copies it back and abandons the perturbation in flight
(a restore costs a few flip-flops here, unlike the on-the-fly generator). ``pointer`` shows
the current pointer at all times.
"""
from __future__ import annotations

from amaranth import Array, Cat, Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.rng import PregenConfig
from zoforge.hw.rng.lfsr import drive_valid, snapshot_stream_members

__all__ = ["PregenGenerator"]


class PregenGenerator(wiring.Component):
    """Stream top of the pre-generated pool (see the module docstring).

    Ports: ``out`` (stream of L q-bit values), ``start``/``length`` (begin a perturbation of
    ``length`` values when idle), ``idle``, ``pointer``; ``save``/``restore`` with snapshot.
    Banks, pointer and control are one module (the banks' read registers need no reset, and
    a separate bank module would leave its reset input unused).
    """

    def __init__(self, config: PregenConfig):
        self.config = config
        self.golden = config.golden()
        self.layout, self.length_bits = config.layout, config.length_bits
        self.snapshot = config.snapshot
        members = {"out": Out(stream.Signature(config.banks * config.bits)), "start": In(1),
                   "length": In(config.length_bits), "idle": Out(1),
                   "pointer": Out(range(config.pool_size)),
                   **snapshot_stream_members(config.snapshot)}
        super().__init__(members)

    def memories(self) -> list[memory.Memory]:
        """One ``amaranth.lib.memory`` block RAM per bank, holding ``bank_contents``."""
        q = self.golden.bits
        return [memory.Memory(shape=q, depth=len(contents),
                              init=[int(v) & ((1 << q) - 1) for v in contents])
                for contents in self.golden.bank_contents(self.layout)]

    def elaborate(self, platform):
        m = Module()
        fetch, fetch_pointer = self._control(m)
        self._banks(m, fetch, fetch_pointer)
        return m

    def _control(self, m: Module):
        """Pointer, remaining count, valid; returns (fetch enable, pointer to fetch)."""
        n, lanes = self.golden.pool_size, self.golden.banks
        pointer, valid, idle = self.pointer, self.out.valid, self.idle
        remaining = Signal(self.length_bits, name="remaining")
        fetched = Signal(name="fetched")
        transfer = valid & self.out.ready
        count = Mux(remaining > lanes, lanes, remaining)
        advanced = pointer + count
        next_pointer = Mux(advanced >= n, advanced - n, advanced)
        m.d.comb += idle.eq(remaining == 0)
        drive_valid(m, self, fetched & ~idle)

        m.d.sync += fetched.eq(1)
        with m.If(transfer):
            m.d.sync += [pointer.eq(next_pointer), remaining.eq(remaining - count)]
        with m.Elif(idle & self.start):
            m.d.sync += remaining.eq(self.length)
        if self.snapshot:                      # (later statements win in Amaranth)
            saved = Signal(range(n), name="pointer_saved")
            with m.If(self.save):
                m.d.sync += saved.eq(pointer)
            with m.If(self.restore):
                m.d.sync += [pointer.eq(saved), remaining.eq(0), fetched.eq(0)]
        return transfer | ~fetched, Mux(transfer, next_pointer, pointer)

    def _banks(self, m: Module, fetch, fetch_pointer) -> None:
        """The banks read ``fetch_pointer`` on ``fetch``; the payload shows ``pointer``'s."""
        lanes, q = self.golden.banks, self.golden.bits
        reads = []
        for index, bank in enumerate(self.memories()):
            m.submodules[f"bank{index}"] = bank
            reads.append(bank.read_port())
            m.d.comb += reads[-1].en.eq(fetch)
        if self.layout == "replicated" or lanes == 1:
            m.d.comb += [read.addr.eq(fetch_pointer) for read in reads]
            m.d.comb += self.out.payload.eq(Cat(read.data for read in reads))
            return
        shift = (lanes - 1).bit_length()
        row, offset = fetch_pointer >> shift, fetch_pointer[:shift]
        for index, read in enumerate(reads):      # (the last bank always reads `row`)
            m.d.comb += read.addr.eq(row + (index < offset) if index < lanes - 1 else row)
        data, shown = Array(read.data for read in reads), self.pointer[:shift]
        for lane in range(lanes):
            m.d.comb += self.out.payload[lane * q:(lane + 1) * q].eq(
                data[(shown + lane)[:shift]])
