"""Turn an elaborated design into files: Verilog, memory initialisation files, config JSON."""
from __future__ import annotations

import json
from pathlib import Path

from amaranth.back import verilog

from zoforge.hw.designs import Elaborated

__all__ = ["to_verilog", "write_design"]


def to_verilog(component, name: str) -> str:
    """Verilog for an Amaranth ``wiring.Component`` (ports from its signature)."""
    return verilog.convert(component, name=name, emit_src=False)


def write_design(design: Elaborated, out_dir: Path | str) -> dict[str, Path]:
    """Write ``<name>.v``, ``<name>.json`` and the memory files into ``out_dir``.

    Returns the written paths by role (``verilog``, ``config``, and each memory file's name).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    paths["verilog"] = out / f"{design.name}.v"
    paths["verilog"].write_text(to_verilog(design.top, design.name))
    for file_name, text in design.memory_files.items():
        paths[file_name] = out / file_name
        paths[file_name].write_text(text)
    paths["config"] = out / f"{design.name}.json"
    config = dict(design.config, top=design.name,
                  memory_files=sorted(design.memory_files))
    paths["config"].write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return paths
