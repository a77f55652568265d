"""Shared by the ``zoforge generate <design>`` commands: elaborate, write, list the files."""
from __future__ import annotations

import argparse

from zoforge.hw.designs import Elaborated

__all__ = ["generate_design"]


def generate_design(name: str, args: argparse.Namespace) -> Elaborated:
    """Elaborate registered design ``name`` from ``args`` into ``args.out``; print the paths."""
    from zoforge.hw.designs import get_design
    from zoforge.hw.export import write_design

    design = get_design(name).spec.elaborate(args)
    for role, path in write_design(design, args.out).items():
        print(f"{role}: {path}")
    return design
