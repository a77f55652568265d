"""One runner for host programs (:mod:`zoforge.sim.program`) on either backend.

* ``jobserver`` (fast): the persistent Verilator job server (:mod:`zoforge.sim.jobserver`);
  each batch is one pipe exchange, every cycle runs in C++. Verilator only.
* ``cocotb``: the cocotbext-axi bench :mod:`zoforge.sim.benches.program` (Verilator or
  Icarus; cocotbext-axi checks the AXI protocol).

:func:`run_program` takes the design (:class:`BusTarget`), the program's ``module:function``
reference, its JSON-able ``args`` and input arrays, and the stalls; it returns the program's
arrays and a :class:`~zoforge.sim.cosim.CosimResult` (``results``: the program's, plus
``sim_cycles`` and ``stalls``: per channel of :data:`~zoforge.sim.jobserver.CHANNELS`, the
stalls inserted: on the job server the cycles a stall held back a pending transfer, in the
cocotb bench the pause cycles drawn). A failure in the run is ``passed`` False with its
message in ``failures``. :func:`stall_problems` checks the counts against the settings.
"""
from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from zoforge.errors import ConfigError
from zoforge.sim.cosim import CosimResult, run_cocotb
from zoforge.sim.jobserver import CHANNELS, JobServer, JobServerError
from zoforge.sim.program import HostCheckFailed, drive, load_program

__all__ = ["BACKENDS", "BACKEND_CHOICES", "BACKEND_HELP", "BusTarget", "Stalls",
           "resolve_backend", "run_program", "stall_problems", "SOURCES", "SINKS"]

#: The channels ``source_idle`` stalls (valid held low) and ``sink_backpressure`` stalls
#: (ready held low).
SOURCES, SINKS = CHANNELS[:4], CHANNELS[4:]

BACKENDS = ("cocotb", "jobserver")
#: what a ``--backend`` option accepts: ``auto`` is the job server on Verilator, else cocotb
BACKEND_CHOICES = ("auto", *BACKENDS)
BACKEND_HELP = ("auto (jobserver on Verilator, else cocotb), jobserver (a persistent "
                "Verilator model driven from C++, no Python per cycle; Verilator only) or "
                "cocotb (cocotbext-axi drives the ports and checks the protocol)")


def resolve_backend(backend: str, simulator: str) -> str:
    """``auto`` -> the job server on Verilator, cocotb elsewhere; the job server needs
    Verilator (a one-line ConfigError otherwise)."""
    if backend == "auto":
        return "jobserver" if simulator == "verilator" else "cocotb"
    if backend == "jobserver" and simulator != "verilator":
        raise ConfigError("backend", "cocotb or auto with --simulator " + simulator +
                          " (the job server is Verilator-only)", backend)
    return backend


@dataclass(frozen=True)
class BusTarget:
    """A design with zoforge's bus ports: its Verilog and top, the output stream's 32-bit
    lanes, the input stream's bits (default ``32 * lanes``), the AXI4-Lite address bits,
    memory files, and extra Verilator options for the cocotb build."""

    verilog: str = field(repr=False)
    top: str
    lanes: int
    addr_bits: int
    in_bits: int | None = None
    memory_files: dict = field(default_factory=dict, repr=False)
    verilator_args: tuple = ()

    @property
    def input_bits(self) -> int:
        return self.in_bits or 32 * self.lanes


@dataclass(frozen=True)
class Stalls:
    """Per-cycle stall probabilities (see :class:`~zoforge.sim.jobserver.JobServer`) and
    their seed; ``patterns``: the input source's / output sink's 0/1 stall patterns (cocotb
    only)."""

    source_idle: float = 0.0
    sink_backpressure: float = 0.0
    seed: int = 0
    patterns: dict | None = None


def stall_problems(counts: dict | None, source_idle: float = 0.0,
                   sink_backpressure: float = 0.0, used=CHANNELS) -> list[str]:
    """What is wrong with a run's stall ``counts`` (``results["stalls"]``) for its settings:
    a channel among ``used`` (those the program transfers on) that its probability stalls
    but that never stalled, or any channel stalled with its probability 0; [] if none."""
    if counts is None:
        return ["no stall counts"]
    problems = []
    for name in CHANNELS:
        probability = source_idle if name in SOURCES else sink_backpressure
        if probability and name in used and not counts.get(name):
            problems.append(f"{name}: no stall at probability {probability:g}")
        if not probability and counts.get(name):
            problems.append(f"{name}: {counts[name]} stalls at probability 0")
    return problems


def run_program(program: str, args: dict, data: dict[str, np.ndarray], target: BusTarget,
                *, backend: str = "jobserver", simulator: str = "verilator",
                stalls: Stalls = Stalls(), max_cycles: int = 20_000_000,
                data_dir=None) -> tuple[dict[str, np.ndarray], CosimResult]:
    """Run the host program ``program`` (``module:function``, called with ``(args, data)``)
    on ``target``; ``max_cycles``: most cycles of one operation. See the module docstring."""
    if backend == "jobserver":
        if stalls.patterns:
            raise ValueError("stall patterns need the cocotb backend")
        return _on_server(load_program(program)(args, data), target, stalls, max_cycles)
    folder = Path(data_dir or tempfile.mkdtemp(prefix="zoforge-program-"))
    folder.mkdir(parents=True, exist_ok=True)
    for name, array in data.items():
        np.save(folder / f"in-{name}.npy", array)
    if stalls.patterns:
        np.savez(folder / "pause.npz", **stalls.patterns)
    settings = {"program": program, "args": args, "in_bits": target.input_bits,
                "lanes": target.lanes, "max_cycles": max_cycles, "patterns": bool(
                    stalls.patterns), "source_idle": stalls.source_idle,
                "sink_backpressure": stalls.sink_backpressure, "seed": stalls.seed}
    result = run_cocotb(verilog=target.verilog, toplevel=target.top,
                        test_module="zoforge.sim.benches.program", args=settings,
                        simulator=simulator, data_dir=folder,
                        extra_files=target.memory_files,
                        verilator_args=list(target.verilator_args))
    arrays = {path.stem[4:]: np.load(path) for path in folder.glob("out-*.npy")} \
        if result.passed else {}
    if not result.passed:                  # the folder is kept to read its sim.log
        result.failures = result.failures + [f"see {folder / 'sim.log'}"]
    elif data_dir is None:
        shutil.rmtree(folder, ignore_errors=True)
        result.data_dir = None
    return arrays, result


def _on_server(program, target: BusTarget, stalls: Stalls, max_cycles: int):
    server = JobServer(target.verilog, target.top, lanes=target.lanes,
                       addr_bits=target.addr_bits, in_bits=target.in_bits,
                       memory_files=target.memory_files, source_idle=stalls.source_idle,
                       sink_backpressure=stalls.sink_backpressure, seed=stalls.seed,
                       max_cycles=max_cycles)
    arrays, results, failures = {}, {}, []
    try:
        with server:
            arrays, results = drive(program, server.exchange)
            results = {**results, "sim_cycles": server.cycle, "stalls": server.stalls()}
    except (JobServerError, HostCheckFailed) as error:
        failures = [str(error)]
    return arrays, CosimResult(passed=not failures, results=results,
                               simulator="verilator (jobserver)", build_s=server.build_s,
                               run_s=time.perf_counter() - server.started,
                               data_dir=server.entry, failures=failures)
