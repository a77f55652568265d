"""Output stage: drained tiles from the result banks, with their column parameters, as a
stream of rows for the requantizer (:class:`~.requant.RequantStream`), and its rows on as
the AXI4-Stream output.

Each tile leaves as R rows (top row first), tiles in the order (nt outer, mt inner); the
job's last row carries ``last`` (``tlast``). A result bank is free again (``tile_done``)
when its last row has been read. The memory reads stall with the stream (their ``en`` is
the stream's ``~valid | ready``). ``job.start`` clears all state.
"""
from __future__ import annotations

from amaranth import Cat, Module, ResetInserter, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.gemm_widths import ACC_BITS
from zoforge.hw.bus import AxiStreamSignature

from .buffers import address_bits, engine_buffers
from .config import DIM_BITS, EngineConfig
from .regmap import PARAM_TABLES
from .registers import JobSignature
from .requant import input_layout, output_layout

__all__ = ["OutputStage"]


class OutputStage(wiring.Component):
    def __init__(self, config: EngineConfig):
        self.config = config
        buffers = engine_buffers(config)
        cols = config.cols
        super().__init__({
            "job": In(JobSignature()),
            "drained": In(1),        # a result bank has been filled
            "tile_done": Out(1),     # a result bank has been read out
            "res_rd": In(buffers["result_buffer"].read_port()),
            **{table.memory: In(buffers[table.memory].read_port())
               for table in PARAM_TABLES.values()},
            "rows": Out(stream.Signature(input_layout(cols))),
            "results": In(stream.Signature(output_layout(cols))),
            "m_axis": Out(AxiStreamSignature(ACC_BITS * cols)),
            "job_end": Out(1),       # the job's last beat leaves
        })

    def elaborate(self, platform):
        m = Module()
        config, job, rows = self.config, self.job, self.rows
        R, C = config.rows, config.cols
        row = Signal(address_bits(R))
        bank = Signal()
        m0 = Signal(DIM_BITS + 7)
        nt = Signal(DIM_BITS)
        n0 = Signal(DIM_BITS + 7)
        tiles_ready = Signal(2)     # drained tiles not yet read out

        adv = ~rows.valid | rows.ready
        issue = adv & (tiles_ready != 0)
        is_tile_end = row == R - 1
        m.d.comb += [self.res_rd.addr.eq(Cat(row, bank)), self.res_rd.en.eq(adv),
                     rows.payload.acc.eq(self.res_rd.data)]
        for table in PARAM_TABLES.values():
            port = getattr(self, table.memory)
            m.d.comb += [port.addr.eq(nt), port.en.eq(adv),
                         rows.payload[table.field].eq(port.data)]
        last = Signal()
        m.d.comb += rows.payload.last.eq(last)
        with m.If(adv):
            m.d.sync += [rows.valid.eq(issue),
                         last.eq(issue & is_tile_end & (m0 + R >= job.m) & (n0 + C >= job.n))]
        with m.If(issue):
            m.d.sync += row.eq(row + 1)
            with m.If(is_tile_end):
                m.d.comb += self.tile_done.eq(1)
                m.d.sync += [row.eq(0), bank.eq(~bank), m0.eq(m0 + R)]
                with m.If(m0 + R >= job.m):
                    m.d.sync += [m0.eq(0), nt.eq(nt + 1), n0.eq(n0 + C)]
        m.d.sync += tiles_ready.eq(tiles_ready + self.drained - self.tile_done)

        results, axis = self.results, self.m_axis
        m.d.comb += [axis.tdata.eq(results.payload.data), axis.tlast.eq(results.payload.last),
                     axis.tvalid.eq(results.valid), results.ready.eq(axis.tready),
                     self.job_end.eq(axis.tvalid & axis.tready & axis.tlast)]
        return ResetInserter(job.start)(m)
