# amaranth: UnusedElaboratable=no
"""Design ``zo-layer``: the ZO training layer, elaborated from a ZoLayerConfig (registered
in :data:`zoforge.hw.designs.BUILTIN`).

First line: :mod:`zoforge.hw.verilog_cache`'s hits leave the top unelaborated."""
from __future__ import annotations

from zoforge.golden.zolayer import ZoLayerConfig
from zoforge.hw.designs import Elaborated, MemorySize, memory_sizes
from zoforge.hw.rng.designs import design_name as generator_name
from zoforge.hw.rng.designs import memory_files as generator_memory_files

from .buffers import Memory, layer_buffers
from .layer import ZoLayer

__all__ = ["layer_name", "elaborate_layer", "layer_memories"]

BLOCKS = {
    "array": "R x C output-stationary systolic array, 16-bit weight x 8-bit activation MACs",
    "fetch": "weight panels -> perturbation (master >> 8 plus/minus z >> eps_shift, "
             "saturating) -> staging banks",
    "feeder": "staging and token buffers -> array, one k-step per cycle (the systolic "
              "library's)",
    "drain": "array read-out (row multiplexers) -> result banks (shared with the GEMM engine)",
    "output": "result banks and init -> rows for the requantizer (shared with the GEMM "
              "engine)",
    "requant": "init add (XW) and requantization of U = requant(X·A)",
    "sink": "requantized rows -> output stream, init buffer or U buffer",
    "update": "update unit: D += g*z, T -= round(eta*D) (walks T in branch order)",
    "loader": "input stream -> token buffer, frozen W and A, master copy",
    "reader": "master copy -> output stream (read_master)",
    "generator": "the perturbation generator (with save/restore)",
    "control": "control/status registers, the job in flight",
    "regs": "AXI4-Lite target",
    "z_switch": "the generator's stream to the panel fetch (branch) or the update unit",
    "master_ports": "the master copy's and D's ports, shared by the loader, panel fetch, "
                    "update unit and reader",
}


def layer_name(config: ZoLayerConfig) -> str:
    mode = "lora" if config.mode == "lora-fa" else "full"
    return (f"zo_layer_{mode}_{config.rows}x{config.cols}_"
            f"{generator_name(config.generator()).removeprefix('rng_')}")


def elaborate_layer(config: ZoLayerConfig) -> Elaborated:
    top = ZoLayer(config)
    name = layer_name(config)
    buffers = layer_buffers(config, top.z_width)
    blocks = dict(BLOCKS, **{memory.value: buffers[memory].doc for memory in Memory
                             if memory in buffers})
    generator = config.generator()
    return Elaborated(top=top, name=name, config=config, facts=top.facts, blocks=blocks,
                      memory_files=generator_memory_files(name, generator, generator.golden()))


#: The configuration fields each memory's size grows with.
SIZED_BY = {"x_buffer": ("max_m", "max_k"), "master": ("max_n", "max_k", "max_r"),
            "update_accumulator": ("max_n", "max_k", "max_r"), "stage": ("max_k",),
            "result_buffer": ("rows", "cols"), "w_frozen": ("max_n", "max_k"),
            "a_frozen": ("max_r", "max_k"), "u_buffer": ("max_m", "max_r"),
            "init_buffer": ("max_n", "max_m")}


def layer_memories(config: ZoLayerConfig) -> dict[str, MemorySize]:
    """The layer's memories, sized from its configuration (no elaboration)."""
    return memory_sizes(layer_buffers(config, config.generator().golden().width), SIZED_BY)
