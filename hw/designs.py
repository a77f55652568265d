"""Registry of buildable top-level designs.

A *design* is what ``zoforge generate``, ``zoforge build`` and the reports elaborate: a
function from command-line parameters to an Amaranth component plus its configuration. Each
hardware area declares its designs in a module named ``designs`` inside its package
(``zoforge.hw.rng.designs``, ``zoforge.hw.pe.designs``, ...) with :func:`register_design`;
those modules are discovered automatically.

Example::

    @register_design("rng", help="PeZO random-number generator")
    class RngDesign:
        @staticmethod
        def add_arguments(parser): ...
        @staticmethod
        def elaborate(args) -> Elaborated: ...
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["Elaborated", "DesignSpec", "register_design", "designs", "get_design"]


@dataclass
class Elaborated:
    """One elaborated design, ready to be written out, simulated or synthesized.

    top:           the Amaranth component (its ports are the Verilog top's ports)
    name:          Verilog name of the top module
    config:        JSON-able configuration, including derived values (widths, ...)
    memory_files:  file name -> contents, for memory initialisation files (may be empty)
    blocks:        names of the top-level sub-blocks (Amaranth submodule names) reports
                   should list separately, mapped to a one-line description
    """

    top: Any
    name: str
    config: dict
    memory_files: dict[str, str] = field(default_factory=dict)
    blocks: dict[str, str] = field(default_factory=dict)


class DesignSpec(Protocol):
    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...
    def elaborate(self, args: argparse.Namespace) -> Elaborated: ...


@dataclass(frozen=True)
class _Entry:
    name: str
    help: str
    spec: Any


_REGISTRY: dict[str, _Entry] = {}


def register_design(name: str, help: str):
    """Class decorator: register ``cls`` (with ``add_arguments``/``elaborate``) as ``name``."""
    def decorate(cls):
        if name in _REGISTRY and _REGISTRY[name].spec is not cls:
            raise RuntimeError(f"design {name!r} registered twice")
        _REGISTRY[name] = _Entry(name, help, cls)
        return cls
    return decorate


def designs() -> dict[str, _Entry]:
    """All registered designs, by name (imports every ``zoforge.hw.*.designs`` module)."""
    import zoforge.hw as hw_package
    for info in pkgutil.iter_modules(hw_package.__path__):
        if info.ispkg:
            try:
                importlib.import_module(f"zoforge.hw.{info.name}.designs")
            except ModuleNotFoundError as error:
                if error.name != f"zoforge.hw.{info.name}.designs":
                    raise
    return dict(sorted(_REGISTRY.items()))


def get_design(name: str) -> _Entry:
    from zoforge.errors import ConfigError
    available = designs()
    if name not in available:
        raise ConfigError("--design", "one of " + ", ".join(available), name)
    return available[name]
