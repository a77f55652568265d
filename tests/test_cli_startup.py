"""The command line starts fast: its registries (commands, designs, co-simulations, boards) are
tables of import references, so building the parser imports no command, design or board, and
``zoforge COMMAND --help`` imports only that command's modules, none of the heavy ones
(issue 19). Each check runs in a fresh interpreter and reads its ``sys.modules``; the times
are measured by ``benchmarks/bench_cli_startup.py``, not asserted here."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import ClassVar

import pytest

from zoforge.cli import COMMANDS, main
from zoforge.config import Config, IntRange, param
from zoforge.hw.designs import BUILTIN, Design, MemorySize, registered_designs
from zoforge.sim.runners import COSIMS

#: Modules no parser and no ``--help`` may import (numpy itself is allowed).
HEAVY = ("torch", "cocotb", "cocotbext", "amaranth", "transformers", "matplotlib", "dask",
         "optuna", "scipy")
DESIGNS = [design.name for design in BUILTIN]

_PROBE = """
import contextlib, io, json, sys
from zoforge.cli import build_parser, main
argv = json.loads(sys.argv[1])
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        if argv:
            code = main(argv)
        else:
            build_parser()
            code = 0
    except SystemExit as exit:
        code = exit.code
print(json.dumps({"code": code, "out": out.getvalue(), "modules": sorted(sys.modules)}))
"""


def _probe(argv: list[str]) -> dict:
    """Run ``zoforge ARGV`` (or, for [], build the parser) in a fresh interpreter: its exit
    code, its output and the modules it imported."""
    proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(argv)],
                          capture_output=True, text=True, check=True)
    result = json.loads(proc.stdout.splitlines()[-1])
    result["modules"] = set(result["modules"])
    return result


def _heavy(modules: set[str], allowed: tuple[str, ...] = ()) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in set(HEAVY) - set(allowed))


def test_building_the_parser_imports_no_command_design_or_heavy_module():
    modules = _probe([])["modules"]
    assert not _heavy(modules)
    assert not [m for m in modules if m.startswith("zoforge.cli.")]
    assert not [m for m in modules if m.startswith(("zoforge.hw", "zoforge.sim",
                                                    "zoforge.golden", "zoforge.boards"))]


def test_zoforge_help_lists_every_command_and_imports_none():
    result = _probe(["--help"])
    assert result["code"] == 0
    for name, command in COMMANDS.items():
        assert name in result["out"] and command.help.split()[0] in result["out"]
    assert not _heavy(result["modules"])
    assert not [m for m in result["modules"] if m.startswith("zoforge.cli.")]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_command_help_imports_only_its_command(command):
    result = _probe([command, "--help"])
    assert result["code"] == 0
    assert f"usage: zoforge {command}" in result["out"]
    others = {f"zoforge.cli.{m}" for name, c in COMMANDS.items() if name != command
              for m in c.modules} - {f"zoforge.cli.{m}" for m in COMMANDS[command].modules}
    assert not others & result["modules"]
    assert not _heavy(result["modules"])


@pytest.mark.parametrize("command", ["generate", "cosim"])
def test_listing_the_designs_imports_none_of_them(command):
    result = _probe([command, "--help"])
    assert result["code"] == 0
    listed = DESIGNS if command == "generate" else [d for d in DESIGNS if d in COSIMS]
    assert all(design in result["out"] for design in listed)
    assert not [m for m in result["modules"]
                if m.startswith(("zoforge.hw.", "zoforge.sim.", "zoforge.golden."))
                and m not in ("zoforge.hw.designs", "zoforge.sim.runners")]


@pytest.mark.parametrize("argv", [
    pytest.param(argv, id=" ".join(argv))
    for design in DESIGNS
    for argv in (["generate", design], ["build", "--design", design],
                 *([["cosim", design]] if design in COSIMS else []))])
def test_a_designs_help_imports_that_design_only(argv):
    """A design's flags import none of the other designs' co-simulations and no heavy
    module (a co-simulation's options type lives with its runner, whose module may import
    Amaranth, never torch or cocotb)."""
    design = argv[-1]
    result = _probe([*argv, "--help"])
    assert result["code"] == 0 and "--config" in result["out"]
    assert not _heavy(result["modules"], ("amaranth",) if argv[0] == "cosim" else ())
    others = [COSIMS[name]["cosim"].partition(":")[0] for name in COSIMS if name != design]
    assert not set(others) & result["modules"]


def test_a_group_commands_sub_command_gets_its_flags_when_used():
    result = _probe(["rng", "dump", "--help"])
    assert result["code"] == 0 and "--n-rng" in result["out"] and "--cycles" in result["out"]
    assert not _heavy(result["modules"])
    assert "zoforge.golden.rng" not in _probe(["rng", "--help"])["modules"]


def _printed(code: str) -> list[str]:
    """The words ``code`` prints when run in a fresh interpreter."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.split()


def test_design_fields_given_as_references_are_imported_when_first_read():
    code = ("import sys\nfrom zoforge.hw.designs import get_design\n"
            "design = get_design('engine')\n"
            "before = 'zoforge.hw.engine.config' in sys.modules\n"
            "design.configs\n"
            "print(before, 'zoforge.hw.engine.config' in sys.modules, "
            "'zoforge.hw.engine.designs' in sys.modules)")
    assert _printed(code) == ["False", "True", "False"]


def test_a_board_is_imported_only_when_used():
    code = ("import sys\nfrom zoforge.boards.registry import board_names, get_board\n"
            "names = board_names()\nget_board('zcu102')\n"
            "print(','.join(names), 'zoforge.boards.ulx3s' in sys.modules, "
            "'zoforge.boards.zcu102' in sys.modules)")
    assert _printed(code) == ["ulx3s-85f,zcu102", "False", "True"]


# -- a design's size limit is its registration's ------------------------------------------

@dataclass(frozen=True)
class TableConfig(Config):
    kind: ClassVar[str] = "test-table"
    depth: int = param(16, "table depth", IntRange(1, 1 << 24))
    width: int = param(8, "word width", IntRange(1, 64))


def _table_memories(config: TableConfig) -> dict[str, MemorySize]:
    return {"table": MemorySize(config.depth, config.depth * config.width, ("depth", "width"))}


TABLE = Design("test-table", "test-only table (tests/test_cli_startup.py)",
                       configs=TableConfig, elaborate=lambda config: None,
                       memories=_table_memories)


@pytest.fixture(autouse=True, scope="module")
def _test_designs():
    """This module's test-only designs, registered while its tests run (never leaking
    into another module's view of the commands)."""
    with registered_designs(TABLE):
        yield


def test_a_registered_designs_memories_are_checked_and_name_its_flags(capsys, tmp_path):
    assert main(["generate", "test-table", "--depth", str(1 << 20),
                 "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("zoforge: error: --depth/--width must be small enough")
    assert error.count("\n") == 1 and "most in table" in error
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
