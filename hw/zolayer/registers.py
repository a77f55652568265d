"""The ZO layer's register map: one table, read by the hardware, the co-simulation and docs.

32-bit registers on AXI4-Lite (byte addresses), :class:`~zoforge.hw.pe.regmap.Register`
entries whose ``kind`` is one of :data:`KINDS`. Jobs start by
writing CTRL with bit 0 set while idle; the job code and the generator/sign flags are taken
from the same write.
"""
from __future__ import annotations

from zoforge.golden.engine_widths import MULT_BITS, SHIFT_BITS, SHIFT_MAX
from zoforge.golden.zolayer.config import Formats
from zoforge.hw.pe.regmap import COUNTER_BITS, Register

__all__ = ["REGISTERS", "KINDS", "JOBS", "LORA_JOBS", "CTRL_FIELDS", "ADDR_BITS", "DIM_BITS",
           "WRITTEN", "address", "ctrl_word"]

ADDR_BITS = 8
DIM_BITS = 16            # width of the M, K, N and RANK registers

#: Kinds of register: what a write does and what a read returns.
KINDS = {"rw": "written only while idle, read back", "r": "read only; writes ignored",
         "w1": "special, see the register's doc"}


REGISTERS = {
    "CTRL": Register(0x00, "w1", 14, "bit0 start, bits 1-4 job, bit5 save the generator "
                                     "state first, bit6 restore it first, bit7 minus (sign "
                                     "-1), bit8 plain (branch without perturbation), bits "
                                     "9-12 query (accumulate: the query of the branch job "
                                     "whose z it takes, with branch_lanes > 2), bit13 "
                                     "zero_w (lora-fa branch: XW taken as 0, the init "
                                     "buffer not added; no frozen_w needed)"),
    "STATUS": Register(0x04, "w1", 3, "bit0 busy, bit1 done (sticky; write 1 clears), "
                                      "bit2 the last job is not available in this mode"),
    "IRQ_EN": Register(0x08, "rw", 1, "irq = done & IRQ_EN"),
    "M": Register(0x0C, "rw", DIM_BITS, "tokens M (a multiple of C)"),
    "K": Register(0x10, "rw", DIM_BITS, "input features K"),
    "N": Register(0x14, "rw", DIM_BITS, "output features N (a multiple of R / "
                                        "branch_lanes)"),
    "RANK": Register(0x18, "rw", DIM_BITS, "LoRA rank r (a multiple of R; lora-fa)"),
    "MULT": Register(0x1C, "rw", MULT_BITS, "requantization multiplier of U = requant(X·A)"),
    "SHIFT": Register(0x20, "rw", SHIFT_BITS, f"requantization shift of U (0..{SHIFT_MAX})"),
    "EPS_SHIFT": Register(0x24, "rw", Formats.EPS_SHIFT_MAX.bit_length(),
                          "eps = 2^-EPS_SHIFT: perturbation z >> EPS_SHIFT"),
    "GRAD": Register(0x28, "rw", Formats.GRAD_BITS,
                     "projected gradient g of the next accumulate (signed)"),
    "ETA_MULT": Register(0x2C, "rw", Formats.ETA_MULT_BITS, "eta / q = ETA_MULT * 2^-ETA_SHIFT"),
    "ETA_SHIFT": Register(0x30, "rw", Formats.ETA_SHIFT_MAX.bit_length(),
                          f"(0..{Formats.ETA_SHIFT_MAX})"),
    "CYCLES": Register(0x34, "r", COUNTER_BITS, "cycles of the last job (start write to done)"),
    "ARRAY_CYCLES": Register(0x38, "r", COUNTER_BITS, "cycles the array was fed a k-step in it"),
    "STEP_CYCLES": Register(0x3C, "w1", COUNTER_BITS, "busy cycles since the last write to it "
                                                      "(any write clears it): one ZO step's "
                                                      "cycles"),
    "INFO": Register(0x40, "r", 32, "rows | cols << 8 | full << 16 | branch_lanes << 24"),
    "MAX_M": Register(0x44, "r", 32, "token buffer capacity"),
    "MAX_K": Register(0x48, "r", 32, "input feature capacity"),
    "MAX_N": Register(0x4C, "r", 32, "output feature capacity"),
    "MAX_R": Register(0x50, "r", 32, "rank capacity"),
}

#: Addresses of the registers a write acts on (all but the read-only ones): the writes the
#: AXI4-Lite target decodes (:class:`~zoforge.hw.pe.axil.RegisterPortSignature`'s ``wr_hit``).
WRITTEN = tuple(reg.address for reg in REGISTERS.values() if reg.kind != "r")

#: Job codes (CTRL bits 1-4). Loads take words from the input stream, compute jobs read the
#: on-chip buffers; see :mod:`zoforge.hw.zolayer.layer` for the word orders.
JOBS = {"load_x": 1, "load_w": 2, "load_a": 3, "load_master": 4, "frozen_w": 5,
        "frozen_a": 6, "branch": 7, "accumulate": 8, "apply": 9, "read_master": 10}
#: Jobs that exist only in lora-fa mode.
LORA_JOBS = ("load_w", "load_a", "frozen_w", "frozen_a")

CTRL_FIELDS = {"start": (0, 1), "job": (1, 4), "save": (5, 1), "restore": (6, 1),
               "minus": (7, 1), "plain": (8, 1), "query": (9, 4), "zero_w": (13, 1)}


def address(name: str) -> int:
    return REGISTERS[name].address


def ctrl_word(job: str, save: bool = False, restore: bool = False, minus: bool = False,
              plain: bool = False, query: int = 0, zero_w: bool = False) -> int:
    """The CTRL value that starts ``job`` with the given flags."""
    values = {"start": 1, "job": JOBS[job], "save": save, "restore": restore,
              "minus": minus, "plain": plain, "query": query, "zero_w": zero_w}
    return sum(int(values[name]) << offset for name, (offset, _) in CTRL_FIELDS.items())
