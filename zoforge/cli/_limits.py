"""Checks the commands make before any work: what a request will cost, and where it runs.

* :func:`check_design_size`: a design whose generation would exhaust the machine is refused
  up front. The GEMM engine's memories are elaborated word by word (each word's initial
  value is part of the netlist): generating the Verilog costs about 1 ms and 16 MB of
  memory per thousand words (65,536 words: about a minute and 1 GB), so the engine's
  memories may hold at most :data:`ENGINE_MAX_WORDS` words and :data:`ENGINE_MAX_BITS` bits
  (32 Mbit, the ZCU102's block RAM: a larger engine could not be built anyway).
* :func:`check_sim_cache`: Verilator's build (GNU Make) cannot run in a folder whose path
  holds a space, so the simulation cache (``$ZOFORGE_CACHE``) must not have one.
"""
from __future__ import annotations

from zoforge.errors import ConfigError

__all__ = ["ENGINE_MAX_WORDS", "ENGINE_MAX_BITS", "engine_memory", "check_design_size",
           "check_sim_cache"]

#: Largest total depth (words) of the GEMM engine's memories ``zoforge`` generates.
ENGINE_MAX_WORDS = 1 << 16
#: Largest total size (bits) of the GEMM engine's memories.
ENGINE_MAX_BITS = 32 << 20

# The flags that size each engine memory (named in the error for the largest one).
_ENGINE_FLAGS = {"x_buffer": "--max-m/--max-k", "w_buffer": "--max-k"}


def engine_memory(config) -> dict[str, tuple[int, int]]:
    """Memory name -> (words, bits) of an engine configuration (no elaboration)."""
    from amaranth.hdl import Shape

    from zoforge.hw.pe.buffers import engine_buffers
    return {name: (buffer.depth, Shape.cast(buffer.shape).width * buffer.depth)
            for name, buffer in engine_buffers(config).items()}


def check_design_size(config) -> None:
    """Refuse a configuration whose generation exceeds the documented limits (see the module
    docstring); a no-op for designs without one."""
    if getattr(config, "kind", None) != "engine":
        return
    memory = engine_memory(config)
    words = sum(w for w, _ in memory.values())
    bits = sum(b for _, b in memory.values())
    if words <= ENGINE_MAX_WORDS and bits <= ENGINE_MAX_BITS:
        return
    largest = max(memory, key=lambda name: memory[name][0])
    flag = _ENGINE_FLAGS.get(largest, "--max-n")
    raise ConfigError(flag, f"small enough for the engine's memories to hold at most "
                      f"{ENGINE_MAX_WORDS} words and {ENGINE_MAX_BITS >> 20} Mbit (generating "
                      "takes about 1 s and 16 MB per 1000 words)",
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
