"""Registry of buildable top-level designs: what ``zoforge generate``, ``cosim`` and ``build``
offer.

A :class:`Design` is a name, the configuration type(s) that describe every instance of it
(one type, or several variants of one kind tagged e.g. by ``strategy``), and a function from
a configuration value to an :class:`Elaborated` design. Registering one with
:func:`register_design` is the only step that exposes it on the command line: flags are
generated from its configuration types, ``--config FILE`` reads a saved configuration.

A design may also carry a co-simulation (``cosim``: ``(config, options) -> JSON-able dict``
with at least ``bit_exact``, and ``cosim_options``, the configuration type of its run
options) and its own switching-activity stimulus (``activity_bench``:
``(config, elaborated) -> (cocotb module, args)``) for the power report. The built-in
designs' co-simulations live in :mod:`zoforge.sim`, above this layer, and are attached there
with :func:`attach_cosim`; :func:`zoforge.sim.runners.designs` returns the designs with them
attached. Each hardware area declares its designs in a module named ``designs`` inside its
package (``zoforge.hw.rng.designs``, ...); those modules are discovered automatically.

Example::

    register_design(Design("rng", "PeZO perturbation generator",
                           configs=(OnTheFlyConfig, PregenConfig, GaussianConfig),
                           elaborate=elaborate_generator))
"""
from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zoforge.hw as hw_package
from zoforge.config import Config, config_from_dict, load_config
from zoforge.errors import ConfigError

__all__ = ["Elaborated", "Design", "register_design", "attach_cosim", "designs",
           "get_design"]


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


@dataclass(frozen=True)
class Design:
    """A registered design (see the module docstring)."""

    name: str
    help: str
    configs: tuple[type[Config], ...]
    elaborate: Callable[[Config], Elaborated]
    cosim: Callable[[Config, Config], dict] | None = None
    cosim_options: type[Config] | None = None
    cosim_help: str = ""
    activity_bench: Callable[[Config, Elaborated], tuple[str, dict]] | None = None
    aliases: tuple[str, ...] = ()

    def __post_init__(self):
        kinds = {c.kind for c in self.configs}
        if kinds != {self.name}:
            raise RuntimeError(f"design {self.name!r}: its configuration types are of kind "
                               f"{sorted(kinds)}, not {self.name!r}")

    def default_config(self) -> Config:
        return self.configs[0]()

    def config_from_dict(self, values: dict, source: str = "") -> Config:
        return config_from_dict(values, self.configs, source)

    def load_config(self, path: Path | str) -> Config:
        return load_config(path, self.configs)


_REGISTRY: dict[str, Design] = {}


def register_design(design: Design) -> Design:
    """Make ``design`` available to every command (registering it twice is an error)."""
    known = _REGISTRY.get(design.name)
    if known is not None and known.elaborate is not design.elaborate:
        raise RuntimeError(f"design {design.name!r} registered twice")
    _REGISTRY[design.name] = design
    return design


def attach_cosim(name: str, run: Callable[[Config, Config], dict], options: type[Config],
                 help: str, aliases: tuple[str, ...] = ()) -> None:
    """Give registered design ``name`` its co-simulation (called by :mod:`zoforge.sim`)."""
    design = designs()[name]
    _REGISTRY[name] = dataclasses.replace(design, cosim=run, cosim_options=options,
                                          cosim_help=help, aliases=aliases)


def designs() -> dict[str, Design]:
    """All registered designs, by name (imports every ``zoforge.hw.*.designs`` module)."""
    for info in pkgutil.iter_modules(hw_package.__path__):
        if info.ispkg:
            try:
                importlib.import_module(f"zoforge.hw.{info.name}.designs")
            except ModuleNotFoundError as error:
                if error.name != f"zoforge.hw.{info.name}.designs":
                    raise
    return dict(sorted(_REGISTRY.items()))


def get_design(name: str) -> Design:
    available = designs()
    if name not in available:
        raise ConfigError("--design", "one of " + ", ".join(available), name)
    return available[name]
