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
The route-1 beats cross to ``softmax_axis`` through :class:`Crossing` (Amaranth's
``AsyncFIFO``, cycle for cycle: ``fifo_depth`` beats, write side ``sync``, read side the
softmax domain; the ``sync`` reset empties it).
"""
from __future__ import annotations

from amaranth import Cat, Elaboratable, Module, Mux, ResetSignal, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.cdc import AsyncFFSynchronizer, FFSynchronizer
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from zoforge.hw.pe.bus import AxiStreamSignature

from .config import LinkConfig
from .reorder import SCORE_BITS, ScoresReorder

__all__ = ["ScoresLink", "Crossing", "job_layout", "SOFTMAX_DOMAIN"]

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
        # (the buffer reads `m` and `length` at a start alone: the head's, ungated)
        passing = Signal()
        free = ~passing & reorder.job.ready
        m.d.comb += [reorder.job.m.eq(head.m), reorder.job.length.eq(head.length)]
        with m.If(free & queue.r_rdy):
            m.d.comb += queue.r_en.eq(1)
            with m.If(head.route):
                m.d.comb += reorder.job.start.eq(1)
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
        m.submodules.cross = cross = Crossing(width=len(lanes.tdata) + 1, depth=c.fifo_depth,
                                              w_domain="sync", r_domain=self.softmax_domain)
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


def _gray(value):
    return value ^ value[1:]


def _from_gray(value):
    bits, acc = [], 0
    for i in reversed(range(len(value))):
        acc = value[i] if i == len(value) - 1 else acc ^ value[i]
        bits.append(acc)
    return Cat(*reversed(bits))


class Crossing(Elaboratable):
    """Amaranth's ``AsyncFIFO`` (``exact_depth``, a power-of-two ``depth``; Cummings' style
    #2: Gray-code pointers through two-stage synchronizers, the write domain's reset
    emptying it) with the same ports, registers and cycles, less ``w_level``, ``r_level``
    and ``r_rst``; each pointer's increment, binary and Gray, is a register of its own, so
    a transfer picks the next pointer (a LUT behind ``w_en & w_rdy``) instead of feeding an
    adder's carry chain."""

    def __init__(self, *, width: int, depth: int, w_domain: str, r_domain: str):
        if depth < 2 or depth & (depth - 1):
            raise ValueError(f"Crossing depth must be a power of two, not {depth}")
        self.width, self.depth = width, depth
        self._w_domain, self._r_domain = w_domain, r_domain
        self._ctr_bits = (depth - 1).bit_length() + 1
        self.w_data = Signal(width)
        self.w_en = Signal()
        self.w_rdy = Signal()
        self.r_data = Signal(width)
        self.r_en = Signal()
        self.r_rdy = Signal()

    def elaborate(self, platform):
        m = Module()
        bits, wd, rd = self._ctr_bits, self._w_domain, self._r_domain
        do_write = self.w_rdy & self.w_en
        do_read = self.r_rdy & self.r_en

        # (the increments stored with bit 0 flipped: every write-side register resets to 0)
        produce_w_bin = Signal(bits)
        produce_w_inc = Signal(bits)                          # produce_w_bin + 1, ^ 1
        produce_w_gry = Signal(bits)
        produce_w_gry_inc = Signal(bits)                      # its Gray code, ^ 1
        produce_w_nxt = Signal(bits)
        m.d.comb += produce_w_nxt.eq(Mux(do_write, produce_w_inc ^ 1, produce_w_bin))
        next_inc = (produce_w_inc ^ 1) + 1
        with m.If(do_write):
            m.d[wd] += [produce_w_bin.eq(produce_w_inc ^ 1), produce_w_inc.eq(next_inc ^ 1),
                        produce_w_gry.eq(produce_w_gry_inc ^ 1),
                        produce_w_gry_inc.eq(_gray(next_inc[:bits]) ^ 1)]

        # both read-domain counters reset_less: the write domain's reset sets them (below)
        consume_r_bin = Signal(bits, reset_less=True)
        consume_r_inc = Signal(bits, init=1, reset_less=True)  # consume_r_bin + 1
        consume_r_gry = Signal(bits, reset_less=True)
        consume_r_gry_inc = Signal(bits, init=1, reset_less=True)
        consume_r_nxt = Signal(bits)
        m.d.comb += consume_r_nxt.eq(Mux(do_read, consume_r_inc, consume_r_bin))
        next_read = consume_r_inc + 1
        with m.If(do_read):
            m.d[rd] += [consume_r_bin.eq(consume_r_inc), consume_r_inc.eq(next_read),
                        consume_r_gry.eq(consume_r_gry_inc),
                        consume_r_gry_inc.eq(_gray(next_read[:bits]))]

        produce_r_gry = Signal(bits)
        m.submodules.produce_cdc = FFSynchronizer(produce_w_gry, produce_r_gry, o_domain=rd)
        consume_w_gry = Signal(bits)
        m.submodules.consume_cdc = FFSynchronizer(consume_r_gry, consume_w_gry, o_domain=wd)

        w_full = Signal()
        r_empty = Signal()
        m.d.comb += [
            w_full.eq((produce_w_gry[-1] != consume_w_gry[-1])
                      & (produce_w_gry[-2] != consume_w_gry[-2])
                      & (produce_w_gry[:-2] == consume_w_gry[:-2])),
            r_empty.eq(consume_r_gry == produce_r_gry),
        ]

        storage = m.submodules.storage = Memory(shape=self.width, depth=self.depth, init=[])
        w_port = storage.write_port(domain=wd)
        r_port = storage.read_port(domain=rd)
        m.d.comb += [w_port.addr.eq(produce_w_bin[:-1]), w_port.data.eq(self.w_data),
                     w_port.en.eq(do_write), self.w_rdy.eq(~w_full),
                     r_port.addr.eq(consume_r_nxt[:-1]), self.r_data.eq(r_port.data),
                     r_port.en.eq(1), self.r_rdy.eq(~r_empty)]

        # the write domain's reset, synchronised (asynchronous set, synchronous release),
        # empties the read side: its pointer set to the write side's
        w_rst = ResetSignal(domain=wd, allow_reset_less=True)
        r_rst = Signal()
        m.submodules.rst_cdc = AsyncFFSynchronizer(w_rst, r_rst, o_domain=rd)
        with m.If(r_rst):
            restart = _from_gray(produce_r_gry)
            m.d.comb += r_empty.eq(1)
            m.d[rd] += [consume_r_gry.eq(produce_r_gry), consume_r_bin.eq(restart),
                        consume_r_inc.eq(restart + 1),
                        consume_r_gry_inc.eq(_gray((restart + 1)[:bits]))]
        return m
