"""docs/architecture.md kept true: its example runs, its tables are the registries and the
import layers, every file, folder and module it names exists, and what it says of the
hardware library holds."""
from __future__ import annotations

import ast
import importlib.util
import re

import pytest


from test_structure import FOLDERS, LAYERS, ROOT
from zoforge.references import resolve
from zoforge.hw.designs import BUILTIN
from zoforge.sim.runners import COSIMS, designs

DOC = ROOT / "docs" / "architecture.md"
TEXT = DOC.read_text()
TOP_FOLDERS = ("zoforge", "golden", "hw", "sim", "boards", "reports", "sweep", "tests",
               "benchmarks", "docs", "scripts")


def _table(heading: str) -> list[list[str]]:
    """The rows (cells without their backticks) of the first table under ``## heading``."""
    section = TEXT.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    assert len(lines) > 2, f"no table under {heading!r}"
    return [[cell.strip().replace("`", "") for cell in line.strip("|").split("|")]
            for line in lines[2:]]


def _module_file(reference: str) -> str:
    """``zoforge.sim.engine_cosim:cosim_engine`` -> ``sim/engine_cosim.py``."""
    module = reference.split(":")[0].split(".")
    return "/".join([FOLDERS.get(module[1], module[1]), *module[2:]]) + ".py"


def test_the_designs_table_is_the_registry():
    rows = {row[0]: row for row in _table("Designs")}
    registered = {design.name: designs()[design.name] for design in BUILTIN}
    assert set(rows) == set(registered)
    for name, (_, types, hardware, golden, cosim) in rows.items():
        design = registered[name]
        assert types.split(", ") == [t.__name__ for t in design.configs], name
        elaborate_module = design.elaborate.__module__.split(".")
        assert hardware == "/".join(["hw", elaborate_module[2]]) + "/", name
        assert (ROOT / golden).exists(), golden
        if name in COSIMS:
            assert cosim == _module_file(COSIMS[name]["cosim"]), name
        else:                       # no `zoforge cosim` runner: the table says so
            assert cosim.startswith("—"), name


def test_the_layers_table_is_the_import_layering():
    folders = [row[0].rstrip("/") for row in _table("Layers")]
    assert folders == [FOLDERS[layer] for layer in LAYERS]


def test_every_path_and_module_named_exists():
    paths = set(re.findall(r"`((?:%s)/[\w./-]*)`" % "|".join(TOP_FOLDERS), TEXT))
    paths |= set(re.findall(r"\b((?:%s)/[\w/-]+\.(?:py|md|vlt|toml))\b" % "|".join(TOP_FOLDERS),
                            TEXT))
    assert len(paths) > 30
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, missing
    modules = set(re.findall(r"`(zoforge(?:\.\w+)+)`", TEXT))
    unknown = []
    for name in sorted(modules):
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:
            found = False
        if not found:   # a module's attribute, e.g. zoforge.config.read_table
            module, _, attribute = name.rpartition(".")
            try:
                resolve(f"{module}:{attribute}")
                found = True
            except (ImportError, AttributeError):
                pass
        if not found:
            unknown.append(name)
    assert not unknown, unknown


def test_the_hardware_library_imports_no_design():
    designs_below = ("zoforge.hw.engine", "zoforge.hw.zolayer", "zoforge.hw.rng",
                     "zoforge.hw.designs")
    found = []
    for path in sorted((ROOT / "hw" / "pe").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.name}: {n}" for n in names if n.startswith(designs_below)]
    assert not found, found


@pytest.mark.slow        # a whole engine report (~13 s): CI's -m ci runs it
@pytest.mark.ci
def test_the_example_runs(tmp_path):
    # (its report is the one tests/test_reports_pinned.py builds, its engine the one
    # tests/test_engine_jobserver.py runs: the synthesis and the build are shared)
    from zoforge.reports.pipeline import Progress

    blocks = re.findall(r"```python\n(.*?)```", TEXT, re.DOTALL)
    assert len(blocks) == 1 and "argparse" not in blocks[0]
    namespace = {"OUT": tmp_path / "example", "QUIET": Progress(quiet=True)}
    exec(compile(blocks[0], "docs/architecture.md", "exec"), namespace)
    report = namespace["report"]
    assert report.resources.total["LUT"] > 0 and report.fmax.fmax_mhz > 0
    assert report.power.total_w > 0
