"""Result sink: where a compute job's rows go once requantized (the output stage's stream,
:class:`~zoforge.hw.pe.output.OutputStage`): a ``branch``'s to the output stream, the
``frozen_w`` rows (XW, raw int32) into the init buffer at ``Cat(row, tile, panel)`` and the
``frozen_a`` rows (U = requant(X·A), int8) into the U buffer at ``Cat(feature, tile)``, the
feature being the row's (panel offset + row). The buffers take a row every cycle; only the
output stream pushes back. ``done`` pulses with the job's last row; the ``job``'s
``launch`` (:class:`~.control.LayerJobSignature`) clears the position
(:func:`~zoforge.hw.pe.tiles.tile_order` over the ``tiles`` job's M tokens and N
features, the order in which the output stage read the rows).
"""
from __future__ import annotations

from amaranth import Cat, Module, Mux, ResetInserter
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.engine_widths import ACC_BITS
from zoforge.golden.zolayer.config import Formats
from zoforge.hw.pe.bus import AxiStreamSignature
from zoforge.hw.pe.signatures import JobSignature
from zoforge.hw.pe.tiles import Buffer, Tiling, address_bits, tile_order

from .buffers import Memory
from .control import LayerJobSignature
from .registers import DIM_BITS

__all__ = ["ResultSink"]


class ResultSink(wiring.Component):
    """``buffers``: the layer's memories (:func:`~.buffers.layer_buffers`; the init and U
    buffers when present); ``u_words``: features per token tile in the U buffer."""

    def __init__(self, tiling: Tiling, buffers: dict[str, Buffer], u_words: int):
        self.tiling = tiling
        self.frozen = Memory.INIT in buffers
        self.u_word_bits = address_bits(u_words)
        stream_bits = ACC_BITS * tiling.cols
        super().__init__({
            "job": In(LayerJobSignature()), "tiles": In(JobSignature(DIM_BITS)),
            "results": In(AxiStreamSignature(stream_bits)),
            "m_axis": Out(AxiStreamSignature(stream_bits)),
            **({"init_wr": In(buffers[Memory.INIT].write_port()),
                "u_wr": In(buffers[Memory.U].write_port())} if self.frozen else {}),
            "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        job, results, axis = self.job, self.results, self.m_axis
        m.d.comb += [results.tready.eq(Mux(job.branch, axis.tready, 1)),
                     axis.tvalid.eq(results.tvalid & job.branch),
                     axis.tdata.eq(results.tdata), axis.tlast.eq(results.tlast)]
        row = results.tvalid & results.tready
        cursor = tile_order(m, self.tiling, row, self.tiles.m, self.tiles.n)
        m.d.comb += self.done.eq(row & results.tlast)
        if self.frozen:
            lanes = [results.tdata[ACC_BITS * j:ACC_BITS * (j + 1)]
                     for j in range(self.tiling.cols)]
            feature = (cursor.first_weight + cursor.row)[:self.u_word_bits]
            m.d.comb += [
                self.init_wr.addr.eq(Cat(cursor.row, cursor.tile, cursor.panel)),
                self.init_wr.data.eq(results.tdata), self.init_wr.en.eq(row & job.frozen_w),
                self.u_wr.addr.eq(Cat(feature, cursor.tile)),
                self.u_wr.data.eq(Cat(lane[:Formats.ACT_BITS] for lane in lanes)),
                self.u_wr.en.eq(row & job.frozen_a),
            ]
        return ResetInserter(job.launch)(m)
