"""A fine-tuning step's calls on the RTL (zoforge.sim.finetune_cosim): one whole ZO step of
a small random BERT with every linear map on the RTL is bit-exact on Verilator (the job
servers, call by call) and on Icarus (the recorded calls replayed through cocotb); a planted
difference is named; an oversized configuration is refused before any work."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from zoforge.errors import ConfigError
from zoforge.golden.finetune.calls import (AdapterCall, EngineCall, GoldenUnits, SoftmaxCall,
                                          UpdateCall)
from zoforge.golden.finetune.config import FinetuneConfig
from zoforge.golden.finetune.train import ZoFinetune, prepare
from zoforge.golden.models import tiny_encoder
from zoforge.sim.finetune_cosim import (LAYER_CALLS, CallMismatch, RtlUnits, call_kind,
                                        check_call, check_rtl_limits, replay_calls)

CFG = FinetuneConfig(blocks=1, seq_len=8, batch=2, queries=2, n_train=40, n_test=20,
                     calibration=8, rank=4, engine_rows=4, engine_cols=4)
HIDDEN, FFN = 32, 64


@pytest.fixture(scope="module")
def prepared():
    model = tiny_encoder(hidden=HIDDEN, layers=1, heads=2, intermediate=FFN)
    return prepare(CFG, model_and_tokenizer=model)


@pytest.fixture(scope="module")
def golden_step(prepared):
    """The golden step, its calls recorded."""
    units = GoldenUnits(CFG.generator().golden(), CFG.layer_rows, record=True)
    run = ZoFinetune(prepared, "int8", units=units)
    return run.step(), units.log


def rtl_step(prepared, units, record):
    """One step on ``units``; its g values, losses and masters equal the golden ``record``."""
    rtl = ZoFinetune(prepared, "int8", units=units).step()
    assert rtl.grads == record.grads and rtl.losses == record.losses
    for name, master in record.masters.items():
        assert torch.equal(rtl.masters[name], master), name
    return rtl


@pytest.mark.slow
@pytest.mark.ci
def test_step_on_verilator_is_bit_exact(prepared, golden_step):
    record, calls = golden_step
    with RtlUnits(CFG, HIDDEN, FFN, "all") as units:
        rtl_step(prepared, units, record)
        # the defaults (engine attention, integer nonlinear functions): every call on the
        # RTL, the GELU jobs on the engine's GELU path and the softmax calls on the unit
        assert (CFG.attention, CFG.nonlinear) == ("engines", "integer")
        assert units.engine_cosim.config.gelu and units.softmax is not None
        assert units.rtl_calls == len(calls)
        by_name = dict(units.cycles_by_name)
        cycles = units.take_cycles()
        assert units.take_cycles() == 0
    assert any(m.abs().sum() > 0 for m in record.masters.values())   # the step moved
    kinds = {call_kind(call) if isinstance(call, EngineCall) else call_kind(call).split()[0]
             for call in calls}
    assert kinds >= {"engine int8", "engine raw", "engine gelu", "adapter", "update",
                     "softmax"}
    assert cycles == sum(by_name.values()) > 0
    assert {"block0.query adapter", "block0.value update", "head engine",
            "block0.softmax softmax"} <= set(by_name)
    print(f"cycles of one step: {cycles}; per call: {by_name}")


@pytest.fixture(scope="module")
def integer_step():
    """``nonlinear`` integer with host attention: ffn_in's call is the engine's GELU job, the
    softmax the host's; the golden step and its calls."""
    cfg = dataclasses.replace(CFG, attention="host")
    model = tiny_encoder(hidden=HIDDEN, layers=1, heads=2, intermediate=FFN)
    prepared = prepare(cfg, model_and_tokenizer=model)
    units = GoldenUnits(cfg.generator().golden(), cfg.layer_rows, record=True)
    return cfg, prepared, ZoFinetune(prepared, "int8", units=units).step(), units.log


@pytest.mark.slow
def test_host_attention_step_with_gelu_jobs_on_verilator_is_bit_exact(integer_step):
    """``--rtl all`` with ``nonlinear`` integer and host attention: the GELU jobs (``engine
    gelu``) run on the engine's GELU path, no softmax call (the host's softmax), no softmax
    unit, every call on the RTL, and the whole step equals the golden one."""
    cfg, prepared, record, calls = integer_step
    gelu_calls = [call for call in calls if isinstance(call, EngineCall) and call.gelu]
    assert gelu_calls and {call_kind(call) for call in gelu_calls} == {"engine gelu"}
    assert not any(isinstance(call, SoftmaxCall) for call in calls)
    with RtlUnits(cfg, HIDDEN, FFN, "all") as units:
        assert units.engine_cosim.config.gelu and units.softmax is None
        rtl = ZoFinetune(prepared, "int8", units=units).step()
        assert units.rtl_calls == len(calls)
        by_name = dict(units.cycles_by_name)
    assert rtl.grads == record.grads and rtl.losses == record.losses
    for name, master in record.masters.items():
        assert torch.equal(rtl.masters[name], master), name
    assert by_name[f"{gelu_calls[0].name} engine"] > 0


@pytest.mark.slow
@pytest.mark.ci
def test_adapters_only_leaves_the_engine_to_the_golden(prepared, golden_step):
    record, calls = golden_step
    with RtlUnits(CFG, HIDDEN, FFN, "adapters") as units:
        rtl_step(prepared, units, record)
        assert units.rtl_calls == sum(isinstance(c, LAYER_CALLS) for c in calls)
        assert units.engine is None


@pytest.mark.slow
@pytest.mark.ci
def test_planted_difference_is_named(golden_step, monkeypatch):
    """The internal golden's block0.value branches are off by one: the first of them (the
    recorded calls replayed in order) is named."""
    _, calls = golden_step
    first = next(call for call in calls if isinstance(call, AdapterCall)
                 and call.name == "block0.value")
    with RtlUnits(CFG, HIDDEN, FFN, "adapters") as units:
        adapter = units.golden.adapter
        monkeypatch.setattr(units.golden, "adapter",
                            lambda call: adapter(call) + int(call.name == "block0.value"))
        with pytest.raises(CallMismatch) as error:
            for call in calls:
                units(call)
    assert error.value.call is first
    message = str(error.value)
    assert "\n" not in message
    assert "(block0.value, adapter +)" in message
    assert f" {first.x.shape[0] * first.w.shape[1]} value(s) differ" in message


def test_check_call_names_the_first_difference(golden_step):
    _, calls = golden_step
    golden = torch.zeros(3, 4, dtype=torch.int64)
    rtl = golden.clone()
    rtl[1, 2] = 5
    with pytest.raises(CallMismatch, match=r"1 value\(s\) differ .* first at \(1, 2\): "
                                           r"RTL 5, golden 0"):
        check_call(calls[0], 7, rtl, golden)
    check_call(calls[0], 7, golden, golden.clone())


def test_limits_name_the_field():
    with pytest.raises(ConfigError, match=r"^batch must be at most \d+ with seq_len 32"):
        check_rtl_limits(FinetuneConfig(batch=128, seq_len=32), "all", 384, 1536)
    check_rtl_limits(FinetuneConfig(batch=2, seq_len=32), "all", 384, 1536)
    with pytest.raises(ConfigError, match="^rtl must be one of adapters, all"):
        check_rtl_limits(CFG, "none", HIDDEN, FFN)
    with pytest.raises(ConfigError, match="^layer_rows must be a divisor"):
        check_rtl_limits(dataclasses.replace(CFG, layer_rows=3, rank=3), "all", HIDDEN, FFN)


@pytest.mark.icarus
def test_step_replayed_on_icarus_is_bit_exact(golden_step):
    _, calls = golden_step
    outputs, info = replay_calls(CFG, HIDDEN, FFN, calls, simulator="icarus")
    golden = GoldenUnits(CFG.generator().golden(), CFG.layer_rows)
    # every call on the RTL (rtl "all": the softmax calls on the softmax unit too)
    assert len(outputs) == len(calls)
    for index, (call, rtl) in enumerate(zip(calls, outputs, strict=True)):
        assert rtl is not None, (index, call_kind(call))
        check_call(call, index, rtl, golden(call))
    assert len(info["layer_jobs"]) > 0 and len(info["engine_jobs"]) > 0
    assert any(isinstance(call, SoftmaxCall) for call in calls)
    assert len(info["softmax_jobs"]) > 0
