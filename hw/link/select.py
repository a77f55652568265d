"""The softmax unit's input selector: :class:`FrameSelect`, whole frames from one of several
AXI4-Stream sources to one sink, in the order the host queues them (docs/link.md).

An attention link gives a softmax unit its scores rows from an engine's reorder buffer
instead of the DDR; a unit fed by several engines' links, and by the DDR for jobs not
linked, takes each job's frame from the source the host names for it. The golden model is
:func:`zoforge.golden.link.select_frames`.

Ports (Verilog: ``clk``, ``rst`` and the members joined by ``__``):

* ``select`` (``lib.stream``, payload the source's index, 0 to ``sources - 1``): one entry
  a frame, queued ahead in a FIFO of ``queue_depth`` entries (``ready`` low while full);
* ``s_axis[i]`` (``data_bits``): source i's frames, a frame ending at its ``tlast``;
  ``tready`` is low except on the source whose frame is passing, so a source's frames
  wait for their entries (a source never loses a beat, whatever it offers early);
* ``m_axis`` (``data_bits``): the chosen source's beats passed through unchanged
  (``tdata``, ``tvalid``, ``tlast`` from it, its ``tready`` from the sink's: no register
  on the path, no beat held here).

Cycles: an entry at the queue's head is taken in a cycle with no frame passing; its
frame's beats pass from the next cycle, one a cycle while both sides are ready; the cycle
after a frame's last beat passes, the next entry is taken (one idle cycle between frames).
"""
from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from zoforge.errors import check_int_range
from zoforge.hw.pe.bus import AxiStreamSignature

from .config import MAX_SOURCES

__all__ = ["FrameSelect", "MAX_SOURCES", "MAX_QUEUE"]

#: Most entries queued ahead.
MAX_QUEUE = 64


class FrameSelect(wiring.Component):
    """Whole frames from ``sources`` streams of ``data_bits`` to one, each frame's source
    queued by the host (module docstring)."""

    def __init__(self, sources: int, data_bits: int, queue_depth: int = 4):
        self.sources = check_int_range("sources", sources, 2, MAX_SOURCES)
        self.data_bits = check_int_range("data_bits", data_bits, 1, 4096)
        self.queue_depth = check_int_range("queue_depth", queue_depth, 1, MAX_QUEUE)
        super().__init__({
            "select": In(stream.Signature(range(sources))),
            "s_axis": In(AxiStreamSignature(data_bits)).array(sources),
            "m_axis": Out(AxiStreamSignature(data_bits)),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.queue = queue = SyncFIFOBuffered(width=len(self.select.payload),
                                                      depth=self.queue_depth)
        m.d.comb += [queue.w_data.eq(self.select.payload),
                     queue.w_en.eq(self.select.valid),
                     self.select.ready.eq(queue.w_rdy)]

        passing = Signal()                      # a frame is under way from `source`
        source = Signal(range(self.sources))
        with m.If(~passing & queue.r_rdy):
            m.d.comb += queue.r_en.eq(1)
            m.d.sync += [passing.eq(1), source.eq(queue.r_data)]

        out = self.m_axis
        for index, port in enumerate(self.s_axis):
            chosen = Signal(name=f"chosen_{index}")
            m.d.comb += [chosen.eq(passing & (source == index)),
                         port.tready.eq(chosen & out.tready)]
            with m.If(chosen):
                m.d.comb += [out.tdata.eq(port.tdata), out.tvalid.eq(port.tvalid),
                             out.tlast.eq(port.tlast)]
        with m.If(out.tvalid & out.tready & out.tlast):
            m.d.sync += passing.eq(0)
        return m
