"""The engine's register map, as data: the one source for the register file
(:mod:`.registers`), the host (``zoforge.sim.engine_cosim``) and docs/engine.md.

32-bit registers at byte addresses (:data:`REGISTER_MAP`); per-column parameter tables in
4 KiB regions (:data:`PARAM_TABLES`), column n at word ``(n // C) * 2^ceil(log2 C) + n % C``.
An engine built with ``gelu`` (:attr:`~.config.EngineConfig.gelu`, the GELU job mode) has
the CTRL bits of :data:`GELU_CTRL_BITS`, the registers of :data:`GELU_REGISTER_MAP` (the
i-GELU's constants, :func:`zoforge.hw.nonlinear.gelu.gelu_registers`) and the tables of
:data:`GELU_TABLES` (the second requantizer's) too: :func:`register_map`,
:func:`param_tables` and :func:`ctrl_bits` give a build's.
"""
from __future__ import annotations

from dataclasses import dataclass

from amaranth import signed, unsigned
from amaranth.hdl import Shape

from zoforge.golden.engine_widths import ACC_BITS, MULT_BITS, SHIFT_BITS, SHIFT_MAX
from zoforge.golden.finetune.integer_params import ERF_BITS
from zoforge.hw.nonlinear import gelu
from zoforge.hw.pe.regmap import COUNTER_BITS, START_BIT, STATUS_BITS, Register, addresses

from .config import DIM_BITS

__all__ = ["Register", "ParamTable", "REGISTER_MAP", "PARAM_TABLES", "CTRL_BITS",
           "STATUS_BITS", "REGISTERS", "PARAM_REGIONS", "ADDR_BITS", "COUNTER_BITS",
           "REGION_SHIFT", "GELU_REGISTER_MAP", "GELU_TABLES", "GELU_CTRL_BITS",
           "GELU_CONSTANTS", "register_map", "param_tables", "ctrl_bits", "host_map"]

ADDR_BITS = 16
REGION_SHIFT = 12          # a parameter table's region is wr_addr[REGION_SHIFT:]

#: Kinds of register: what the register file does on a write and what a read returns.
KINDS = {
    "ctrl": "the fields of CTRL_BITS: start (W, a one-cycle pulse) and the mode bits (RW); "
            "writes are ignored while busy",
    "status": "the fields of STATUS_BITS (R); writing 1 to the done bit clears it",
    "config": "RW, ``width`` bits, written only while idle (a job's parameters)",
    "rw": "RW, ``width`` bits, at any time",
    "counter": "R, counts cycles of one event, cleared by start",
    "info": "R, a build constant",
}


@dataclass(frozen=True)
class ParamTable:
    """A per-column parameter table: a 4 KiB region of words, held in ``memory``, read
    into the requantizer's input field ``field``."""

    address: int
    shape: Shape
    memory: str
    field: str
    doc: str


REGISTER_MAP: dict[str, Register] = {
    "CTRL": Register(0x00, "ctrl", 32, "W bit0 start (ignored while busy); RW bit1 relu, "
                                       "bit2 raw, bit3 per_channel, bit4 bias_en"),
    "STATUS": Register(0x04, "status", 32, "R bit0 busy, bit1 done (sticky; write 1 to "
                                           "bit1 clears it)"),
    "IRQ_EN": Register(0x08, "rw", 1, "RW bit0 interrupt enable (irq = done & irq_en)"),
    "M": Register(0x0C, "config", DIM_BITS, "rows of X and Y"),
    "K": Register(0x10, "config", DIM_BITS, "columns of X, rows of W"),
    "N": Register(0x14, "config", DIM_BITS, "columns of W and Y"),
    "MULT": Register(0x18, "config", MULT_BITS, "per-tensor requantization multiplier"),
    "SHIFT": Register(0x1C, "config", SHIFT_BITS,
                      f"per-tensor requantization shift (0..{SHIFT_MAX})"),
    "CYCLES": Register(0x20, "counter", COUNTER_BITS,
                       "cycles of the last/current job (start to last output beat)"),
    "ARRAY_CYCLES": Register(0x24, "counter", COUNTER_BITS,
                             "cycles the array was fed a k-step during that job"),
    "INFO": Register(0x28, "info", 32, "rows | cols << 8 | pack << 16"),
    "MAX_M": Register(0x2C, "info", 32, "X buffer rows"),
    "MAX_K": Register(0x30, "info", 32, "K limit"),
    "MAX_N": Register(0x34, "info", 32, "N limit"),
}
PARAM_TABLES: dict[str, ParamTable] = {
    "BIAS": ParamTable(0x1000, signed(ACC_BITS), "bias_table", "bias", "per-column bias"),
    "COL_MULT": ParamTable(0x2000, unsigned(MULT_BITS), "mult_table", "mult",
                           "per-column requantization multiplier"),
    "COL_SHIFT": ParamTable(0x3000, unsigned(SHIFT_BITS), "shift_table", "shift",
                            "per-column requantization shift"),
}
CTRL_BITS = {"start": START_BIT, "relu": 1, "raw": 2, "per_channel": 3, "bias_en": 4}

#: The GELU job mode's CTRL bit (``gelu`` builds): with raw 0, the job's results go through
#: the 16-bit requantizer, the i-GELU and the second (OUT_*) requantizer; relu is ignored.
GELU_CTRL_BITS = {"gelu": 5}
#: The GELU registers: name -> (the i-GELU constant, ``gelu_registers``' key; its lowest
#: bit the register holds). ``offset`` is wider than a register (51 bits: the unit takes
#: every scale the golden makes constants for), its bits 32 and up are GELU_OFFSET_HI's.
GELU_CONSTANTS = {"GELU_BETA": ("beta", 0), "GELU_OFFSET": ("offset", 0),
                  "GELU_OFFSET_HI": ("offset", 32), "GELU_SHIFT": ("shift", 0),
                  "GELU_ONE": ("one", 0)}
_GELU_WIDTHS = {"beta": gelu.BETA_BITS, "offset": gelu.GAMMA_BITS, "shift": gelu.SHIFT_BITS,
                "one": ERF_BITS}
GELU_REGISTER_MAP: dict[str, Register] = {
    name: Register(0x38 + 4 * index, "config", min(32, _GELU_WIDTHS[constant] - low),
                   f"i-GELU constant {constant}" + (f" bits {low} and up" if low else "")
                   + " (gelu builds; gelu_registers)")
    for index, (name, (constant, low)) in enumerate(GELU_CONSTANTS.items())}
GELU_TABLES: dict[str, ParamTable] = {
    "OUT_MULT": ParamTable(0x4000, unsigned(MULT_BITS), "out_mult_table", "out_mult",
                           "per-column multiplier after the GELU (gelu builds)"),
    "OUT_SHIFT": ParamTable(0x5000, unsigned(SHIFT_BITS), "out_shift_table", "out_shift",
                            "per-column shift after the GELU (gelu builds)"),
}


def register_map(gelu_mode: bool = False) -> dict[str, Register]:
    """The registers of a build (with ``gelu``: :data:`GELU_REGISTER_MAP` too)."""
    return {**REGISTER_MAP, **(GELU_REGISTER_MAP if gelu_mode else {})}


def param_tables(gelu_mode: bool = False) -> dict[str, ParamTable]:
    """The per-column tables of a build (with ``gelu``: :data:`GELU_TABLES` too)."""
    return {**PARAM_TABLES, **(GELU_TABLES if gelu_mode else {})}


def ctrl_bits(gelu_mode: bool = False) -> dict[str, int]:
    """CTRL's fields in a build (with ``gelu``: :data:`GELU_CTRL_BITS` too)."""
    return {**CTRL_BITS, **(GELU_CTRL_BITS if gelu_mode else {})}


#: Register byte addresses, by name (the host's view; a gelu build's: :func:`host_map`).
REGISTERS = addresses(REGISTER_MAP)
#: Parameter region base addresses, by name (a gelu build's: :func:`host_map`).
PARAM_REGIONS = {name: table.address for name, table in PARAM_TABLES.items()}


def host_map(gelu_mode: bool = False) -> tuple[dict[str, int], dict[str, int]]:
    """A build's ``(register addresses, parameter region addresses)``, by name."""
    return (addresses(register_map(gelu_mode)),
            {name: table.address for name, table in param_tables(gelu_mode).items()})
