"""The attention link on one GEMM engine's output: :class:`ScoresLink`, the engine's frames
either passed on unchanged (to the DDR's writer, as today) or, for the ``scores = Q·K^T``
jobs the host links, through a :class:`~.reorder.ScoresReorder` and an asynchronous FIFO
into the softmax units' clock domain (docs/link.md; the golden model
:func:`zoforge.golden.link.route_frames`).

Ports (Verilog: ``clk``, ``rst``, ``softmax_clk``, ``softmax_rst`` and the members joined
by ``__``):

* ``job`` (``lib.stream``, payload :func:`job_layout`: ``route``, ``m``, ``length``): one
  entry a frame of the engine's (a job's output, ending at its ``tlast``), in issue order,
  queued ahead in a FIFO of ``queue_depth`` entries (``ready`` low while full). ``route``
  0: the frame to ``m_axis``; 1: to the reorder buffer as a job of ``m`` query rows x
  ``length`` keys (1 to max_rows, 1 to max_len: anything else is the host's error);
  ``m`` and ``length`` are ignored for route 0.
* ``s_axis`` (``32 C`` bits, ``sync``): the engine's output. ``tready`` is low while no
  entry is taken for the frame (a frame that comes before its entry waits, nothing is
  lost), then the chosen side's.
* ``m_axis`` (``32 C`` bits, ``sync``): the route-0 frames, beat by beat as they came
  (``tdata``, ``tlast``, ``tvalid`` from ``s_axis``, its ``tready`` to ``s_axis``: no
  register on the path). A frame ends at its ``tlast``.
* ``softmax_axis`` (``32 lanes`` bits, in the domain ``softmax_domain``, ``softmax`` by
  default: hw/accel/top.py's softmax units' clock): the route-1 frames' rows in the softmax
  unit's input format (hw/softmax/top.py ``s_axis``; docs/link.md), ``tlast`` on each
  job's last beat. A route-1 frame is counted from its ``m`` and ``length`` by the reorder
  buffer (its ``tlast`` only checked).
* ``error`` (sticky): a route-1 frame's ``tlast`` was not on its last beat alone (the
  engine's job and the entry disagree; the reorder buffer's ``job.error``); cleared by
  ``clear``.

Cycles (``sync``): an entry at the queue's head is taken in a cycle with no frame under
way (for route 1, the buffer ready for a start: its previous job's input is in); the
frame's beats pass from the next cycle, one a cycle while the side taking them is ready.
An entry is in the queue's head two cycles after it is pushed (``SyncFIFOBuffered``).
The route-1 beats cross to ``softmax_axis`` through ``AsyncFIFO`` (``fifo_depth`` beats,
write side ``sync``, read side the softmax domain; the ``sync`` reset empties it).
"""
from __future__ import annotations

from amaranth import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import AsyncFIFO, SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from zoforge.hw.pe.bus import AxiStreamSignature

from .config import LinkConfig
from .reorder import SCORE_BITS, ScoresReorder

__all__ = ["ScoresLink", "job_layout", "SOFTMAX_DOMAIN"]

#: The read side's clock domain by default (hw/accel/top.py's ``SOFTMAX_DOMAIN``).
SOFTMAX_DOMAIN = "softmax"


def job_layout(m_bits: int, l_bits: int) -> data.StructLayout:
    """A job entry: ``route`` (0 pass, 1 to the softmax side), the reorder job's ``m`` and
    ``length``."""
    return data.StructLayout({"route": 1, "m": m_bits, "length": l_bits})


class ScoresLink(wiring.Component):
    """The link on one engine's output (module docstring), from a :class:`LinkConfig` (or
    its fields as keywords); ``softmax_domain`` names the read side's clock domain."""

    def __init__(self, config: LinkConfig | None = None, *,
                 softmax_domain: str = SOFTMAX_DOMAIN, **fields):
        config = self.link_config = config if config is not None else LinkConfig(**fields)
        self.softmax_domain = softmax_domain
        super().__init__({
            "job": In(stream.Signature(job_layout(config.m_bits, config.l_bits))),
            "error": Out(1),
            "clear": In(1),
            "s_axis": In(AxiStreamSignature(SCORE_BITS * config.cols)),
            "m_axis": Out(AxiStreamSignature(SCORE_BITS * config.cols)),
            "softmax_axis": Out(AxiStreamSignature(SCORE_BITS * config.lanes)),
        })

    def elaborate(self, platform):
        m = Module()
        c = self.link_config
        s, out = self.s_axis, self.m_axis
        m.submodules.reorder = reorder = ScoresReorder(c.reorder)

        # the job entries, queued ahead
        layout = job_layout(c.m_bits, c.l_bits)
        m.submodules.queue = queue = SyncFIFOBuffered(width=layout.size, depth=c.queue_depth)
        m.d.comb += [queue.w_data.eq(self.job.payload), queue.w_en.eq(self.job.valid),
                     self.job.ready.eq(queue.w_rdy)]
        head = data.View(layout, queue.r_data)

        # a route-0 frame under way (`passing`) or a route-1 one (the buffer's job input
        # under way: `reorder.job.ready` low); neither: the next entry is taken
        passing = Signal()
        free = ~passing & reorder.job.ready
        with m.If(free & queue.r_rdy):
            m.d.comb += queue.r_en.eq(1)
            with m.If(head.route):
                m.d.comb += [reorder.job.start.eq(1), reorder.job.m.eq(head.m),
                             reorder.job.length.eq(head.length)]
            with m.Else():
                m.d.sync += passing.eq(1)
        with m.If(out.tvalid & out.tready & out.tlast):
            m.d.sync += passing.eq(0)

        m.d.comb += [out.tdata.eq(s.tdata), out.tlast.eq(s.tlast),
                     out.tvalid.eq(s.tvalid & passing),
                     reorder.s_axis.tdata.eq(s.tdata), reorder.s_axis.tlast.eq(s.tlast),
                     reorder.s_axis.tvalid.eq(s.tvalid & ~passing),
                     s.tready.eq(passing & out.tready | ~passing & reorder.s_axis.tready)]

        # the buffer's rows into the softmax domain: tdata and tlast a FIFO word
        lanes = reorder.m_axis
        m.submodules.cross = cross = AsyncFIFO(width=len(lanes.tdata) + 1, depth=c.fifo_depth,
                                               w_domain="sync", r_domain=self.softmax_domain,
                                               exact_depth=True)
        sm = self.softmax_axis
        m.d.comb += [cross.w_data.eq(Cat(lanes.tdata, lanes.tlast)),
                     cross.w_en.eq(lanes.tvalid), lanes.tready.eq(cross.w_rdy),
                     sm.tdata.eq(cross.r_data[:-1]), sm.tlast.eq(cross.r_data[-1]),
                     sm.tvalid.eq(cross.r_rdy), cross.r_en.eq(sm.tready)]

        # the error, sticky: the buffer's flag rising (it is held until its next start)
        flagged = Signal()
        m.d.sync += flagged.eq(reorder.job.error)
        with m.If(self.clear):
            m.d.sync += self.error.eq(0)
        with m.Elif(reorder.job.error & ~flagged):
            m.d.sync += self.error.eq(1)
        return m
