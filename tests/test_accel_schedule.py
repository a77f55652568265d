"""The accelerator's step schedule (hw/accel/schedule.py), both adapter mappings (split:
X·W and U on the engines, the ZO layers K = r with no load_w or frozen_w; layer: all on the
ZO layers): MACs and weight bytes counted by hand, every job a job the RTL units run and
within their capacities, the U phase before the layers' jobs that take U, the column slices
covering every map, and the two rewrites it relies on (branches concatenated along M, output
columns split) value by value on the golden engine."""
import pytest
import torch

from zoforge.errors import ConfigError
from zoforge.golden.engine import engine_gemm, quantize_multiplier
from zoforge.hw.accel.config import AcceleratorConfig
from zoforge.hw.accel.schedule import step_schedule
from zoforge.hw.zolayer.registers import JOBS
from zoforge.reports.model_shape import ModelShape

H, F, B, L, R, Q, BLOCKS, CLASSES = 16, 32, 2, 8, 4, 2, 3, 2
SHAPE = ModelShape(blocks=BLOCKS, seq_len=L, batch=B, rank=R, adapted=2, queries=Q,
                   hidden=H, ffn=F, heads=2, classes=CLASSES)
M, S = B * L, 2 * Q


def accel(**change):
    fields = dict(engines=3, engine_rows=4, engine_cols=4, engine_max_m=S * M,
                  engine_max_k=F, engine_max_n=64, layers=2, layer_rows=4, layer_cols=4,
                  layer_max_m=M, layer_max_k=H, layer_max_n=16, layer_max_r=R)
    fields.update(change)
    return AcceleratorConfig(**fields)


def hand_macs(first: int, mapping: str) -> int:
    """Linear MACs of the step, counted per map: M x K x N, branches counted."""
    plain_block = M * (4 * H * H + 2 * H * F)
    if mapping == "layer":
        # frozen X.W, and X.A on each of the 2 layers holding a column slice (each needs
        # all of U = X.A for its columns: computed twice)
        adapter = M * H * H + 2 * M * H * R
    else:
        # engines: X.W and U = X.A once; layers (K = r): frozen_a U.I_r on each of the 2
        # layers, no frozen_w (W' = 0: the branches' zero_w flag)
        adapter = M * H * H + M * H * R + 2 * M * R * R
    total = first * plain_block                      # below the first adapted block: once
    # the first adapted block: key once; query/value frozen products once, S branches
    total += M * H * H + 2 * adapter + 2 * S * M * R * H
    total += S * M * (H * H + 2 * H * F)             # attn_out, ffn_in, ffn_out per branch
    later = BLOCKS - first - 1
    total += later * S * (2 * (adapter + M * R * H) + M * (2 * H * H + 2 * H * F))
    return total + S * B * H * CLASSES              # the head


@pytest.mark.parametrize("mapping", ["split", "layer"])
@pytest.mark.parametrize("first", [0, 1, 2])
def test_macs_are_the_models_linear_macs(first, mapping):
    assert step_schedule(SHAPE, accel(), first, mapping).macs == hand_macs(first, mapping)


def test_default_mapping_is_split():
    assert step_schedule(SHAPE, accel()).mapping == "split"
    assert step_schedule(SHAPE, accel()).macs == hand_macs(0, "split")


@pytest.mark.parametrize("mapping", ["split", "layer"])
def test_weights_read_once_per_step_and_per_chunk_when_m_does_not_fit(mapping):
    weights = BLOCKS * (4 * H * H + 2 * H * F) + H * CLASSES   # int8, each map once
    adapted = 2 * BLOCKS
    if mapping == "split":   # A (H x R) to the engines; W' = 0 is not loaded
        weights += adapted * H * R
    assert step_schedule(SHAPE, accel(), 0, mapping).bytes_of("w") == weights
    # half the rows per engine job: every engine map on S x M rows reads its W twice (M
    # rows fit: block 0's key, and with split its query/value X.W and A; the head's
    # S x B rows fit)
    if mapping == "layer":
        engine_w = BLOCKS * (2 * H * H + 2 * H * F) - H * H
    else:
        engine_w = BLOCKS * (4 * H * H + 2 * H * F) - 3 * H * H + (BLOCKS - 1) * 2 * H * R
    halved = step_schedule(SHAPE, accel(engine_max_m=S * M // 2), 0, mapping).bytes_of("w")
    assert halved == weights + engine_w


@pytest.mark.parametrize("mapping", ["split", "layer"])
def test_every_job_is_an_rtl_job_within_its_unit(mapping):
    config = accel()
    engine, layer = config.engine_config(), config.layer_config()
    for job in step_schedule(SHAPE, config, 1, mapping).jobs:
        if job.unit == "engine":
            assert job.kind in ("gemm", "gemm-raw")
            assert (job.m, job.k, job.n) <= (engine.max_m, engine.max_k, engine.max_n) \
                and job.m <= engine.max_m and job.n <= engine.max_n
            assert job.replica < config.engines
        else:
            assert job.kind in JOBS and job.replica < config.layers
            assert job.m <= layer.max_m and job.k <= layer.max_k and job.n <= layer.max_n
            assert job.m % layer.cols == 0 and job.n % layer.rows == 0
            if mapping == "split" and job.kind in ("frozen_w", "frozen_a", "branch"):
                assert job.k == job.r == R                       # the narrow adapter
            if mapping == "split":                               # W' = 0: no X'.W'
                assert job.kind not in ("load_w", "frozen_w")


def test_split_u_phase_comes_before_the_layers_that_take_it():
    """Each adapted group's U = requant(X.A) jobs (int8 engine jobs, N = r) form the phase
    just before the group's, which holds the X.W raw engine jobs and the narrow adapters."""
    phases = step_schedule(SHAPE, accel(), 1).phases
    names = [p.name for p in phases]
    for block in (1, 2):
        u = names.index(f"block{block}.qkv.u")
        assert names[u + 1] == f"block{block}.qkv"
        u_jobs = phases[u].jobs
        assert {(j.unit, j.kind, j.k) for j in u_jobs} == {("engine", "gemm", H)}
        assert sum(j.n for j in u_jobs) == 2 * R                 # query and value
        main = phases[u + 1].jobs
        raw = {j.name for j in main if j.kind == "gemm-raw"}
        assert raw == {f"block{block}.query", f"block{block}.value"}
        assert {j.name for j in main if j.unit == "zo-layer"} == raw
    assert "block0.qkv.u" not in names                       # no adapter below first
    assert not any(n.endswith(".u") for n in
                   (p.name for p in step_schedule(SHAPE, accel(), 1, "layer").phases))


@pytest.mark.parametrize("mapping", ["split", "layer"])
def test_slices_cover_each_map_once_per_chunk(mapping):
    schedule = step_schedule(SHAPE, accel(engine_max_m=S * M // 2), 0, mapping)
    sums = {}
    for job in schedule.jobs:
        if job.kind in ("gemm", "gemm-raw", "frozen_w", "frozen_a"):
            key = (job.name, job.kind)
            sums[key] = sums.get(key, 0) + job.n * job.m
    assert sums[("block1.ffn_in", "gemm")] == S * M * F
    assert sums[("block0.key", "gemm")] == M * H                 # shared: once
    assert sums[("block0.query", "frozen_a")] == M * H            # shared: once
    assert sums[("block1.query", "frozen_a")] == S * M * H        # per branch
    assert sums[("head", "gemm-raw")] == S * B * CLASSES
    # the layer mapping's X.W on the layers; the split mapping's on the engines
    frozen_w = {key: total for key, total in sums.items() if key[1] == "frozen_w"}
    if mapping == "layer":
        assert frozen_w[("block0.query", "frozen_w")] == M * H
        assert frozen_w[("block1.query", "frozen_w")] == S * M * H
    else:
        assert frozen_w == {}
    if mapping == "split":                    # X.W raw, U (N = r) int8, on the engines
        assert sums[("block0.query", "gemm-raw")] == M * H
        assert sums[("block0.query", "gemm")] == M * R
        assert sums[("block1.value", "gemm-raw")] == S * M * H
        assert sums[("block1.value", "gemm")] == S * M * R
    else:
        assert ("block1.value", "gemm-raw") not in sums


@pytest.mark.parametrize("mapping", ["split", "layer"])
def test_update_walks_and_branch_jobs_counted(mapping):
    jobs = step_schedule(SHAPE, accel(), 0, mapping).jobs
    slices = 2                     # 16 columns on 2 layers: 8 each
    adapters = 2 * BLOCKS
    assert sum(j.kind == "apply" for j in jobs) == Q * adapters * slices
    assert sum(j.kind == "branch" for j in jobs) == S * adapters * slices
    # split: the narrow adapter's A and master loaded with each load group (block 0's
    # shared input one, each later block's S branches); layer: once per adapter and slice
    groups = 2 * (1 + (BLOCKS - 1) * S) if mapping == "split" else adapters
    assert sum(j.kind == "load_a" for j in jobs) == groups * slices
    assert sum(j.kind == "load_master" for j in jobs) == groups * slices + Q * adapters * slices
    # W' = 0 of the split mapping's narrow adapters is neither loaded nor multiplied
    loads_w = 0 if mapping == "split" else adapters * slices
    assert sum(j.kind == "load_w" for j in jobs) == loads_w
    frozen_w = sum(j.kind == "frozen_w" for j in jobs)
    assert frozen_w == (0 if mapping == "split" else sum(j.kind == "frozen_a" for j in jobs))


def _int8(*shape, seed):
    g = torch.Generator().manual_seed(seed)
    t = torch.randint(-128, 128, shape, generator=g, dtype=torch.int64)
    t.view(-1)[:2] = torch.tensor([-128, 127])        # both ends present
    return t


def test_branches_along_m_and_column_split_leave_every_value_unchanged():
    w, bias = _int8(H, 10, seed=1), _int8(10, seed=2) * 1000
    params = quantize_multiplier(torch.linspace(0.001, 0.02, 10, dtype=torch.float64))
    xs = [_int8(M, H, seed=3 + i) for i in range(S)]
    whole = engine_gemm(torch.cat(xs), w, bias, params)
    separate = torch.cat([engine_gemm(x, w, bias, params) for x in xs])
    assert torch.equal(whole, separate)
    split = [(0, 4), (4, 8), (8, 10)]
    cols = torch.cat([engine_gemm(xs[0], w[:, a:b], bias[a:b],
                                  type(params)(params.multiplier[a:b], params.shift[a:b]))
                      for a, b in split], dim=1)
    assert torch.equal(cols, engine_gemm(xs[0], w, bias, params))
    raw = torch.cat([engine_gemm(xs[1], w[:, a:b], bias[a:b]) for a, b in split], dim=1)
    assert torch.equal(raw, engine_gemm(xs[1], w, bias))


@pytest.mark.parametrize("change, field, mapping", [
    ({"engine_max_k": 16}, "engine_max_k", "split"),          # ffn_out's K = 32
    ({"engine_max_k": 16}, "engine_max_k", "layer"),
    ({"layer_max_k": 8}, "layer_max_k", "layer"),             # the adapters' K = 16
    ({"layer_max_k": 2}, "layer_max_k", "split"),             # the narrow K = r = 4
    ({"layer_max_r": 4, "layer_rows": 2, "layer_max_n": 16}, None, "split"),   # control
    ({"layer_max_r": 4, "layer_rows": 2, "layer_max_n": 16}, None, "layer"),
])
def test_a_map_that_does_not_fit_names_the_field(change, field, mapping):
    if field is None:
        step_schedule(SHAPE, accel(**change), 0, mapping)
        return
    with pytest.raises(ConfigError) as error:
        step_schedule(SHAPE, accel(**change), 0, mapping)
    assert str(error.value).startswith(field) and "\n" not in str(error.value)


def test_first_adapted_out_of_range():
    with pytest.raises(ConfigError, match="first_adapted"):
        step_schedule(SHAPE, accel(), BLOCKS)


def test_unknown_mapping_is_one_line():
    with pytest.raises(ConfigError) as error:
        step_schedule(SHAPE, accel(), 0, "engine")
    assert str(error.value).startswith("mapping") and "\n" not in str(error.value)


def test_split_layer_k_is_the_rank_so_a_small_layer_max_k_fits():
    """The split mapping's layers need K = r only: layer_max_k 4 fits it (and the layer
    mapping names the field)."""
    step_schedule(SHAPE, accel(layer_max_k=R))
    with pytest.raises(ConfigError, match="^layer_max_k"):
        step_schedule(SHAPE, accel(layer_max_k=R), 0, "layer")


# -- Q.K^T and P.V on the engines (attention "engines") -----------------------------------------

def hand_attention(first: int) -> tuple[int, int]:
    """MACs and packed DDR bytes of the attention jobs, counted per job by hand: per sequence
    and head (B x heads = 4) Q.K^T L x d x L and P.V L x L x d; a block below ``first``
    once, the first adapted block's Q.K^T once on the S branches' rows (K^T shared: key has
    no adapter), everything else per branch. Bytes per job: X, W int8, 4 bytes of bias per
    column, the int32 result."""
    d, jobs = H // 2, B * 2

    def job_bytes(m, k, n):
        return m * k + k * n + 4 * n + 4 * m * n
    macs = nbytes = 0
    for block in range(BLOCKS):
        runs = 1 if block < first else S
        score_rows = S * L if block == first else L
        score_jobs = jobs if block <= first else S * jobs
        macs += score_jobs * score_rows * d * L + runs * jobs * L * L * d
        nbytes += score_jobs * job_bytes(score_rows, d, L) + runs * jobs * job_bytes(L, L, d)
    return macs, nbytes


@pytest.mark.parametrize("first", [0, 1, 2])
def test_engine_attention_jobs_phases_and_bytes(first):
    host = step_schedule(SHAPE, accel(), first)
    sched = step_schedule(SHAPE, accel(), first, attention="engines")
    macs, nbytes = hand_attention(first)
    assert host.attention == "host" and sched.attention == "engines"
    assert sched.macs == hand_macs(first, "split") + macs
    names = [p.name for p in sched.phases]
    for block in range(BLOCKS):
        at = names.index(f"block{block}.qkv")
        assert names[at + 1:at + 4] == [f"block{block}.scores", f"block{block}.context",
                                        f"block{block}.attn_out"]
    added = [p for p in sched.phases if p.name.endswith((".scores", ".context"))]
    assert [p.name for p in sched.phases if p not in added] == [p.name for p in host.phases]
    assert sum(t.payload_bytes for p in added for t in p.transfers) == nbytes
    assert all(j.kind == "gemm-raw" and j.unit == "engine" for p in added for j in p.jobs)
    for p in added:                                    # whole jobs, spread over the engines
        replicas = [j.replica for j in p.jobs]
        assert replicas == [i % 3 for i in range(len(p.jobs))]
    scores = next(p for p in added if p.name == f"block{first}.scores")
    assert {(j.m, j.branches) for j in scores.jobs} == {(S * L, S)}


def test_engine_attention_key_adapted_keeps_branches_apart():
    """With key adapted too (adapted = 3), K^T differs per branch: no M concatenation."""
    shape = ModelShape(blocks=1, seq_len=L, batch=B, rank=R, adapted=3, queries=Q, hidden=H,
                       ffn=F, heads=2, classes=CLASSES)
    sched = step_schedule(shape, accel(), 0, attention="engines")
    scores = next(p for p in sched.phases if p.name == "block0.scores")
    assert len(scores.jobs) == S * B * 2 and {(j.m, j.branches) for j in scores.jobs} == \
        {(L, 1)}


def test_engine_attention_that_does_not_fit_names_the_field():
    with pytest.raises(ConfigError) as error:        # P.V's K = L = 8
        step_schedule(SHAPE, accel(engine_max_k=7), attention="engines")
    assert error.value.parameter == "engine_max_k"
    with pytest.raises(ConfigError) as error:
        step_schedule(SHAPE, accel(), attention="fabric")
    assert error.value.parameter == "attention" and "host, engines" in str(error.value)


def test_job_rows_are_the_forwards_rows():
    """Each job's ``rows`` (the overlap's pieces): an engine map's chunks one after the
    other (half the rows a chunk: 0-32, 32-64 of S x M = 64), the ZO layer's per branch
    (branch b at b x M), a shared map branch 0's; attention job i is sequence i // heads
    (branch-major), and a job of the S branches' rows of one sequence runs from its first
    branch's row to its last's; the split mapping's loads their group's rows; the layer
    mapping's loads and the walks read no forward row."""
    sched = step_schedule(SHAPE, accel(engine_max_m=S * M // 2), 1, attention="engines")
    jobs = {}
    for job in sched.jobs:
        jobs.setdefault((job.name, job.kind, job.replica), []).append(job.rows)
    assert jobs["block2.ffn_in", "gemm", 0] == [(0, 32), (32, 64)]
    assert jobs["block1.key", "gemm", 0] == [(0, 16)]                  # shared: M rows
    assert jobs["block1.query", "branch", 0] == [(b * M, b * M + M) for b in range(S)]
    assert jobs["block2.query", "frozen_a", 0] == [(b * M, b * M + M) for b in range(S)]
    # the narrow adapters' loads with each load group (block 1's input shared: one); the
    # layer mapping's once per slice, reading no row
    assert jobs["block1.query", "load_a", 0] == [(0, M)]
    assert jobs["block2.value", "load_master", 0] == [(b * M, b * M + M) for b in range(S)] \
        + [None] * Q                                                 # the update walks
    layer = step_schedule(SHAPE, accel(engine_max_m=S * M // 2), 1, "layer").jobs
    assert [j.rows for j in layer if (j.name, j.kind, j.replica) ==
            ("block2.query", "load_w", 0)] == [None]
    assert all(rows is None for name, kind, _ in jobs if kind == "accumulate"
               for rows in jobs[name, kind, _])
    context = [j for p in sched.phases if p.name == "block2.context" for j in p.jobs]
    assert [j.rows for j in context] == [((i // 2) * L, (i // 2) * L + L)
                                         for i in range(S * B * 2)]
    # block 1 (first adapted), key not adapted: Q.K^T of one sequence and head over the
    # S = 4 branches' rows, 32 rows (all of them) in one chunk; sequence 1 from row 8 of
    # branch 0 to row 8 + 8 of branch 3
    scores = [j for p in sched.phases if p.name == "block1.scores" for j in p.jobs]
    assert [j.rows for j in scores] == [(0, 3 * M + L), (0, 3 * M + L),
                                        (L, 3 * M + 2 * L), (L, 3 * M + 2 * L)]


def test_float_nonlinear_keeps_every_job_on_a_design_with_nonlinear_units():
    plain = step_schedule(SHAPE, accel(), 1, attention="engines")
    units = accel(gelu_engines=2, softmax_units=2)
    for nonlinear in ("float",):
        sched = step_schedule(SHAPE, units, 1, attention="engines", nonlinear=nonlinear)
        assert not sched.gelu and not sched.softmax
        assert [(p.name, [(j.kind, j.replica, j.m, j.k, j.n) for j in p.jobs])
                for p in sched.phases] == [(p.name, [(j.kind, j.replica, j.m, j.k, j.n)
                                                     for j in p.jobs]) for p in plain.phases]
    with pytest.raises(ConfigError) as error:
        step_schedule(SHAPE, units, nonlinear="fixed")
    assert error.value.parameter == "nonlinear" and "float, integer" in str(error.value)


@pytest.mark.parametrize("gelu", [1, 2, 3])
def test_integer_ffn_in_runs_as_gelu_jobs_on_the_gelu_engines_only(gelu):
    """nonlinear integer, ``gelu`` GELU engines of 3: every ffn_in job a ``gemm-gelu`` job on
    engines 0 .. gelu - 1, its F = 32 columns split in ceil(32 / gelu) slices (at most
    max_n 64), the MACs the model's; its tables 4 bytes x 5 a column (bias, multiplier,
    shift, and the second requantizer's multiplier and shift); no other map changes."""
    sched = step_schedule(SHAPE, accel(gelu_engines=gelu), 1, nonlinear="integer")
    plain = step_schedule(SHAPE, accel(gelu_engines=gelu), 1)
    assert sched.gelu and not sched.softmax and sched.macs == hand_macs(1, "split")
    for block in range(BLOCKS):
        phase = next(p for p in sched.phases if p.name == f"block{block}.ffn_in")
        width = -(-F // gelu)
        assert [(j.kind, j.replica, j.n) for j in phase.jobs] == [
            ("gemm-gelu", i, min(width, F - i * width)) for i in range(-(-F // width))]
        tables = [t for t in phase.transfers if t.role == "tables"]
        assert sum(t.payload_bytes for t in tables) == 4 * F * 5
    others = [(j.name, j.kind, j.replica) for j in sched.jobs if not j.name.endswith("ffn_in")]
    assert others == [(j.name, j.kind, j.replica) for j in plain.jobs
                      if not j.name.endswith("ffn_in")]


def test_softmax_units_phase_between_scores_and_context():
    """nonlinear integer, attention engines, 2 softmax units: ``blockN.softmax`` after each
    ``blockN.scores``, one job per scores job (its M rows of L keys, the same rows), job i
    on unit i mod 2; bytes per job 4 M L in (int32 S) and M L out (int8 P); with the host's
    attention, or without units, no such phase."""
    sched = step_schedule(SHAPE, accel(softmax_units=2), 1, attention="engines",
                          nonlinear="integer")
    assert sched.softmax and not sched.gelu
    names = [p.name for p in sched.phases]
    for block in range(BLOCKS):
        at = names.index(f"block{block}.scores")
        assert names[at + 1:at + 3] == [f"block{block}.softmax", f"block{block}.context"]
        scores, softmax = sched.phases[at], sched.phases[at + 1]
        assert [(j.unit, j.kind, j.replica, j.m, j.n, j.rows) for j in softmax.jobs] == [
            ("softmax", "softmax", i % 2, j.m, L, j.rows) for i, j in enumerate(scores.jobs)]
        assert sum(t.payload_bytes for t in softmax.transfers) == sum(
            5 * j.m * L for j in scores.jobs)
        assert softmax.jobs[0].macs == 0
    # block 0 shared (first adapted 1): 4 jobs of L rows; block 1 (key not adapted): 4 jobs
    # of the S branches' rows; block 2: S x 4 jobs of L rows
    counts = [(len(p.jobs), p.jobs[0].m) for p in sched.phases if p.name.endswith("softmax")]
    assert counts == [(B * 2, L), (B * 2, S * L), (S * B * 2, L)]
    for units, attention in ((0, "engines"), (2, "host")):
        other = step_schedule(SHAPE, accel(softmax_units=units), 1, attention=attention,
                              nonlinear="integer")
        assert not other.softmax and not any(p.name.endswith("softmax") for p in other.phases)
    with pytest.raises(ConfigError) as error:
        step_schedule(SHAPE, accel(softmax_units=1, softmax_max_len=L - 1), 1,
                      attention="engines", nonlinear="integer")
    assert error.value.parameter == "softmax_max_len" and "\n" not in str(error.value)


def test_linked_scores_stream_to_the_softmax_unit_their_engines_link_feeds():
    """With ``link`` (hw/accel/config.py): the scores jobs in chunks of at most
    ``link_max_rows`` rows, one softmax job per chunk (the same rows) on the unit the
    chunk's engine's link feeds (engine e -> unit e mod 2; 3 engines, so job 3 on engine 0
    goes to unit 0, not 3 mod 2), no DDR write of S and no DDR read of the softmax's input:
    the DDR bytes are the round trip's 4 M L + 4 M L per chunk fewer than the same chunks
    without the link, counted by hand; the MACs unchanged."""
    linked = accel(softmax_units=2, link=True, link_max_rows=L)
    sched = step_schedule(SHAPE, linked, 1, attention="engines", nonlinear="integer")
    plain = step_schedule(SHAPE, accel(softmax_units=2, engine_max_m=L), 1,
                          attention="engines", nonlinear="integer")
    assert sched.linked and not plain.linked and sched.macs == plain.macs
    names = [p.name for p in sched.phases]
    assert names == [p.name for p in plain.phases]
    round_trip = 0
    for block in range(BLOCKS):
        at = names.index(f"block{block}.scores")
        scores, softmax = sched.phases[at], sched.phases[at + 1]
        assert all(j.m <= L for j in scores.jobs)
        assert [(j.unit, j.replica, j.m, j.k, j.n, j.rows) for j in softmax.jobs] == [
            ("softmax", s.replica % 2, s.m, L, L, s.rows) for s in scores.jobs]
        assert not any(t.write for t in scores.transfers)
        assert {t.role for t in softmax.transfers} == {"y"}
        assert sum(t.payload_bytes for t in softmax.transfers) == sum(
            j.m * L for j in scores.jobs)
        round_trip += sum(8 * j.m * L for j in scores.jobs)
    # block 1 (key not adapted): 4 jobs of the S branches' rows, each in S chunks of L
    assert [len(p.jobs) for p in sched.phases if p.name.endswith("softmax")] == [
        B * 2, B * 2 * S, S * B * 2]
    assert sched.phases[names.index("block1.softmax")].jobs[3].replica == 0    # engine 0
    attention = [i for i, name in enumerate(names) if name.endswith(("scores", "softmax"))]
    assert sum(t.payload_bytes for i in attention for t in plain.phases[i].transfers) - sum(
        t.payload_bytes for i in attention for t in sched.phases[i].transfers) == round_trip
    at_limit = step_schedule(SHAPE, linked.replace(engine_max_n=L, link_max_len=L,
                                                   softmax_max_len=L), 1,
                             attention="engines", nonlinear="integer")
    assert at_limit.linked and all(j.n <= L for j in at_limit.jobs if j.unit == "softmax")
    for change, field in ((dict(engine_max_n=L - 1), "engine_max_n"),
                          (dict(link_max_len=L - 1), "link_max_len")):
        with pytest.raises(ConfigError) as error:
            step_schedule(SHAPE, linked.replace(**change), 1, attention="engines",
                          nonlinear="integer")
        assert error.value.parameter == field and "\n" not in str(error.value)
    # the links only carry the softmax units' input: on the host's softmax, as without them
    floats = step_schedule(SHAPE, linked, 1, attention="engines", nonlinear="float")
    assert not floats.linked and floats.phases == step_schedule(
        SHAPE, linked.replace(link=False), 1, attention="engines", nonlinear="float").phases
