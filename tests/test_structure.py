"""The code's layering, checked on its source: imports go one way (no cycle between areas,
not even through a function-local import), no module uses another area's underscore names,
and argparse lives only in the command line and the benchmarks' own flags."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Areas from the bottom up; a module may import its own area and the areas below it.
LAYERS = ["base", "boards", "golden", "hw", "sim", "reports", "sweep", "cli"]
FOLDERS = {"golden": "golden", "hw": "hw", "sim": "sim", "boards": "boards",
           "reports": "reports", "sweep": "sweep", "cli": "zoforge/cli", "base": "zoforge"}


def _area_of_module(name: str) -> str | None:
    parts = name.split(".")
    if parts[0] != "zoforge":
        return None
    if len(parts) == 1:
        return "base"
    if parts[1] == "cli":
        return "cli"
    return parts[1] if parts[1] in FOLDERS else "base"


def _area_of_file(path: Path) -> str:
    relative = path.relative_to(ROOT).as_posix()
    if relative.startswith("zoforge/cli/") or relative == "zoforge/__main__.py":
        return "cli"
    return "base" if relative.startswith("zoforge/") else relative.split("/")[0]


def _sources():
    for folder in ("zoforge", "golden", "hw", "sim", "boards", "reports", "sweep"):
        yield from sorted((ROOT / folder).rglob("*.py"))


def _imports(tree: ast.AST):
    """(imported module, imported names, line) for every import in ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, [alias.name for alias in node.names], node.lineno


def test_imports_go_down_the_layers_only():
    upward = []
    for path in _sources():
        area = _area_of_file(path)
        for module, _, line in _imports(ast.parse(path.read_text())):
            target = _area_of_module(module)
            if target and LAYERS.index(target) > LAYERS.index(area):
                upward.append(f"{path.relative_to(ROOT)}:{line} ({area}) imports {module}")
    assert not upward, "\n".join(upward)


#: Private names of third-party packages used on purpose, one place, each with its reason.
WAIVED_PRIVATE = {
    "torch._int_mm": "torch's int8 x int8 -> int32 GEMM has no public name; "
                     "golden/finetune/calls.py probes each shape once against float64 and "
                     "falls back to the float32 route where it is missing or inexact",
}


def test_no_module_uses_another_areas_underscore_names():
    found = []
    for path in _sources():
        area = _area_of_file(path)
        tree = ast.parse(path.read_text())
        for module, names, line in _imports(tree):
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if private and _area_of_module(module) not in (None, area):
                found.append(f"{path.relative_to(ROOT)}:{line} imports {private} from {module}")
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name)
                             and node.value.id in ("self", "cls"))
                    and not isinstance(node.value, ast.Call)
                    and not (isinstance(node.value, ast.Name)
                             and f"{node.value.id}.{node.attr}" in WAIVED_PRIVATE)):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} uses .{node.attr}")
    assert not found, "\n".join(found)


def test_function_local_imports_say_why():
    """Outside the command line (whose modules import their work inside the handlers, see
    zoforge/cli/__init__.py), an import inside a function carries a comment saying why it is
    there (start-up time), on its line or on the import or comment line just above it."""
    silent = []
    for path in _sources():
        if _area_of_file(path) == "cli":
            continue
        text = path.read_text()
        lines = text.splitlines()
        for function in ast.walk(ast.parse(text)):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    row = node.lineno - 1
                    while row >= 0 and "#" not in lines[row]:
                        above = lines[row - 1].strip() if row else ""
                        if not (above.startswith(("import ", "from ", "#")) or "#" in above):
                            row = -1
                            break
                        row -= 1
                    if row < 0:
                        silent.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not silent, "function-local imports without a reason: " + ", ".join(silent)


@pytest.mark.parametrize("folder", ["golden", "hw", "sim", "boards", "reports", "sweep",
                                    "zoforge"])
def test_argparse_only_in_the_command_line(folder):
    users = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        if path.relative_to(ROOT).as_posix().startswith("zoforge/cli/"):
            continue
        if any(module == "argparse" for module, _, _ in _imports(ast.parse(path.read_text()))):
            users.append(str(path.relative_to(ROOT)))
    assert not users
