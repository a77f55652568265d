"""A benchmark script as a module, for the tests of its helpers and generated docs: the
scripts live in ``benchmarks/`` beside their own helpers (``result_lines``), not in a
package, so the folder is on ``sys.path`` while the module is used."""
from __future__ import annotations

import importlib.util
import sys
from contextlib import contextmanager
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@contextmanager
def benchmark_script(name: str):
    """``benchmarks/<name>.py`` loaded as a module (its folder on ``sys.path`` meanwhile)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCHMARKS))
