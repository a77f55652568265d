# amaranth: UnusedElaboratable=no
"""Design ``link``: the attention link on one GEMM engine's output
(:class:`~.path.ScoresLink`: the scores reorder buffer, its job queue and the asynchronous
FIFO into the softmax units' clock domain), elaborated from a :class:`~.config.LinkConfig`
(registered in :data:`zoforge.hw.designs.BUILTIN`; docs/link.md).

The top has two clock domains: ``sync`` (``clk``, ``rst``: the engine's side, the job queue,
the reorder buffer, the FIFO's write side) and ``softmax`` (``softmax_clk``,
``softmax_rst``: the FIFO's read side and ``softmax_axis``); it names the second in
``clock_domains``, so a board harness (``boards/harness.py``) runs it on the board's clock
too. Its job entry's payload is a plain vector (:class:`LinkTop`): the harness drives
each input port as a plain vector. ``zoforge build``'s Fmax of it (``yosys-estimate``, the longest register-to-register
path of the netlist, whatever the clocks) is one figure over both domains' paths: the
accelerator's composed build (:func:`zoforge.hw.accel.top.accelerator_units`) counts it in
``sync``, where the buffer and nearly all of the link's logic are.

The softmax unit's input selector (:class:`~.select.FrameSelect`) is not a registered design
(no configuration type of its own): it is small (a queue of ``queue_depth`` source indices
and a multiplexer), and the composed build does not count it.

First line: :mod:`zoforge.hw.verilog_cache`'s hits leave the top unelaborated."""
from __future__ import annotations

from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In

from zoforge.hw.designs import Elaborated, MemorySize

from .config import LinkConfig
from .path import ScoresLink
from .reorder import SCORE_BITS

__all__ = ["LinkTop", "elaborate_link", "link_name", "link_memories"]

BLOCKS = {
    "link": "the link (hw/link/path.py): its job queue (queue), the scores reorder buffer "
            "(reorder: two banks of P 32-bit memories, the engine's column panels in, the "
            "softmax unit's rows out) and the asynchronous FIFO into the softmax domain "
            "(cross)",
}


class LinkTop(wiring.Component):
    """A :class:`~.path.ScoresLink` (submodule ``link``) as a design's top: its ports, the
    job entry's payload a plain vector of :func:`~.path.job_layout`'s bits (``route`` bit 0,
    then ``m``, then ``length``: the same Verilog port; a board harness drives plain
    vectors), and the read side's domain named in :attr:`clock_domains`."""

    def __init__(self, config: LinkConfig):
        self.link = ScoresLink(config)
        self.link_config, self.softmax_domain = config, self.link.softmax_domain
        members = dict(self.link.signature.members)
        members["job"] = In(stream.Signature(len(self.link.job.payload.as_value())))
        super().__init__(members)

    @property
    def clock_domains(self) -> tuple[str, ...]:
        """The clock domains besides ``sync`` its ports name (the read side's)."""
        return (self.softmax_domain,)

    @property
    def facts(self) -> dict:
        """Derived build facts for the design's summary."""
        c = self.link_config
        return {"memories": c.memories, "memory_words": c.depth,
                "fifo_bits": SCORE_BITS * c.lanes + 1, "m_bits": c.m_bits,
                "l_bits": c.l_bits, "clock_domains": ["sync", self.softmax_domain]}

    def elaborate(self, platform):
        m = Module()
        m.submodules.link = link = self.link
        for name in ("s_axis", "m_axis", "softmax_axis"):
            wiring.connect(m, wiring.flipped(getattr(self, name)), getattr(link, name))
        m.d.comb += [link.job.payload.eq(self.job.payload), link.job.valid.eq(self.job.valid),
                     self.job.ready.eq(link.job.ready), self.error.eq(link.error),
                     link.clear.eq(self.clear)]
        return m


def link_name(config: LinkConfig) -> str:
    """The Verilog top name (``link_*``: hw/lint_waivers.vlt's scope)."""
    return (f"link_path_{config.rows}x{config.cols}_{config.lanes}_"
            f"{config.max_rows}x{config.max_len}")


def elaborate_link(config: LinkConfig) -> Elaborated:
    top = LinkTop(config)
    return Elaborated(top=top, name=link_name(config), config=config, facts=top.facts,
                      blocks=dict(BLOCKS))


def link_memories(config: LinkConfig) -> dict[str, MemorySize]:
    """The reorder buffer's P memories (``depth`` words of 32 bits each, two banks) and the
    FIFO's, sized from the configuration (no elaboration)."""
    sized = ("rows", "cols", "lanes", "max_rows", "max_len")
    out = {f"link.reorder.keys_{p}": MemorySize(config.depth, config.depth * SCORE_BITS, sized)
           for p in range(config.memories)}
    bits = SCORE_BITS * config.lanes + 1
    out["link.cross"] = MemorySize(config.fifo_depth, config.fifo_depth * bits,
                              ("lanes", "fifo_depth"))
    return out
