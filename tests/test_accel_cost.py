"""The accelerator's step priced (reports/accel_cost.py): each job's cycles from its unit's
model (worked by hand), a phase's critical path, DDR bytes packed and as streamed, the host's
operation counts (with the split mapping's sums), board_step_fields' keys and arithmetic
at a small shape for both adapter mappings."""
import pytest

from zoforge.errors import ConfigError
from zoforge.golden.finetune.config import FinetuneConfig
from zoforge.hw.accel.config import AcceleratorConfig
from zoforge.hw.accel.schedule import Job, Phase, Transfer, step_schedule
from zoforge.reports.accel_cost import (BOARD_STEP_KEYS, HOST, board_step_fields, host_ops,
                                        job_cycles_of, price_phase, price_schedule,
                                        transfer_bytes)
from zoforge.reports.model_shape import ModelShape

ACCEL = AcceleratorConfig(engines=3, engine_rows=4, engine_cols=4, engine_max_m=64,
                          engine_max_k=32, engine_max_n=64, layers=2, layer_rows=4,
                          layer_cols=4, layer_max_m=16, layer_max_k=16, layer_max_n=16,
                          layer_max_r=4)


def test_job_cycles_worked_by_hand():
    # paired 4x4 engine, pack 2, 16x16x8: 8 beats a panel, 16 k-steps, 4 x 2 tiles at
    # max(16, the skewed drain's max(R/2 + R - 2, R) = 4) = 16 apart but a tile's result
    # bank free for the tile two later only 16 + (3R + C + 5 - R/2 = 19) = 35 after its
    # begin (> 2 x 16): in pairs 35 apart; extra 3R + C + 21 - R/2 = 35: 2 x 8 + 3 x 35 +
    # 16 + 16 + 35 = 188 (the RTL's, 2026-11-27, and with the skewed drain)
    assert job_cycles_of(ACCEL, Job("engine", 0, "gemm", 16, 16, 8)) == 188
    # 4x4 ZO layer frozen_w 16x16x8 (r 4): depth 16, 4 x 2 tiles, spacing max(16, the
    # skewed drain's 2R - 2 = 6, (16 + 4.5 + 12 + 4) / 8 banks = 4.6) = 16, fill 27 + 12 + 4
    # = 43, finish 1: 7 x 16 + 16 + 43 + 1 = 172
    assert job_cycles_of(ACCEL, Job("zo-layer", 0, "frozen_w", 16, 16, 8, 4)) == 172
    # load_w: N/R x K = 32 words + 1, finish 1
    assert job_cycles_of(ACCEL, Job("zo-layer", 1, "load_w", 4, 16, 8, 4)) == 34


def test_phase_is_the_busiest_unit_and_bytes_once():
    jobs = (Job("engine", 0, "gemm", 16, 16, 8), Job("engine", 0, "gemm", 16, 16, 8),
            Job("engine", 1, "gemm", 16, 16, 8), Job("zo-layer", 0, "load_w", 4, 16, 8, 4))
    transfers = (Transfer("x", "x", "engine", 16, 16, 0, receivers=2),
                 Transfer("w", "w", "zo-layer", 0, 16, 8, 4))
    cost = price_phase(ACCEL, Phase("p", jobs, transfers), mhz=100.0, ddr_bytes_per_s=1e6)
    assert cost.cycles == 2 * 188 and cost.unit_cycles[("engine", 1)] == 188
    assert cost.payload_bytes == 16 * 16 + 16 * 8          # X once for both engines
    assert cost.compute_s == pytest.approx(376 / 100e6)
    assert cost.memory_s == pytest.approx(384 / 1e6) and cost.bound == "memory"
    assert cost.time_s == cost.memory_s and cost.macs == 3 * 16 * 16 * 8


@pytest.mark.parametrize("transfer, payload, stream", [
    # engine X 16 x 16: 4 row panels x 8 beats x (pack 2 x 4 lanes) = 256: packed already
    (Transfer("x", "x", "engine", 16, 16, 0), 256, 256),
    # engine int8 Y 16 x 8: 4 x 2 tiles, each tile's 4 rows of 4 int8 packed in one beat of
    # 4 lanes x 4 bytes (hw/engine/packer.py): the payload
    (Transfer("y", "y", "engine", 16, 16, 8, write=True), 128, 128),
    (Transfer("y", "y", "engine", 16, 16, 8, raw=True, write=True), 512, 512),
    # per-column bias, multiplier, shift: 3 x 4 bytes x 8; as written 3 x 2 panels x 4 x 4
    (Transfer("t", "tables", "engine", 16, 16, 8), 96, 96),
    # ZO layer W 16 x 8: 2 panels x 16 words of 4 lanes x 4 bytes, one int8 per lane
    (Transfer("w", "w", "zo-layer", 0, 16, 8, 4), 128, 512),
    # master 4 x 8 at 3 bytes; 2 x 4 words of 16 bytes
    (Transfer("m", "master", "zo-layer", 0, 16, 8, 4), 96, 128),
    # branch Y int32 16 x 8: 4 x 2 tiles x 4 words x 16 bytes
    (Transfer("y", "y", "zo-layer", 16, 16, 8, 4, write=True), 512, 512)])
def test_transfer_bytes_by_hand(transfer, payload, stream):
    assert transfer_bytes(ACCEL, transfer) == (payload, stream)


SHAPE = ModelShape(blocks=3, seq_len=8, batch=2, rank=4, adapted=2, queries=2, hidden=16,
                   ffn=32, heads=2, classes=2)


def test_host_ops_by_hand():
    ops = host_ops(SHAPE, first_adapted=1)
    runs = 1 + 4 * 2                     # block 0 once, blocks 1 and 2 once per branch
    assert ops["attention products"] == runs * 2 * 2 * 8 * 8 * 16
    assert ops["softmax"] == runs * 2 * 2 * 64 * 15
    assert ops["layernorm"] == runs * 2 * 16 * 16 * 5 + 16 * 16 * 5
    assert ops["gelu"] == runs * 16 * 32 * 13
    assert ops["pooling"] == 4 * 16 * 16
    # per block: q, k, v, attn_out 4 x 4 M H; ffn_in 3 M H + M F; ffn_out 3 M F + M H
    assert ops["quantize"] == runs * (16 * 16 * 16 + 4 * 16 * 16 + 4 * 16 * 32) \
        + 4 * 3 * 2 * 16
    # split: wrap32(XW + Yn) per adapted map (2 a block) and branch, blocks 1 and 2
    assert ops["combine"] == 4 * 2 * 2 * 16 * 16
    layer = host_ops(SHAPE, first_adapted=1, mapping="layer")
    assert layer["combine"] == 0 and {k: v for k, v in layer.items() if k != "combine"} \
        == {k: v for k, v in ops.items() if k != "combine"}


def test_board_step_fields_arithmetic():
    cfg = FinetuneConfig(blocks=3, seq_len=8, batch=2, rank=4, queries=2, attention="host",
                         nonlinear="float")      # host attention: the prices derived below
    fields = board_step_fields(cfg, 16, 32, 2, 2, "zcu102", ACCEL, mhz=100.0)
    assert tuple(fields) == BOARD_STEP_KEYS
    price = price_schedule(step_schedule(SHAPE, ACCEL), 100.0, 21.3e9)
    host = sum(host_ops(SHAPE).values()) / (HOST["cores"] * HOST["mhz"] * 1e6 * HOST["lanes"])
    macs = step_schedule(SHAPE, ACCEL).macs
    assert fields["cycles_per_step"] == price.cycles
    assert fields["board_host_seconds_per_step"] == pytest.approx(host)
    assert fields["board_serial_seconds_per_step"] == pytest.approx(price.fabric_s + host)
    # the priced step: the host overlapped (tests/test_step_overlap.py), its exposed part
    # the step less the fabric's, strictly between the larger resource and the serial sum
    seconds = fields["seconds_per_step_at_fmax"]
    assert seconds == price.seconds
    assert max(price.fabric_s, host) < seconds < price.fabric_s + host
    assert fields["board_host_exposed_seconds_per_step"] == pytest.approx(
        seconds - fields["board_fabric_seconds_per_step"])
    assert "overlapped" in fields["seconds_source"] and "serial" in fields["serial_source"]
    assert fields["dsp"] == ACCEL.dsp and fields["macs_per_step"] == macs
    assert fields["gops_per_dsp"] == pytest.approx(2 * macs / seconds / ACCEL.dsp / 1e9)
    assert fields["gops_per_device_dsp"] == pytest.approx(2 * macs / seconds / 2_520 / 1e9)
    assert fields["tops"] == pytest.approx(2 * macs / seconds / 1e12)
    assert fields["tokens_per_second"] == pytest.approx(4 * 16 / seconds)
    assert fields["ddr_bytes_per_step"] == price.payload_bytes
    assert fields["fmax_source"] == "given" and "arm-estimate" in fields["board_host_source"]
    assert fields["accelerator"]["engines"] == 3 and fields["adapter_mapping"] == "split"


def test_layer_mapping_priced_and_split_is_faster_here():
    """The layer mapping's price is its own schedule's; on ACCEL (3 engines, 2 4x4 layers)
    the split mapping takes the layers' K = 16 X.W off them: fewer cycles, and the qkv
    phase's busiest layer does less."""
    cfg = FinetuneConfig(blocks=3, seq_len=8, batch=2, rank=4, queries=2, attention="host",
                         nonlinear="float")      # host attention: the prices derived below
    fields = board_step_fields(cfg, 16, 32, 2, 2, "zcu102", ACCEL, mhz=100.0,
                               mapping="layer")
    price = price_schedule(step_schedule(SHAPE, ACCEL, 0, "layer"), 100.0, 21.3e9)
    assert fields["adapter_mapping"] == "layer" and fields["cycles_per_step"] == price.cycles
    assert fields["board_host_seconds_per_step"] == pytest.approx(
        sum(host_ops(SHAPE, 0, "layer").values()) / (HOST["cores"] * HOST["mhz"] * 1e6
                                                     * HOST["lanes"]))
    split = price_schedule(step_schedule(SHAPE, ACCEL), 100.0, 21.3e9)
    assert split.cycles < price.cycles

    def layer_cycles(p):
        qkv = next(c for c in p.phases if c.name == "block1.qkv")
        return max(v for (unit, _), v in qkv.unit_cycles.items() if unit == "zo-layer")
    assert layer_cycles(split) < layer_cycles(price)


@pytest.mark.parametrize("call, field", [
    (lambda: price_schedule(step_schedule(SHAPE, ACCEL), 0.0, 1e9), "mhz"),
    (lambda: price_schedule(step_schedule(SHAPE, ACCEL), 100.0, -1.0), "ddr_bytes_per_s"),
    (lambda: board_step_fields(FinetuneConfig(blocks=3, seq_len=8, batch=2, rank=4), 16,
                               32, 2, 2, "no-such-board", ACCEL), "board"),
    (lambda: board_step_fields(FinetuneConfig(blocks=3, seq_len=8, batch=2, rank=4), 16,
                               32, 2, 2, "zcu102", ACCEL, 100.0, "fused"), "mapping")])
def test_bad_input_is_one_line(call, field):
    with pytest.raises(ConfigError) as error:
        call()
    assert str(error.value).startswith(field) and "\n" not in str(error.value)


def test_the_default_design_is_the_fastest_of_the_planners():
    """``board_step_fields`` without a design: among the planner's designs for one ZO layer
    of the run's ``layer_rows`` and each width tried, then with the best width each engine
    array tried (the most engines of it that fit), the one with the shortest modelled step
    (every candidate planned and priced again here), its layer's K capacity the rank (the
    split mapping)."""
    from zoforge.errors import ConfigError
    from zoforge.hw.accel.plan import plan_accelerator
    from zoforge.reports.accel_cost import ENGINE_ARRAYS_TRIED, LAYER_COLS_TRIED, price_schedule
    from zoforge.boards.registry import get_board
    cfg = FinetuneConfig(model="tiny", blocks=2, seq_len=8, batch=2, queries=2,
                         attention="host", nonlinear="float")
    shape = ModelShape(blocks=2, seq_len=8, batch=2, rank=8, adapted=2, queries=2, hidden=32,
                       ffn=64, heads=2, classes=2)
    board = get_board("zcu102")
    seconds = {}
    def price(**fields):
        accel = plan_accelerator(board, shape, layers=1, layer_rows=cfg.layer_rows,
                                 layer_max_k=8, **fields)
        return price_schedule(step_schedule(shape, accel, 0, "split"), 100.0,
                              board.ddr_bytes_per_s).seconds, accel

    for cols in LAYER_COLS_TRIED:
        seconds[cols] = price(layer_cols=cols)
    layer_cols = min(seconds, key=lambda cols: seconds[cols][0])
    for rows, cols in ENGINE_ARRAYS_TRIED:
        try:
            seconds[rows, cols] = price(layer_cols=layer_cols, engine_rows=rows,
                                        engine_cols=cols)
        except ConfigError:                     # does not fit: skipped
            pass
    assert len(ENGINE_ARRAYS_TRIED) == 16 and len(seconds) > 3 + 4
    best_s, best = min(seconds.values(), key=lambda pair: pair[0])
    fields = board_step_fields(cfg, 32, 64, 2, 2, "zcu102", mhz=100.0)
    chosen = fields["accelerator"]
    assert (chosen["layer_cols"], chosen["engine_rows"], chosen["engine_cols"],
            chosen["engines"]) == (best.layer_cols, best.engine_rows, best.engine_cols,
                                   best.engines)
    assert (chosen["layers"], chosen["layer_rows"], chosen["layer_max_k"]) == (1, 4, 8)
    assert fields["seconds_per_step_at_fmax"] == pytest.approx(best_s, rel=1e-12)


def test_host_ops_with_engine_attention_by_hand():
    """attention "engines": no attention products; q, k, v quantized (3 x 3 M H), S
    dequantized and P quantized (B heads L^2 x 4), C dequantized (M H) per block run."""
    host, engines = host_ops(SHAPE, 1), host_ops(SHAPE, 1, attention="engines")
    runs = 1 + 4 * 2
    assert "attention products" not in engines and "attention quantize" not in host
    assert engines["attention quantize"] == runs * (9 * 16 * 16 + 2 * 2 * 64 * 4 + 16 * 16)
    assert {k: v for k, v in engines.items() if k != "attention quantize"} == \
        {k: v for k, v in host.items() if k != "attention products"}


def test_board_step_fields_take_the_attention_from_cfg():
    cfg = FinetuneConfig(blocks=3, seq_len=8, batch=2, rank=4, queries=2, attention="host",
                         nonlinear="float")      # host attention: the prices derived below
    host = board_step_fields(cfg, 16, 32, 2, 2, "zcu102", ACCEL, mhz=100.0)
    engines = board_step_fields(cfg.replace(attention="engines"), 16, 32, 2, 2, "zcu102",
                                ACCEL, mhz=100.0)
    price = price_schedule(step_schedule(SHAPE, ACCEL, attention="engines"), 100.0, 21.3e9)
    assert engines["cycles_per_step"] == price.cycles > host["cycles_per_step"]
    assert engines["board_host_seconds_per_step"] == pytest.approx(
        sum(host_ops(SHAPE, attention="engines").values()) / (
            HOST["cores"] * HOST["mhz"] * 1e6 * HOST["lanes"]))
    assert engines["macs_per_step"] > host["macs_per_step"]
    assert engines["attention_on_fabric_seconds_saved"] == 0.0
    assert host["attention_on_fabric_seconds_saved"] != 0.0


def test_host_ops_without_the_work_the_nonlinear_units_take_by_hand():
    """GELU engines: no host GELU, and neither ffn_in's output dequantized (M F) nor
    ffn_out's input quantized (3 M F); softmax units: no host softmax, S dequantize or P
    quantize (B heads L^2 x 4): the attention's quantization is q, k, v (9 M H) and C
    (M H) only. first_adapted 1: 9 block runs; M = 16, H = 16, F = 32, 2 x 2 x 64 heads."""
    runs, M, H, F = 1 + 4 * 2, 16, 16, 32
    plain = host_ops(SHAPE, 1, attention="engines")
    gelu = host_ops(SHAPE, 1, attention="engines", gelu=True)
    assert "gelu" not in gelu and gelu["quantize"] == plain["quantize"] - runs * 4 * M * F
    softmax = host_ops(SHAPE, 1, attention="engines", softmax=True)
    assert "softmax" not in softmax
    assert softmax["attention quantize"] == runs * (9 * M * H + M * H) == \
        plain["attention quantize"] - runs * 4 * 2 * 2 * 64
    both = host_ops(SHAPE, 1, attention="engines", gelu=True, softmax=True)
    assert {k: v for k, v in both.items() if k not in ("quantize", "attention quantize")} \
        == {k: v for k, v in plain.items() if k not in ("quantize", "attention quantize",
                                                        "gelu", "softmax")}


def test_softmax_jobs_priced_by_the_units_model():
    """A softmax job's cycles: the bus unit's model (hw/softmax/cycles.py); its long-stream
    rate is a row of 128 keys every 128 / 8 = 16 cycles on 8 lanes; its bytes: 4 bytes a
    score in, a byte a P out (streamed in beats of 8 lanes: a row of 12 keys is 2 beats)."""
    from zoforge.hw.softmax.config import SoftmaxConfig
    from zoforge.hw.softmax.cycles import softmax_job_cycles
    accel = ACCEL.replace(softmax_units=1, softmax_max_len=128)
    unit = SoftmaxConfig(lanes=8, max_len=128)
    assert accel.softmax_config() == unit
    job = Job("softmax", 0, "softmax", 128, 128, 128)
    assert job_cycles_of(accel, job) == softmax_job_cycles(unit, 128, 128)
    assert job_cycles_of(accel, job.__class__("softmax", 0, "softmax", 256, 128, 128)) \
        - job_cycles_of(accel, job) == 128 * 16
    assert transfer_bytes(accel, Transfer("s", "x", "softmax", 16, 12, 12, raw=True)) == \
        (4 * 16 * 12, 16 * 2 * 32)
    assert transfer_bytes(accel, Transfer("p", "y", "softmax", 16, 12, 12, write=True)) == \
        (16 * 12, 16 * 2 * 8)


def test_design_clocks():
    from zoforge.reports.accel_cost import design_clocks
    assert design_clocks("zcu102", ACCEL, 100.0) == (100.0, 100.0, "given")
    engines, softmax, source = design_clocks("zcu102", ACCEL.replace(softmax_units=1))
    assert (engines, softmax) == (355.87, 249.0) and "ZO layer's builds by size" in source
    assert "softmax units at 249 MHz, their own clock (yosys-estimate)" in source
    assert "softmax" not in design_clocks("zcu102", ACCEL)[2]
    engines, _, source = design_clocks("zcu102", ACCEL.replace(gelu_engines=1))
    assert engines == 278.0 and "GELU engines" in source
    with pytest.raises(ConfigError) as error:
        design_clocks("ulx3s-85f", ACCEL)
    assert error.value.parameter == "board"


def test_price_follows_the_runs_nonlinear():
    """On a design with 3 GELU engines and a softmax unit: nonlinear integer (attention on
    the engines) prices the GELU jobs and the softmax phases (their cycles, their bytes in
    the step's DDR bytes) and the host's work without them; float prices the plain step."""
    cfg = FinetuneConfig(blocks=3, seq_len=8, batch=2, rank=4, queries=2, attention="engines")
    accel = ACCEL.replace(gelu_engines=3, softmax_units=1)
    integer = board_step_fields(cfg.replace(nonlinear="integer"), 16, 32, 2, 2, "zcu102",
                                accel, mhz=100.0)
    flt = board_step_fields(cfg.replace(nonlinear="float"), 16, 32, 2, 2, "zcu102", accel,
                            mhz=100.0)
    sched = step_schedule(SHAPE, accel, attention="engines", nonlinear="integer")
    price = price_schedule(sched, 100.0, 21.3e9)
    softmax = [p for p in price.phases if p.name.endswith(".softmax")]
    assert len(softmax) == 3 and integer["cycles_per_step"] == price.cycles
    # the softmax phases, and per block ffn_in's GELU latency (one job on each engine: F
    # = 32 columns in 3 slices) on its critical path
    assert integer["cycles_per_step"] - flt["cycles_per_step"] == sum(
        p.cycles for p in softmax) + 3 * (13 + 1 + 9)
    # the softmax jobs' bytes, and per block ffn_in's (one map of the S branches' rows)
    # second requantizer's multiplier and shift: 2 x 4 bytes x F = 32 columns
    assert sum(p.payload_bytes for p in softmax) == sum(
        5 * j.m * 8 for p in sched.phases for j in p.jobs if j.unit == "softmax")
    assert integer["ddr_bytes_per_step"] - flt["ddr_bytes_per_step"] == sum(
        p.payload_bytes for p in softmax) + 3 * 2 * 4 * 32
    rate = HOST["cores"] * HOST["mhz"] * 1e6 * HOST["lanes"]
    assert integer["board_host_seconds_per_step"] == pytest.approx(sum(host_ops(
        SHAPE, attention="engines", gelu=True, softmax=True).values()) / rate)
    assert flt["board_host_seconds_per_step"] == pytest.approx(sum(host_ops(
        SHAPE, attention="engines").values()) / rate)
    # the softmax phases overlap the engines': the accelerator alone is under their sum
    assert price.fabric_s < price.phases_s and price.seconds >= price.fabric_s
    assert integer["board_fabric_seconds_per_step"] == price.fabric_s


def test_the_integer_design_is_no_slower_than_the_plain_or_one_softmax_unit():
    """With nonlinear integer and engine attention the search also prices softmax units
    (and GELU engines) on the fastest plain design's arrays: its choice is no slower than
    that plain design, nor than the same arrays with one 8-lane softmax unit (each planned
    and priced again here), and fits the board's budget."""
    from zoforge.boards.registry import get_board
    from zoforge.config import config_from_dict
    from zoforge.hw.accel.plan import budget, estimate_resources, plan_accelerator
    cfg = FinetuneConfig(model="tiny", blocks=2, seq_len=8, batch=2, queries=2,
                         attention="engines", nonlinear="integer")
    shape = ModelShape(blocks=2, seq_len=8, batch=2, rank=8, adapted=2, queries=2, hidden=32,
                       ffn=64, heads=2, classes=2)
    board = get_board("zcu102")
    fields = board_step_fields(cfg, 32, 64, 2, 2, "zcu102", mhz=100.0)
    keep = {k: fields["accelerator"][k] for k in ("layer_cols", "engine_rows", "engine_cols")}
    for extra in ({}, {"softmax_units": 1}):
        accel = plan_accelerator(board, shape, layers=1, layer_rows=4, layer_max_k=8,
                                 **keep, **extra)
        other = price_schedule(step_schedule(shape, accel, 0, "split", "engines", "integer"),
                               100.0, board.ddr_bytes_per_s).seconds
        assert fields["seconds_per_step_at_fmax"] <= other * (1 + 1e-12)
    chosen = config_from_dict(fields["accelerator"], [AcceleratorConfig])
    total = estimate_resources(chosen)["total"]
    assert all(total[key] <= limit for key, limit in budget(board).items())


def test_gelu_jobs_priced_by_the_engines_gelu_model():
    """A GELU job: the plain job's cycles (188 for 16 x 16 x 8 on the paired 4 x 4, above)
    and the GELU path's latency (the i-GELU's 13 stages, the register slice's one and the
    second requantizer's 9, ``GELU_EXTRA_LATENCY``), on an engine built with it; its tables 5 words a column (bias,
    multiplier, shift, and the second requantizer's multiplier and shift): 8 columns in 2
    panels of 4 lanes x 4 bytes, 5 x 2 x 4 x 4 = 160 bytes streamed, 4 x 8 x 5 packed."""
    from zoforge.hw.engine.gelu_path import GELU_EXTRA_LATENCY
    accel = ACCEL.replace(gelu_engines=1)
    assert job_cycles_of(accel, Job("engine", 0, "gemm-gelu", 16, 16, 8)) == \
        188 + GELU_EXTRA_LATENCY == 188 + 13 + 1 + 9
    assert transfer_bytes(accel, Transfer("t", "tables", "engine", 16, 16, 8, gelu=True)) == \
        (160, 160)
    assert accel.engine_config(True).gelu and not accel.engine_config().gelu


def test_softmax_phases_run_at_the_softmax_units_own_clock():
    """A softmax phase's compute time is its cycles at ``softmax_mhz`` (the units' clock
    domain), every other phase's at ``mhz``; a clock <= 0 is a one-line error naming it."""
    accel = ACCEL.replace(softmax_units=1)
    sched = step_schedule(SHAPE, accel, attention="engines", nonlinear="integer")
    price = price_schedule(sched, 100.0, 21.3e9, softmax_mhz=40.0)
    softmax = [p for p in price.phases if p.name.endswith(".softmax")]
    assert softmax and all(p.compute_s == p.cycles / 40e6 for p in softmax)
    assert all(p.compute_s == p.cycles / 100e6 for p in price.phases if p not in softmax)
    same = price_schedule(sched, 100.0, 21.3e9)
    assert [p.compute_s * 100 for p in same.phases if p.name.endswith(".softmax")] == \
        pytest.approx([p.compute_s * 40 for p in softmax], rel=1e-12)
    for mhz, softmax_mhz, name in ((0.0, 40.0, "mhz"), (100.0, -1.0, "softmax_mhz")):
        with pytest.raises(ConfigError) as error:
            price_schedule(sched, mhz, 21.3e9, softmax_mhz=softmax_mhz)
        assert error.value.parameter == name
