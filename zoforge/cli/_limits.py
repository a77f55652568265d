"""Checks the commands make before any work: what a request will cost, and where it runs.

* :func:`check_design_size`: a design whose generation would exhaust the machine is refused
  up front, generically: a registered design says what its memories cost and which
  configuration fields size each (its ``memories``). Memories (the GEMM engine's, the ZO
  layer's) are elaborated word by word (each word's initial value is part of the netlist):
  generating the Verilog costs about 1 s and 16 MB of memory per thousand words (131,072
  words: about two minutes and 2 GB, room for a board-sized accelerator: MiniLM's priced
  ZCU102 design holds 78,208; the largest ZO layer the flags allow passed 6 GB), so a
  design's memories may hold at most :data:`~zoforge.hw.designs.MAX_WORDS` words and
  :data:`~zoforge.hw.designs.MAX_BITS` bits
  (32 Mbit, the ZCU102's block RAM: a larger design could not be built anyway).
* :func:`check_sim_cache`: the simulation cache (``$ZOFORGE_CACHE``) must be an absolute,
  writable folder whose path Verilator's build (GNU Make) accepts
  (:func:`zoforge.files.check_cache_dir`).
"""
from __future__ import annotations

from zoforge.errors import ConfigError
from zoforge.hw.designs import MAX_BITS, MAX_WORDS   # the limits' one source

__all__ = ["MAX_WORDS", "MAX_BITS", "check_design_size", "check_sim_cache"]


def check_design_size(config) -> None:
    """Refuse a configuration whose generation exceeds the documented limits (see the module
    docstring), naming the flags of the fields that size its largest memory (the most words
    if the words exceed their limit, else the most bits); a no-op for
    designs without user-sized memories (a design's ``memories``,
    :class:`zoforge.hw.designs.Design`)."""
    from zoforge.config import flag_name
    from zoforge.hw.designs import get_design

    memories = get_design(config.kind).memories
    if memories is None:
        return
    memory = memories(config)
    words = sum(m.words for m in memory.values())
    bits = sum(m.bits for m in memory.values())
    if words <= MAX_WORDS and bits <= MAX_BITS:
        return
    over = "words" if words > MAX_WORDS else "bits"      # the limit exceeded (words first)
    largest = max(memory, key=lambda name: getattr(memory[name], over))
    flags = "/".join(flag_name(field) for field in memory[largest].sized_by)
    raise ConfigError(flags, f"small enough for the {config.kind}'s memories to hold at most "
                      f"{MAX_WORDS} words and {MAX_BITS >> 20} Mbit (generating takes about "
                      "1 s and 16 MB per 1000 words)",
                      f"{words} words, {bits / 2**20:.1f} Mbit, most in {largest}")


def check_sim_cache() -> None:
    """Refuse a simulation cache Verilator cannot build in, or zoforge cannot write
    (:func:`zoforge.files.check_cache_dir`)."""
    from zoforge.files import check_cache_dir
    check_cache_dir()
