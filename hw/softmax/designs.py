# amaranth: UnusedElaboratable=no
"""Design ``softmax``: the integer softmax unit with its bus interfaces, elaborated from a
:class:`~.config.SoftmaxConfig` (registered in :data:`zoforge.hw.designs.BUILTIN`).

First line: :mod:`zoforge.hw.verilog_cache`'s hits leave the top unelaborated."""
from __future__ import annotations

from zoforge.hw.designs import Elaborated, MemorySize
from zoforge.hw.nonlinear.softmax import EXP_BITS, Q_BITS, ROWS

from .config import SoftmaxConfig
from .top import SoftmaxBusUnit

__all__ = ["elaborate_softmax", "softmax_name", "softmax_memories"]

BLOCKS = {
    "axil": "AXI4-Lite target",
    "regs": "control/status registers, the job's length, rows, key mask and constants",
    "unit": "the streaming integer softmax (row max, i-exp, the row's sum and reciprocal, "
            "p = e R): hw/nonlinear/softmax.py",
}


def softmax_name(config: SoftmaxConfig) -> str:
    """The Verilog top name (``nonlinear_*``: hw/lint_waivers.vlt's scope)."""
    return f"nonlinear_softmax_{config.lanes}x{config.max_len}"


def elaborate_softmax(config: SoftmaxConfig) -> Elaborated:
    top = SoftmaxBusUnit(config)
    return Elaborated(top=top, name=softmax_name(config), config=config, facts=top.facts,
                      blocks=dict(BLOCKS))


def softmax_memories(config: SoftmaxConfig) -> dict[str, MemorySize]:
    """The unit's two buffers (ROWS rows of ``max_beats`` words each), sized from its
    configuration (no elaboration)."""
    depth = ROWS * (1 << max(1, (config.max_beats - 1).bit_length()))
    return {"rows": MemorySize(depth, depth * config.lanes * (Q_BITS + 1),
                               ("lanes", "max_len")),
            "exps": MemorySize(depth, depth * config.lanes * EXP_BITS, ("lanes", "max_len"))}
