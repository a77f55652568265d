# amaranth: UnusedElaboratable=no
"""Design ``accelerator``: ``engines`` GEMM engines, ``layers`` ZO layers and
``softmax_units`` softmax units in one Verilog top.

:class:`Accelerator` instantiates each unit (``engine_0`` ..., ``layer_0`` ... and
``softmax_0`` ..., the bus softmax unit :class:`~zoforge.hw.softmax.top.SoftmaxBusUnit`) and
passes its ports through unchanged (``wiring.connect`` of the unit with the flipped top
port): the top's ports are arrays of the units' own interfaces, ``engines[i]``,
``layers[i]`` and (with softmax units) ``softmax[i]``, each with its AXI4-Lite target
(``s_axil``), its AXI4-Stream input and output and its ``irq`` (Verilog
``engines__0__s_axis__tdata`` ...). Two clock domains: ``sync`` (``clk``, ``rst``) for the
engines and ZO layers, and with softmax units :data:`SOFTMAX_DOMAIN` (``softmax_clk``,
``softmax_rst``) for those, so they run at their own clock, as the price runs them
(``reports/accel_cost.design_clocks``: their own Fmax). Each unit's bus ports are
synchronous to its unit's clock; without links the top crosses no clock domain itself (the
SoC's AXI interconnect and DMA bridge to each port at its clock, e.g. with AXI clock
converters, as a Zynq PL takes several PS clocks).

With ``link`` (docs/link.md) the top also holds :class:`~zoforge.hw.link.links.
AttentionLinks` (submodule ``links``: engine e's :class:`~zoforge.hw.link.path.ScoresLink`
and softmax unit u's :class:`~zoforge.hw.link.select.FrameSelect`) between the units and
their stream ports, which keep their signatures (the host's DMA sees the same
``engines[e]`` and ``softmax[u]``): engine e's ``m_axis`` goes into its link, whose
route-0 frames come out on the top's ``engines[e].m_axis`` (``sync``); the top's
``softmax[u].s_axis`` (the DDR's rows, ``softmax`` domain) is source 0 of unit u's
selector, whose output is the softmax unit's ``s_axis``; each link's route-1 frames cross
into the ``softmax`` domain (the link's ``AsyncFIFO``) to source ``1 + j`` of unit
``e mod S``'s selector (engine e the j-th of ``e mod S, e mod S + S, ...``). Two more port
arrays drive them: ``links[e]`` (domain ``sync``: ``job``, the link's ``lib.stream`` of
``route``, ``m``, ``length``, one entry a frame of engine e, its payload a plain vector of
:func:`~zoforge.hw.link.path.job_layout`'s bits, ``route`` bit 0, then ``m``, then
``length``, as a board harness drives it; ``error``, sticky;
``clear``) and ``selects[u]`` (domain ``softmax``: a ``lib.stream`` of the source's index,
``range(1 + links_per_unit)``, one entry a frame of unit u's input). The host queues both
(Verilog ``links__0__job__payload`` ..., ``selects__0__valid`` ...).
Engines ``0 .. gelu_engines - 1`` are built with the GELU job mode (``EngineConfig.gelu``: the
same ports, more registers). The host drives each unit as it drives
one alone (its register map, its stream protocol): the schedule (:mod:`.schedule`) splits
the work into jobs each unit already runs, so every unit's co-simulation still holds.

:func:`accelerator_units` declares the units to ``zoforge build`` (``Design.units``): one
engine x ``engines`` (a GELU engine x ``gelu_engines`` of them), one ZO layer x ``layers``
and one softmax unit x ``softmax_units``, with ``link`` one link x ``engines`` (design
``link``, counted in ``sync``: see :func:`accelerator_units`), with the planner's margins;
the top adds no logic of its own but, with ``link``, the softmax units' input selectors
(not counted).

First line: :mod:`zoforge.hw.verilog_cache`'s hits leave the top unelaborated.
"""
from __future__ import annotations

from amaranth import DomainRenamer, Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from zoforge.hw.designs import Elaborated, Unit, Units
from zoforge.hw.engine.designs import elaborate_engine
from zoforge.hw.link.links import AttentionLinks
from zoforge.hw.link.path import job_layout
from zoforge.hw.softmax.designs import elaborate_softmax
from zoforge.hw.zolayer.designs import elaborate_layer

from .config import AcceleratorConfig
from .memories import accelerator_memories
from .plan import MARGINS

__all__ = ["Accelerator", "elaborate_accelerator", "accelerator_memories",
           "accelerator_units", "accelerator_name", "SOFTMAX_DOMAIN"]

#: The softmax units' clock domain (Verilog ports ``softmax_clk``, ``softmax_rst``).
SOFTMAX_DOMAIN = "softmax"


class Accelerator(wiring.Component):
    """The units of an :class:`AcceleratorConfig`, side by side (see the module docstring).

    ``units``: submodule name -> the unit (``engine_0``, ..., ``layer_0``, ...,
    ``softmax_0``, ...).
    """

    def __init__(self, config: AcceleratorConfig):
        self.config = config
        layer = config.layer_config()
        self.engine_units = [elaborate_engine(config.engine_config(i < config.gelu_engines)).top
                             for i in range(config.engines)]
        layers = [elaborate_layer(layer) for _ in range(config.layers)]
        self.layer_units = [design.top for design in layers]
        self.memory_files = layers[0].memory_files
        self.softmax_units = [elaborate_softmax(config.softmax_config()).top
                              for _ in range(config.softmax_units)]
        self.units = {**{f"engine_{i}": unit for i, unit in enumerate(self.engine_units)},
                      **{f"layer_{i}": unit for i, unit in enumerate(self.layer_units)},
                      **{f"softmax_{i}": unit for i, unit in enumerate(self.softmax_units)}}
        ports = {"engines": Out(self.engine_units[0].signature).array(config.engines),
                 "layers": Out(self.layer_units[0].signature).array(config.layers)}
        if self.softmax_units:
            ports["softmax"] = Out(self.softmax_units[0].signature).array(config.softmax_units)
        self.attention_links = AttentionLinks(config) if config.link else None
        if self.attention_links is not None:
            link = config.link_config()
            ports["links"] = Out(wiring.Signature({
                "job": In(stream.Signature(job_layout(link.m_bits, link.l_bits).size)),
                "error": Out(1), "clear": In(1)})).array(config.engines)
            ports["selects"] = In(stream.Signature(range(1 + config.links_per_unit))).array(
                config.softmax_units)
        super().__init__(ports)

    @property
    def clock_domains(self) -> tuple[str, ...]:
        """The clock domains besides ``sync`` the top's ports name (its softmax units')."""
        return (SOFTMAX_DOMAIN,) if self.softmax_units else ()

    @property
    def facts(self) -> dict:
        """The units' counts, each unit's facts and the DSP count (:attr:`AcceleratorConfig.
        dsp`)."""
        config = self.config
        facts = {"dsp": config.dsp, "engine_dsp": config.engine_dsp,
                 "gelu_engines": config.gelu_engines,
                 "layer_dsp": config.layer_dsp, "array_multipliers": config.array_multipliers,
                 "engine": self.engine_units[0].facts, "layer": self.layer_units[0].facts}
        if self.softmax_units:
            facts.update(softmax_dsp=config.softmax_dsp, softmax=self.softmax_units[0].facts)
        return facts

    def elaborate(self, platform):
        m = Module()
        for name, unit in self.units.items():
            if name.startswith("softmax_"):
                unit = DomainRenamer(SOFTMAX_DOMAIN)(unit)
            m.submodules[name] = unit
        links = self.attention_links
        if links is not None:
            m.submodules.links = links
        for e, (port, unit) in enumerate(zip(self.engines, self.engine_units)):
            if links is None:
                wiring.connect(m, wiring.flipped(port), unit)
                continue
            _pass_through(m, port, unit, skip="m_axis")
            wiring.connect(m, unit.m_axis, links.engine_axis[e])
            wiring.connect(m, wiring.flipped(port.m_axis), links.ddr_axis[e])
            control = self.links[e]
            job = links.job[e]
            m.d.comb += [job.payload.eq(control.job.payload), job.valid.eq(control.job.valid),
                         control.job.ready.eq(job.ready), control.error.eq(links.error[e]),
                         links.clear[e].eq(control.clear)]
        for port, unit in zip(self.layers, self.layer_units):
            wiring.connect(m, wiring.flipped(port), unit)
        for u, (port, unit) in enumerate(zip(getattr(self, "softmax", ()), self.softmax_units)):
            if links is None:
                wiring.connect(m, wiring.flipped(port), unit)
                continue
            _pass_through(m, port, unit, skip="s_axis")
            wiring.connect(m, wiring.flipped(port.s_axis), links.ddr_in[u])
            wiring.connect(m, links.softmax_axis[u], unit.s_axis)
            wiring.connect(m, wiring.flipped(self.selects[u]), links.select[u])
        return m


def _pass_through(m: Module, port, unit, skip: str) -> None:
    """Connect the top's ``port`` (the unit's own signature) to ``unit`` member by member,
    but ``skip``: interfaces with ``wiring.connect``, single signals by direction."""
    for name, member in unit.signature.members.items():
        if name == skip:
            continue
        outer, inner = getattr(port, name), getattr(unit, name)
        if not member.is_port:
            wiring.connect(m, wiring.flipped(outer), inner)
        elif member.flow == Out:
            m.d.comb += outer.eq(inner)
        else:
            m.d.comb += inner.eq(outer)


def accelerator_name(config: AcceleratorConfig) -> str:
    """The Verilog top name: ``accel_<E>x<R>x<C>[p]_<L>x<R>x<C>[_<G>g][_<S>s<lanes>][_l]``
    (G GELU engines, S softmax units, ``_l`` with the attention links)."""
    pairs = "p" if config.paired else ""
    gelu = f"_{config.gelu_engines}g" if config.gelu_engines else ""
    softmax = (f"_{config.softmax_units}s{config.softmax_lanes}" if config.softmax_units
               else "")
    link = "_l" if config.link else ""
    return (f"accel_{config.engines}x{config.engine_rows}x{config.engine_cols}{pairs}_"
            f"{config.layers}x{config.layer_rows}x{config.layer_cols}{gelu}{softmax}{link}")


def elaborate_accelerator(config: AcceleratorConfig) -> Elaborated:
    top = Accelerator(config)
    kinds = {"engine": "GEMM engine", "layer": "ZO layer", "softmax": "softmax unit"}
    blocks = {name: kinds[name.rsplit("_", 1)[0]] for name in top.units}
    if top.attention_links is not None:
        blocks["links"] = "attention links: each engine's ScoresLink, each softmax unit's " \
                          "FrameSelect (hw/link/links.py)"
    return Elaborated(top=top, name=accelerator_name(config), config=config,
                      facts=top.facts, blocks=blocks, memory_files=dict(top.memory_files))


def accelerator_units(config: AcceleratorConfig) -> Units:
    """The distinct units (design ``engine`` x ``engines``, ``zo-layer`` x ``layers``,
    ``softmax`` x ``softmax_units`` where there are any, in :data:`SOFTMAX_DOMAIN`; with
    ``link`` design ``link`` x ``engines``) and the planner's margins
    (:data:`~zoforge.hw.accel.plan.MARGINS`).

    A link has two clock domains (its buffer and job queue in ``sync``, its FIFO's read side
    in :data:`SOFTMAX_DOMAIN`); its Fmax estimate is one figure over both domains' paths
    (the netlist model does not split them by clock), declared in ``sync``, where nearly
    all of its logic is: it caps the engines' clock, not the softmax units'. The softmax
    units' input selectors (:class:`~zoforge.hw.link.select.FrameSelect`, a queue and a
    multiplexer each) are not a registered design and not counted here."""
    plain = config.engines - config.gelu_engines
    units = [Unit("engine", config.engine_config(gelu), count)
             for gelu, count in ((False, plain), (True, config.gelu_engines)) if count]
    units.append(Unit("zo-layer", config.layer_config(), config.layers))
    if config.softmax_units:
        units.append(Unit("softmax", config.softmax_config(), config.softmax_units,
                          SOFTMAX_DOMAIN))
    if config.link:
        units.append(Unit("link", config.link_config(), config.engines))
    return Units(units=tuple(units), margins=dict(MARGINS))
