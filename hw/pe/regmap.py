"""The register-map type: one entry of a design's table of 32-bit registers (the engine's
:mod:`zoforge.hw.engine.regmap`, the ZO layer's :mod:`zoforge.hw.zolayer.registers`). A design's
map is a ``dict`` of register name -> :class:`Register`, read by its register file, its
host (the co-simulation) and its docs page; the design says what each ``kind`` means.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Register", "addresses", "COUNTER_BITS", "START_BIT", "STATUS_BITS"]

#: Job control of the bus units (the engine's and the softmax unit's CTRL / STATUS, and
#: every unit's cycle counters): the counters' width, CTRL's start bit (a write's one-cycle
#: pulse) and STATUS's fields (``done`` cleared by writing 1 to it).
COUNTER_BITS = 32
START_BIT = 0
STATUS_BITS = {"busy": 0, "done": 1}


@dataclass(frozen=True)
class Register:
    """A register at byte ``address``: its ``kind`` (a key of the design's kinds: what a
    write does and what a read returns), ``width`` bits, ``doc``."""

    address: int
    kind: str
    width: int
    doc: str


def addresses(registers: dict[str, Register]) -> dict[str, int]:
    """Byte addresses by register name (the host's view of a map)."""
    return {name: register.address for name, register in registers.items()}
