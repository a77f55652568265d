"""The registered designs with their co-simulations attached.

:mod:`zoforge.hw.designs` registers designs without knowing about simulation (hardware sits
below this layer); each co-simulation module of this package (``zoforge.sim.*_cosim``)
attaches its runner to its design when imported. :func:`designs` imports them all, so it
returns every design with whatever co-simulation it has.
"""
from __future__ import annotations

import importlib
import pkgutil

import zoforge.sim as sim_package
from zoforge.hw.designs import Design
from zoforge.hw.designs import designs as registered_designs

__all__ = ["designs"]


def designs() -> dict[str, Design]:
    """Every registered design, with the co-simulations of ``zoforge.sim.*_cosim``."""
    registered_designs()
    for info in pkgutil.iter_modules(sim_package.__path__):
        if info.name.endswith("_cosim"):
            importlib.import_module(f"zoforge.sim.{info.name}")
    return registered_designs()
