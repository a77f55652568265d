"""Registry of buildable top-level designs: what ``zoforge generate``, ``cosim`` and ``build``
offer.

A :class:`Design` is a name, the configuration type(s) that describe every instance of it
(one type, or several variants of one kind tagged e.g. by ``strategy``), a function from a
configuration value to an :class:`Elaborated` design and, for designs whose memories the
user sizes, a function from a configuration to its memories (:class:`MemorySize`: words, bits
and the configuration fields that size each; the command line refuses a design too large to
generate and names those fields' flags). A design may also carry a co-simulation (``cosim``:
``(config, options) -> JSON-able dict`` with at least ``bit_exact``, and ``cosim_options``,
the configuration type of its run options) and its own switching-activity stimulus
(``activity_bench``: ``(config, elaborated) -> (cocotb module, args)``) for the power report.
A design made of replicated units may declare them (``units``: ``config ->``
:class:`Units`, each distinct unit's registered design name, configuration and count, and
the share of each device resource the design may use): ``zoforge build`` then estimates it
from one build of each distinct unit (:mod:`zoforge.reports.composite`).

Any of these may be given as an import reference (``"package.module:attribute"``,
:mod:`zoforge.references`), resolved when first read: listing the designs imports nothing,
and using one imports only its own modules (``zoforge --help`` stays fast and torch-free).

The built-in designs are the table :data:`BUILTIN` below; a line there (or a
:func:`register_design` call, for a design defined elsewhere) is the only step that exposes
a design on the command line: flags are generated from its configuration types,
``--config FILE`` reads a saved configuration. Their co-simulations live in
:mod:`zoforge.sim`, above this layer, in the table of :mod:`zoforge.sim.runners`, whose
:func:`~zoforge.sim.runners.designs` returns the designs with them.

Example::

    register_design(Design("counter", "a counter", configs=(CounterConfig,),
                           elaborate=elaborate_counter))
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from zoforge.config import Config, config_from_dict, load_config
from zoforge.errors import ConfigError
from zoforge.references import is_reference, resolve

__all__ = ["Elaborated", "MemorySize", "memory_sizes", "Unit", "Units", "Design", "BUILTIN",
           "register_design",
           "registered_designs", "designs",
           "get_design", "MAX_WORDS", "MAX_BITS"]

#: Largest total depth (words) of a design's memories zoforge generates (elaborating a
#: memory word by word costs about 1 s and 16 MB per thousand words).
MAX_WORDS = 1 << 17
#: Largest total size (bits) of a design's memories (32 Mbit, the ZCU102's block RAM).
MAX_BITS = 32 << 20


@dataclass
class Elaborated:
    """One elaborated design, ready to be written out, simulated or synthesized.

    top:           the Amaranth component (its ports are the Verilog top's ports)
    name:          Verilog name of the top module
    config:        the configuration value it was elaborated from
    facts:         JSON-able derived values (widths, formats, memory sizes, port notes)
    memory_files:  file name -> contents, for memory initialisation files (may be empty)
    blocks:        names of the top-level sub-blocks (Amaranth submodule names) reports
                   should list separately, mapped to a one-line description
    """

    top: Any
    name: str
    config: Config
    facts: dict = field(default_factory=dict)
    memory_files: dict[str, str] = field(default_factory=dict)
    blocks: dict[str, str] = field(default_factory=dict)

    def summary(self) -> dict:
        """The configuration and the derived facts, as one JSON-able dict (``<name>.json``)."""
        return dict(self.facts, **self.config.to_dict(), design=self.config.kind,
                    top=self.name, config_hash=self.config.stable_hash(),
                    memory_files=sorted(self.memory_files))


class MemorySize(NamedTuple):
    """One memory of a design, as its configuration sizes it (before elaboration)."""

    words: int
    bits: int
    sized_by: tuple[str, ...]   # the configuration fields its size grows with


def memory_sizes(buffers: Mapping, sized_by: Mapping[str, tuple[str, ...]]
                 ) -> dict[str, MemorySize]:
    """Memory name -> :class:`MemorySize` of a design's buffers (name -> a library
    ``Buffer`` with ``depth`` and ``bits``) and the fields that size each."""
    return {name: MemorySize(buffer.depth, buffer.bits, sized_by[name])
            for name, buffer in buffers.items()}


class Unit(NamedTuple):
    """One distinct unit of a design made of replicated units: a registered design's name,
    the unit's configuration, how many identical copies the design holds and the clock
    domain they run in (``sync``, the design's clock, or a clock of their own)."""

    design: str
    config: Config
    count: int
    domain: str = "sync"


class Units(NamedTuple):
    """What a design made of replicated units declares (a :class:`Design`'s ``units``).

    units:   the distinct units (:class:`Unit`); the top adds no logic of its own (its ports
             are the units' passed through)
    margins: resource (``LUT``, ``FF``, ``BRAM18``, ``DSP``) -> the fraction of the device
             the design may use (its planner's margin), stated and checked by the report
    """

    units: tuple[Unit, ...]
    margins: Mapping[str, float]


def _config_types(design: Design, value) -> tuple[type[Config], ...]:
    """One configuration type, a sequence of them, or a mapping to them -> a tuple, all of
    the design's kind."""
    if isinstance(value, type):
        types = (value,)
    else:
        types = tuple(value.values() if isinstance(value, Mapping) else value)
    kinds = {t.kind for t in types}
    if kinds != {design.name}:
        raise RuntimeError(f"design {design.name!r}: its configuration types are of kind "
                           f"{sorted(kinds)}, not {design.name!r}")
    return types


class _Resolved:
    """A :class:`Design` attribute that may be given as an import reference: resolved (and
    converted) when first read, then kept."""

    def __init__(self, convert: Callable[[Design, Any], Any] = lambda design, value: value):
        self.convert = convert

    def __set_name__(self, owner, name: str):
        self.name = name

    def __get__(self, design, owner=None):
        if design is None:
            return self
        value = design.__dict__[self.name]
        if is_reference(value):
            value = design.__dict__[self.name] = self.convert(design, resolve(value))
        return value

    def __set__(self, design, value):
        design.__dict__[self.name] = (value if value is None or is_reference(value)
                                      else self.convert(design, value))


class Design:
    """A registered design (see the module docstring). Every argument but ``name``,
    ``help``, ``cosim_help`` and ``aliases`` may be an import reference."""

    configs: tuple[type[Config], ...] = _Resolved(_config_types)
    elaborate: Callable[[Config], Elaborated] = _Resolved()
    memories: Callable[[Config], dict[str, MemorySize]] | None = _Resolved()
    cosim: Callable[[Config, Config], dict] | None = _Resolved()
    cosim_options: type[Config] | None = _Resolved()
    activity_bench: Callable[[Config, Elaborated], tuple[str, dict]] | None = _Resolved()
    units: Callable[[Config], Units] | None = _Resolved()

    def __init__(self, name: str, help: str, configs, elaborate, *, memories=None,
                 cosim=None, cosim_options=None, cosim_help: str = "", activity_bench=None,
                 units=None, aliases: tuple[str, ...] = ()):
        self.name, self.help, self.cosim_help, self.aliases = name, help, cosim_help, aliases
        self.configs, self.elaborate, self.memories = configs, elaborate, memories
        self.cosim, self.cosim_options = cosim, cosim_options
        self.activity_bench, self.units = activity_bench, units

    def __repr__(self) -> str:
        return f"Design({self.name!r})"

    @property
    def has_cosim(self) -> bool:
        """Whether the design has a co-simulation (without importing it)."""
        return self.__dict__["cosim"] is not None

    def replace(self, **changes) -> Design:
        """A copy with ``changes`` (import references stay unresolved)."""
        return Design(**dict(self.__dict__, **changes))

    def default_config(self) -> Config:
        return self.configs[0]()

    def config_from_dict(self, values: dict, source: str = "") -> Config:
        return config_from_dict(values, self.configs, source)

    def load_config(self, path: Path | str) -> Config:
        return load_config(path, self.configs)


#: The built-in designs (their co-simulations: :data:`zoforge.sim.runners.COSIMS`).
BUILTIN = (
    Design("engine", "tiled INT8 GEMM engine (systolic array, AXI4-Lite/Stream)",
           configs="zoforge.hw.engine.config:EngineConfig",
           elaborate="zoforge.hw.engine.designs:elaborate_engine",
           memories="zoforge.hw.engine.designs:engine_memories"),
    Design("rng", "PeZO perturbation generator (on-the-fly, pre-generated pool, or the "
                  "Gaussian baseline)",
           configs="zoforge.golden.rng:GENERATOR_CONFIGS",
           elaborate="zoforge.hw.rng.designs:elaborate_generator"),
    Design("zo-layer", "ZO training layer (LoRA-FA or full weight): perturbed weight stream, "
                       "P-RGE branches, update unit regenerating z",
           configs="zoforge.golden.zolayer:LAYER_CONFIGS",
           elaborate="zoforge.hw.zolayer.designs:elaborate_layer",
           memories="zoforge.hw.zolayer.designs:layer_memories"),
    Design("softmax", "integer softmax unit: rows of raw int32 scores -> int8 P "
                      "(AXI4-Lite/Stream)",
           configs="zoforge.hw.softmax.config:SoftmaxConfig",
           elaborate="zoforge.hw.softmax.designs:elaborate_softmax",
           memories="zoforge.hw.softmax.designs:softmax_memories"),
    Design("link", "attention link on a GEMM engine's output: frames passed on, or its "
                   "scores reordered into a softmax unit's rows across an asynchronous FIFO "
                   "(two clocks)",
           configs="zoforge.hw.link.config:LinkConfig",
           elaborate="zoforge.hw.link.designs:elaborate_link",
           memories="zoforge.hw.link.designs:link_memories"),
    Design("accelerator", "board-sized accelerator: GEMM engines and ZO layers side by side, "
                          "sized to the board (--board) or as given",
           configs="zoforge.hw.accel.config:AcceleratorConfig",
           elaborate="zoforge.hw.accel.top:elaborate_accelerator",
           memories="zoforge.hw.accel.memories:accelerator_memories",
           units="zoforge.hw.accel.top:accelerator_units"),
)

_REGISTRY: dict[str, Design] = {design.name: design for design in BUILTIN}


def register_design(design: Design) -> Design:
    """Make ``design`` available to every command (registering it twice is an error)."""
    known = _REGISTRY.get(design.name)
    if known is not None and known.elaborate is not design.elaborate:
        raise RuntimeError(f"design {design.name!r} registered twice")
    _REGISTRY[design.name] = design
    return design


@contextlib.contextmanager
def registered_designs(*extra: Design) -> Iterator[None]:
    """Register ``extra`` for the duration of a ``with`` block only (tests, trials of a
    plug-in): afterwards every command sees the registry as it was."""
    added = [design for design in extra if design.name not in _REGISTRY]
    for design in extra:
        register_design(design)
    try:
        yield
    finally:
        for design in added:
            del _REGISTRY[design.name]


def designs() -> dict[str, Design]:
    """All registered designs, by name (importing none of their modules)."""
    return dict(sorted(_REGISTRY.items()))


def get_design(name: str) -> Design:
    available = designs()
    if name not in available:
        raise ConfigError("design", "one of " + ", ".join(available), name)
    return available[name]
