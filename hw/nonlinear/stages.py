"""A lane's pipeline registers for the nonlinear units (one copy for i-GELU and i-softmax).

Data only (validity travels in the units' own ``valid`` registers): no reset, so a delay line
can be a shift-register LUT (SRL) and no reset fans out to the lanes.
"""
from __future__ import annotations

from amaranth import Module, Signal

__all__ = ["lane_stages"]


def lane_stages(m: Module, lane: int):
    """``(reg, delayed)`` for lane ``lane`` of ``m``: ``reg(shape, stage, name)`` a reset-less
    register named ``{name}_s{stage}_{lane}``; ``delayed(value, first, last, name)``
    ``value`` registered at stage ``first`` and carried to stage ``last`` (its last
    register)."""
    def reg(shape, stage, name):
        return Signal(shape, name=f"{name}_s{stage}_{lane}", reset_less=True)

    def delayed(value, first, last, name):
        regs = [reg(value.shape(), n, name) for n in range(first, last + 1)]
        m.d.sync += regs[0].eq(value)
        m.d.sync += [dst.eq(src) for dst, src in zip(regs[1:], regs[:-1])]
        return regs[-1]

    return reg, delayed
