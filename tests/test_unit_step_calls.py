"""The cycle model of a fine-tuning step on today's units (reports/unit_calls.py) under the
integer nonlinear functions: ffn_in's jobs are the engine's GELU jobs and, with engine
attention, each block's softmax of a forward is a job of the softmax unit, as the
co-simulation runs them (``zoforge finetune --rtl all --design units``); the model equals
the RTL's cycles under each setting (the default one: tests/test_finetune_cli.py)."""
from __future__ import annotations

import json

import pytest

from zoforge.errors import ConfigError
from zoforge.golden.zolayer import layer_config
from zoforge.hw.engine.config import EngineConfig
from zoforge.hw.engine.cycles import GELU_EXTRA_LATENCY
from zoforge.hw.softmax.config import SoftmaxConfig
from zoforge.hw.softmax.cycles import softmax_job_cycles
from zoforge.reports.model_shape import ModelShape
from zoforge.reports.unit_calls import predicted_step_cycles, softmax_call

# docs/finetune.md's tiny command: 1 block, 2 sequences of 8 tokens, hidden 32, 2 heads,
# FFN 64, q 2; its 4 x 4 engine (ffn_in in one job), its 4 x 4 ZO layer, its softmax unit
TINY = ModelShape(blocks=1, seq_len=8, batch=2, rank=4, adapted=2, queries=2, hidden=32,
                  ffn=64, heads=2, classes=2)
ENGINE = EngineConfig(rows=4, cols=4, pack=2, max_m=16, max_k=64, max_n=1024, gelu=True)
LAYER = layer_config("onthefly", rows=4, cols=4, mode="lora-fa", max_m=16, max_k=32,
                     max_n=32, max_r=4)
UNIT = SoftmaxConfig(lanes=8, max_len=8)


def _step(attention: str, nonlinear: str):
    return predicted_step_cycles(TINY, ENGINE, LAYER, attention, nonlinear, UNIT)


def test_integer_nonlinear_adds_the_softmax_and_gelu_jobs():
    """Per forward (4 a step): ffn_in's GELU job, GELU_EXTRA_LATENCY = 23 cycles more than
    the int8 one, and one softmax job of 2 sequences x 2 heads x 8 rows of 8 keys (457
    cycles, the unit's model): 4 x (457 + 23) = 1,920 cycles, the difference the RTL
    shows between --nonlinear integer and float (47,812 - 45,892)."""
    integer, plain = _step("engines", "integer"), _step("engines", "float")
    assert softmax_job_cycles(UNIT, 32, 8) == 457
    assert integer.cycles - plain.cycles == 4 * (457 + GELU_EXTRA_LATENCY) == 1920
    softmax = next(call for call in integer.calls if call.unit == "softmax")
    assert (softmax.count, softmax.shape, softmax.jobs) == (4, (32, 8),
                                                             (("softmax (per block)", 457),))
    # in: a beat of 8 int32 a row, out: 2 words (8 int8) a row; the key mask's word and the
    # job's 4 registers written; int32 scores and int8 P as values
    assert (softmax.stream_bytes, softmax.payload_bytes, softmax.table_words) == (
        32 * 32 + 32 * 8, 32 * 8 * 5, 1 + 4)
    ffn_in = next(call for call in integer.calls if call.name.startswith("ffn_in"))
    assert ffn_in.name == "ffn_in (GELU job)" and ffn_in.count == 4
    assert integer.stream_bytes - plain.stream_bytes == 4 * softmax.stream_bytes + 4 * (
        2 * 16 * 4 * 4)                # ffn_in's OUT_MULT and OUT_SHIFT: 16 column tiles
    # host attention: the softmax stays on the host, the GELU job does not
    assert _step("host", "integer").cycles - _step("host", "float").cycles == 4 * 23
    assert "softmax" not in {call.unit for call in _step("host", "integer").calls}


def test_a_softmax_call_is_cut_at_the_rows_register():
    """1,024 blocks of 128 rows: jobs of at most (2^16 - 1) // 128 = 511 blocks, as
    zoforge.sim.softmax_cosim.softmax_jobs cuts them: 511, 511 and 2."""
    unit = SoftmaxConfig(lanes=8, max_len=128)
    call = softmax_call(unit, 1024, 128)
    assert call.cycles == sum(softmax_job_cycles(unit, blocks * 128, 128)
                              for blocks in (511, 511, 2))
    assert len(call.jobs) == 3 and len(call.job_stream_bytes) == 3


def test_settings_the_units_cannot_run_are_refused():
    with pytest.raises(ConfigError, match="nonlinear"):
        _step("engines", "fp16")
    with pytest.raises(ConfigError, match="engine gelu"):
        predicted_step_cycles(TINY, EngineConfig(rows=4, cols=4, pack=2, max_m=16,
                                                 max_k=64, max_n=1024), LAYER,
                              "engines", "integer", UNIT)
    with pytest.raises(ConfigError, match="softmax max_len"):
        predicted_step_cycles(TINY, ENGINE, LAYER, "engines", "integer",
                              SoftmaxConfig(lanes=8, max_len=4))
    # the defaults: the engine built with GELU where the nonlinear functions are integer
    assert predicted_step_cycles(TINY, attention="engines", nonlinear="integer").engine.gelu


@pytest.mark.slow
@pytest.mark.ci
@pytest.mark.parametrize("flags", [["--nonlinear", "float"],
                                   ["--nonlinear", "float", "--attention", "host"]])
def test_the_model_is_the_rtl_under_the_earlier_settings(tmp_path, flags):
    """docs/finetune.md's tiny command on Verilator: the RTL's cycles per step equal the
    model's (45,892 and 41,508 at e2e3b96)."""
    from zoforge.cli import main
    path = tmp_path / "rtl.json"
    code = main(["finetune", "--model", "tiny", "--blocks", "1", "--seq-len", "8", "--batch",
                 "2", "--queries", "2", "--rank", "4", "--engine-rows", "4", "--engine-cols",
                 "4", "--n-train", "40", "--n-test", "20", "--calibration", "8", "--steps",
                 "2", "--rtl", "all", "--no-float", "--quiet", "--out", str(tmp_path / "rtl"),
                 "--json", str(path), "--design", "units", *flags])
    result = json.loads(path.read_text())
    assert code == 0 and result["bit_exact"] is True
    assert result["cycles_per_step"] == result["predicted_cycles_per_step"] > 0
