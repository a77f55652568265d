"""Host side of the GEMM engine co-simulation: stream packing, job running, golden check.

The host packs whole jobs into the engine's stream formats (numpy, no per-cycle Python),
the engine's host program (:mod:`zoforge.sim.engine_host`) plays them through the RTL on
either backend (:mod:`zoforge.sim.backends`: the Verilator job server, or cocotbext-axi on
Verilator or Icarus), and the host compares the returned words with
:mod:`zoforge.golden.engine` value by value.

Stream formats are documented in :mod:`zoforge.hw.engine.engine`.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np

from zoforge.config import Config, FloatRange, IntRange, OneOf, param
from zoforge.errors import ConfigError, check_int_range
from zoforge.hw.export import design_verilog
from zoforge.hw.engine.config import MAX_DIM, EngineConfig
from zoforge.hw.engine.designs import elaborate_engine, engine_name
from zoforge.hw.engine.packer import ROWS_PER_BEAT
from zoforge.hw.engine.regmap import GELU_CONSTANTS, ctrl_bits, host_map
from zoforge.sim.backends import (BACKEND_CHOICES, BACKEND_HELP, BusTarget, Stalls,
                                  resolve_backend, run_program)
from zoforge.sim.cosim import SIMULATORS, public_ports_args, run_cocotb, scratch_folder
from zoforge.sim.verdict import Verdict

__all__ = ["EngineJob", "JobResult", "EngineCosim", "EngineCosimOptions", "cosim_engine",
           "pack_input_stream", "output_beats", "unpack_output", "param_table",
           "ideal_cycles", "random_job", "array_steps", "JOB_COMPARISONS", "gelu_job",
           "gelu_writes", "random_gelu_job", "random_stage", "OUTPUTS", "job_outputs"]

#: What a job's verdict compares, each by name: its output with the golden model's, and its
#: ARRAY_CYCLES counter with the k-steps its tiles feed the array (:func:`array_steps`).
JOB_COMPARISONS = ("outputs", "counters")

#: The jobs' outputs ``zoforge cosim engine --output`` makes: requantized int8, raw int32,
#: GELU jobs (the GELU job mode of an engine built with ``gelu``) and ``auto`` (GELU and
#: int8 jobs in turn on an engine built with ``gelu``, else int8: :func:`job_outputs`).
OUTPUTS = ("auto", "int8", "raw", "gelu")


@dataclass(frozen=True)
class EngineCosimOptions(Config):
    """How ``zoforge cosim engine`` (alias ``gemm``) runs random GEMMs through the engine."""

    kind: ClassVar[str] = "cosim-engine"

    m: int = param(16, "rows of X (and Y)", IntRange(1, MAX_DIM))
    k: int = param(16, "columns of X, rows of W", IntRange(1, MAX_DIM))
    n: int = param(16, "columns of W (and Y)", IntRange(1, MAX_DIM))
    seed: int = param(0, "seed of the random operands", IntRange(0))
    simulator: str = param("verilator", "simulator", OneOf(SIMULATORS))
    backend: str = param("auto", "where the host program runs: " + BACKEND_HELP,
                         OneOf(BACKEND_CHOICES))
    output: str = param("auto", "the jobs' output: int8 (requantized), raw (int32), gelu (the "
                        "GELU job mode of an engine built with --gelu) or auto (GELU and int8 "
                        "jobs in turn on an engine built with --gelu, else int8)",
                        OneOf(OUTPUTS))
    per_channel: bool = param(False, "per-output-column multiplier/shift (else per tensor)")
    relu: bool = param(False, "ReLU after requantization (int8 jobs)")
    bias: bool = param(True, "add a random bias")
    backpressure: float = param(0.0, "probability that the output stream's (and AXI4-Lite "
                                "B/R) ready is low in a cycle",
                                FloatRange(0.0, 1.0, high_open=True))
    jobs: int = param(1, "back-to-back jobs of the same shape (different operands)",
                      IntRange(1, 1000))

    def check(self) -> None:
        resolve_backend(self.backend, self.simulator)
        if self.relu and self.output == "gelu":
            raise ConfigError("relu", "false with --output gelu (a GELU job has no ReLU)",
                              self.relu)


@dataclass
class EngineJob:
    """One GEMM for the engine: int8 ``x [M,K]``, ``w [K,N]``, optional int32 ``bias [N]``.

    ``multiplier``/``shift`` (int or length-N arrays) select the requantized INT8 output;
    both None gives raw INT32 output (``relu`` is ignored then, as in the RTL). ``gelu`` (a
    :class:`~zoforge.golden.engine_gelu.GeluStage`; :func:`gelu_job` makes one) makes it a
    GELU job (an engine built with ``gelu``): ``multiplier``/``shift`` its ``into``.
    """

    x: np.ndarray
    w: np.ndarray
    bias: np.ndarray | None = None
    multiplier: object = None
    shift: object = None
    relu: bool = False
    gelu: object = None

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.x.shape[0], self.x.shape[1], self.w.shape[1]

    @property
    def raw(self) -> bool:
        return self.multiplier is None

    @property
    def per_channel(self) -> bool:
        return not self.raw and np.ndim(self.multiplier) + np.ndim(self.shift) > 0

    def golden(self) -> np.ndarray:
        """The engine's expected result (int32 raw, else int8), from the golden model."""
        import torch   # torch only to compute expected results (keeps `zoforge --help` fast)
        from zoforge.golden.engine import RequantParams, engine_gemm
        from zoforge.golden.engine_gelu import engine_gemm_gelu
        bias = None if self.bias is None else torch.from_numpy(np.asarray(self.bias, np.int64))
        if self.gelu is not None:
            return engine_gemm_gelu(torch.from_numpy(self.x), torch.from_numpy(self.w), bias,
                                    self.gelu).numpy()
        params = None if self.raw else RequantParams(
            torch.as_tensor(np.asarray(self.multiplier), dtype=torch.int64),
            torch.as_tensor(np.asarray(self.shift), dtype=torch.int64))
        out = engine_gemm(torch.from_numpy(self.x), torch.from_numpy(self.w), bias, params,
                          self.relu)
        return out.numpy()


def gelu_job(x: np.ndarray, w: np.ndarray, bias, stage) -> EngineJob:
    """A GELU job of ``stage`` (a :class:`~zoforge.golden.engine_gelu.GeluStage`)."""
    def host(value):
        return value.numpy() if hasattr(value, "numpy") else int(value)
    return EngineJob(x, w, bias, host(stage.into.multiplier), host(stage.into.shift),
                     gelu=stage)


@dataclass
class JobResult:
    """One job's counters and verdict: ``checks`` (:data:`JOB_COMPARISONS`, each equal or
    not), ``bit_exact`` their conjunction."""
    shape: tuple[int, int, int]
    bit_exact: bool
    mismatches: int
    cycles: int
    array_cycles: int
    ideal_cycles: int
    irq: bool
    output: np.ndarray = field(repr=False)
    expected: np.ndarray = field(repr=False)
    checks: dict = field(default_factory=dict)

    @property
    def pe_utilization(self) -> float:
        return self.ideal_cycles / self.cycles if self.cycles else 0.0


def ideal_cycles(m: int, k: int, n: int, rows: int, cols: int) -> int:
    """``ceil(M*K*N / (R*C))``: cycles if every PE did a useful MAC every cycle."""
    return -(-m * k * n // (rows * cols))


def array_steps(m: int, k: int, n: int, rows: int, cols: int, pack: int) -> int:
    """The k-steps a job feeds the array (its ARRAY_CYCLES): every output tile takes
    ``ceil(K / pack)`` beats of ``pack`` k-steps."""
    return -(-m // rows) * -(-n // cols) * -(-k // pack) * pack


def pack_input_stream(x: np.ndarray, w: np.ndarray, rows: int, cols: int, pack: int
                      ) -> np.ndarray:
    """The job's input stream as bytes (uint8), zero-padded edge tiles.

    Order: W panel 0, X panels 0..MT-1, W panels 1..NT-1, in beats of ``pack * max(rows,
    cols)`` bytes. An X panel: ceil(K/pack) beats, byte ``p*R + i`` of beat w is
    X[mt*R+i, w*pack+p]. A W panel: ceil(K/pack) words of ``pack * C`` bytes (byte ``p*C +
    j`` of word w is W[w*pack+p, nt*C+j]), ``G = max(1, R // C)`` words a beat (word w at
    byte ``(w % G) * pack * C`` of beat ``w // G``), the last beat's missing words zero.
    """
    m, k = x.shape
    n = w.shape[1]
    mt, nt, kw = -(-m // rows), -(-n // cols), -(-k // pack)
    beat, group = pack * max(rows, cols), max(1, rows // cols)
    w_beats = -(-kw // group)
    xp = np.zeros((mt * rows, kw * pack), np.uint8)
    xp[:m, :k] = x.view(np.uint8)
    wp = np.zeros((w_beats * group * pack, nt * cols), np.uint8)
    wp[:k, :n] = w.view(np.uint8)
    x_beats = xp.reshape(mt, rows, kw, pack).transpose(0, 2, 3, 1).reshape(mt, kw, pack * rows)
    w_words = wp.reshape(w_beats * group, pack, nt, cols).transpose(2, 0, 1, 3)
    x_full = np.zeros((mt, kw, beat), np.uint8)
    x_full[:, :, :pack * rows] = x_beats
    w_full = np.zeros((nt, w_beats, beat), np.uint8)
    w_full[:, :, :group * pack * cols] = w_words.reshape(nt, w_beats, group * pack * cols)
    return np.concatenate([w_full[:1].reshape(-1), x_full.reshape(-1),
                           w_full[1:].reshape(-1)])


def output_beats(m: int, n: int, rows: int, cols: int, raw: bool) -> int:
    """Output-stream beats of a job: R rows a tile, one a beat raw, else four (int8) a beat
    (the job's last beat may hold fewer)."""
    result_rows = -(-m // rows) * -(-n // cols) * rows
    return result_rows if raw else -(-result_rows // ROWS_PER_BEAT)


def unpack_output(words: np.ndarray, m: int, n: int, rows: int, cols: int, raw: bool
                  ) -> np.ndarray:
    """Output-stream words (uint32, C a beat) -> ``[M, N]``. The stream's rows: tiles
    nt-major, each R rows of C columns; raw one row a beat (column j in word j, int32), else
    four a beat (row r of the beat, column j at its byte ``r*C + j``, lane j's byte b being
    byte ``4j + b``: the words little-endian)."""
    mt, nt = -(-m // rows), -(-n // cols)
    expected = output_beats(m, n, rows, cols, raw) * cols
    words = np.asarray(words, np.uint32)
    if words.size != expected:
        raise ValueError(f"output stream has {words.size} words, expected {expected}")
    if raw:
        values = words.view(np.int32)
    else:
        values = words.astype("<u4").view(np.int8)[:mt * nt * rows * cols]
    tiles = values.reshape(nt, mt, rows, cols)
    full = tiles.transpose(1, 2, 0, 3).reshape(mt * rows, nt * cols)[:m, :n]
    return full.copy()


def param_table(values, n: int, cols: int) -> np.ndarray:
    """Per-column values -> the words of a parameter region (column n at
    ``(n // C) * 2^ceil(log2 C) + n % C``), as uint32."""
    lanes = 1 << (cols - 1).bit_length()
    nt = -(-n // cols)
    column = np.broadcast_to(np.asarray(values, np.int64), (n,))
    table = np.zeros((nt, lanes), np.int64)
    padded = np.zeros(nt * cols, np.int64)
    padded[:n] = column
    table[:, :cols] = padded.reshape(nt, cols)
    return (table.reshape(-1) & 0xFFFFFFFF).astype(np.uint32)


def random_job(rng: np.random.Generator, m: int, k: int, n: int, *, raw: bool = False,
               bias: bool = True, per_channel: bool = False, relu: bool = False,
               extreme: bool = False) -> EngineJob:
    """Random operands; ``extreme`` draws only -128/127 (and saturating scales)."""
    if extreme:
        x = rng.choice(np.array([-128, 127], np.int8), size=(m, k))
        w = rng.choice(np.array([-128, 127], np.int8), size=(k, n))
    else:
        x = rng.integers(-128, 128, size=(m, k), dtype=np.int8)
        w = rng.integers(-128, 128, size=(k, n), dtype=np.int8)
    # Typical |x·w| (random signs): the bias and the scales are drawn relative to it so that
    # requantized outputs spread over int8 and saturate at both ends now and then.
    typical = 128 * 128 * math.sqrt(k) / (1.0 if extreme else 3.0)
    b = rng.integers(-typical, typical, size=n).astype(np.int32) if bias else None
    if raw:
        return EngineJob(x, w, b)
    from zoforge.golden.engine import quantize_multiplier   # imports torch: only when used
    if per_channel:
        scales = 127.0 / typical * np.exp(rng.uniform(-1.5, 1.5, size=n))
        pairs = [quantize_multiplier(float(s)) for s in scales]
        mult = np.array([p.multiplier for p in pairs], np.int64)
        shift = np.array([p.shift for p in pairs], np.int64)
    else:
        p = quantize_multiplier(127.0 / typical * float(np.exp(rng.uniform(-1, 1))))
        mult, shift = p.multiplier, p.shift
    return EngineJob(x, w, b, mult, shift, relu)


def random_stage(rng: np.random.Generator, n: int, k: int, *, per_column: bool = False,
                 scale: float = 2.0 ** -10):
    """Random constants of a GELU job of depth ``k`` (a :class:`~zoforge.golden.engine_gelu.
    GeluStage`): i-GELU's of input ``scale``; the requantizers' scales (per tensor, or one
    per column of ``n``) spread ``q`` over int16 (about 3 units of the GELU's input at a
    typical ``acc``, saturating now and then) and the int8 result (127 at about 2.5 units)."""
    import torch   # the golden model's types: only when a GELU job is made
    from zoforge.golden.engine import RequantParams, quantize_multiplier
    from zoforge.golden.engine_gelu import GeluStage
    from zoforge.golden.finetune.integer_ops import GeluParams
    typical = 128 * 128 * np.sqrt(k) / 3

    def params(target, spread):
        scales = target * np.exp(rng.uniform(-spread, spread, size=n if per_column else 1))
        pairs = [quantize_multiplier(float(s)) for s in scales]
        if not per_column:
            return pairs[0]
        return RequantParams(torch.tensor([p.multiplier for p in pairs]),
                             torch.tensor([p.shift for p in pairs]))
    gelu = GeluParams.of(scale)
    into = params(3.0 / scale / typical, 1.0)
    out = params(127.0 / (2.5 / gelu.out_scale), 0.7)
    return GeluStage(into, gelu, out)


def random_gelu_job(rng: np.random.Generator, m: int, k: int, n: int, *,
                    per_column: bool = False, bias: bool = True,
                    scale: float = 2.0 ** -10) -> EngineJob:
    """A GELU job (:func:`gelu_job`) of random int8 operands, a random bias (about a
    typical ``|x·w|``) and :func:`random_stage`'s constants."""
    x = rng.integers(-128, 128, size=(m, k), dtype=np.int8)
    w = rng.integers(-128, 128, size=(k, n), dtype=np.int8)
    typical = int(128 * 128 * np.sqrt(k) / 3)
    b = rng.integers(-typical, typical, size=n).astype(np.int32) if bias else None
    return gelu_job(x, w, b, random_stage(rng, n, k, per_column=per_column, scale=scale))


def job_outputs(config: EngineConfig, options: EngineCosimOptions) -> list[str]:
    """Each job's output (``int8``, ``raw`` or ``gelu``) for ``options.output`` on
    ``config``: ``auto`` is GELU and int8 jobs in turn (a GELU job first) on an engine built
    with ``gelu``, else int8 jobs; ``gelu`` on an engine without is a one-line ConfigError
    naming ``output``."""
    if options.output == "gelu" and not config.gelu:
        allowed = [name for name in OUTPUTS if name != "gelu"]
        raise ConfigError("output", "one of " + ", ".join(allowed) + " (gelu: on an engine "
                          "built with --gelu)", options.output)
    if options.output != "auto":
        return [options.output] * options.jobs
    kinds = ("gelu", "int8") if config.gelu else ("int8",)
    return [kinds[index % len(kinds)] for index in range(options.jobs)]


class EngineCosim:
    """Builds one engine configuration and runs lists of jobs through its co-simulation."""

    def __init__(self, config: EngineConfig | None = None, *, simulator: str = "verilator",
                 **fields):
        """``config``, or its fields as keywords (``EngineCosim(rows=4, cols=4, ...)``)."""
        self.config = config if config is not None else EngineConfig(**fields)
        self.rows, self.cols, self.pack = self.config.rows, self.config.cols, self.config.pack
        self.in_bytes = self.config.in_bytes
        self.simulator = simulator
        self.top = engine_name(self.config)
        self._verilog: str | None = None

    @property
    def verilog(self) -> str:
        if self._verilog is None:
            self._verilog = design_verilog(elaborate_engine(self.config))
        return self._verilog

    def check_shape(self, m: int, k: int, n: int) -> None:
        """GEMM dimensions within the buffers (ConfigError naming --m/--k/--n)."""
        check_int_range("--m", m, 1, self.config.max_m)
        check_int_range("--k", k, 1, self.config.max_k)
        check_int_range("--n", n, 1, self.config.max_n)

    def check_job(self, job: EngineJob) -> None:
        m, k, n = job.shape
        if job.w.shape[0] != k:
            raise ConfigError("k", "the same for x and w", f"{k} and {job.w.shape[0]}")
        self.check_shape(m, k, n)
        if job.gelu is not None:
            if not self.config.gelu:
                raise ConfigError("gelu", "GELU jobs on an engine built with --gelu",
                                  "an engine without")
            if job.relu:
                raise ConfigError("relu", "False in a GELU job", job.relu)
            gelu_writes(job.gelu)

    @property
    def target(self) -> BusTarget:
        """The engine as a bus target: input beats of ``in_bytes``, output beats of C
        32-bit lanes."""
        found = re.search(r"\[(\d+):0\] s_axil__awaddr", self.verilog)
        return BusTarget(self.verilog, self.top, lanes=self.cols,
                         addr_bits=int(found.group(1)) + 1 if found else 16,
                         in_bits=8 * self.in_bytes,
                         verilator_args=tuple(public_ports_args(self.top, ENGINE_PORTS)))

    def run(self, jobs: list[EngineJob], *, backpressure: float = 0.0, seed: int = 0,
            data_dir: Path | None = None, backend: str = "auto",
            patterns: dict[str, np.ndarray] | None = None, bench: str | None = None):
        """Run ``jobs`` back to back in one simulation; returns ``(job_results, info)``.

        backpressure: probability that the output stream's ``tready`` (and AXI4-Lite B/R
        ready) is low in a cycle; backend: ``auto``, ``jobserver`` or ``cocotb``
        (:mod:`zoforge.sim.backends`; auto: the job server on Verilator); patterns: 0/1
        stall patterns of the input ``source`` and the output ``sink`` (cocotb); bench: a
        specialised cocotb bench module instead of the host program (it reads the jobs
        from ``job<n>.npz`` and stores ``out<n>.npy``).
        """
        for job in jobs:
            self.check_job(job)
        if bench is not None:
            return self._run_bench(jobs, bench, data_dir)
        if patterns is not None:
            backend = "cocotb"
        args, data = self.program_inputs(jobs)
        limit = max(job_limit_cycles(spec) for spec in args["jobs"])
        arrays, result = run_program(
            "zoforge.sim.engine_host:engine_program", args, data, self.target,
            backend=resolve_backend(backend, self.simulator), simulator=self.simulator,
            stalls=Stalls(sink_backpressure=backpressure, seed=seed, patterns=patterns),
            max_cycles=int(limit / (1.0 - backpressure)), data_dir=data_dir)
        if not result.passed:
            raise RuntimeError(f"co-simulation failed: {'; '.join(result.failures)}")
        outputs = [arrays[f"out{index}"] for index in range(len(jobs))]
        sim_cycles = result.results["sim_cycles"]
        # cocotb: the time inside the simulator; the job server: from its process start
        wall = result.results.get("wall_s", result.run_s)
        info = {"sim_cycles": sim_cycles, "wall_s": wall,
                "cycles_per_s": sim_cycles / wall if wall else 0.0,
                "build_s": result.build_s, "run_s": result.run_s,
                "simulator": result.simulator, "stalls": result.results.get("stalls")}
        return self.check_results(jobs, outputs, result.results["jobs"]), info

    def program_inputs(self, jobs: list[EngineJob]) -> tuple[dict, dict[str, np.ndarray]]:
        """The host program's ``(args, data)`` (:mod:`zoforge.sim.engine_host`) for
        ``jobs``."""
        specs, data = [], {}
        for index, job in enumerate(jobs):
            spec, frame, tables = self.job_spec(job)
            specs.append(spec)
            data[f"job{index}_frame"] = frame_words(frame, self.in_bytes)
            data.update({f"job{index}_{name}": table for name, table in tables.items()})
        registers, regions = host_map(self.config.gelu)
        return {"jobs": specs, "registers": registers, "regions": regions,
                "lanes": self.cols}, data

    def _run_bench(self, jobs: list[EngineJob], bench: str, data_dir: Path | None):
        with scratch_folder(data_dir, "zoforge-gemm-") as data:
            specs = []
            for index, job in enumerate(jobs):
                spec, frame, tables = self.job_spec(job)
                np.savez(data / f"job{index}.npz", frame=frame, **tables)
                specs.append(spec)
            registers, regions = host_map(self.config.gelu)
            args = {"jobs": specs, "registers": registers, "regions": regions}
            result = run_cocotb(verilog=self.verilog, toplevel=self.top, test_module=bench,
                                args=args, simulator=self.simulator, data_dir=data,
                                verilator_args=public_ports_args(self.top, ENGINE_PORTS))
            if not result.passed:
                raise RuntimeError(f"co-simulation failed: {result.failures} "
                                   f"(see {data}/sim.log)")
            outputs = [np.load(data / f"out{index}.npy") for index in range(len(jobs))]
        info = dict(result.results.get("info", {}), build_s=result.build_s,
                    run_s=result.run_s, simulator=result.simulator)
        return self.check_results(jobs, outputs, result.results["jobs"]), info

    def check_results(self, jobs: list[EngineJob], outputs: list[np.ndarray],
                      stats: list[dict]) -> list[JobResult]:
        """Each job's output words (uint32) against the golden model and its counters
        against :func:`array_steps` (``stats``: the host program's per-job counters)."""
        job_results = []
        for job, words, job_stats in zip(jobs, outputs, stats, strict=True):
            m, k, n = job.shape
            output = unpack_output(words, m, n, self.rows, self.cols, job.raw)
            expected = job.golden()
            mismatches = int(np.count_nonzero(output != expected))
            verdict = Verdict.of(JOB_COMPARISONS, True, {
                "outputs": (output, expected),
                "counters": (job_stats["array_cycles"],
                             array_steps(m, k, n, self.rows, self.cols, self.pack))})
            job_results.append(JobResult(
                shape=job.shape, bit_exact=verdict.bit_exact, mismatches=mismatches,
                cycles=job_stats["cycles"], array_cycles=job_stats["array_cycles"],
                ideal_cycles=ideal_cycles(m, k, n, self.rows, self.cols),
                irq=job_stats["irq"], output=output, expected=expected,
                checks=verdict.checks))
        return job_results

    def job_spec(self, job: EngineJob) -> tuple[dict, np.ndarray, dict[str, np.ndarray]]:
        """``(spec, frame, tables)``: the job's register values and stream/table data."""
        m, k, n = job.shape
        frame = pack_input_stream(job.x, job.w, self.rows, self.cols, self.pack)
        tables = {}
        if job.bias is not None:
            tables["BIAS"] = param_table(job.bias, n, self.cols)
        if job.per_channel:
            tables["COL_MULT"] = param_table(job.multiplier, n, self.cols)
            tables["COL_SHIFT"] = param_table(job.shift, n, self.cols)
        bits = ctrl_bits(self.config.gelu)
        ctrl = ((job.relu << bits["relu"]) | (job.raw << bits["raw"])
                | (job.per_channel << bits["per_channel"])
                | ((job.bias is not None) << bits["bias_en"]))
        writes = {}
        if job.gelu is not None:
            out_mult, out_shift = job.gelu.out.per_column(n)
            tables["OUT_MULT"] = param_table(out_mult.numpy(), n, self.cols)
            tables["OUT_SHIFT"] = param_table(out_shift.numpy(), n, self.cols)
            ctrl |= 1 << bits["gelu"]
            writes = gelu_writes(job.gelu)
        tensor = (0, 0) if job.raw or job.per_channel else (int(job.multiplier), int(job.shift))
        mt, nt = -(-m // self.rows), -(-n // self.cols)
        x_panel = -(-k // self.pack) * self.in_bytes
        w_panel = (frame.size - mt * x_panel) // nt
        spec = {"m": m, "k": k, "n": n, "ctrl": ctrl, "mult": tensor[0], "shift": tensor[1],
                "tables": sorted(tables), "beats": int(frame.size // self.in_bytes),
                "beat_bytes": self.in_bytes, "w_panel_bytes": int(w_panel),
                "first_bytes": int(mt * x_panel + min(nt, 2) * w_panel),
                "out_beats": output_beats(m, n, self.rows, self.cols, job.raw),
                "writes": writes}
        return spec, frame, tables


def gelu_writes(stage) -> dict[str, int]:
    """The GELU registers' values for ``stage``'s i-GELU constants (:func:`~zoforge.hw.
    nonlinear.gelu.gelu_registers`; a constant the unit cannot take: one-line ConfigError)."""
    from zoforge.hw.nonlinear.gelu import gelu_registers   # Amaranth: only for a GELU job
    try:
        values = gelu_registers(stage.gelu)
    except ValueError as error:
        raise ConfigError("gelu", "i-GELU constants the engine's GeluUnit takes (made by "
                          "GeluParams.of)", str(error)) from None
    return {name: values[constant] >> low & 0xFFFFFFFF
            for name, (constant, low) in GELU_CONSTANTS.items()}


def frame_words(frame: np.ndarray, beat_bytes: int) -> np.ndarray:
    """An input frame's bytes -> 32-bit words, each beat zero-padded to whole words (lane 0
    in the low bits, as the job server and the program bench take them)."""
    per_beat = -(-beat_bytes // 4)
    beats = np.zeros((frame.size // beat_bytes, 4 * per_beat), np.uint8)
    beats[:, :beat_bytes] = frame.reshape(-1, beat_bytes)
    return beats.view("<u4").reshape(-1).astype(np.uint32)


def job_limit_cycles(spec: dict) -> int:
    """A bound no correct job reaches (one MAC per cycle, every beat stalled 20x): a job
    still running then has stalled, and fails instead of hanging."""
    m, k, n = spec["m"], spec["k"], spec["n"]
    return 20 * (m * k * n + m * n) + 100_000


#: The engine's ports public to VPI (:func:`~zoforge.sim.cosim.public_ports_args`).
ENGINE_PORTS = ("clk", "rst", "irq", "s_axil__*", "s_axis__*", "m_axis__*")


def cosim_engine(config: EngineConfig, options: EngineCosimOptions | None = None) -> dict:
    """Random GEMMs through the engine's RTL (each job's output kind: :func:`job_outputs`),
    checked bit-exact against the golden model; a JSON-able summary (``bit_exact``, the jobs
    of each output kind ``job_outputs``, cycles, PE utilization, speed)."""
    options = options or EngineCosimOptions()
    cosim = EngineCosim(config, simulator=options.simulator)
    cosim.check_shape(options.m, options.k, options.n)
    outputs = job_outputs(config, options)
    rng = np.random.default_rng(options.seed)
    jobs = [random_gelu_job(rng, options.m, options.k, options.n, bias=options.bias,
                            per_column=options.per_channel) if output == "gelu" else
            random_job(rng, options.m, options.k, options.n, raw=output == "raw",
                       bias=options.bias, per_channel=options.per_channel, relu=options.relu)
            for output in outputs]
    results, info = cosim.run(jobs, backpressure=options.backpressure, seed=options.seed,
                              backend=options.backend)
    cycles = sum(r.cycles for r in results)
    ideal = sum(r.ideal_cycles for r in results)
    return {
        "bit_exact": all(r.bit_exact for r in results),
        "checks": {name: all(r.checks[name] for r in results) for name in JOB_COMPARISONS},
        "mismatches": sum(r.mismatches for r in results),
        "m": options.m, "k": options.k, "n": options.n, "rows": config.rows,
        "cols": config.cols, "pack": config.pack, "gelu": config.gelu,
        "output": options.output, "jobs": options.jobs,
        "job_outputs": {name: outputs.count(name) for name in OUTPUTS if name in outputs},
        "backend": resolve_backend(options.backend, options.simulator),
        "cycles": cycles, "ideal_cycles": ideal,
        "pe_utilization": round(ideal / cycles, 4) if cycles else 0.0,
        "array_cycles": sum(r.array_cycles for r in results),
        "cycles_per_s": round(info.get("cycles_per_s", 0.0), 1),
        "sim_cycles": info.get("sim_cycles"), "sim_wall_s": round(info.get("wall_s", 0), 3),
        "build_s": round(info["build_s"], 2), "run_s": round(info["run_s"], 2),
        "simulator": info["simulator"], "stalls": info.get("stalls"),
        "config_hash": config.stable_hash(),
    }
