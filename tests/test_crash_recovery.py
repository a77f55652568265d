"""Caches that heal (issue 13): a simulation build and a synthesis killed with SIGKILL
half-way, and a truncated or emptied entry of each of those caches, are each followed by a
normal run that succeeds with the result of a run on a clean cache. (The feature cache and
checkpoints: ``tests/test_zo_train.py``; the job server's build: ``test_zolayer_jobserver.py``.)

Every run here uses its own ``ZOFORGE_CACHE`` so that nothing is shared with other tests.
The default run builds one real simulation (Icarus, its manifest emptied); the other kinds of
damage run under ``-m ci``, and each of them also on a stand-in build by default
(``tests/test_cache_faults.py``).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import INSTALL
from zoforge.files import RESULT
from zoforge.sim.toolchain import have_simulator

SMALL_RNG = ["cosim", "rng", "--n-rng", "3", "--bits", "5", "--cycles", "300"]
VERILOG_TOP = "crash_counter"
VERILOG = f"""module {VERILOG_TOP}(input clk, input rst, output reg [15:0] count,
                        output [15:0] square);
  always @(posedge clk) count <= rst ? 16'd0 : count + 16'd1;
  assign square = count * count;
endmodule
"""


def _env(cache: Path) -> dict:
    return {**os.environ, "ZOFORGE_CACHE": str(cache)}


def _zoforge(cache: Path, args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zoforge", *args], env=_env(cache),
                          capture_output=True, text=True, timeout=600)


def _comparable(stdout: str) -> dict:
    """A co-simulation's JSON without what depends on the machine or the cache."""
    summary = json.loads(stdout)
    return {key: value for key, value in summary.items()
            if not key.endswith("_s") and key not in ("cycles_per_s", "data_dir")}


def _kill_when(command: list[str], cache: Path, ready, limit_s: float = 300) -> bool:
    """Start ``command`` (own process group), SIGKILL the group as soon as ``ready()``;
    True when it was killed that way (False: it finished first)."""
    process = subprocess.Popen(command, env=_env(cache), start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + limit_s
    try:
        while process.poll() is None and time.monotonic() < deadline:
            if ready():
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                return True
            time.sleep(0.05)
        return False
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _sim_entries(cache: Path) -> list[Path]:
    return sorted((cache / "sim").glob("*")) if (cache / "sim").exists() else []


# -- simulation builds ------------------------------------------------------------------

def _rng(simulator: str) -> list[str]:
    return [*SMALL_RNG, "--simulator", simulator]


@pytest.fixture(scope="module")
def clean_rng(tmp_path_factory):
    """Per simulator: a cache holding its complete build, and the run's comparable result."""
    found = {}

    def get(simulator: str):
        if simulator not in found:
            if not have_simulator(simulator):
                pytest.skip(f"{simulator} is not installed here ({INSTALL[simulator]})")
            cache = tmp_path_factory.mktemp(f"clean-{simulator}")
            done = _zoforge(cache, _rng(simulator))
            assert done.returncode == 0, done.stderr
            found[simulator] = cache, _comparable(done.stdout)
        return found[simulator]
    return get


def _compiling(cache: Path):
    """True once Verilator's C++ compile has started in some build folder."""
    def ready():
        return any(any(entry.rglob("*.o")) or any(entry.rglob("*.d")) for entry in
                   _sim_entries(cache))
    return ready


# a whole Verilator compile of its own (slow + ci: CI runs it; out of the default run's 10 CPU-minutes)
@pytest.mark.slow
@pytest.mark.ci
def test_a_verilator_build_killed_mid_compile_is_rebuilt(tmp_path, clean_rng):
    _, clean = clean_rng("verilator")
    cache = tmp_path / "cache"
    killed = _kill_when([sys.executable, "-m", "zoforge", *_rng("verilator")], cache,
                        _compiling(cache))
    assert killed, "the build finished before it could be killed"
    [entry] = _sim_entries(cache)
    assert not (entry / RESULT).exists()          # an incomplete entry, never marked complete
    done = _zoforge(cache, _rng("verilator"))
    assert done.returncode == 0, done.stderr
    assert "rebuilding an incomplete simulation build" in done.stderr
    assert _comparable(done.stdout) == clean


@pytest.mark.parametrize("simulator, damage", [
    pytest.param("verilator", "truncate-model", marks=(pytest.mark.slow, pytest.mark.ci)),
    pytest.param("icarus", "truncate-model", marks=(pytest.mark.slow, pytest.mark.ci)),
    pytest.param("icarus", "truncate-manifest", marks=(pytest.mark.slow, pytest.mark.ci)),
    ("icarus", "empty-manifest")])
def test_a_damaged_simulation_build_is_rebuilt(tmp_path, clean_rng, simulator, damage):
    built, clean = clean_rng(simulator)
    cache = tmp_path / "cache"
    shutil.copytree(built, cache)                         # a complete build, then damaged
    [entry] = _sim_entries(cache)
    manifest = entry / RESULT
    if damage == "truncate-model":
        files = json.loads(manifest.read_text())["files"]             # name -> [size, sha256]
        model = entry / max(files, key=lambda name: files[name][0])   # the largest file
        model.write_bytes(model.read_bytes()[: files[model.relative_to(entry).as_posix()][0]
                                             // 2])
    elif damage == "truncate-manifest":
        manifest.write_text(manifest.read_text()[:10])
    else:
        manifest.write_text("{}")
    done = _zoforge(cache, _rng(simulator))
    assert done.returncode == 0, done.stderr
    assert "rebuilding an incomplete simulation build" in done.stderr
    assert _comparable(done.stdout) == clean
    again = _zoforge(cache, _rng(simulator))                          # healed: no rebuild now
    assert "rebuilding" not in again.stderr and _comparable(again.stdout) == clean


# -- synthesis ----------------------------------------------------------------------------

SYNTH = [sys.executable, "-m", "zoforge.reports.synth"]


def _synth(cache: Path, design: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*SYNTH, str(design), VERILOG_TOP], env=_env(cache),
                          capture_output=True, text=True, timeout=600)


def _synth_summary(stdout: str) -> dict:
    result = json.loads(stdout)
    return {"cells": result["cells"], "resources": result["resources"]}


@pytest.fixture(scope="module")
def design_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("design") / "counter.v"
    path.write_text(VERILOG)
    return path


@pytest.fixture(scope="module")
def clean_synth(tmp_path_factory, design_file):
    """A cache holding the design's complete synthesis, and its summary."""
    cache = tmp_path_factory.mktemp("clean-synth")
    done = _synth(cache, design_file)
    assert done.returncode == 0, done.stderr
    summary = _synth_summary(done.stdout)
    assert summary["resources"].get("DSP", 0) + summary["resources"].get("LUT", 0) > 0
    return cache, summary


def _synth_entry(cache: Path) -> Path:
    [entry] = list((cache / "synth").glob(f"{VERILOG_TOP}-*"))
    return entry


# a whole synthesis of its own (slow + ci: CI runs it; out of the default run's 10 CPU-minutes)
@pytest.mark.slow
@pytest.mark.ci
def test_a_synthesis_killed_mid_way_is_redone(tmp_path, design_file, clean_synth):
    _, clean = clean_synth
    cache = tmp_path / "cache"

    def yosys_started():                     # Yosys has written its log: synthesis running
        return any(path.stat().st_size > 0 for path in (cache / "synth").glob("*/synth.log")) \
            if (cache / "synth").exists() else False

    killed = _kill_when([*SYNTH, str(design_file), VERILOG_TOP], cache, yosys_started)
    assert killed, "synthesis finished before it could be killed"
    assert not (_synth_entry(cache) / RESULT).exists()
    done = _synth(cache, design_file)
    assert done.returncode == 0, done.stderr
    assert _synth_summary(done.stdout) == clean


@pytest.mark.parametrize("damage", [        # each a Yosys run (~10 CPU-s): CI's -m ci runs them
    pytest.param("truncate-netlist", marks=(pytest.mark.slow, pytest.mark.ci)),
    pytest.param("empty-modules", marks=(pytest.mark.slow, pytest.mark.ci)),
    pytest.param("truncate-result", marks=(pytest.mark.slow, pytest.mark.ci))])
def test_a_damaged_synthesis_entry_is_redone(tmp_path, design_file, clean_synth, damage):
    built, clean = clean_synth
    cache = tmp_path / "cache"
    shutil.copytree(built, cache)                     # a complete entry, then damaged
    entry = _synth_entry(cache)
    if damage == "truncate-netlist":
        netlist = entry / "netlist.json"
        netlist.write_text(netlist.read_text()[:100])
    elif damage == "empty-modules":
        (entry / RESULT).write_text(json.dumps({"modules": {}}))
    else:
        (entry / RESULT).write_text((entry / RESULT).read_text()[:7])
    done = _synth(cache, design_file)
    assert done.returncode == 0, done.stderr
    assert _synth_summary(done.stdout) == clean
    if damage != "truncate-result":                 # an unreadable result is simply a miss
        assert "discarding a damaged synthesis cache entry" in done.stderr
    assert json.loads((entry / "netlist.json").read_text())["modules"]
