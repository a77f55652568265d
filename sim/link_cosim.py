"""The attention links on a scaled-down accelerator's RTL: the scores of each engine's
Q·K^T job streamed on chip into a softmax unit, co-simulated (cocotb bench
:mod:`zoforge.sim.benches.linked_attention` on the top's Verilog, two clocks).

:func:`cosim_linked_attention` (``zoforge cosim accelerator`` with ``--link``: unit
``linked_attention``) runs, on the whole :class:`~zoforge.hw.accel.top.Accelerator` of an
:class:`~zoforge.hw.accel.config.AcceleratorConfig` with ``link``, per engine e:

* ``jobs`` *scores jobs* (``scores``): random int8 Q (M rows, M <= ``link_max_rows``) times
  K^T (K = a random head dim, N = L keys, L <= ``link_max_len``), the engine's raw int32
  output (``gemm-raw``: no bias) routed to its link (the entry ``route`` 1, M, L pushed into
  ``links[e].job`` before the job), each followed on softmax unit ``e mod S``
  (:meth:`~zoforge.hw.accel.config.AcceleratorConfig.link_unit`) by its *linked softmax
  job* (``softmax_link``): the selector entry naming the engine's source (``1 + j``,
  :func:`~zoforge.hw.link.links.linked_engines`), the unit's LENGTH, ROWS, constants (a
  random scale, :func:`~zoforge.sim.softmax_cosim.register_writes`) and key mask (random,
  as ``zoforge cosim softmax`` draws them) written, its start once the scores job is done
  (the schedule's order: :mod:`zoforge.hw.accel.schedule`), P collected on
  ``softmax[u].m_axis``; the first job of each engine is the link's largest,
  ``link_max_rows`` x ``link_max_len``;
* engine 0: one *route-0 job* (``engine``) after its first scores job: a random
  requantized int8 GEMM with a bias, passed through its link to ``engines[0].m_axis``;
* each unit: one *DDR softmax job* (``softmax_ddr``) after its first linked job: the
  selector's source 0, the scores sent on ``softmax[u].s_axis``.

Every value is compared: each linked job's P with the golden engine's raw S (``engine_gemm``
of Q and K^T) through the golden softmax (``int_softmax``, :meth:`~zoforge.golden.finetune.
calls.GoldenUnits.softmax`), the route-0 output word by word with ``engine_gemm``, the DDR
job's P with ``int_softmax``; each output frame's ``tlast`` on its last beat, each job's
STATUS done (and cleared), its irq, the engine's ARRAY_CYCLES (:func:`~zoforge.sim.
engine_cosim.array_steps`) and no link ``error``. Each job's CYCLES (its unit's clock) is
compared with its unit's model: :func:`~zoforge.hw.engine.cycles.engine_job_cycles` for the
scores and route-0 jobs, :func:`~zoforge.hw.softmax.cycles.softmax_job_cycles` for the
softmax jobs (the models the schedule prices the linked step with: the link never holds the
engine while a bank is free, the softmax job's input always valid).

Runs (one simulation each, the same jobs): each of ``ratios`` (softmax clock period : sync
period, 1:1 and 3:2 by default: the softmax clock slower) with every stream ready (the
cycles checked: the engine's next scores job waits for its scores job two before to leave
the link, so a bank is free), and one with ``stalls`` (random idle on every input stream
and the AXI4-Lite AW/W/AR, back-pressure on every output and B/R, the engines' jobs back to
back: two linked frames in a link at once; values only). A summary: ``bit_exact`` (every
run's values and checks), ``cycles`` per ratio and job kind (most and least error, %), and
``cycles_within`` (every job of the unstalled runs within ``tolerance_pct``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from zoforge.errors import ConfigError
from zoforge.golden.finetune.calls import GoldenUnits, SoftmaxCall
from zoforge.golden.finetune.integer_params import MAX_SCALE, SoftmaxParams
from zoforge.hw.accel.top import elaborate_accelerator
from zoforge.hw.engine.cycles import engine_job_cycles
from zoforge.hw.engine.regmap import host_map
from zoforge.hw.export import design_verilog
from zoforge.hw.link.links import linked_engines
from zoforge.hw.nonlinear.softmax import LEVELS
from zoforge.hw.softmax.cycles import softmax_job_cycles
from zoforge.hw.softmax.regmap import KEY_MASK, REGISTERS
from zoforge.sim.cosim import SIMULATORS, public_ports_args, run_cocotb, scratch_folder
from zoforge.sim.engine_cosim import (EngineCosim, EngineJob, array_steps, random_job,
                                      unpack_output)
from zoforge.sim.softmax_cosim import program_inputs, random_call, softmax_jobs
from zoforge.sim.softmax_cosim import unpack_output as softmax_unpack

__all__ = ["LinkCosimOptions", "cosim_linked_attention", "linked_jobs", "JOB_KINDS",
           "TOLERANCE_PCT", "BENCH"]

#: The cocotb bench.
BENCH = "zoforge.sim.benches.linked_attention"
#: The job kinds, each compared with its unit's cycle model.
JOB_KINDS = ("scores", "softmax_link", "engine", "softmax_ddr")
#: The cycle models' bar on the co-simulation (issue: "within 3 %").
TOLERANCE_PCT = 3.0
#: STATUS's done bit.
_DONE = 0b10


@dataclass(frozen=True)
class LinkCosimOptions:
    """How :func:`cosim_linked_attention` runs (module docstring)."""

    seed: int = 0
    jobs: int = 2                     # scores jobs an engine
    simulator: str = "verilator"
    ratios: tuple = ((1, 1), (3, 2))  # softmax clock period : sync clock period
    stalls: float = 0.3               # the stalled run's idle and back-pressure (0: none)
    stalled_ratio: tuple = (3, 2)
    sync_ns: int = 6                  # the sync clock's period
    tolerance_pct: float = TOLERANCE_PCT
    data_dir: Path | None = None

    def __post_init__(self):
        if self.simulator not in SIMULATORS:
            raise ConfigError("simulator", "one of " + ", ".join(SIMULATORS), self.simulator)
        if not 1 <= self.jobs <= 1000:
            raise ConfigError("jobs", "1..1000 scores jobs an engine", self.jobs)
        for softmax_part, sync_part in (*self.ratios, self.stalled_ratio):
            period = self.sync_ns * 1000 * softmax_part / sync_part
            if period != int(period) or period <= 0:
                raise ConfigError("ratios", f"softmax : sync period ratios giving whole "
                                  f"picoseconds from sync_ns {self.sync_ns}",
                                  (softmax_part, sync_part))


@dataclass
class _Job:
    kind: str
    lane: str                         # engine<e> / softmax<u>
    name: str
    shape: dict
    model: int                        # its unit's cycle model
    expected: np.ndarray = field(repr=False)
    check: Callable | None = field(repr=False, default=None)  # words -> values compared
    array_steps: int | None = None


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _softmax_params(rng: np.random.Generator, config, length: int):
    """A random scale (log-uniform over the unit's) and key mask, as ``zoforge cosim
    softmax`` draws them (:func:`~zoforge.sim.softmax_cosim.random_call`)."""
    scale = float(np.exp(rng.uniform(np.log(config.min_scale), np.log(MAX_SCALE))))
    kind = rng.integers(0, 6)
    keep = np.ones(length, bool) if kind == 0 else np.zeros(length, bool) if kind == 1 \
        else rng.random(length) < 0.75
    return SoftmaxParams.of(scale), keep


def _softmax_job(scores: np.ndarray, keep: np.ndarray, params, config):
    """The unit's job of ``scores`` (int64 M x L) and its golden P (``int_softmax``)."""
    call = SoftmaxCall("linked.softmax", torch.from_numpy(scores.astype(np.int64))[None],
                       torch.from_numpy(keep)[None], params, LEVELS)
    (job,) = softmax_jobs(call, config)
    return job, GoldenUnits.softmax(call)[0].numpy()


def _softmax_ops(job, config, name: str, source: int, frame: bool, wait: str | None,
                 done: str | None) -> tuple[list, dict]:
    """A softmax job's operations on its unit's lane: the selector entry, the registers
    and key mask, (``frame``: the scores on ``s_axis``), the start (after ``wait``), P, the
    STATUS and CYCLES reads, done cleared (``done``: signalled)."""
    args, data = program_inputs([job], config)
    ops = [["select", source]]
    ops += [["write", REGISTERS[reg], value] for reg, value in args["jobs"][0]["writes"].items()]
    ops += [["write", KEY_MASK + 4 * i, int(word)] for i, word in enumerate(data["job0_mask"])]
    files = {}
    if frame:
        files[name] = data["job0_frame"]
        ops.append(["send", name])
    if wait:
        ops.append(["wait", wait])
    ops += _finish(REGISTERS, name, 1, receive=True, counters=("CYCLES",))
    if done:
        ops.append(["signal", done])
    return ops, files


def _finish(registers: dict, name: str, ctrl: int, receive: bool, counters) -> list:
    """Start (CTRL), the output frame (or STATUS polled until done), the irq, STATUS, the
    counters, done cleared and STATUS again."""
    ops = [["write", registers["CTRL"], ctrl | 1]]
    if receive:
        ops += [["receive", name], ["idle", 2], ["sample", f"{name}.irq"],
                ["read", f"{name}.status", registers["STATUS"]]]
    else:
        ops += [["poll", f"{name}.status", registers["STATUS"], _DONE], ["idle", 2],
                ["sample", f"{name}.irq"]]
    ops += [["read", f"{name}.{counter.lower()}", registers[counter]] for counter in counters]
    ops += [["write", registers["STATUS"], _DONE],
            ["read", f"{name}.cleared", registers["STATUS"]]]
    return ops


def _engine_ops(cosim, job, name: str, entry: int, receive: bool) -> tuple[list, dict]:
    """An engine job's operations on its lane: the link entry, the registers and tables,
    the input frame, the start and what :func:`_finish` does."""
    spec, frame, tables = cosim.job_spec(job)
    registers, regions = host_map(cosim.config.gelu)
    ops = [["link", entry]]
    ops += [["write", registers[reg], spec[reg.lower()]]
            for reg in ("M", "K", "N", "MULT", "SHIFT")]
    ops += [["write", registers[reg], value] for reg, value in spec["writes"].items()]
    for table, words in tables.items():
        ops += [["write", regions[table] + 4 * i, int(word)] for i, word in enumerate(words)]
    ops.append(["send", name])
    ops += _finish(registers, name, spec["ctrl"], receive, ("CYCLES", "ARRAY_CYCLES"))
    return ops, {name: frame.astype(np.uint8)}


def linked_jobs(config, options: LinkCosimOptions, pipelined: bool
                ) -> tuple[dict[str, list], dict[str, np.ndarray], list[_Job]]:
    """The lanes' operations (:mod:`zoforge.sim.benches.linked_attention`), the frames
    and the jobs (module docstring) of ``config``; the same jobs for every run of one
    ``options.seed``. ``pipelined``: each engine's jobs back to back (else a scores job
    waits for the engine's scores job two before to have left the link)."""
    if not config.link:
        raise ConfigError("link", "true for the linked attention co-simulation", False)
    rng = np.random.default_rng(options.seed)
    softmax = config.softmax_config()
    link = config.link_config()
    lanes = {f"engine{e}": [] for e in range(config.engines)}
    lanes.update({f"softmax{u}": [] for u in range(config.softmax_units)})
    files, jobs = {}, []
    cosims = [EngineCosim(config.engine_config(e < config.gelu_engines))
              for e in range(config.engines)]
    for e in range(config.engines):
        lanes[f"engine{e}"].append(["write", _irq_en(cosims[e]), 1])
    for u in range(config.softmax_units):
        lanes[f"softmax{u}"].append(["write", REGISTERS["IRQ_EN"], 1])
    # the scores jobs, engine by engine, and each one's softmax job
    linked = {}                     # (e, r) -> (the softmax job's ops, files, _Job)
    for e, cosim in enumerate(cosims):
        engine = cosim.config
        lane = lanes[f"engine{e}"]
        u = config.link_unit(e)
        source = 1 + linked_engines(config, u).index(e)
        most_rows = min(link.max_rows, engine.max_m)
        most_len = min(link.max_len, engine.max_n, softmax.max_len)
        for r in range(options.jobs):
            m, length = (most_rows, most_len) if r == 0 else (
                int(rng.integers(1, most_rows + 1)), int(rng.integers(1, most_len + 1)))
            head = int(rng.integers(1, min(16, engine.max_k) + 1))
            q = rng.integers(-128, 128, size=(m, head), dtype=np.int8)
            keys = rng.integers(-128, 128, size=(length, head), dtype=np.int8)
            scores_job = EngineJob(q, np.ascontiguousarray(keys.T))       # raw, no bias
            s = scores_job.golden()
            name = f"scores{e}.{r}"
            if r >= 2 and not pipelined:
                lane.append(["wait", f"softmax{e}.{r - 2}"])
            entry = 1 | m << 1 | length << (1 + link.m_bits)
            ops, frame = _engine_ops(cosim, scores_job, name, entry, receive=False)
            lane += ops + [["signal", name]]
            files.update(frame)
            jobs.append(_Job("scores", f"engine{e}", name, {"m": m, "k": head, "n": length},
                             engine_job_cycles(engine, m, head, length), s,
                             array_steps=array_steps(m, head, length, engine.rows,
                                                     engine.cols, engine.pack)))
            params, keep = _softmax_params(rng, softmax, length)
            job, p = _softmax_job(s.astype(np.int64), keep, params, softmax)
            pname = f"softmax{e}.{r}"
            ops, more = _softmax_ops(job, softmax, pname, source, False, name, pname)
            linked[e, r] = ops, more, _Job(
                "softmax_link", f"softmax{u}", pname, {"m": m, "length": length,
                                                       "engine": e, "source": source},
                softmax_job_cycles(softmax, m, length), p,
                lambda words, job=job: softmax_unpack(words, job, softmax))
            if e == 0 and r == 0:                     # the route-0 job
                n_most = min(16, engine.max_n)
                m0, k0, n0 = (int(rng.integers(1, min(16, engine.max_m) + 1)),
                              int(rng.integers(1, min(16, engine.max_k) + 1)),
                              int(rng.integers(1, n_most + 1)))
                plain = random_job(rng, m0, k0, n0, bias=True)
                ops, frame = _engine_ops(cosim, plain, "engine0.pass", 0, receive=True)
                lane += ops
                files.update(frame)
                jobs.append(_Job("engine", "engine0", "engine0.pass",
                                 {"m": m0, "k": k0, "n": n0},
                                 engine_job_cycles(engine, m0, k0, n0), plain.golden(),
                                 lambda words, m0=m0, n0=n0, engine=engine: unpack_output(
                                     words, m0, n0, engine.rows, engine.cols, False),
                                 array_steps(m0, k0, n0, engine.rows, engine.cols,
                                             engine.pack)))
    # each unit's jobs in its selector's order: round r's linked jobs (its engines in
    # source order), the DDR job after round 0's
    for u in range(config.softmax_units):
        lane = lanes[f"softmax{u}"]
        for r in range(options.jobs):
            for e in linked_engines(config, u):
                ops, more, job = linked[e, r]
                lane += ops
                files.update(more)
                jobs.append(job)
            if r == 0:
                call = random_call(rng, softmax, max_rows=min(6, link.max_rows))
                (job,) = softmax_jobs(call, softmax)
                name = f"softmax{u}.ddr"
                ops, more = _softmax_ops(job, softmax, name, 0, True, None, None)
                lane += ops
                files.update(more)
                jobs.append(_Job("softmax_ddr", f"softmax{u}", name,
                                 {"m": job.rows, "length": job.length},
                                 softmax_job_cycles(softmax, job.rows, job.length),
                                 GoldenUnits.softmax(call)[0].numpy().reshape(
                                     job.rows, job.length),
                                 lambda words, job=job: softmax_unpack(words, job, softmax)))
    return lanes, files, jobs


def _irq_en(cosim) -> int:
    return host_map(cosim.config.gelu)[0]["IRQ_EN"]


#: The linked top's ports public to VPI (:func:`~zoforge.sim.cosim.public_ports_args`).
TOP_PORTS = ("clk", "rst", "softmax_clk", "softmax_rst", "engines__*", "softmax__*",
             "links__*", "selects__*", "layers__*")


def _verilog(config) -> tuple[str, str]:
    design = elaborate_accelerator(config)
    return design_verilog(design), design.name


def _check_run(jobs: list[_Job], result, folder: Path) -> dict:
    """One run's verdict: every value, every job's status, irq, counters; each job's CYCLES
    against its model."""
    reads = result.results.get("reads", {})
    mismatches, checks, rows = 0, {"values": True, "frames": True, "status": True,
                                   "irq": True, "array_cycles": True, "link_error": True}, []
    for job in jobs:
        status, cleared = reads.get(f"{job.name}.status"), reads.get(f"{job.name}.cleared")
        if status is None or status & 0b11 != _DONE or cleared is None or cleared & 0b11:
            checks["status"] = False
        if not reads.get(f"{job.name}.irq"):
            checks["irq"] = False
        if job.array_steps is not None and reads.get(f"{job.name}.array_cycles") != \
                job.array_steps:
            checks["array_cycles"] = False
        if job.check is not None:
            path = folder / f"out-{job.name}.npy"
            try:
                got = job.check(np.load(path)) if path.exists() else None
            except ValueError:       # the frame's tlast not on its last beat
                got = None
            if got is None:
                checks["frames"] = False
                mismatches += job.expected.size
            else:
                wrong = int(np.count_nonzero(got != job.expected))
                mismatches += wrong
                checks["values"] &= wrong == 0
        cycles = reads.get(f"{job.name}.cycles")
        error = None if cycles is None else round(100.0 * (cycles - job.model) / job.model, 3)
        rows.append({"kind": job.kind, "job": job.name, "lane": job.lane, **job.shape,
                     "cycles": cycles, "model": job.model, "error_pct": error})
    errors = result.results.get("errors")
    checks["link_error"] = errors is not None and not any(errors)
    checks["values"] &= checks["frames"]
    return {"passed": result.passed, "failures": result.failures,
            "timed_out": result.results.get("timed_out"), "checks": checks,
            "mismatches": mismatches, "link_errors": errors,
            "bit_exact": result.passed and all(checks.values()),
            "jobs": rows, "sim_ns": result.results.get("sim_ns"),
            "run_s": round(result.run_s, 2), "build_s": round(result.build_s, 2)}


def cosim_linked_attention(config, options: LinkCosimOptions | None = None) -> dict:
    """The linked attention jobs of ``config`` (an :class:`~zoforge.hw.accel.config.
    AcceleratorConfig` with ``link``) on its top's RTL (module docstring); a JSON-able
    summary: ``bit_exact``, ``checks`` (each over every run), ``mismatches``, ``runs``
    (each with its jobs' CYCLES, models and errors), ``cycles`` (ratio -> kind -> the
    errors' ``max_abs_pct``, ``min_pct`` and ``max_pct``) and ``cycles_within``."""
    options = options or LinkCosimOptions()
    if not config.link:
        raise ConfigError("link", "true for the linked attention co-simulation", False)
    verilog, top = _verilog(config)
    runs = [("%d:%d" % ratio, ratio, 0.0, False) for ratio in options.ratios]
    if options.stalls:
        runs.append(("%d:%d stalled" % options.stalled_ratio, options.stalled_ratio,
                     options.stalls, True))
    summaries = {}
    started = time.perf_counter()
    for label, (softmax_part, sync_part), stalls, pipelined in runs:
        lanes, files, jobs = linked_jobs(config, options, pipelined)
        sync_ns = options.sync_ns
        softmax_ns = sync_ns * softmax_part / sync_part
        total = sum(job.model for job in jobs)
        timeout_ns = int(200 * total * max(sync_ns, softmax_ns) + 1_000_000)
        folder_arg = None if options.data_dir is None else \
            Path(options.data_dir) / label.replace(":", "-").replace(" ", "-")
        with scratch_folder(folder_arg, "zoforge-linkcosim-") as folder:
            for name, array in files.items():
                np.save(folder / f"in-{name}.npy", array)
            args = {"engines": config.engines, "softmax_units": config.softmax_units,
                    "sync_ns": sync_ns, "softmax_ns": softmax_ns, "idle": stalls,
                    "backpressure": stalls, "seed": options.seed, "timeout_ns": timeout_ns,
                    "lanes": lanes}
            result = run_cocotb(verilog=verilog, toplevel=top, test_module=BENCH, args=args,
                                simulator=options.simulator, data_dir=folder,
                                verilator_args=public_ports_args(top, TOP_PORTS))
            summary = _check_run(jobs, result, folder)
        summary.update(ratio=label, sync_ns=sync_ns, softmax_ns=softmax_ns, stalls=stalls,
                       cycles_checked=not stalls)
        summaries[label] = summary
    cycles = {}
    for label, summary in summaries.items():
        if not summary["cycles_checked"]:
            continue
        per_kind = {}
        for kind in JOB_KINDS:
            errors = [row["error_pct"] for row in summary["jobs"] if row["kind"] == kind]
            if not errors:
                continue
            if any(error is None for error in errors):
                per_kind[kind] = {"max_abs_pct": None, "jobs": len(errors)}   # no CYCLES
                continue
            per_kind[kind] = {"max_abs_pct": max(abs(x) for x in errors),
                              "min_pct": min(errors), "max_pct": max(errors),
                              "jobs": len(errors)}
        cycles[label] = per_kind
    within = bool(cycles) and all(entry["max_abs_pct"] is not None and
                                  entry["max_abs_pct"] <= options.tolerance_pct
                                  for kinds in cycles.values() for entry in kinds.values())
    checks = {name: all(s["checks"][name] for s in summaries.values())
              for name in next(iter(summaries.values()))["checks"]}
    first = next(iter(summaries.values()))
    return {"bit_exact": all(s["bit_exact"] for s in summaries.values()),
            "checks": checks,
            "mismatches": sum(s["mismatches"] for s in summaries.values()),
            "jobs": len(first["jobs"]),
            "job_kinds": {kind: sum(row["kind"] == kind for row in first["jobs"])
                          for kind in JOB_KINDS},
            "cycles": cycles, "cycles_within": within,
            "tolerance_pct": options.tolerance_pct,
            "engines": config.engines, "softmax_units": config.softmax_units,
            "simulator": options.simulator, "top": top,
            "runs": summaries, "wall_s": round(time.perf_counter() - started, 2)}
