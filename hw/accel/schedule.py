"""One P-RGE ZO step of a BERT/MiniLM stack mapped onto an accelerator (issue 32).

The step (``golden/finetune/train.py``): q queries, each a + and a - forward with the step's
starting masters, then per query one update walk over the J adapters. All 2q = S forwards
use the same masters, so they are independent; the schedule runs them side by side:

* **shared work once**: a map whose input is the same for every branch (every map of a
  block below ``first_adapted``; query, key and value of the first adapted block, whose
  input is that block's input) runs once on ``tokens`` rows; the first adapted maps' frozen
  products X·W and X·A once, then the S branch jobs;
* **the adapter mapping** (``mapping``, :data:`MAPPINGS`): ``split`` (the default,
  :mod:`zoforge.golden.finetune.split`, bit-exact by construction) runs an adapted map's
  frozen X·W as a ``gemm-raw`` engine map and U = requant(X·A) as a ``gemm`` engine map
  (N = r padded to the layer's rows) in a phase of its own before the map's phase (the
  layer needs U), and leaves the ZO layers an adapter with K = r (X' = U, W' = 0,
  A' = I_r): ``load_a``, ``load_master``, ``load_x``, ``frozen_a`` (r deep) and branches
  with the ``zero_w`` flag (XW taken as 0), no ``load_w`` or ``frozen_w``; the host adds
  the two int32 results (``wrap32(XW + Yn)``). ``layer`` runs the whole adapter on the ZO
  layers (K = the map's K, with ``load_w`` and ``frozen_w``), as today's units do;
* **branches along M**: every other engine map runs once on the S branches' rows
  concatenated (M = S x tokens; the head S x batch), a ZO-layer map per branch (the
  layer's token buffer holds one branch; with ``layer`` its W, A and master stay loaded for
  all S, the phase run alone; with ``split`` the narrow adapter's A and master are loaded
  again with each branch's X: each load group a piece that carries no state, so the driver
  may interleave it with other phases' pieces, reports/overlap.py);
* **columns split across the replicated units**: an engine map's N in ``ceil(N/E)``-wide
  slices (at most ``engine_max_n``), slice j on engine ``j mod E``; an adapter's N in slices
  of a multiple of the layer's R rows on layer ``j mod L``; M beyond a unit's ``max_m`` in
  equal chunks (a chunk re-streams the unit's W slice);
* **one DDR read per operand**: each :class:`Transfer` is read (or written) once and
  ``receivers`` units take it from the same beats (X broadcast to every unit holding a
  column slice, A to every layer); so each frozen weight is read once per step (per M
  chunk if M does not fit);
* **phases**: the maps that can run at once (a block's query, key, value: the engines and
  the layers side by side), then attn_out, ffn_in, ffn_out, the head, the update walks;
  the host's work (softmax, LayerNorm, GELU, the attention products) sits between them;
* **attention on the engines** (``attention`` ``engines``,
  :mod:`zoforge.golden.finetune.attention`): after a block's qkv phase, ``blockN.scores``
  (S = Q·K^T, one ``gemm-raw`` job L x d x L per sequence, head and branch) and, after the
  host's softmax, ``blockN.context`` (C = P·V, L x L x d), whole jobs spread over the
  engines (job i on engine ``i mod E``); each job its own operands (q or P as X, K^T or V as
  W, int32 S or C out). Each job's W is its own sequence's and head's, so jobs are never
  concatenated along M, except Q·K^T of the branches of one sequence and head in the first
  adapted block when ``key`` carries no adapter (K is then the same for every branch: one
  job of M = S x L, ``branches`` S). A block below ``first_adapted`` runs them once;
* **the nonlinear units** (``nonlinear`` ``integer``, :data:`~zoforge.golden.finetune.
  config.NONLINEARS`): with ``gelu_engines`` > 0, ``ffn_in`` is a ``gemm-gelu`` map (the
  engine's GELU job: int8 GELU(x) out, no host GELU or quantization between ffn_in and
  ffn_out) split across the GELU engines only (engines ``0 .. gelu_engines - 1``); with
  ``softmax_units`` > 0 and ``attention`` ``engines``, a ``blockN.softmax`` phase between
  ``scores`` and ``context``: per scores job one ``softmax`` job of its M rows of L keys
  (raw int32 S in, int8 P out) on softmax unit ``i mod softmax_units``. With ``float`` the
  host keeps both (every job as before);
* **the attention links** (``accel.link``, docs/link.md; :attr:`Schedule.linked`): with the
  softmax on the units, each scores job's M in chunks of at most ``link_max_rows`` (the
  link's reorder bank), each chunk's int32 S streamed on chip by its engine's link into
  softmax unit ``link_unit(engine)``, whose softmax job of that chunk's rows takes it there:
  no DDR write of S, no DDR read of the softmax's input (the host queues each chunk's link
  entry and selector entry). A chunk's rows are one frame of the engine (N = L within the
  engine's ``max_n`` and the link's ``max_len``: else a one-line error).

Every :class:`Job` is a job the RTL units run: ``gemm`` / ``gemm-raw`` (the engine's int8
or int32 job) and the ZO layer's own jobs (:data:`zoforge.hw.zolayer.registers.JOBS`).
Concatenating branches along M and splitting by output columns leave every value unchanged
(each output element is one row of X times one column of W): ``tests/test_accel_schedule.py``
checks it on the golden engine. The ZO layers' perturbations are the exception: each layer
draws its slice's z from its own generator, so a multi-layer run needs the golden model to
draw per layer (not modelled here).

``shape`` is a :class:`zoforge.reports.model_shape.ModelShape` (read by its fields: the
layers below ``reports`` cannot import it).
"""
from __future__ import annotations

from dataclasses import dataclass

from zoforge.errors import ConfigError, check_choice, check_int_range
from zoforge.golden.finetune.config import ATTENTION_PRODUCTS, ATTENTIONS, NONLINEARS

__all__ = ["BLOCK_MAPS", "ADAPTED_ORDER", "ENGINE", "LAYER", "SOFTMAX", "Job", "Transfer",
           "Phase", "Schedule", "step_schedule", "MAC_JOBS", "MAPPINGS"]

ENGINE, LAYER, SOFTMAX = "engine", "zo-layer", "softmax"
#: A BERT block's linear maps in the forward's order, with the tensor each reads
#: (golden/models.bert_layer): x the block input, then the attention context, the first
#: LayerNorm's output, the GELU's output.
BLOCK_MAPS = (("query", "x"), ("key", "x"), ("value", "x"), ("attn_out", "context"),
              ("ffn_in", "attn"), ("ffn_out", "inner"))
#: The maps that carry adapters, in the order ``shape.adapted`` takes them.
ADAPTED_ORDER = ("query", "value", "key", "attn_out")
#: Jobs that multiply: their MACs.
MAC_JOBS = ("gemm", "gemm-raw", "gemm-gelu", "frozen_w", "frozen_a", "branch")
#: How an adapted map runs (module docstring): the split mapping (default) or all on the
#: ZO layers.
MAPPINGS = ("split", "layer")


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Job:
    """One job on one unit: ``unit`` (engine, zo-layer or softmax) number ``replica``,
    ``kind`` (``gemm``, ``gemm-raw``, ``gemm-gelu``, a ZO-layer job or ``softmax``: M rows
    of N keys), shape M x K x N (rank ``r``), ``branches``
    side by side along M (the map's), ``name`` (the map, e.g. ``block0.key``), ``query``
    (an accumulate's query within its branch job), ``rows`` (the forward's rows its output
    holds, ``(first, end)``: branch b's token t is row b x tokens + t, a job shared by the
    branches holds branch 0's; the head's rows are branch x batch; ``None``: all of them,
    e.g. the loads and the update walks)."""

    unit: str
    replica: int
    kind: str
    m: int
    k: int
    n: int
    r: int = 0
    branches: int = 1
    name: str = ""
    query: int = 0
    rows: tuple[int, int] | None = None

    @property
    def macs(self) -> int:
        """Multiply-accumulates the job computes (0 for loads and walks)."""
        mkn = self.m * self.k * self.n
        return {"gemm": mkn, "gemm-raw": mkn, "gemm-gelu": mkn, "frozen_w": mkn,
                "frozen_a": self.m * self.k * self.r,
                "branch": self.m * self.r * self.n}.get(self.kind, 0)


@dataclass(frozen=True)
class Transfer:
    """One operand moved between DDR and the units, once: ``role`` (x, w, a, master, y,
    tables) of a ``unit`` job of shape ``m, k, n, r`` (``raw``: int32 results; ``gelu``: a
    GELU job's), ``write`` (to DDR) or read, taken by ``receivers`` units from the same
    beats."""

    name: str
    role: str
    unit: str
    m: int
    k: int
    n: int
    r: int = 0
    raw: bool = False
    write: bool = False
    receivers: int = 1
    gelu: bool = False

    @property
    def payload_bytes(self) -> int:
        """The values at their width, packed: int8 X, W, A, Y; int32 raw or ZO-layer Y;
        the 24-bit master in 3 bytes; per column an int32 bias (and for an int8 result a
        multiplier and a shift; a GELU job's its second requantizer's multiplier and shift
        too); a softmax job's int32 scores in, int8 P out (M x N)."""
        m, k, n, r = self.m, self.k, self.n, self.r
        if self.unit == SOFTMAX:
            return {"x": 4 * m * n, "y": m * n}[self.role]
        wide = self.raw or self.unit == LAYER
        return {"x": m * k, "w": k * n, "a": k * r, "master": 3 * r * n,
                "y": m * n * (4 if wide else 1),
                "tables": 4 * n * (1 if self.raw else 3 + 2 * self.gelu)}[self.role]


@dataclass(frozen=True)
class Phase:
    """Jobs that run at once (each unit's jobs one after the other) and their transfers."""

    name: str
    jobs: tuple[Job, ...]
    transfers: tuple[Transfer, ...]

    def unit_jobs(self) -> dict[tuple[str, int], list[Job]]:
        """Each busy unit ``(unit, replica)`` and its jobs in order."""
        out: dict[tuple[str, int], list[Job]] = {}
        for job in self.jobs:
            out.setdefault((job.unit, job.replica), []).append(job)
        return out


@dataclass(frozen=True)
class Schedule:
    """The phases of one step on ``accel`` for ``shape`` with the adapter ``mapping``
    (module docstring)."""

    shape: object
    accel: object
    first_adapted: int
    phases: tuple[Phase, ...]
    mapping: str = "split"
    attention: str = "host"
    nonlinear: str = "float"

    @property
    def gelu(self) -> bool:
        """ffn_in's jobs are the GELU engines' GELU jobs (module docstring)."""
        return self.nonlinear == "integer" and self.accel.gelu_engines > 0

    @property
    def softmax(self) -> bool:
        """The softmax runs on the softmax units (module docstring)."""
        return (self.nonlinear == "integer" and self.attention == "engines"
                and self.accel.softmax_units > 0)

    @property
    def linked(self) -> bool:
        """The scores reach the softmax units through the attention links (module
        docstring)."""
        return self.softmax and self.accel.link

    @property
    def jobs(self) -> list[Job]:
        return [job for phase in self.phases for job in phase.jobs]

    @property
    def macs(self) -> int:
        """Every job's MACs (padding included: tokens to the layer's C, N and r to R)."""
        return sum(job.macs for job in self.jobs)

    @property
    def transfers(self) -> list[Transfer]:
        return [t for phase in self.phases for t in phase.transfers]

    def bytes_of(self, role: str) -> int:
        """Payload bytes of one role over the step (``w``: the frozen weights read)."""
        return sum(t.payload_bytes for t in self.transfers if t.role == role)


def _chunks(total: int, most: int, unit: int = 1) -> list[int]:
    """``total`` rows in the fewest equal chunks of at most ``most`` (multiples of
    ``unit``, the last one the rest)."""
    count = _ceil(total, most)
    size = _ceil(_ceil(total, count), unit) * unit
    return [min(size, total - i * size) for i in range(count) if total > i * size]


def _slices(n: int, units: int, most: int, unit: int = 1) -> list[int]:
    """``n`` columns split across ``units``: slices of ``ceil(n/units)`` rounded up to
    ``unit``, at most ``most``, the last one the rest."""
    width = min(most, _ceil(_ceil(n, units), unit) * unit)
    return [min(width, n - i * width) for i in range(_ceil(n, width))]


class _Builder:
    def __init__(self, shape, accel, first_adapted: int):
        self.shape, self.accel, self.first = shape, accel, first_adapted
        self.branches = 2 * shape.queries
        self.engine, self.layer = accel.engine_config(), accel.layer_config()
        self.phases: list[Phase] = []
        self.jobs: list[Job] = []
        self.transfers: list[Transfer] = []
        self.adapters: list[tuple[str, int, int]] = []       # name, K, N

    def close(self, name: str) -> None:
        if self.jobs:
            self.phases.append(Phase(name, tuple(self.jobs), tuple(self.transfers)))
        self.jobs, self.transfers = [], []

    @property
    def rank(self) -> int:
        """The adapters' rank as the layers take it: padded to the layer's R rows."""
        return _ceil(self.shape.rank, self.layer.rows) * self.layer.rows

    def engine_map(self, name: str, m: int, k: int, n: int, branches: int,
                   raw: bool = False, gelu: bool = False) -> None:
        """An engine map, its N split across the engines (``gelu``: a GELU map, across the
        GELU engines only)."""
        e = self.engine
        if k > e.max_k:
            raise ConfigError("engine_max_k", f"at least {k} ({name}'s K)", e.max_k)
        units = self.accel.gelu_engines if gelu else self.accel.engines
        slices = _slices(n, units, e.max_n)
        kind = "gemm-raw" if raw else "gemm-gelu" if gelu else "gemm"
        row = 0
        for rows in _chunks(m, e.max_m):
            for first in range(0, len(slices), units):   # X to the engines of a round
                self.transfers.append(Transfer(f"{name}.x", "x", ENGINE, rows, k, 0,
                                               receivers=len(slices[first:first + units])))
            for j, cols in enumerate(slices):
                replica = j % units
                self.jobs.append(Job(ENGINE, replica, kind, rows, k, cols, 0, branches, name,
                                     rows=(row, row + rows)))
                self.transfers += [
                    Transfer(f"{name}.w", "w", ENGINE, rows, k, cols, gelu=gelu),
                    Transfer(f"{name}.tables", "tables", ENGINE, rows, k, cols, raw=raw,
                             gelu=gelu),
                    Transfer(f"{name}.y", "y", ENGINE, rows, k, cols, raw=raw, write=True,
                             gelu=gelu)]
            row += rows

    def attention_jobs(self, name: str, count: int, m: int, k: int, n: int,
                       branches: int, linked: bool = False) -> list[tuple[int, int, int]]:
        """``count`` separate raw jobs ``m x k x n`` (each its own X and W), job i on engine
        ``i mod engines``; M beyond ``max_m`` in chunks (``linked``: beyond the link's
        ``link_max_rows`` too, and S not written to DDR: the link takes it), N beyond
        ``max_n`` in slices. Job i is sequence ``i // heads`` (branch-major) and head ``i mod
        heads``; with ``branches`` > 1 its M rows are that sequence's in each branch, one
        after the other (a job's ``rows`` then run from its first row's branch to its
        last's). Returns each chunk's ``(job, first row, rows)``."""
        e = self.engine
        if k > e.max_k:
            raise ConfigError("engine_max_k", f"at least {k} ({name}'s K)", e.max_k)
        most = min(e.max_m, self.accel.link_max_rows) if linked else e.max_m
        if linked:
            for field_, have in (("engine_max_n", e.max_n),
                                 ("link_max_len", self.accel.link_max_len)):
                if n > have:
                    raise ConfigError(field_, f"at least {n} with link ({name}'s rows of "
                                      "L keys: one frame a chunk)", have)
        chunks = []
        for i in range(count):
            row = 0
            for rows in _chunks(m, most):
                self.transfers.append(Transfer(f"{name}.x", "x", ENGINE, rows, k, 0))
                span = self.span(i, row, rows)
                chunks.append((i, row, rows))
                row += rows
                for cols in _slices(n, 1, e.max_n):
                    self.jobs.append(Job(ENGINE, i % self.accel.engines, "gemm-raw", rows, k,
                                         cols, 0, branches, name, rows=span))
                    self.transfers += [
                        Transfer(f"{name}.w", "w", ENGINE, rows, k, cols),
                        Transfer(f"{name}.tables", "tables", ENGINE, rows, k, cols, raw=True)]
                    if not linked:
                        self.transfers.append(Transfer(f"{name}.y", "y", ENGINE, rows, k,
                                                       cols, raw=True, write=True))
        return chunks

    def span(self, i: int, row: int, rows: int) -> tuple[int, int]:
        """The forward's rows ``(first, end)`` of attention job ``i``'s rows ``row`` ..
        ``row + rows - 1`` (:meth:`attention_jobs`)."""
        L, tokens = self.shape.seq_len, self.shape.tokens

        def at(row: int) -> int:
            return (row // L) * tokens + (i // self.shape.heads) * L + row % L
        return at(row), at(row + rows - 1) + 1

    def softmax_jobs(self, name: str, chunks: list[tuple[int, int, int]], branches: int,
                     linked: bool = False) -> None:
        """Per scores chunk (``(job, first row, rows)``, as :meth:`attention_jobs` returns
        them) one softmax job of its rows of L keys: on softmax unit ``job mod
        softmax_units``, its int32 scores read from DDR, or (``linked``) on the unit the
        job's engine's link feeds, its scores from the link; its int8 P written."""
        L, accel = self.shape.seq_len, self.accel
        if L > accel.softmax_max_len:
            raise ConfigError("softmax_max_len", f"at least {L} (seq_len: {name}'s rows)",
                              accel.softmax_max_len)
        for i, row, rows in chunks:
            unit = accel.link_unit(i % accel.engines) if linked else i % accel.softmax_units
            self.jobs.append(Job(SOFTMAX, unit, "softmax", rows, L, L, 0, branches, name,
                                 rows=self.span(i, row, rows)))
            if not linked:
                self.transfers.append(Transfer(f"{name}.x", "x", SOFTMAX, rows, L, L,
                                               raw=True))
            self.transfers.append(Transfer(f"{name}.y", "y", SOFTMAX, rows, L, L, write=True))

    def layer_map(self, name: str, k: int, n: int, shared: bool, zero_w: bool = False
                  ) -> None:
        """An adapter on the layers; ``zero_w``: the split mapping's narrow adapter (W' = 0:
        no ``load_w``, no ``frozen_w``, its branches with the flag)."""
        cfg, shape = self.layer, self.shape
        if cfg.mode != "lora-fa":
            raise ConfigError("layer_mode", "lora-fa (the step trains LoRA-FA adapters)",
                              cfg.mode)
        R, C = cfg.rows, cfg.cols
        r = self.rank                                      # the host pads the rank to R
        tokens = _ceil(shape.tokens, C) * C                # and the tokens to C
        for field_, need, have in (("layer_max_k", k, cfg.max_k), ("layer_max_r", r,
                                                                    cfg.max_r)):
            if need > have:
                raise ConfigError(field_, f"at least {need} ({name})", have)
        slices = _slices(_ceil(n, R) * R, self.accel.layers, cfg.max_n, R)
        chunks = _chunks(tokens, cfg.max_m, C)
        units = self.accel.layers
        # the forward's X loads: once for a shared input, per branch otherwise. A narrow
        # adapter's state (A, the master: a few hundred words) is loaded again with each
        # load group, so each group is a piece of its own that carries no state and the
        # driver may interleave it with other phases' pieces (reports/overlap.py); a whole
        # adapter's (W' too) once per slice, before its groups (the phase runs alone).
        # A and each X go to the layers of a round of slices
        loads = [(None, rows) for rows in chunks] if shared else \
            [(b, rows) for b in range(self.branches) for rows in chunks]
        for first in range(0, len(slices), units):
            receivers = len(slices[first:first + units])
            for group in loads if zero_w else loads[:1]:
                self.transfers.append(Transfer(f"{name}.a", "a", LAYER, 0, k, 0, r,
                                               receivers=receivers))
            self.transfers += [Transfer(f"{name}.x", "x", LAYER, rows, k, 0, r,
                                        receivers=receivers) for _, rows in loads]
        # a narrow adapter (zero_w) neither loads W' nor computes X'·W'
        loaded, frozen = (("load_a", "load_master"), ("load_x", "frozen_a")) if zero_w else \
            (("load_w", "load_a", "load_master"), ("load_x", "frozen_w", "frozen_a"))
        for j, cols in enumerate(slices):
            replica = j % self.accel.layers

            def job(kind, rows=C, query=0, replica=replica, cols=cols, at=None):
                self.jobs.append(Job(LAYER, replica, kind, rows, k, cols, r, 1, name, query,
                                     at))

            def load(at=None) -> None:
                for kind in loaded:
                    job(kind, at=at)
                if not zero_w:
                    self.transfers.append(Transfer(f"{name}.w", "w", LAYER, 0, k, cols, r))
                self.transfers.append(Transfer(f"{name}.master", "master", LAYER, 0, k, cols,
                                               r))

            if not zero_w:
                load()
            next_row = dict.fromkeys(range(-1, self.branches), 0)   # per branch (-1: shared)
            for b, rows in loads:
                start = next_row[-1 if b is None else b]
                next_row[-1 if b is None else b] += rows
                end = min(start + rows, shape.tokens)
                at = (start + (b or 0) * shape.tokens, end + (b or 0) * shape.tokens)
                if zero_w:
                    load(at)
                for kind in frozen:
                    job(kind, rows, at=at)
                for branch in (range(self.branches) if b is None else (b,)):
                    job("branch", rows, at=(start + branch * shape.tokens,
                                            end + branch * shape.tokens))
                    self.transfers.append(Transfer(f"{name}.y", "y", LAYER, rows, k, cols, r,
                                                   write=True))
        self.adapters.append((name, k, _ceil(n, R) * R))

    def updates(self) -> None:
        cfg, R = self.layer, self.layer.rows
        r = self.rank
        for query in range(self.shape.queries):
            for name, k, n in self.adapters:
                for j, cols in enumerate(_slices(n, self.accel.layers, cfg.max_n, R)):
                    for kind in ("load_master", "accumulate", "apply", "read_master"):
                        self.jobs.append(Job(LAYER, j % self.accel.layers, kind, cfg.cols, k,
                                             cols, r, 1, name))
                    self.transfers += [
                        Transfer(f"{name}.master", "master", LAYER, 0, k, cols, r),
                        Transfer(f"{name}.master", "master", LAYER, 0, k, cols, r,
                                 write=True)]
        self.close("update")


def step_schedule(shape, accel, first_adapted: int = 0, mapping: str = "split",
                  attention: str = "host", nonlinear: str = "float") -> Schedule:
    """The step of ``shape`` (a ``ModelShape``) on ``accel`` (an ``AcceleratorConfig``),
    adapters on blocks ``first_adapted`` and above, their maps run as ``mapping`` (one of
    :data:`MAPPINGS`), Q·K^T and P·V on the host or the engines (``attention``, one of
    :data:`~zoforge.golden.finetune.config.ATTENTIONS`), softmax and GELU in float on the
    host or on the accelerator's nonlinear units where it has them (``nonlinear``, one of
    :data:`~zoforge.golden.finetune.config.NONLINEARS`; module docstring). A map that does
    not fit a unit is a ConfigError naming the accelerator's field."""
    check_int_range("first_adapted", first_adapted, 0, shape.blocks - 1)
    check_choice("mapping", mapping, MAPPINGS)
    check_choice("attention", attention, ATTENTIONS)
    check_choice("nonlinear", nonlinear, NONLINEARS)
    gelu = Schedule(shape, accel, first_adapted, (), mapping, attention, nonlinear).gelu
    build = _Builder(shape, accel, first_adapted)
    h, f, S = shape.hidden, shape.ffn, build.branches
    adapted = ADAPTED_ORDER[:shape.adapted]
    groups = (("qkv", ("query", "key", "value")), ("attn_out", ("attn_out",)),
              ("ffn_in", ("ffn_in",)), ("ffn_out", ("ffn_out",)))
    inputs = dict(BLOCK_MAPS)
    for block in range(shape.blocks):
        for group, maps in groups:
            # each map: name, K, N, shared (its input the same for every branch), adapted
            specs = [(f"block{block}.{map_}", f if map_ == "ffn_out" else h,
                      f if map_ == "ffn_in" else h,
                      block < first_adapted or (block == first_adapted
                                                and inputs[map_] == "x"),
                      block >= first_adapted and map_ in adapted) for map_ in maps]
            if mapping == "split":          # U = requant(X.A) first: the layers take it
                for name, k, n, shared, lora in specs:
                    if lora:
                        rows = shape.tokens if shared else S * shape.tokens
                        build.engine_map(name, rows, k, build.rank, 1 if shared else S)
                build.close(f"block{block}.{group}.u")
            for name, k, n, shared, lora in specs:
                rows = shape.tokens if shared else S * shape.tokens
                if lora and mapping == "layer":
                    build.layer_map(name, k, n, shared)
                    continue
                build.engine_map(name, rows, k, n, 1 if shared else S, raw=lora,
                                 gelu=gelu and name.endswith(".ffn_in"))
                if lora:
                    build.layer_map(name, build.rank, n, shared, zero_w=True)
            build.close(f"block{block}.{group}")
            if group == "qkv" and attention == "engines":
                _attention(build, block, adapted, nonlinear == "integer"
                           and accel.softmax_units > 0)
    build.engine_map("head", S * shape.batch, h, shape.classes, S, raw=True)
    build.close("head")
    build.updates()
    return Schedule(shape, accel, first_adapted, tuple(build.phases), mapping, attention,
                    nonlinear)


def _attention(build: _Builder, block: int, adapted: tuple[str, ...], softmax: bool) -> None:
    """Block ``block``'s Q·K^T and P·V phases (module docstring): per sequence and head, one
    job if X and W are the same for every branch, one of the branches concatenated along M
    if only W is, else one per branch; with ``softmax`` the softmax units' phase between
    them, one job per Q·K^T chunk (through the links where the accelerator has them)."""
    shape, S = build.shape, build.branches
    L, d = shape.seq_len, shape.hidden // shape.heads
    heads = shape.batch * shape.heads
    linked = softmax and build.accel.link

    def shared(map_: str) -> bool:       # the map's output the same for every branch
        return block < build.first or (block == build.first and map_ not in adapted)
    q, k, v = (shared(map_) for map_ in ("query", "key", "value"))
    for name, x_shared, w_shared, (m, depth, n) in zip(
            (f"block{block}.{p}" for p in ATTENTION_PRODUCTS), (q, q and k), (k, v),
            ((L, d, L), (L, L, d))):
        if x_shared and w_shared:
            jobs = (heads, m, 1)
        elif w_shared:
            jobs = (heads, S * m, S)
        else:
            jobs = (S * heads, m, 1)
        scores = softmax and name.endswith(".scores")
        chunks = build.attention_jobs(name, jobs[0], jobs[1], depth, n, jobs[2],
                                      linked and scores)
        build.close(name)
        if scores:
            build.softmax_jobs(f"block{block}.softmax", chunks, jobs[2], linked)
            build.close(f"block{block}.softmax")
