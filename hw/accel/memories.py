"""The accelerator's memories, unit by unit, sized from its configuration: what the
generator's size limit (:data:`~zoforge.hw.designs.MAX_WORDS`, ``MAX_BITS``) and the
planner's fit test (:func:`~zoforge.hw.accel.plan.over_budget`) read."""
from __future__ import annotations

from zoforge.hw.designs import MemorySize
from zoforge.hw.engine.designs import engine_memories
from zoforge.hw.softmax.designs import softmax_memories
from zoforge.hw.zolayer.designs import layer_memories

from .config import AcceleratorConfig

__all__ = ["accelerator_memories"]


def accelerator_memories(config: AcceleratorConfig) -> dict[str, MemorySize]:
    """Every unit's memories (``engine_0.x_buffer`` ...), sized from the configuration; the
    fields sizing each are the accelerator's (``engine_max_m`` ...), and the unit count."""
    out = {}
    engines = [engine_memories(config.engine_config(i < config.gelu_engines))
               for i in range(config.engines)]
    for prefix, units in (("engine", engines),
                          ("layer", [layer_memories(config.layer_config())] * config.layers),
                          ("softmax", [softmax_memories(config.softmax_config())]
                           * config.softmax_units)):
        for index, memories in enumerate(units):
            for name, size in memories.items():
                sized_by = tuple(f"{prefix}_{field}" for field in size.sized_by)
                count_field = "softmax_units" if prefix == "softmax" else f"{prefix}s"
                out[f"{prefix}_{index}.{name}"] = MemorySize(
                    size.words, size.bits, sized_by + (count_field,))
    return out
