"""``zoforge finetune`` (issue 20): its flags, the JSON and files of a run, ``--steps 0``, the
backprop ceiling, and the RTL path (``--rtl``): measured cycles, the bit-exact verdict and a
mismatch's one-line exit with the JSON still written.

Every run uses the small random BERT (``--model tiny``: hidden 32, 2 blocks) on a few
examples. One run co-simulates every call on Verilator (``--rtl all``, the designs of
``tests/test_finetune_cosim.py``, so their builds are shared); the other RTL cases run
against a stand-in for :mod:`zoforge.sim.finetune_cosim` (:class:`FakeRtl`: its interface,
the golden units inside, a call count and cycles) to check the command's side: the calls
counted, the cycles per step, a mismatch's exit and the limits.
"""
from __future__ import annotations

import dataclasses
import json
import sys
import types

import pytest

from zoforge.cli import main
from zoforge.cli.finetune import COST_KEYS, OUT_FILES, TRAIN_LOSS_KEYS
from zoforge.config import flag_name, load_config
from zoforge.errors import ConfigError
from zoforge.golden.finetune.config import FinetuneConfig

TINY = ["finetune", "--model", "tiny", "--blocks", "1", "--seq-len", "8", "--steps", "2",
        "--batch", "2", "--n-train", "40", "--n-test", "20", "--calibration", "20",
        "--quiet", "--design", "units"]

KEYS = {"bit_exact", "rtl_calls", "steps", "accuracy_before", "accuracy_after",
        "float_accuracy_after", "backprop_accuracy_after", "cycles_per_step", "config",
        "loss", "float_loss", "error", *COST_KEYS, *TRAIN_LOSS_KEYS}


def _run(tmp_path, *extra: str, name: str = "run"):
    out, path = tmp_path / name, tmp_path / f"{name}.json"
    code = main([*TINY, "--out", str(out), "--json", str(path), *extra])
    return code, out, json.loads(path.read_text()) if path.exists() else None


def test_help_lists_every_config_field_and_the_run_flags(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["finetune", "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    for field in dataclasses.fields(FinetuneConfig):
        assert flag_name(field.name) in text, field.name
    for flag in ("--rtl", "{none,adapters,all}", "--float", "--no-float", "--backprop",
                 "--no-backprop", "--out", "--json", "--config", "--threads"):
        assert flag in text, flag
    flat = " ".join(text.split())
    for phrase in ("--k-shot K_SHOT few-shot mode: train on k examples per class",
                   "0 <= value <= 10000 (default 0)", "(None: 4, or 1 with --k-shot)",
                   "None: 2e-5, or 4e-4 with --k-shot", "zoforge finetune --k-shot 16 "
                   "--steps 200"):
        assert phrase in flat, phrase


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("finetune")
    return _run(tmp)


def test_a_run_writes_every_key_and_its_files(tiny_run):
    code, out, result = tiny_run
    assert code == 0
    assert KEYS <= set(result)
    assert result["steps"] == 2 and len(result["loss"]) == len(result["float_loss"]) == 2
    for key in ("accuracy_before", "accuracy_after", "float_accuracy_before",
                "float_accuracy_after"):
        assert 0 <= result[key] <= 1
    # not few-shot: no training-loss figures
    assert [result[key] for key in TRAIN_LOSS_KEYS] == [None] * 4 + [[]] * 3
    # no RTL, no backprop: not run, so null
    assert result["bit_exact"] is None and result["rtl_calls"] is None
    assert result["cycles_per_step"] is None and result["backprop_accuracy_after"] is None
    # no accelerator.toml: --design units prices today's units, no board-sized design
    assert sorted(p.name for p in out.iterdir()) == sorted(OUT_FILES[:-1])
    assert json.loads((out / "finetune.json").read_text()) == result
    assert (out / "finetune.png").read_bytes()[:4] == b"\x89PNG"
    cfg = load_config(out / "config.toml", (FinetuneConfig,))
    assert cfg == FinetuneConfig(**{k: v for k, v in result["config"].items() if k != "kind"})
    assert (cfg.model, cfg.blocks, cfg.seq_len, cfg.steps) == ("tiny", 1, 8, 2)


def test_the_cost_figures_are_the_cost_models(tiny_run):
    from zoforge.reports.model_shape import ModelShape
    from zoforge.reports.step_memory import backprop_peak_memory, memory_bits, zo_peak_memory
    from zoforge.reports.step_price import UNIT_FIGURES, roofline
    from zoforge.reports.unit_calls import predicted_step_cycles
    shape = ModelShape(blocks=1, seq_len=8, batch=2, rank=8, adapted=2, queries=4,
                       hidden=32, ffn=64, heads=2, classes=2)
    from zoforge.config import config_from_dict
    from zoforge.golden.finetune.config import FinetuneConfig
    from zoforge.sim.finetune_cosim import engine_design
    _, _, result = tiny_run
    # the designs the RTL runs: engine 8x8 (ffn_in in one job), ZO layer 4x4 with the run's
    # generator (7 LFSRs of 8 bits)
    cfg = config_from_dict(result["config"], (FinetuneConfig,))
    engine, layer = engine_design(cfg, 32, 64), cfg.layer_design(32, 64)
    assert (engine.rows, engine.cols, layer.rows, layer.cols, layer.n_rng) == (8, 8, 4, 4, 7)
    assert (cfg.attention, cfg.nonlinear) == ("engines", "integer")     # the defaults
    from zoforge.sim.softmax_cosim import cosim_design
    step = predicted_step_cycles(shape, engine, layer, attention="engines",
                                 nonlinear="integer", softmax=cosim_design(8))
    assert {call.unit for call in step.calls} == {"engine", "zo-layer", "softmax"}
    assert result["predicted_cycles_per_step"] == step.cycles > 0
    assert result["ddr_bytes_per_step"] == step.stream_bytes
    assert result["onchip_bits"] == memory_bits(engine, layer)["total"]
    assert result["zo_peak_bytes"] == zo_peak_memory(shape, layer)["total"]
    assert result["backprop_peak_bytes"] == backprop_peak_memory(shape)["total"]
    # time and energy: the labelled estimates of the board's units, the roofline's time
    figures = UNIT_FIGURES[result["board"]]
    assert "measured error vs nextpnr" in result["fmax_error"]
    assert result["fmax_source"] == "yosys-estimate" and "activity-model" in result[
        "power_source"]
    from zoforge.boards.registry import get_board
    ddr = get_board(result["board"]).ddr_bytes_per_s
    calls = roofline(step, figures["fmax_mhz"], ddr)
    seconds = sum(row.count * max(row.compute_s, row.time_s) for row in calls)
    assert result["seconds_per_step_at_fmax"] == pytest.approx(seconds, rel=1e-12)
    assert seconds >= step.cycles / (figures["fmax_mhz"] * 1e6) * (1 - 1e-12)
    # energy: the static power as stated, the dynamic taken to the Fmax, apart and summed
    dynamic_w = figures["dynamic_w"] * figures["fmax_mhz"] / figures["power_at_mhz"]
    assert result["static_joules_per_step"] == pytest.approx(seconds * figures["static_w"],
                                                             rel=1e-12)
    assert result["dynamic_joules_per_step"] == pytest.approx(seconds * dynamic_w, rel=1e-12)
    assert result["joules_per_step"] == pytest.approx(
        result["static_joules_per_step"] + result["dynamic_joules_per_step"], rel=1e-12)
    assert "PeZO" in result["static_source"]


def test_zero_steps_and_the_backprop_ceiling_from_the_saved_config(tmp_path, tiny_run):
    """The first run's config.toml with ``--steps 0`` (flags override the file)."""
    path = tmp_path / "zero.json"
    code = main(["finetune", "--config", str(tiny_run[1] / "config.toml"), "--steps", "0",
                 "--backprop", "--no-float", "--quiet", "--out", str(tmp_path / "zero"),
                 "--json", str(path)])
    result = json.loads(path.read_text())
    assert code == 0
    assert result["config"] == dict(tiny_run[2]["config"], steps=0)
    assert result["steps"] == 0 and result["loss"] == [] and result["float_loss"] == []
    assert result["accuracy_after"] == result["accuracy_before"] == tiny_run[2][
        "accuracy_before"]
    assert result["float_accuracy_after"] is None
    # backprop with 0 steps: the untrained float twin, i.e. the probe
    assert result["backprop_accuracy_after"] == result["float_accuracy_before"]


def test_backprop_trains_for_the_steps(tmp_path):
    code, _, result = _run(tmp_path, "--backprop")
    assert code == 0
    assert len(result["backprop_loss"]) == 2 and 0 <= result["backprop_accuracy_after"] <= 1


# -- --rtl --------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.ci
def test_a_run_on_the_rtl_is_bit_exact_and_measures_its_cycles(tmp_path):
    """Every call of two steps on Verilator (q = 2: per step 4 forwards of 2 adapter calls,
    5 engine calls, with the default engine attention a scores and a context job per
    sequence (batch 2) and head (2) and one softmax call, and 2 update walks of 2
    adapters)."""
    path = tmp_path / "rtl.json"
    code = main(["finetune", "--model", "tiny", "--blocks", "1", "--seq-len", "8", "--batch",
                 "2", "--queries", "2", "--rank", "4", "--engine-rows", "4", "--engine-cols",
                 "4", "--n-train", "40", "--n-test", "20", "--calibration", "8", "--steps",
                 "2", "--rtl", "all", "--no-float", "--quiet", "--out", str(tmp_path / "rtl"),
                 "--json", str(path), "--design", "units"])
    result = json.loads(path.read_text())
    assert code == 0 and result["bit_exact"] is True and result["error"] is None
    assert result["rtl_calls"] == 2 * (4 * (2 + 5 + 2 * 2 * 2 + 1) + 2 * 2)
    # the cycle model of the step is every job the RTL ran, each at its unit's exact model
    # (the engine's GELU and attention jobs, the softmax unit's): equal to the cycle
    assert result["cycles_per_step"] == result["predicted_cycles_per_step"] > 0


# -- --rtl, against a stand-in of zoforge.sim.finetune_cosim ---------------------------------

class CallMismatch(Exception):
    pass


class FakeRtl:
    """The interface of ``zoforge.sim.finetune_cosim``: RtlUnits(cfg, hidden, ffn, rtl),
    callable, a context manager, ``rtl_calls``, ``take_cycles()``; ``check_rtl_limits``.
    Each RTL call costs :data:`CYCLES`; call number ``fail_at`` raises CallMismatch."""

    CYCLES = 10
    fail_at: int | None = None
    max_tokens = 1 << 30
    entered = exited = 0

    def __init__(self, cfg, hidden, ffn, rtl):
        from zoforge.golden.finetune.calls import GoldenUnits
        assert (hidden, ffn) == (32, 64) and rtl in ("adapters", "all")
        self.golden = GoldenUnits(cfg.generator().golden(), cfg.layer_rows)
        self.rtl, self.rtl_calls, self.cycles = rtl, 0, 0

    def __enter__(self):
        type(self).entered += 1
        return self

    def __exit__(self, *exc):
        type(self).exited += 1

    def __call__(self, call):
        if self.rtl == "all" or call.unit == "zolayer":
            self.rtl_calls += 1
            self.cycles += self.CYCLES
            if self.rtl_calls == self.fail_at:
                raise CallMismatch(f"call {self.rtl_calls} ({call.name}): Y[0, 0] RTL 1, "
                                   "golden 2\nsecond line")
        return self.golden(call)

    def take_cycles(self) -> int:
        cycles, self.cycles = self.cycles, 0
        return cycles


def _check_rtl_limits(cfg, rtl, hidden, ffn):
    if cfg.tokens > FakeRtl.max_tokens:
        raise ConfigError("batch", f"at most {FakeRtl.max_tokens // cfg.seq_len} with --rtl "
                          f"{rtl}", cfg.batch)


@pytest.fixture
def fake_rtl(monkeypatch):
    import zoforge.sim
    import zoforge.sim.finetune_cosim as real_cosim
    module = types.ModuleType("zoforge.sim.finetune_cosim")
    module.RtlUnits, module.CallMismatch = FakeRtl, CallMismatch
    module.check_rtl_limits = _check_rtl_limits
    module.engine_design = real_cosim.engine_design       # the sizing is not the RTL's run
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(zoforge.sim, "finetune_cosim", module, raising=False)
    monkeypatch.setattr(FakeRtl, "entered", 0)
    monkeypatch.setattr(FakeRtl, "exited", 0)
    return FakeRtl


# calls per step with blocks 1, q 4: 8 forwards x (2 adapter calls + key, attn_out, ffn_in,
# ffn_out, head on the engine, and with the default engine attention a scores and a context
# job per sequence (batch 2) and head (the tiny model's 2) and the block's softmax call)
# + 4 update walks x 2 adapters
ADAPTER_CALLS = 8 * 2 + 4 * 2
ENGINE_AND_SOFTMAX_CALLS = 8 * (5 + 2 * 2 * 2 + 1)


@pytest.mark.parametrize("rtl, per_step", [("adapters", ADAPTER_CALLS),
                                           ("all", ADAPTER_CALLS + ENGINE_AND_SOFTMAX_CALLS)])
def test_rtl_calls_and_measured_cycles(tmp_path, fake_rtl, rtl, per_step):
    code, _, result = _run(tmp_path, "--rtl", rtl, "--no-float")
    assert code == 0 and fake_rtl.entered == fake_rtl.exited == 1
    assert result["bit_exact"] is True and result["rtl"] == rtl
    assert result["rtl_calls"] == 2 * per_step          # the evaluations are golden
    assert result["cycles_per_step"] == per_step * FakeRtl.CYCLES


def test_a_mismatch_is_one_line_exit_1_with_the_json_written(tmp_path, fake_rtl, capsys,
                                                           monkeypatch):
    monkeypatch.setattr(FakeRtl, "fail_at", ADAPTER_CALLS + 3)       # in the second step
    code, out, result = _run(tmp_path, "--rtl", "adapters")
    err = capsys.readouterr().err
    assert code == 1 and fake_rtl.exited == 1
    assert err.startswith("zoforge: error: the RTL differs from the golden model: call ")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert result["bit_exact"] is False and result["rtl_calls"] == ADAPTER_CALLS + 3
    assert result["error"].startswith(f"call {ADAPTER_CALLS + 3} (")
    assert result["steps"] == 1 and len(result["loss"]) == 1
    assert json.loads((out / "finetune.json").read_text()) == result


def test_rtl_limits_are_checked_before_the_work(tmp_path, fake_rtl, capsys, monkeypatch):
    monkeypatch.setattr(FakeRtl, "max_tokens", 8)
    code, out, result = _run(tmp_path, "--rtl", "all")
    err = capsys.readouterr().err
    assert code == 2 and result is None and not out.exists()
    assert err.startswith("zoforge: error: --batch must be at most 1 with --rtl all")
    assert err.count("\n") == 1 and fake_rtl.entered == 0


def test_the_default_configuration_round_trips_through_toml(tmp_path):
    """``model`` None (the default MiniLM): TOML has no null, the key is left out."""
    from zoforge.config import dump_config
    for cfg in (FinetuneConfig(), FinetuneConfig(model="tiny", blocks=2)):
        path = dump_config(cfg, tmp_path / "config.toml")
        assert load_config(path, (FinetuneConfig,)) == cfg


def test_the_accelerator_design_fields_are_the_board_models():
    """``--design accelerator`` (the default): the JSON's cost keys are
    :func:`~zoforge.reports.accel_cost.board_step_fields`' for the planned design, the
    modelled cycles under ``cycles_per_step`` and ``predicted_cycles_per_step``, the step
    time the fabric's plus the host's, the model's peak memory the same as for today's
    units (it does not depend on the design) and the units-only keys None."""
    from zoforge.reports.accel_cost import board_step_fields
    from zoforge.reports.finetune_fields import cost_models_for, unit_cost_fields
    from zoforge.sim.finetune_run import CostContext
    cfg = FinetuneConfig(model="tiny", blocks=2, seq_len=8, batch=2, queries=2, n_train=40,
                         n_test=20, calibration=20)
    ctx = CostContext(cfg, 32, 64, 2, 2)
    (model,) = cost_models_for("accelerator", "zcu102")
    fields = model(ctx)
    step = board_step_fields(cfg, 32, 64, 2, 2, "zcu102")
    assert {key: fields[key] for key in step} == step
    assert fields["design"] == "accelerator" and fields["board"] == "zcu102"
    assert fields["predicted_cycles_per_step"] == fields["cycles_per_step"] > 0
    assert fields["board_serial_seconds_per_step"] == pytest.approx(
        fields["board_fabric_seconds_per_step"] + fields["board_host_seconds_per_step"],
        rel=1e-12)
    assert max(fields["board_fabric_seconds_per_step"], fields["board_host_seconds_per_step"]) \
        <= fields["seconds_per_step_at_fmax"] <= fields["board_serial_seconds_per_step"]
    assert fields["board_host_exposed_seconds_per_step"] == pytest.approx(
        fields["seconds_per_step_at_fmax"] - fields["board_fabric_seconds_per_step"],
        rel=1e-9)
    assert fields["board_host_seconds_per_step"] > 0 and fields["dsp"] > 0
    units = unit_cost_fields(ctx)
    assert (fields["zo_peak_bytes"], fields["backprop_peak_bytes"]) == (
        units["zo_peak_bytes"], units["backprop_peak_bytes"])
    assert fields["onchip_bits"] is None and fields["static_joules_per_step"] is None
    assert units["design"] == "units"


@pytest.mark.parametrize("flags, message", [
    (["--board", "nope"], "--board must be one of"),
    (["--design", "units", "--board", "ulx3s-85f"], "--board must be one of zcu102")])
def test_bad_cost_flags_are_one_line(flags, message, tmp_path, capsys):
    code = main(["finetune", "--model", "tiny", "--out", str(tmp_path / "o"), *flags])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
@pytest.mark.ci
def test_the_board_command_of_issue_32(tmp_path):
    """The acceptance command: MiniLM, 6 blocks, batch 4 x seq 128, q 2, no steps; the
    board-sized design's keys in the JSON."""
    path = tmp_path / "F.json"
    code = main(["finetune", "--board", "zcu102", "--blocks", "6", "--batch", "4",
                 "--seq-len", "128", "--queries", "2", "--steps", "0", "--n-train", "64",
                 "--n-test", "8", "--calibration", "8", "--no-float", "--quiet",
                 "--out", str(tmp_path / "out"), "--json", str(path)])
    result = json.loads(path.read_text())
    assert code == 0 and result["design"] == "accelerator"
    for key in ("seconds_per_step_at_fmax", "board_host_seconds_per_step", "dsp",
                "gops_per_dsp", "ddr_bytes_per_step", "cycles_per_step"):
        assert result[key] > 0, key
    assert result["seconds_per_step_at_fmax"] > result["board_host_seconds_per_step"]


@pytest.mark.slow
@pytest.mark.ci
def test_rtl_all_with_the_accelerators_mapping_is_bit_exact(tmp_path):
    """``--rtl all --design accelerator``: every adapter call split as the accelerator maps
    it (X·W and U on the engine, the narrowed ZO-layer call) on Verilator, each call equal
    to the golden model's; the run's losses equal the direct golden run's."""
    code, _, split = _run(tmp_path, "--rtl", "all", "--design", "accelerator", name="split")
    code_direct, _, direct = _run(tmp_path, "--design", "units", name="direct")
    assert code == code_direct == 0 and split["bit_exact"] is True
    # per step (q 4, one block): 2q forwards of 2 adapters (each X·W, U and the narrow
    # call), 5 engine calls, 2 x 2 x 2 attention jobs and a softmax call, and q update
    # walks of 2 adapters
    assert split["rtl_calls"] == 2 * (2 * 4 * (2 * 3 + 5 + 2 * 2 * 2 + 1) + 4 * 2)
    assert split["loss"] == direct["loss"]
    assert split["cycles_source"].startswith("co-simulation")
