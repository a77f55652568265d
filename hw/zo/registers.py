"""The ZO layer's register map: one table, read by the hardware, the co-simulation and docs.

32-bit registers on AXI4-Lite (byte addresses). ``access``: ``rw`` (written only while idle,
read back), ``r`` (read only; writes ignored), ``w1`` (special, see ``doc``). Jobs start by
writing CTRL with bit 0 set while idle; the job code and the generator/sign flags are taken
from the same write.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Register", "REGISTERS", "JOBS", "LORA_JOBS", "CTRL_FIELDS", "ADDR_BITS", "address",
           "ctrl_word"]

ADDR_BITS = 8


@dataclass(frozen=True)
class Register:
    address: int
    access: str
    bits: int
    doc: str


REGISTERS = {
    "CTRL": Register(0x00, "w1", 9, "bit0 start, bits 1-4 job, bit5 save the generator state "
                                    "first, bit6 restore it first, bit7 minus (sign -1), "
                                    "bit8 plain (branch without perturbation)"),
    "STATUS": Register(0x04, "w1", 3, "bit0 busy, bit1 done (sticky; write 1 clears), "
                                      "bit2 the last job is not available in this mode"),
    "IRQ_EN": Register(0x08, "rw", 1, "irq = done & IRQ_EN"),
    "M": Register(0x0C, "rw", 16, "tokens M (a multiple of C)"),
    "K": Register(0x10, "rw", 16, "input features K"),
    "N": Register(0x14, "rw", 16, "output features N (a multiple of R)"),
    "RANK": Register(0x18, "rw", 16, "LoRA rank r (a multiple of R; lora-fa)"),
    "MULT": Register(0x1C, "rw", 16, "requantization multiplier of U = requant(X·A)"),
    "SHIFT": Register(0x20, "rw", 6, "requantization shift of U (0..47)"),
    "EPS_SHIFT": Register(0x24, "rw", 5, "eps = 2^-EPS_SHIFT: perturbation z >> EPS_SHIFT"),
    "GRAD": Register(0x28, "rw", 16, "projected gradient g of the next accumulate (signed)"),
    "ETA_MULT": Register(0x2C, "rw", 16, "eta / q = ETA_MULT * 2^-ETA_SHIFT"),
    "ETA_SHIFT": Register(0x30, "rw", 6, "(0..47)"),
    "CYCLES": Register(0x34, "r", 32, "cycles of the last job (start write to done)"),
    "ARRAY_CYCLES": Register(0x38, "r", 32, "cycles the array was fed a k-step in it"),
    "STEP_CYCLES": Register(0x3C, "w1", 32, "busy cycles since the last write to it "
                                            "(any write clears it): one ZO step's cycles"),
    "INFO": Register(0x40, "r", 32, "rows | cols << 8 | full << 16"),
    "MAX_M": Register(0x44, "r", 32, "token buffer capacity"),
    "MAX_K": Register(0x48, "r", 32, "input feature capacity"),
    "MAX_N": Register(0x4C, "r", 32, "output feature capacity"),
    "MAX_R": Register(0x50, "r", 32, "rank capacity"),
}

#: Job codes (CTRL bits 1-4). Loads take words from the input stream, compute jobs read the
#: on-chip buffers; see :mod:`zoforge.hw.zo.layer` for the word orders.
JOBS = {"load_x": 1, "load_w": 2, "load_a": 3, "load_master": 4, "frozen_w": 5,
        "frozen_a": 6, "branch": 7, "accumulate": 8, "apply": 9, "read_master": 10}
#: Jobs that exist only in lora-fa mode.
LORA_JOBS = ("load_w", "load_a", "frozen_w", "frozen_a")

CTRL_FIELDS = {"start": (0, 1), "job": (1, 4), "save": (5, 1), "restore": (6, 1),
               "minus": (7, 1), "plain": (8, 1)}


def address(name: str) -> int:
    return REGISTERS[name].address


def ctrl_word(job: str, save: bool = False, restore: bool = False, minus: bool = False,
              plain: bool = False) -> int:
    """The CTRL value that starts ``job`` with the given flags."""
    values = {"start": 1, "job": JOBS[job], "save": save, "restore": restore,
              "minus": minus, "plain": plain}
    return sum(int(values[name]) << offset for name, (offset, _) in CTRL_FIELDS.items())
