# amaranth: UnusedElaboratable=no
"""An accelerator's attention links: :class:`AttentionLinks`, every engine's
:class:`~.path.ScoresLink` and every softmax unit's :class:`~.select.FrameSelect` of an
:class:`~zoforge.hw.accel.config.AcceleratorConfig` with ``link`` (docs/link.md; the golden
model :func:`zoforge.golden.link.link_frames`).

E engines, S softmax units: engine e's link (``config.link_config()``) feeds softmax unit
``u = e mod S`` (``config.link_unit(e)``). Unit u's selector has ``1 + n_u`` sources: source
0 the DDR's stream (``ddr_in[u]``, the unlinked softmax jobs' rows), source ``1 + j`` the
link of the j-th engine linked to u, the engines ``u, u + S, u + 2 S, ...`` in that order
(so ``n_u = ceil((E - u) / S)``): the host's ``select[u]`` entries name the sources by
these indices. A unit no engine links to (E < S) has no selector: ``ddr_in[u]`` passes
straight to ``softmax_axis[u]`` and its ``select[u]`` entries are taken and ignored.

Ports (arrays; Verilog ``engine_axis__0__tdata`` ...; ``clk``/``rst`` and
``softmax_clk``/``softmax_rst``):

* engine side, domain ``sync``, one each an engine: ``engine_axis[e]`` (``In``, 32 C bits:
  from the engine's ``m_axis``), ``ddr_axis[e]`` (``Out``, 32 C bits: the route-0 frames, to
  the DDR's writer), ``job[e]`` (``In``, ``lib.stream`` of
  :func:`~.path.job_layout`: one entry a frame of engine e, route 0 to the DDR, 1 to the
  softmax unit), ``error[e]`` (``Out``, sticky) and ``clear[e]`` (``In``): the
  :class:`~.path.ScoresLink`'s ports, unchanged;
* softmax side, domain :data:`SOFTMAX_DOMAIN`, one each a softmax unit: ``ddr_in[u]``
  (``In``, 32 lanes bits: the DDR's stream for the unlinked jobs), ``softmax_axis[u]``
  (``Out``, 32 lanes bits: to the softmax unit's ``s_axis``), ``select[u]`` (``In``,
  ``lib.stream`` of ``range(1 + links_per_unit)``: one entry a frame of the unit's input,
  its source's index as above; an index past the unit's own sources is the host's error,
  its low bits taken).

The selectors run in the softmax domain (``DomainRenamer``); each link writes its
asynchronous FIFO in ``sync`` and reads it in the softmax domain. The selectors' queues hold
the links' ``queue_depth`` entries (``config.link_config().queue_depth``). Cycles: each
block's own (docs/link.md): no register between them.
"""
from __future__ import annotations

from amaranth import DomainRenamer, Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from zoforge.errors import ConfigError
from zoforge.hw.accel.config import AcceleratorConfig
from zoforge.hw.pe.bus import AxiStreamSignature

from .path import SOFTMAX_DOMAIN, ScoresLink, job_layout
from .reorder import SCORE_BITS
from .select import FrameSelect

__all__ = ["AttentionLinks", "linked_engines"]


def linked_engines(config: AcceleratorConfig, unit: int) -> list[int]:
    """The engines whose links feed softmax unit ``unit``, in their selector's source order
    (source ``1 + j`` is the j-th): ``unit, unit + S, unit + 2 S, ...``."""
    return list(range(unit, config.engines, config.softmax_units))


class AttentionLinks(wiring.Component):
    """Every link and selector of ``config`` (its ``link`` true; module docstring).

    ``links``: engine e's :class:`~.path.ScoresLink`; ``selects``: unit u's
    :class:`~.select.FrameSelect` or None (no engine linked to it); ``sources[u]``: the
    engines linked to unit u, in source order (:func:`linked_engines`).
    """

    def __init__(self, config: AcceleratorConfig):
        if not config.link:
            raise ConfigError("link", "true for the attention links (AttentionLinks)", False)
        self.config = config
        link = config.link_config()
        engines, units = config.engines, config.softmax_units
        self.links = [ScoresLink(link, softmax_domain=SOFTMAX_DOMAIN) for _ in range(engines)]
        self.sources = [linked_engines(config, u) for u in range(units)]
        bits = SCORE_BITS * link.lanes
        self.selects = [FrameSelect(1 + len(src), bits, link.queue_depth) if src else None
                        for src in self.sources]
        engine_axis = AxiStreamSignature(SCORE_BITS * link.cols)
        super().__init__({
            "engine_axis": In(engine_axis).array(engines),
            "ddr_axis": Out(engine_axis).array(engines),
            "job": In(stream.Signature(job_layout(link.m_bits, link.l_bits))).array(engines),
            "error": Out(1).array(engines),
            "clear": In(1).array(engines),
            "ddr_in": In(AxiStreamSignature(bits)).array(units),
            "softmax_axis": Out(AxiStreamSignature(bits)).array(units),
            "select": In(stream.Signature(range(1 + config.links_per_unit))).array(units),
        })

    @property
    def clock_domains(self) -> tuple[str, ...]:
        """The clock domains besides ``sync`` its ports name (the softmax units')."""
        return (SOFTMAX_DOMAIN,)

    def elaborate(self, platform):
        m = Module()
        for e, link in enumerate(self.links):
            m.submodules[f"link_{e}"] = link
            wiring.connect(m, wiring.flipped(self.engine_axis[e]), link.s_axis)
            wiring.connect(m, wiring.flipped(self.ddr_axis[e]), link.m_axis)
            wiring.connect(m, wiring.flipped(self.job[e]), link.job)
            m.d.comb += [self.error[e].eq(link.error), link.clear.eq(self.clear[e])]
        for u, (select, sources) in enumerate(zip(self.selects, self.sources)):
            entry = self.select[u]
            if select is None:                      # no link into this unit: the DDR's alone
                wiring.connect(m, wiring.flipped(self.ddr_in[u]),
                               wiring.flipped(self.softmax_axis[u]))
                m.d.comb += entry.ready.eq(1)
                continue
            m.submodules[f"select_{u}"] = DomainRenamer(SOFTMAX_DOMAIN)(select)
            m.d.comb += [select.select.payload.eq(entry.payload),
                         select.select.valid.eq(entry.valid), entry.ready.eq(select.select.ready)]
            wiring.connect(m, wiring.flipped(self.ddr_in[u]), select.s_axis[0])
            for j, e in enumerate(sources):
                wiring.connect(m, self.links[e].softmax_axis, select.s_axis[1 + j])
            wiring.connect(m, wiring.flipped(self.softmax_axis[u]), select.m_axis)
        return m
