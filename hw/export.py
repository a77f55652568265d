"""Turn an elaborated design into files: Verilog, memory files, its configuration and facts.

``write_design`` writes, into one folder and each file atomically:

* ``<name>.v``: the Verilog;
* the memory initialisation files (``.hex``);
* ``design.toml``: the configuration it was elaborated from — the file a user keeps:
  ``zoforge generate --config DIR/design.toml`` reproduces the same Verilog byte for byte;
* ``<name>.json``: that configuration with the derived facts (widths, formats, ports) and
  the configuration's stable hash.
"""
from __future__ import annotations

import json
from pathlib import Path

from amaranth.back import verilog

from zoforge.config import config_text
from zoforge.files import atomic_write_text
from zoforge.hw.designs import Elaborated

__all__ = ["to_verilog", "write_design", "CONFIG_FILE"]

CONFIG_FILE = "design.toml"


def to_verilog(component, name: str) -> str:
    """Verilog for an Amaranth ``wiring.Component`` (ports from its signature)."""
    return verilog.convert(component, name=name, emit_src=False)


def write_design(design: Elaborated, out_dir: Path | str) -> dict[str, Path]:
    """Write the design's files (see the module docstring) into ``out_dir``.

    Returns the written paths by role (``verilog``, ``design``, ``summary``, and each memory
    file's name). The configuration file is written last, so a folder that has one is
    complete.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {"verilog": out / f"{design.name}.v"}
    atomic_write_text(paths["verilog"], to_verilog(design.top, design.name))
    for file_name, text in design.memory_files.items():
        paths[file_name] = out / file_name
        atomic_write_text(paths[file_name], text)
    paths["summary"] = out / f"{design.name}.json"
    atomic_write_text(paths["summary"],
                      json.dumps(design.summary(), indent=2, sort_keys=True) + "\n")
    paths["design"] = out / CONFIG_FILE
    atomic_write_text(paths["design"], config_text(design.config, ".toml"))
    return paths
