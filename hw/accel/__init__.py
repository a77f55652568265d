"""A board-sized accelerator: today's proven units (GEMM engines, ZO layers) replicated and
sized to a board.

* :mod:`.config` the accelerator's configuration (design ``accelerator``) and each unit's
  DSP48E2 count;
* :mod:`.plan` the planner: sizes from a board's budget (:func:`plan_accelerator`);
* :mod:`.top` the :class:`Accelerator` component (the units side by side, one Verilog top).
"""
from zoforge.hw.accel.config import AcceleratorConfig

__all__ = ["AcceleratorConfig"]
