"""Run a cocotb testbench on generated Verilog, with build caching and data exchange.

The host side (pytest, the CLI) calls :func:`run_cocotb`; the cocotb testbench (a module in
``zoforge.sim.benches``) runs inside the simulator process. They exchange data through files
in a per-run folder, never through per-cycle Python on the host:

* ``bench_args()`` in the testbench returns the JSON-able ``args`` given to :func:`run_cocotb`;
* ``bench_dir()`` is a folder for bulk data both sides can write (``.npy`` arrays);
* ``write_result(dict)`` in the testbench stores results, returned as ``CosimResult.results``.

Golden comparison happens on the host, so the simulator process never imports torch.

Builds are cached in the one simulation build cache (:mod:`zoforge.sim.build_cache`), keyed
by the Verilog, the simulator and its options. Icarus builds :func:`with_time_zero_trigger`'s
form of the Verilog (every combinational block evaluated at time 0, as Verilator does).
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from zoforge.errors import ConfigError, check_choice
from zoforge.files import atomic_write_text, content_key, entry_dir
from zoforge.sim.build_cache import cached_build
from zoforge.sim.toolchain import apply_toolchain_env, available_simulators, check_build_tools

__all__ = ["CosimResult", "run_cocotb", "bench_args", "bench_dir", "write_result",
           "SIMULATORS", "scratch_folder", "with_time_zero_trigger"]

SIMULATORS = ("verilator", "icarus")
_ARGS_ENV = "ZOFORGE_BENCH_ARGS"
_DIR_ENV = "ZOFORGE_BENCH_DIR"
#: Yosys' ``write_verilog`` trigger register, one a module, declared ``= 0`` and read by every
#: ``always @*`` block it writes (``if (trigger) begin end``) so that each runs at time 0
#: (group 1: the indent, 2: the escaped name with its closing space).
_TRIGGER = re.compile(r"^( *)reg (\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+ ) *= 0;$",
                      re.MULTILINE)


def with_time_zero_trigger(verilog: str) -> str:
    """``verilog`` with each Yosys trigger register (:data:`_TRIGGER`) set to 1 by an
    ``initial #0``: Icarus fires no event for a declaration's initial value, so an ``always
    @*`` block none of whose inputs changes after time 0 never ran and its outputs stayed X
    (a comb signal under ``m.If`` whose condition holds its reset value: docs/toolchain.md).
    The ``#0`` sets it once every block waits at its ``@*``; nothing else reads it, so the
    values are the design's. Verilog without the trigger is returned unchanged."""
    return _TRIGGER.sub(lambda match: f"{match[0]}\n{match[1]}initial #0 {match[2]}= 1;",
                        verilog)
_RESULT_FILE = "result.json"


@dataclass
class CosimResult:
    passed: bool            # every cocotb test in the module passed
    results: dict           # what the testbench stored with write_result()
    simulator: str
    build_s: float          # wall time of the (possibly cached) build
    run_s: float            # wall time of the simulation process
    data_dir: Path | None   # the run's data folder (bench_dir() in the testbench); None
                            # when it was a temporary one, removed after a passing run
    failures: list[str] = field(default_factory=list)
    waves: Path | None = None  # the SAIF/VCD file if one was requested


def run_cocotb(*, verilog: str, toplevel: str, test_module: str, args: dict | None = None,
               simulator: str = "verilator", saif: bool = False, vcd: bool = False,
               data_dir: Path | None = None, extra_files: dict[str, str] | None = None,
               verilator_args: list[str] | None = None) -> CosimResult:
    """Build ``verilog`` (cached) and run the cocotb tests of ``test_module`` on it.

    verilog:     the complete Verilog source text of the design
    toplevel:    its top module
    test_module: dotted module name of the cocotb testbench (importable in the sim process)
    args:        JSON-able arguments for the testbench (``bench_args()``)
    simulator:   "verilator" or "icarus"
    saif / vcd:  record switching activity (Verilator: SAIF via --trace-saif, or VCD)
    data_dir:    folder for the run's data (default: a temporary folder, removed after a
                 passing run without waves, kept to inspect when the run fails)
    extra_files: memory initialisation files (name -> text) to place beside the simulation
    verilator_args: extra Verilator build arguments appended after the defaults (e.g.
                 ``--no-public-flat-rw`` and a ``.vlt`` file naming the ports cocotb needs,
                 for a faster model); ignored by other simulators
    """
    from cocotb_tools.runner import get_runner   # only to build and run, not in a bench

    check_choice("--simulator", simulator, SIMULATORS)
    apply_toolchain_env()
    if simulator not in available_simulators():
        raise ConfigError("simulator", "one installed here: " +
                          (", ".join(available_simulators()) or "none found"), simulator)
    waves = saif or vcd
    build_args: list[str] = []
    if simulator == "verilator":
        build_args = ["-Wno-fatal", "-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-O3"]
        if saif:
            build_args.append("--trace-saif")
        elif vcd:
            build_args.append("--trace")
        build_args.extend(verilator_args or [])
    runner = get_runner(simulator)
    # what the simulator compiles, and what its build is cached by
    source_text = with_time_zero_trigger(verilog) if simulator == "icarus" else verilog

    def build(build_dir: Path, complete: bool) -> None:
        source = build_dir / f"{toplevel}.v"
        if not complete:
            check_build_tools(simulator)
            source.write_text(source_text)
            for name, text in (extra_files or {}).items():
                (build_dir / name).write_text(text)
        build_kwargs = dict(sources=[source], hdl_toplevel=toplevel, build_dir=build_dir,
                            build_args=build_args, waves=waves, always=not complete)
        if simulator == "icarus":
            build_kwargs["timescale"] = ("1ns", "1ps")
        # a complete build is not redone (the runner finds it up to date), but the runner
        # needs its build step for the test step
        with _log_tail_on_error(build_dir / "build.log"):
            runner.build(**build_kwargs, log_file=build_dir / "build.log")

    build_dir, build_s = cached_build(f"{toplevel}-{simulator}", [
        source_text, toplevel, *build_args, json.dumps(sorted((extra_files or {}).items()))],
        build)

    temporary = data_dir is None
    data = Path(tempfile.mkdtemp(prefix="zoforge-cosim-")) if temporary else Path(data_dir)
    data = data.resolve()
    data.mkdir(parents=True, exist_ok=True)
    for name, text in (extra_files or {}).items():
        (data / name).write_text(text)
    result_file = data / _RESULT_FILE
    result_file.unlink(missing_ok=True)
    results_xml = data / "results.xml"
    started = time.perf_counter()
    with _log_tail_on_error(data / "sim.log"):
        try:
            runner.test(hdl_toplevel=toplevel, test_module=test_module, build_dir=build_dir,
                        test_dir=data, results_xml=str(results_xml), waves=waves,
                        extra_env={_ARGS_ENV: json.dumps(args or {}), _DIR_ENV: str(data)},
                        log_file=data / "sim.log")
        except SystemExit:
            pass  # runner.test() exits 1 on a failing test; the results XML says which
    run_s = time.perf_counter() - started
    failures = _failures(results_xml)
    results = json.loads(result_file.read_text()) if result_file.exists() else {}
    wave_file = None
    if waves:
        wave_file = _find_wave_file(data, build_dir, suffix="saif" if saif else "vcd")
    passed = not failures and results_xml.exists()
    if temporary and passed and not waves:
        shutil.rmtree(data, ignore_errors=True)
        data = None
    return CosimResult(passed=passed, results=results, simulator=simulator, build_s=build_s,
                       run_s=run_s, data_dir=data, failures=failures, waves=wave_file)


def public_ports_args(top: str, patterns: tuple[str, ...]) -> list[str]:
    """Verilator options that make only the top's ports matching ``patterns`` public to VPI.

    cocotb builds with ``--public-flat-rw`` (every signal public), which keeps Verilator from
    optimising the model; ``--no-public-flat-rw`` plus a configuration file naming the ports
    makes the 8x8 engine's model ~3x faster (measured: 20k -> 59k cycles/s, clock only). The
    file is content-keyed in the cache, written atomically."""
    text = "`verilator_config\n" + "".join(
        f'public_flat_rw -module "{top}" -var "{pattern}"\n' for pattern in patterns)
    path = entry_dir("vlt", content_key(text)) / "ports.vlt"
    if not path.exists():
        atomic_write_text(path, text)
    return ["--no-public-flat-rw", str(path)]


@contextlib.contextmanager
def scratch_folder(data_dir: Path | str | None, prefix: str):
    """The folder for a run's files: ``data_dir`` when given (kept), else a temporary folder
    that is removed when the block ends normally and kept when it raises (the error message
    names it, so the logs can be read)."""
    if data_dir is not None:
        path = Path(data_dir)
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    path = Path(tempfile.mkdtemp(prefix=prefix))
    yield path
    shutil.rmtree(path, ignore_errors=True)


# -- inside the simulator process ---------------------------------------------------------

def bench_args() -> dict:
    """The ``args`` given to :func:`run_cocotb` (call from a cocotb testbench)."""
    return json.loads(os.environ.get(_ARGS_ENV, "{}"))


def bench_dir() -> Path:
    """The run's data folder (call from a cocotb testbench)."""
    return Path(os.environ.get(_DIR_ENV, "."))


def write_result(result: dict) -> None:
    """Store the testbench's JSON-able results for the host (merged with earlier calls)."""
    path = bench_dir() / _RESULT_FILE
    merged = json.loads(path.read_text()) if path.exists() else {}
    merged.update(result)
    atomic_write_text(path, json.dumps(merged))


# -- helpers ------------------------------------------------------------------------------

@contextlib.contextmanager
def _log_tail_on_error(log_path: Path):
    """On an exception other than SystemExit, print the tail of the tool's log to stderr.

    The tools' output goes to ``log_path`` through the runner's ``log_file`` (the child
    processes' stdout and stderr), never by redirecting this process's file descriptors 1
    and 2: that is process-global state, which would swallow other threads' output and
    break when two co-simulations run in one process (a Dask worker's threads).
    """
    try:
        yield
    except Exception:
        if log_path.exists():
            print(log_path.read_text()[-4000:], file=sys.stderr)
        raise


def _failures(results_xml: Path) -> list[str]:
    if not results_xml.exists():
        return ["no results: the simulation did not run (see sim.log)"]
    failed = []
    for case in ET.parse(results_xml).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(case.get("name", "?"))
    return failed


def _find_wave_file(*folders: Path, suffix: str) -> Path | None:
    for folder in folders:
        found = sorted(folder.rglob(f"*.{suffix}"), key=lambda p: p.stat().st_mtime)
        if found:
            return found[-1]
    return None
