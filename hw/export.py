"""Turn an elaborated design into files: Verilog, memory files, its configuration and facts.

``write_design`` writes, into one folder and each file atomically (a temporary file renamed
into place), never through a symbolic link (a link at an output file's name, or among the
folders on the way to it, is a one-line :class:`~zoforge.errors.ConfigError` naming
``flag``, ``--out`` by default, raised before anything is written):

* ``<name>.v``: the Verilog;
* the memory initialisation files (``.hex``);
* ``design.toml``: the configuration it was elaborated from — the file a user keeps:
  ``zoforge generate --config DIR/design.toml`` reproduces the same Verilog byte for byte;
* ``<name>.json``: that configuration with the derived facts (widths, formats, ports) and
  the configuration's stable hash.

The Verilog is platform-less by default (what ``zoforge generate``, the co-simulations and
the formal checks use). ``family`` elaborates it for a board's device family instead (a
platform whose ``family`` is that name, nothing else): a block may then hand-instantiate the
family's primitives, e.g. the UltraScale+ form of
:class:`~zoforge.hw.pe.packed_multiply.PackedMultiplier` (one ``DSP48E2``) on ``"xcup"``.
``zoforge build`` on a Xilinx board writes and estimates that form
(:mod:`zoforge.reports.pipeline`), so its ``<name>.v`` is ``zoforge generate``'s only where
the design has no such block; simulating it takes the primitives' models
(:func:`zoforge.sim.models.with_models`).
"""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from amaranth.back import verilog
from amaranth.hdl import ClockDomain, Fragment, ValueCastable
from amaranth.hdl._ir import PortDirection      # the port directions convert() passes
from amaranth.lib.wiring import In

from zoforge.config import config_text
from zoforge.hw.designs import Elaborated
from zoforge.hw.verilog_cache import cached_verilog
from zoforge.outputs import check_targets, make_out_dir, write_text

__all__ = ["to_verilog", "design_verilog", "verilog_key", "write_design", "CONFIG_FILE"]

CONFIG_FILE = "design.toml"


def to_verilog(component, name: str, family: str | None = None) -> str:
    """Verilog for an Amaranth ``wiring.Component`` (ports from its signature); ``family``:
    elaborated for that device family (module docstring), None: platform-less.

    A component with clock domains besides ``sync`` (its ``clock_domains``) gets ``sync``
    and those, in name order, created here with their ``clk``/``rst`` ports last: Amaranth
    creates a top's missing domains from a set, so their order (the ports', and every
    module's they reach) would follow Python's hash seed and the text would differ from
    process to process."""
    platform = None if family is None else SimpleNamespace(family=family)
    domains = tuple(getattr(component, "clock_domains", ()))
    if not domains:
        return verilog.convert(component, name=name, emit_src=False, platform=platform)
    ports = {}
    for path, member, value in component.signature.flatten(component):
        value = value.as_value() if isinstance(value, ValueCastable) else value
        ports["__".join(map(str, path))] = (value, PortDirection.Input if member.flow == In
                                            else PortDirection.Output)
    fragment = Fragment.get(component, platform)
    for domain in map(ClockDomain, ("sync", *sorted(set(domains) - {"sync"}))):
        fragment.add_domains(domain)
        ports.update({signal.name: (signal, PortDirection.Input)
                      for signal in (domain.clk, domain.rst)})
    return verilog.convert_fragment(fragment, ports, name, emit_src=False)[0]


def verilog_key(design: Elaborated, family: str | None = None) -> tuple[str, ...]:
    """What a design's Verilog depends on besides the code: its kind, configuration text,
    top module's class and name, and ``family`` (the Verilog cache's key parts)."""
    top = type(design.top)
    return (design.config.kind, config_text(design.config, ".toml"), design.name,
            f"{top.__module__}.{top.__qualname__}", family or "")


def design_verilog(design: Elaborated, family: str | None = None) -> str:
    """:func:`to_verilog` of a design's top, converted once per :func:`verilog_key` and code
    version (:mod:`zoforge.hw.verilog_cache`)."""
    return cached_verilog(verilog_key(design, family),
                          lambda: to_verilog(design.top, design.name, family))


def write_design(design: Elaborated, out_dir: Path | str, flag: str = "--out",
                 family: str | None = None) -> dict[str, Path]:
    """Write the design's files (see the module docstring) into ``out_dir``; ``family``:
    the Verilog elaborated for that device family (:func:`to_verilog`).

    Returns the written paths by role (``verilog``, ``design``, ``summary``, and each memory
    file's name). The configuration file is written last, so a folder that has one is
    complete. ``flag``: the option that named ``out_dir``, for the errors.
    """
    out = make_out_dir(flag, out_dir)
    texts: dict[str, tuple[Path, object]] = {
        "verilog": (out / f"{design.name}.v",
                    lambda: design_verilog(design, family))}
    for file_name, text in design.memory_files.items():
        texts[file_name] = (out / file_name, text)
    texts["summary"] = (out / f"{design.name}.json",
                        json.dumps(design.summary(), indent=2, sort_keys=True) + "\n")
    texts["design"] = (out / CONFIG_FILE, config_text(design.config, ".toml"))
    check_targets(out, [path for path, _ in texts.values()], flag)
    paths: dict[str, Path] = {}
    for role, (path, text) in texts.items():
        write_text(path, text() if callable(text) else text, root=out, flag=flag)
        paths[role] = path
    return paths
