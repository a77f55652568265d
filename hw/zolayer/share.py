"""What the layer's units share, given to the unit the job in flight needs:

* :class:`ZSwitch`: the generator's transfers to the panel fetch (a ``branch``: the
  perturbation) or to the update unit (``accumulate``: the same z again; with Q queries per
  branch job, only every Q-th transfer from the job's ``query`` on, the others dropped);
* :class:`MasterPorts`: the master copy T's read port to the reader (``read_master``), the
  update unit (``accumulate``, ``apply``) or the panel fetch (other jobs), and the write
  ports of T and of the update accumulator D to the update unit or the loader
  (``load_master``).

Both are multiplexers (the switch's transfer count modulo Q aside): a unit that is not
selected sees its port's data but its requests go nowhere. T's read data passes one
register (:data:`T_READ_LATENCY`: the block RAM's output register, its only load), which
takes the read port's data whenever the port's ``en`` is high: a read with ``en`` in cycle
c is on the units' ``data`` from cycle c + 2 if ``en`` is high in cycle c + 1 as well (a
pipeline whose two stages, the memory and the register, move together on ``en``). The
writes of T and D reach the memories a cycle after the unit's (registered after the
multiplexer): a unit that reads a word it wrote waits a cycle more (none does within a job).
"""
from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from zoforge.hw.pe.tiles import Buffer

from .buffers import Memory
from .control import LayerJobSignature

__all__ = ["ZSwitch", "MasterPorts", "T_READERS", "WRITERS", "T_READ_LATENCY"]

#: The units that read T, and the units that write T and D, each with the port name prefix.
T_READERS = ("reader", "update", "fetch")
WRITERS = ("update", "loader")
#: Cycles from a read of T (``en`` high) to its word on the units' ``data``.
T_READ_LATENCY = 2


class ZSwitch(wiring.Component):
    """``z`` (the generator's stream) to ``fetch`` in a branch, else to ``update``: with
    ``queries`` Q > 1 per branch job, the update unit gets transfers ``query``, ``query +
    Q``, ... of the job (counted from its ``launch``), and the switch drops the others
    while the update unit is ready for one (so an accumulate of query Q - 1 leaves the
    generator at the end of the branch job's perturbations)."""

    def __init__(self, z_bits: int, queries: int = 1):
        self.queries = queries
        signature = stream.Signature(z_bits)
        super().__init__({"job": In(LayerJobSignature()), "z": In(signature),
                          "fetch": Out(signature), "update": Out(signature)})

    def elaborate(self, platform):
        m = Module()
        branch = self.job.branch
        ours = 1
        if self.queries > 1:
            count = Signal(range(self.queries))      # the transfer's query within its word
            ours = count == self.job.query
            with m.If(self.job.launch):
                m.d.sync += count.eq(0)
            with m.Elif(self.z.valid & self.z.ready & ~branch):
                m.d.sync += count.eq(Mux(count == self.queries - 1, 0, count + 1))
        # the panel fetch takes a transfer only in a branch (its perturbation flag), so its
        # valid is the generator's own (no gate between the generator and the fetch's walk)
        m.d.comb += [self.fetch.payload.eq(self.z.payload),
                     self.fetch.valid.eq(self.z.valid),
                     self.update.payload.eq(self.z.payload),
                     self.update.valid.eq(self.z.valid & ~branch & ours)]
        # a transfer not the update's is dropped while the update unit wants one: after
        # the last word's own transfer the rest of that word stays in the generator
        m.d.comb += self.z.ready.eq(Mux(branch, self.fetch.ready, self.update.ready))
        return m


class MasterPorts(wiring.Component):
    """The memories' side: ``t_rd``, ``t_wr``, ``d_wr``; the units' side: ``{unit}_t_rd``
    for the :data:`T_READERS`, ``{unit}_t_wr`` and ``{unit}_d_wr`` for the :data:`WRITERS`
    (``buffers``: the layer's memories)."""

    def __init__(self, buffers: dict[Memory, Buffer]):
        master, accumulator = buffers[Memory.MASTER], buffers[Memory.ACCUMULATOR]
        super().__init__({
            "job": In(LayerJobSignature()),
            "t_rd": In(master.read_port()), "t_wr": In(master.write_port()),
            "d_wr": In(accumulator.write_port()),
            **{f"{unit}_t_rd": Out(master.read_port()) for unit in T_READERS},
            **{f"{unit}_t_wr": Out(master.write_port()) for unit in WRITERS},
            **{f"{unit}_d_wr": Out(accumulator.write_port()) for unit in WRITERS},
        })

    def elaborate(self, platform):
        m = Module()
        job = self.job
        updating = job.accumulate | job.apply
        # T's reads: the reader's, the update unit's, else the panel fetch's
        address, enable = self.fetch_t_rd.addr, self.fetch_t_rd.en
        for selected, port in ((updating, self.update_t_rd), (job.read_master, self.reader_t_rd)):
            address, enable = Mux(selected, port.addr, address), Mux(selected, port.en, enable)
        m.d.comb += [self.t_rd.addr.eq(address), self.t_rd.en.eq(enable)]
        word = Signal.like(self.t_rd.data, name="t_word")
        with m.If(enable):
            m.d.sync += word.eq(self.t_rd.data)
        m.d.comb += [getattr(self, f"{unit}_t_rd").data.eq(word) for unit in T_READERS]
        # T's and D's writes: the update unit's while updating, else the loader's, one cycle
        # later (from registers: the block RAMs' write ports after the multiplexer)
        for memory in ("t_wr", "d_wr"):
            port, ours, theirs = (getattr(self, name) for name in
                                  (memory, f"update_{memory}", f"loader_{memory}"))
            m.d.sync += [port.addr.eq(Mux(updating, ours.addr, theirs.addr)),
                         port.data.eq(Mux(updating, ours.data.as_value(), theirs.data.as_value())),
                         port.en.eq(Mux(updating, ours.en, theirs.en))]
        return m
