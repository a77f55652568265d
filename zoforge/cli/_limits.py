"""Checks the commands make before any work: what a request will cost, and where it runs.

* :func:`check_design_size`: a design whose generation would exhaust the machine is refused
  up front. The memories of the GEMM engine and the ZO layer are elaborated word by word
  (each word's initial value is part of the netlist): generating the Verilog costs about
  1 ms and 16 MB of memory per thousand words (65,536 words: about a minute and 1 GB; the
  largest ZO layer the flags allow passed 6 GB), so a design's memories may hold at most
  :data:`MAX_WORDS` words and :data:`MAX_BITS` bits (32 Mbit, the ZCU102's block RAM: a
  larger design could not be built anyway).
* :func:`check_sim_cache`: Verilator's build (GNU Make) cannot run in a folder whose path
  holds a space, so the simulation cache (``$ZOFORGE_CACHE``) must not have one.
"""
from __future__ import annotations

from zoforge.errors import ConfigError

__all__ = ["MAX_WORDS", "MAX_BITS", "design_memory", "check_design_size", "check_sim_cache"]

#: Largest total depth (words) of a design's memories ``zoforge`` generates.
MAX_WORDS = 1 << 16
#: Largest total size (bits) of a design's memories.
MAX_BITS = 32 << 20

# The flags that size each memory (named in the error for the largest one).
_FLAGS = {
    "engine": {"x_buffer": "--max-m/--max-k", "w_buffer": "--max-k"},
    "zo-layer": {"x_buffer": "--max-m/--max-k", "master": "--max-n/--max-k/--max-r",
                 "update_accumulator": "--max-n/--max-k/--max-r", "w_frozen": "--max-n/--max-k",
                 "a_frozen": "--max-r/--max-k", "u_buffer": "--max-m/--max-r",
                 "init_buffer": "--max-n/--max-m"},
}


def design_memory(config) -> dict[str, tuple[int, int]] | None:
    """Memory name -> (words, bits) of an engine or ZO layer configuration (no
    elaboration); None for designs whose memories are not sized by the user."""
    from amaranth.hdl import Shape

    kind = getattr(config, "kind", None)
    if kind == "engine":
        from zoforge.hw.pe.buffers import engine_buffers
        buffers = engine_buffers(config)
    elif kind == "zo-layer":
        from zoforge.hw.zo.buffers import layer_buffers
        buffers = layer_buffers(config, config.generator().golden().width)
    else:
        return None
    return {name: (buffer.depth, Shape.cast(buffer.shape).width * buffer.depth)
            for name, buffer in buffers.items()}


def check_design_size(config) -> None:
    """Refuse a configuration whose generation exceeds the documented limits (see the module
    docstring); a no-op for designs without user-sized memories."""
    memory = design_memory(config)
    if memory is None:
        return
    words = sum(w for w, _ in memory.values())
    bits = sum(b for _, b in memory.values())
    if words <= MAX_WORDS and bits <= MAX_BITS:
        return
    largest = max(memory, key=lambda name: memory[name][0])
    flag = _FLAGS[config.kind].get(largest, "--max-n")
    raise ConfigError(flag, f"small enough for the {config.kind}'s memories to hold at most "
                      f"{MAX_WORDS} words and {MAX_BITS >> 20} Mbit (generating takes about "
                      "1 s and 16 MB per 1000 words)",
                      f"{words} words, {bits / 2**20:.1f} Mbit, most in {largest}")


def check_sim_cache() -> None:
    """Refuse a simulation cache path with white space (Verilator's Make cannot build
    there)."""
    from zoforge.files import cache_dir
    path = str(cache_dir())
    if any(c.isspace() for c in path):
        raise ConfigError("ZOFORGE_CACHE", "a folder path without spaces (Verilator's GNU "
                          "Make cannot build in one; the default is ~/.cache/zoforge)",
                          repr(path))
