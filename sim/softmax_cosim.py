"""Softmax calls (:class:`~zoforge.golden.finetune.calls.SoftmaxCall`) on the RTL bus softmax
unit (:mod:`zoforge.hw.softmax`), through the persistent Verilator job server.

:class:`SoftmaxCosim` runs each call as jobs of the unit (:func:`softmax_jobs`: a job per
run of consecutive ``j`` with one key mask, at most 65,535 rows: the engine attention's
heads of one sequence are one job) with the host program :func:`~zoforge.sim.softmax_host.
softmax_program`; :meth:`SoftmaxCosim.run` returns the result (int64, the scores' shape) and
the jobs' CYCLES. A call the unit cannot take is a one-line :class:`~zoforge.errors.
ConfigError` before any job: rows longer than ``max_len`` (``length``), constants that do not
fit the unit (``softmax_registers``: a scale finer than ``min_scale``), other ``levels``.

:func:`replay_softmax_calls` plays a list of calls as one host program on either backend
(the job server or the cocotb bench: the route of :func:`zoforge.sim.finetune_cosim.
replay_calls`); :func:`cosim_random` is ``zoforge cosim softmax``: random calls against
``int_softmax``.
"""
from __future__ import annotations

import numpy as np
import torch

from zoforge.errors import ConfigError
from zoforge.golden.finetune.calls import GoldenUnits, SoftmaxCall
from zoforge.golden.finetune.integer_params import MAX_SCALE, SoftmaxParams
from zoforge.hw.nonlinear.softmax import LEVELS, softmax_registers
from zoforge.hw.softmax.config import ROW_BITS, SCALES, SoftmaxConfig
from zoforge.hw.softmax.cycles import softmax_job_cycles
from zoforge.hw.softmax.regmap import ADDR_BITS, CONSTANT_WORDS, KEY_MASK, REGISTERS
from zoforge.sim.backends import BusTarget, Stalls, run_program
from zoforge.sim.jobserver import JobServer
from zoforge.sim.program import drive
from zoforge.sim.softmax_host import SoftmaxCosimOptions, softmax_program

__all__ = ["SoftmaxCosim", "SoftmaxJob", "softmax_jobs", "softmax_target", "program_inputs",
           "cosim_design",
           "unpack_output", "register_writes", "replay_softmax_calls", "random_call",
           "cosim_random", "check_random_work", "MAX_RANDOM_SCORES", "PROGRAM"]

#: The host program's reference (:func:`~zoforge.sim.backends.run_program`).
PROGRAM = "zoforge.sim.softmax_host:softmax_program"


class SoftmaxJob:
    """One job of the unit: ``scores`` int64 ``(R, L)``, ``keep`` bool ``(L,)``, the
    constants' register values ``constants`` (name -> value)."""

    def __init__(self, scores: np.ndarray, keep: np.ndarray, constants: dict[str, int]):
        self.scores, self.keep, self.constants = scores, keep, constants

    @property
    def rows(self) -> int:
        return self.scores.shape[0]

    @property
    def length(self) -> int:
        return self.scores.shape[1]


def softmax_target(config: SoftmaxConfig) -> BusTarget:
    """The unit's Verilog and bus widths (output lanes: 32-bit words of a beat)."""
    # the RTL's Verilog only when a co-simulation builds it (importing the replay is cheap)
    from zoforge.hw.export import design_verilog
    from zoforge.hw.softmax.designs import elaborate_softmax
    design = elaborate_softmax(config)
    return BusTarget(design_verilog(design), design.name,
                     lanes=config.out_words, addr_bits=ADDR_BITS, in_bits=32 * config.lanes)


def cosim_design(seq_len: int, lanes: int = 8) -> SoftmaxConfig:
    """The unit a fine-tuning step's co-simulation runs its SoftmaxCalls on: rows of up to
    ``seq_len`` keys, made for every scale the golden has (``min_scale`` 2^-24: the tiny
    test models' scores are near 2e-6, MiniLM's 1.5e-4 to 1.5e-3; the values are the same
    on any unit that holds the constants)."""
    return SoftmaxConfig(lanes=lanes, max_len=seq_len, min_scale=SCALES[0])


def register_writes(params: SoftmaxParams, config: SoftmaxConfig) -> dict[str, int]:
    """The constants' register values (:data:`~zoforge.hw.softmax.regmap.CONSTANT_WORDS`):
    :func:`softmax_registers` of ``params`` on the unit (a one-line ConfigError where they
    do not fit it)."""
    values = softmax_registers(params, config.min_scale)
    return {register: values[name] >> (32 * n) & 0xFFFFFFFF
            for name, registers in CONSTANT_WORDS.items()
            for n, register in enumerate(registers)}


def softmax_jobs(call: SoftmaxCall, config: SoftmaxConfig) -> list[SoftmaxJob]:
    """The unit's jobs of ``call`` (module docstring), in order; refuses (one line) what
    the unit cannot take."""
    if call.levels != LEVELS:
        raise ConfigError("levels", f"{LEVELS} (the unit's output levels)", call.levels)
    length = call.scores.shape[-1]
    if not 1 <= length <= config.max_len:
        raise ConfigError("length", f"1 <= keys a row <= {config.max_len} (the unit's "
                          "max_len)", length)
    constants = register_writes(call.params, config)
    scores = call.scores.reshape(-1, *call.scores.shape[-2:]).numpy()
    keep = call.keep.reshape(-1, length).numpy()
    if scores.shape[1] == 0:
        return []
    low, high = int(scores.min(initial=0)), int(scores.max(initial=0))
    if low < -2 ** 31 or high >= 2 ** 31:
        raise ConfigError("scores", "int32 values (the engine's raw scores)", (low, high))
    if scores.shape[1] >= 1 << ROW_BITS:
        raise ConfigError("rows", f"at most {(1 << ROW_BITS) - 1} rows a job (the unit's "
                          "ROWS register)", scores.shape[1])
    per_job = ((1 << ROW_BITS) - 1) // scores.shape[1]
    jobs, start = [], 0
    while start < scores.shape[0]:
        end = start + 1
        while end < scores.shape[0] and end - start < per_job and \
                np.array_equal(keep[end], keep[start]):
            end += 1
        jobs.append(SoftmaxJob(scores[start:end].reshape(-1, length), keep[start], constants))
        start = end
    return jobs


def _mask_words(keep: np.ndarray, config: SoftmaxConfig) -> np.ndarray:
    """The key mask's words: bit ``i`` of word ``w`` keeps key ``32 w + i``."""
    bits = np.zeros(32 * config.mask_words, np.uint8)
    bits[:keep.size] = keep
    return np.packbits(bits, bitorder="little").view("<u4").astype(np.uint32)


def program_inputs(jobs: list[SoftmaxJob], config: SoftmaxConfig,
                   written: dict[str, int] | None = None) -> tuple[dict, dict[str, np.ndarray]]:
    """The host program's ``args`` and ``data`` for ``jobs``; ``written``: the registers'
    values already in the unit (updated: a job writes only the ones it changes)."""
    written = {} if written is None else written
    specs, data = [], {}
    for index, job in enumerate(jobs):
        wanted = {"LENGTH": job.length, "ROWS": job.rows, **job.constants}
        writes = {name: value for name, value in wanted.items() if written.get(name) != value}
        written.update(writes)
        beats = config.beats(job.length)
        frame = np.zeros((job.rows, beats * config.lanes), np.int64)
        frame[:, :job.length] = job.scores
        data[f"job{index}_frame"] = (frame & 0xFFFFFFFF).astype(np.uint32).reshape(-1)
        data[f"job{index}_mask"] = _mask_words(job.keep, config)
        specs.append({"writes": writes, "out_beats": job.rows * beats})
    args = {"lanes": config.out_words, "registers": REGISTERS, "key_mask": KEY_MASK,
            "jobs": specs}
    return args, data


def unpack_output(words: np.ndarray, job: SoftmaxJob, config: SoftmaxConfig) -> np.ndarray:
    """A job's output frame (32-bit words) -> p, int64 ``(R, L)``."""
    beats = config.beats(job.length)
    data = np.asarray(words, np.uint32).astype("<u4").view(np.uint8)
    lanes = data.reshape(job.rows * beats, 4 * config.out_words)[:, :config.lanes]
    return lanes.reshape(job.rows, beats * config.lanes)[:, :job.length].astype(np.int64)


class SoftmaxCosim:
    """Softmax calls on one persistent RTL unit of ``config`` (module docstring), a context
    manager; ``server_options``: :class:`~zoforge.sim.jobserver.JobServer`'s
    (``source_idle``, ``sink_backpressure``, ``seed``, ``max_cycles``, ``timeout_s``).

    ``jobs``: every job's counters so far (``cycles``, ``rows``, ``length``)."""

    def __init__(self, config: SoftmaxConfig | None = None, **server_options):
        self.config = config if config is not None else SoftmaxConfig()
        self.target = softmax_target(self.config)
        self.server = JobServer(self.target.verilog, self.target.top, lanes=self.target.lanes,
                                addr_bits=self.target.addr_bits, in_bits=self.target.in_bits,
                                **server_options)
        self.jobs: list[dict] = []
        self._written: dict[str, int] = {}

    def run(self, call: SoftmaxCall) -> tuple[torch.Tensor, int]:
        """The call on the RTL: its result (int64, ``call.scores``' shape) and its jobs'
        CYCLES."""
        jobs = softmax_jobs(call, self.config)
        if not jobs:
            return torch.zeros(call.scores.shape, dtype=torch.int64), 0
        args, data = program_inputs(jobs, self.config, self._written)
        try:
            arrays, results = drive(softmax_program(args, data), self.server.exchange)
        except BaseException:
            self._written = {}               # the server is gone or the unit's state unknown
            raise
        parts = [unpack_output(arrays[f"out{n}"], job, self.config)
                 for n, job in enumerate(jobs)]
        cycles = 0
        for job, stats in zip(jobs, results["jobs"], strict=True):
            self.jobs.append({"cycles": stats["cycles"], "rows": job.rows,
                              "length": job.length})
            cycles += stats["cycles"]
        out = torch.from_numpy(np.concatenate(parts)).reshape(call.scores.shape)
        return out, cycles

    def __call__(self, call: SoftmaxCall) -> torch.Tensor:
        return self.run(call)[0]

    def close(self, kill: bool = False) -> None:
        self.server.close(kill)

    def __enter__(self) -> "SoftmaxCosim":
        return self

    def __exit__(self, kind, value, traceback) -> None:
        self.close(kill=kind is not None)


def replay_softmax_calls(calls: list[SoftmaxCall], config: SoftmaxConfig | None = None, *,
                         backend: str = "jobserver", simulator: str = "verilator",
                         stalls: Stalls = Stalls(), max_cycles: int = 20_000_000
                         ) -> tuple[list[torch.Tensor], list[dict]]:
    """``calls`` in order as one host program (:func:`~zoforge.sim.backends.run_program`:
    the job server, or the cocotb bench on ``simulator``): each call's RTL result (int64,
    its scores' shape) and every job's counters. A failed run raises RuntimeError."""
    config = config if config is not None else SoftmaxConfig()
    per_call = [softmax_jobs(call, config) for call in calls]
    jobs = [job for part in per_call for job in part]
    if not jobs:
        return [torch.zeros(c.scores.shape, dtype=torch.int64) for c in calls], []
    args, data = program_inputs(jobs, config)
    arrays, result = run_program(PROGRAM, args, data, softmax_target(config), backend=backend,
                                 simulator=simulator, stalls=stalls, max_cycles=max_cycles)
    if not result.passed:
        raise RuntimeError(f"co-simulation failed: {'; '.join(result.failures)}")
    results, n = [], 0
    for call, part in zip(calls, per_call, strict=True):
        rows = [unpack_output(arrays[f"out{n + j}"], job, config) for j, job in enumerate(part)]
        n += len(part)
        results.append(torch.from_numpy(np.concatenate(rows)).reshape(call.scores.shape)
                       if rows else torch.zeros(call.scores.shape, dtype=torch.int64))
    return results, result.results["jobs"]


# -- zoforge cosim softmax ---------------------------------------------------------------------

#: The most scores ``zoforge cosim softmax``'s random jobs may hold together (``--jobs x
#: --max-rows x --max-len``, what they hold at most): 2^22, 32 MiB a copy of them as int64
#: (the host holds a few: scores, frames, golden and RTL results) and about 2^22 / lanes
#: beats through the unit. A larger request is refused before any score is drawn.
MAX_RANDOM_SCORES = 1 << 22


def check_random_work(jobs: int, max_rows: int, max_len: int,
                      parameter: str = "--jobs x --max-rows x --max-len") -> None:
    """Refuse (one-line ConfigError naming ``parameter``) random jobs that may hold more
    than :data:`MAX_RANDOM_SCORES` scores: ``jobs x max_rows x max_len``."""
    if jobs * max_rows * max_len > MAX_RANDOM_SCORES:
        raise ConfigError(parameter, f"at most {MAX_RANDOM_SCORES:,} (the scores random jobs "
                          "may hold)", f"{jobs} x {max_rows} x {max_len} = "
                          f"{jobs * max_rows * max_len:,}")

def random_call(rng: np.random.Generator, config: SoftmaxConfig, max_rows: int = 6,
                name: str = "random.softmax") -> SoftmaxCall:
    """A random call of one job: a length in ``1 .. max_len``, ``1 .. max_rows`` rows, a
    scale log-uniform over the unit's (``min_scale`` to 2^-7), a random key mask (all kept,
    all masked or each key kept with probability 3/4), scores spread over about 20 ``ln2``
    below a random top, a few at both ends of int32."""
    length = int(rng.integers(1, config.max_len + 1))
    rows = int(rng.integers(1, max_rows + 1))
    scale = float(np.exp(rng.uniform(np.log(config.min_scale), np.log(MAX_SCALE))))
    params = SoftmaxParams.of(scale)
    kind = rng.integers(0, 6)
    keep = np.ones(length, bool) if kind == 0 else np.zeros(length, bool) if kind == 1 \
        else rng.random(length) < 0.75
    top = int(rng.integers(-2 ** 30, 2 ** 30))
    scores = top - rng.integers(0, 20 * params.ln2 + 2, (rows, length))
    ends = rng.random((rows, length)) < 0.05
    scores[ends] = rng.choice([-2 ** 31, 2 ** 31 - 1], int(ends.sum()))
    return SoftmaxCall(name, torch.from_numpy(scores.astype(np.int64))[None],
                       torch.from_numpy(keep)[None], params, LEVELS)


def cosim_random(config: SoftmaxConfig, options: SoftmaxCosimOptions,
                 simulator: str = "verilator") -> dict:
    """``zoforge cosim softmax`` (:func:`zoforge.sim.softmax_host.cosim_softmax`; the cocotb
    backend on ``simulator``); refuses more than :data:`MAX_RANDOM_SCORES` scores
    (:func:`check_random_work`) before any is drawn."""
    check_random_work(options.jobs, options.max_rows, config.max_len)
    rng = np.random.default_rng(options.seed)
    calls = [random_call(rng, config, options.max_rows) for _ in range(options.jobs)]
    jobs = [job for call in calls for job in softmax_jobs(call, config)]
    args, data = program_inputs(jobs, config)
    stalls = Stalls(options.source_idle, options.backpressure, options.seed)
    arrays, result = run_program(PROGRAM, args, data, softmax_target(config),
                                 backend=options.backend, simulator=simulator, stalls=stalls)
    if not result.passed:
        return {"bit_exact": False, "failures": result.failures}
    golden = [GoldenUnits.softmax(call)[0] for call in calls]
    got = [unpack_output(arrays[f"out{n}"], job, config) for n, job in enumerate(jobs)]
    exact = all(np.array_equal(g.numpy(), r) for g, r in zip(golden, got, strict=True))
    cycles = [stats["cycles"] for stats in result.results["jobs"]]
    model = [softmax_job_cycles(config, job.rows, job.length) for job in jobs]
    return {"bit_exact": exact, "jobs": len(jobs), "cycles": cycles, "model_cycles": model,
            "simulator": result.simulator, "stalls": result.results.get("stalls")}
