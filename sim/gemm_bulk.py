"""Bulk co-simulation of the GEMM engine: a Verilog-only testbench, no Python in the loop.

:meth:`GemmCosim.run` drives the engine from cocotb (cocotbext-axi, which checks the AXI
protocol), so every beat and the clock pass through cocotb's GPI. Here the host writes each
job as files instead: a program of AXI4-Lite writes/reads (``prog.txt``) and the input
stream as ``$readmemh`` images (``in<j>.hex``). The testbench ``benches/gemm_bulk.sv``
plays the program and the streams, stalls the output stream with a xorshift32 generator
(back-pressure) and writes every output beat to ``out.hex`` and the register reads to
``stats.txt``; the C++ harness ``benches/gemm_bulk_main.cpp`` toggles its clock until
``$finish``. It is built with Verilator once per engine configuration (cached by hash under
``cache_dir()/bulk``); the host then checks the output against the golden model with the
same functions as :meth:`GemmCosim.run`.

Speed is simulated cycles per wall-clock second of the simulation binary, start-up and
file I/O included.
"""
from __future__ import annotations

import hashlib
import re
import subprocess
import time
from pathlib import Path

import numpy as np

from zoforge.files import cache_dir, clear_entry, file_lock, load_result, store_result
from zoforge.hw.pe.engine import PARAM_REGIONS, REGISTERS
from zoforge.sim.benches import DUT_PORTS, bench_text
from zoforge.sim.cosim import scratch_folder
from zoforge.sim.toolchain import apply_toolchain_env, verilator_root

__all__ = ["run_bulk", "build_bulk", "write_program", "read_output_words"]

TESTBENCH = "gemm_bulk.sv"
HARNESS = "gemm_bulk_main.cpp"
TOP = "gemm_bulk_tb"
# The model's C++ is compiled with toolchain_env()'s MAKEFLAGS (PCH fix, OPT_FAST=-O1).
_BUILD_ARGS = ["--cc", "--exe", "--build", "--prefix", "Vtb", "-O3", "-Wno-fatal",
               "-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-Wno-lint", "-Wno-style",
               "--x-assign", "fast", "--x-initial", "fast"]


def _max_beats(config) -> int:
    """Most input beats of one job: every X and W panel at the largest K."""
    return -(-config.max_k // config.pack) * (-(-config.max_m // config.rows)
                                              + -(-config.max_n // config.cols))


def build_bulk(cosim) -> tuple[Path, float]:
    """Build (or reuse) the bulk testbench binary for ``cosim``'s engine; ``(exe, seconds)``."""

    apply_toolchain_env()
    verilog, tb, harness = cosim.verilog, bench_text(TESTBENCH), bench_text(HARNESS)
    ports = bench_text(DUT_PORTS)
    addr = re.search(r"input \[(\d+):0\] s_axil__awaddr;", verilog)
    params = {"IN_W": 8 * cosim.in_bytes, "OUT_W": 32 * cosim.cols,
              "ADDR_W": int(addr.group(1)) + 1 if addr else 16,
              "MAX_BEATS": _max_beats(cosim.config)}
    args = [*_BUILD_ARGS, f"-DENGINE={cosim.top}", "--top-module", TOP,
            *(f"-G{name}={value}" for name, value in params.items())]
    key = hashlib.sha256("\0".join([verilog, tb, harness, ports, *args]).encode()).hexdigest()[:16]
    build_dir = cache_dir() / "bulk" / f"{cosim.top}-{key}"
    build_dir.mkdir(parents=True, exist_ok=True)
    exe = build_dir / "obj" / "Vbench"
    started = time.perf_counter()
    with file_lock(build_dir / ".lock"):
        # complete only once the size of the built binary is stored; anything else (a build
        # killed half-way, a truncated binary) is discarded and rebuilt
        stored = load_result(build_dir)
        if not (stored and exe.exists() and exe.stat().st_size == stored.get("exe_bytes")):
            clear_entry(build_dir)
            (build_dir / f"{cosim.top}.v").write_text(verilog)
            (build_dir / TESTBENCH).write_text(tb)
            (build_dir / HARNESS).write_text(harness)
            (build_dir / DUT_PORTS).write_text(ports)
            root = verilator_root()
            verilator = str(root / "bin" / "verilator") if root else "verilator"
            command = [verilator, *args, "--Mdir", "obj", "-o", "Vbench", "-j", "2",
                       f"{cosim.top}.v", TESTBENCH, HARNESS]
            done = subprocess.run(command, cwd=build_dir, capture_output=True, text=True)
            (build_dir / "build.log").write_text(done.stdout + done.stderr)
            if done.returncode != 0 or not exe.exists():
                raise RuntimeError("bulk testbench build failed:\n" + done.stderr[-4000:])
            store_result(build_dir, {"exe_bytes": exe.stat().st_size})
    return exe, time.perf_counter() - started


def write_program(cosim, jobs, data: Path) -> list[dict]:
    """Write ``prog.txt`` and ``in<j>.hex`` for ``jobs``; returns their specs."""
    lines = [f"1 {REGISTERS['IRQ_EN']:x} 1"]
    specs = []
    for index, job in enumerate(jobs):
        spec, frame, tables = cosim.job_spec(job)
        specs.append(spec)
        for name in ("M", "K", "N"):
            lines.append(f"1 {REGISTERS[name]:x} {spec[name.lower()]:x}")
        lines.append(f"1 {REGISTERS['MULT']:x} {spec['mult']:x}")
        lines.append(f"1 {REGISTERS['SHIFT']:x} {spec['shift']:x}")
        for name in spec["tables"]:
            base = PARAM_REGIONS[name]
            lines.extend(f"1 {base + 4 * i:x} {int(word):x}"
                         for i, word in enumerate(tables[name]))
        beats = frame.reshape(spec["beats"], spec["beat_bytes"])[:, ::-1]   # MSB first
        text = beats.tobytes().hex()
        width = 2 * spec["beat_bytes"]
        (data / f"in{index}.hex").write_text(
            "\n".join(text[i:i + width] for i in range(0, len(text), width)) + "\n")
        lines.append(f"2 {spec['beats']:x} {index:x}")    # held until the engine is busy
        lines.append(f"1 {REGISTERS['CTRL']:x} {spec['ctrl'] | 1:x}")
        lines.append("3 0 0")
        for name in ("STATUS", "CYCLES", "ARRAY_CYCLES"):
            lines.append(f"4 {REGISTERS[name]:x} 0")
        lines.append(f"1 {REGISTERS['STATUS']:x} 2")       # clear done (W1C)
        lines.append(f"4 {REGISTERS['STATUS']:x} 0")
    lines.append("0 0 0")
    (data / "prog.txt").write_text("\n".join(lines) + "\n")
    return specs


def read_output_words(path: Path, lanes: int) -> np.ndarray:
    """``out.hex`` (one beat per line, lane 0 in the low bits) -> uint32 words, beat-major."""
    text = "".join(path.read_text().split())
    raw = np.frombuffer(bytes.fromhex(text), np.uint8).reshape(-1, 4 * lanes)[:, ::-1]
    return np.ascontiguousarray(raw).view("<u4").reshape(-1)


def _parse_stats(path: Path, specs: list[dict]) -> tuple[list[dict], int]:
    """``stats.txt`` -> per-job counters (as the cocotb bench reports them), total cycles."""
    reads, irqs, total = [], [], None
    for line in path.read_text().split("\n"):
        fields = line.split()
        if not fields:
            continue
        if fields[0] == "R":
            reads.append(int(fields[2], 16))
        elif fields[0] == "I":
            irqs.append(bool(int(fields[1])))
        elif fields[0] == "E":
            total = int(fields[1])
        elif fields[0] == "T":
            raise RuntimeError(f"bulk co-simulation timed out after {fields[1]} cycles "
                               f"(see {path.parent})")
    if total is None or len(reads) != 4 * len(specs) or len(irqs) != len(specs):
        raise RuntimeError(f"bulk co-simulation ended early (see {path.parent})")
    stats = []
    for index in range(len(specs)):
        status, cycles, array_cycles, cleared = reads[4 * index:4 * index + 4]
        if status & 0b11 != 0b10 or cleared & 0b11 != 0:
            raise RuntimeError(f"job {index}: STATUS {status:#x}, after clearing {cleared:#x}")
        stats.append({"cycles": cycles, "array_cycles": array_cycles, "status": status,
                      "status_after_clear": cleared, "irq": irqs[index]})
    return stats, total


def run_bulk(cosim, jobs, *, backpressure: float = 0.0, seed: int = 0,
             data_dir: Path | None = None):
    """Run ``jobs`` back to back through the bulk testbench; ``(job_results, info)`` as
    :meth:`GemmCosim.run` returns them (``info``: sim_cycles, wall_s, cycles_per_s, ...)."""
    for job in jobs:
        cosim.check_job(job)
    exe, build_s = build_bulk(cosim)
    with scratch_folder(data_dir, "zoforge-bulk-") as data:
        specs = write_program(cosim, jobs, data)
        ideal = sum(s["beats"] + s["out_beats"] + s["m"] * s["k"] * s["n"] for s in specs)
        max_cycles = 10_000 + int(4 * (ideal + 8 * len(specs) * 4096) / (1.0 - backpressure))
        threshold = min(65535, round(backpressure * 65536))
        command = [str(exe), f"+prog={data / 'prog.txt'}", f"+dir={data}", f"+bp={threshold}",
                   f"+seed={(seed * 2654435761 + 1) & 0x7FFFFFFF or 1}",
                   f"+max_cycles={min(max_cycles, 2**32 - 1)}"]
        started = time.perf_counter()
        done = subprocess.run(command, cwd=data, capture_output=True, text=True)
        wall = time.perf_counter() - started
        (data / "sim.log").write_text(done.stdout + done.stderr)
        if done.returncode != 0:
            raise RuntimeError(f"bulk co-simulation failed (exit {done.returncode}): "
                               f"{done.stderr[-2000:]} (see {data})")
        stats, sim_cycles = _parse_stats(data / "stats.txt", specs)
        words = read_output_words(data / "out.hex", cosim.cols)
    outputs, start = [], 0
    for spec in specs:
        count = spec["out_beats"] * cosim.cols
        outputs.append(words[start:start + count])
        start += count
    if start != words.size:
        raise RuntimeError(f"output stream has {words.size} words, expected {start}")
    info = {"sim_cycles": sim_cycles, "wall_s": wall,
            "cycles_per_s": sim_cycles / wall if wall else 0.0, "build_s": build_s,
            "run_s": wall, "simulator": "verilator (bulk)"}
    return cosim.check_results(jobs, outputs, stats), info
