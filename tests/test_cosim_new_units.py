# amaranth: UnusedElaboratable=no
"""The co-simulation commands run the units they report on (by construction):

* ``zoforge cosim engine`` on an engine built with ``--gelu`` runs GELU jobs (``--output
  gelu``, or the default ``auto``'s GELU and int8 jobs in turn), each compared with
  ``engine_gemm_gelu`` (a planted difference in it is seen) and its CYCLES the GELU path's;
  ``--output gelu`` on a plain engine is one line naming ``--output``;
* ``zoforge cosim accelerator`` co-simulates the GELU engine and the softmax unit where the
  accelerator has them, its verdict the conjunction of every unit's, each named with its
  job count (the units' runs stubbed by default; slow: on Verilator);
* ``replay_calls`` refuses a unit's run that returns fewer results than its calls;
* ``zoforge cosim softmax`` refuses ``--jobs x --max-rows x --max-len`` above
  ``MAX_RANDOM_SCORES`` before any score is drawn (exactly the bound accepted).
"""
from __future__ import annotations

import pytest
import torch

from zoforge.cli import main
from zoforge.errors import ConfigError
from zoforge.hw.accel import AcceleratorConfig
from zoforge.hw.engine.config import EngineConfig
from zoforge.hw.engine.cycles import engine_job_cycles
from zoforge.sim.engine_cosim import EngineCosimOptions, cosim_engine, job_outputs

#: The engine tests/test_engine_gelu.py builds (cached): 4x4, two k-steps a beat, GELU mode.
GELU_ENGINE = EngineConfig(rows=4, cols=4, pack=2, max_m=24, max_k=40, max_n=24, gelu=True)
ENGINE_FLAGS = ["--rows", "4", "--cols", "4", "--pack", "2", "--max-m", "24", "--max-k",
                "40", "--max-n", "24"]


# -- zoforge cosim engine --output ----------------------------------------------------------

def test_auto_output_mixes_gelu_jobs_on_a_gelu_engine_only():
    auto = EngineCosimOptions(jobs=3)
    assert job_outputs(GELU_ENGINE, auto) == ["gelu", "int8", "gelu"]
    assert job_outputs(GELU_ENGINE.replace(gelu=False), auto) == ["int8"] * 3
    assert job_outputs(GELU_ENGINE, auto.replace(output="raw")) == ["raw"] * 3


def test_gelu_output_on_a_plain_engine_is_one_line_naming_output(capsys):
    with pytest.raises(ConfigError) as error:
        cosim_engine(GELU_ENGINE.replace(gelu=False), EngineCosimOptions(output="gelu"))
    assert error.value.parameter == "output"
    code = main(["cosim", "engine", *ENGINE_FLAGS, "--output", "gelu", "--jobs", "1"])
    message = capsys.readouterr().err
    assert code == 2 and message.count("\n") == 1
    assert message.startswith("zoforge: error: --output must be one of auto, int8, raw")
    code = main(["cosim", "engine", *ENGINE_FLAGS, "--gelu", "--output", "gelu", "--relu"])
    message = capsys.readouterr().err
    assert code == 2 and message.startswith("zoforge: error: --relu must be false")


def test_cosim_engine_with_gelu_runs_the_gelu_path():
    """The default on a GELU engine: a GELU job then an int8 one, bit-exact; their CYCLES
    are the model's with and without the GELU path (its 23 cycles: the GELU jobs ran)."""
    report = cosim_engine(GELU_ENGINE, EngineCosimOptions(m=16, k=32, n=16, jobs=2, seed=1))
    assert report["bit_exact"] is True and report["mismatches"] == 0
    assert report["job_outputs"] == {"int8": 1, "gelu": 1} and report["gelu"] is True
    assert report["cycles"] == (engine_job_cycles(GELU_ENGINE, 16, 32, 16, gelu=True)
                                + engine_job_cycles(GELU_ENGINE, 16, 32, 16))


def test_a_planted_gelu_difference_is_seen(monkeypatch):
    """``--output gelu``: every job's output is compared with ``engine_gemm_gelu``."""
    import zoforge.golden.engine_gelu as engine_gelu
    real = engine_gelu.engine_gemm_gelu
    monkeypatch.setattr(engine_gelu, "engine_gemm_gelu",
                        lambda *args: real(*args) ^ torch.ones((), dtype=torch.int8))
    report = cosim_engine(GELU_ENGINE, EngineCosimOptions(m=5, k=16, n=6, output="gelu"))
    assert report["job_outputs"] == {"gelu": 1}
    assert report["bit_exact"] is False and report["mismatches"] == 5 * 6


# -- zoforge cosim accelerator ----------------------------------------------------------------

SMALL = AcceleratorConfig(engines=2, engine_rows=4, engine_cols=4, engine_max_m=16,
                          engine_max_k=16, engine_max_n=16, layers=1, layer_max_m=16,
                          layer_max_k=16, layer_max_n=16, layer_max_r=4)
#: SMALL with a GELU engine and a softmax unit of 4 lanes, rows of up to 8 keys.
WITH_UNITS = SMALL.replace(gelu_engines=1, softmax_units=1, softmax_lanes=4,
                           softmax_max_len=8)


@pytest.fixture
def stub_units(monkeypatch):
    """Every unit's co-simulation stubbed: the calls made, in order; ``verdicts`` (name ->
    bit_exact) sets what each returns."""
    import zoforge.sim.engine_cosim as engine_cosim
    import zoforge.sim.softmax_cosim as softmax_cosim
    import zoforge.sim.zolayer_cosim as zolayer_cosim
    calls, verdicts = [], {}

    def engine(config, options):
        name = "gelu_engine" if config.gelu else "engine"
        calls.append((name, config, options))
        return {"bit_exact": verdicts.get(name, True), "jobs": options.jobs}

    def layer(config, options):
        calls.append(("layer", config, options))
        return {"bit_exact": verdicts.get("layer", True)}

    def softmax(config, options, simulator="verilator"):
        calls.append(("softmax", config, options))
        return {"bit_exact": verdicts.get("softmax", True), "jobs": options.jobs}
    monkeypatch.setattr(engine_cosim, "cosim_engine", engine)
    monkeypatch.setattr(zolayer_cosim, "cosim_layer", layer)
    monkeypatch.setattr(softmax_cosim, "cosim_random", softmax)
    return calls, verdicts


def test_accelerator_cosim_runs_the_gelu_engine_and_the_softmax_unit(stub_units):
    from zoforge.sim.accel_cosim import AccelCosimOptions, cosim_accelerator
    calls, verdicts = stub_units
    result = cosim_accelerator(WITH_UNITS, AccelCosimOptions(jobs=3, steps=2))
    assert [name for name, _, _ in calls] == ["engine", "gelu_engine", "layer", "softmax"]
    configs = {name: config for name, config, _ in calls}
    assert configs["engine"] == WITH_UNITS.engine_config()
    assert configs["gelu_engine"] == WITH_UNITS.engine_config(gelu=True)
    assert configs["softmax"] == WITH_UNITS.softmax_config()
    assert calls[1][2].output == "auto" and calls[0][2].output == "int8"
    assert result["bit_exact"] is True
    assert result["units"] == {"engine": {"bit_exact": True, "jobs": 3},
                               "gelu_engine": {"bit_exact": True, "jobs": 3},
                               "layer": {"bit_exact": True, "jobs": 2},
                               "softmax": {"bit_exact": True, "jobs": 3}}
    # the verdict is every unit's: one unit's difference makes it false
    for unit in ("gelu_engine", "softmax", "layer", "engine"):
        verdicts.clear()
        verdicts[unit] = False
        result = cosim_accelerator(WITH_UNITS, AccelCosimOptions(jobs=1))
        assert result["bit_exact"] is False and result["units"][unit]["bit_exact"] is False
    # without them: the plain engine and the layer only; all engines GELU: no plain engine
    calls.clear()
    cosim_accelerator(SMALL)
    assert [name for name, _, _ in calls] == ["engine", "layer"]
    calls.clear()
    cosim_accelerator(SMALL.replace(gelu_engines=2))
    assert [name for name, _, _ in calls] == ["gelu_engine", "layer"]


def test_accelerator_softmax_work_refused_before_any_unit_runs(stub_units):
    from zoforge.sim.accel_cosim import AccelCosimOptions, cosim_accelerator
    from zoforge.sim.softmax_cosim import MAX_RANDOM_SCORES
    calls, _ = stub_units
    config = WITH_UNITS.replace(softmax_max_len=1024)
    jobs = MAX_RANDOM_SCORES // (6 * 1024)
    cosim_accelerator(config, AccelCosimOptions(jobs=jobs))
    calls.clear()
    with pytest.raises(ConfigError, match=r"^--jobs x --softmax-max-len \(x 6 rows a job\) "
                                          r"must be at most 4,194,304"):
        cosim_accelerator(config, AccelCosimOptions(jobs=jobs + 1))
    assert calls == []


@pytest.mark.slow          # builds a GELU engine and a softmax unit (Verilator): CI's -m ci
@pytest.mark.ci
def test_accelerator_cosim_with_every_unit_on_verilator():
    from zoforge.sim.accel_cosim import AccelCosimOptions, cosim_accelerator
    result = cosim_accelerator(WITH_UNITS, AccelCosimOptions(jobs=2, steps=1))
    assert result["bit_exact"] is True
    assert set(result["units"]) == {"engine", "gelu_engine", "layer", "softmax"}
    assert all(unit["bit_exact"] and unit["jobs"] > 0 for unit in result["units"].values())
    assert result["gelu_engine"]["job_outputs"] == {"int8": 1, "gelu": 1}
    assert result["softmax"]["jobs"] == 2 and result["softmax"]["bit_exact"] is True


# -- replay_calls: no call silently left without its result -----------------------------------

def test_replay_refuses_fewer_softmax_results_than_calls(monkeypatch):
    import numpy as np

    import zoforge.sim.finetune_cosim as finetune_cosim
    from zoforge.golden.finetune.config import FinetuneConfig
    from zoforge.sim.softmax_cosim import random_call
    cfg = FinetuneConfig(blocks=1, seq_len=8, batch=2, queries=2, rank=4, engine_rows=4,
                         engine_cols=4)
    unit = finetune_cosim.cosim_design(cfg.seq_len)
    rng = np.random.default_rng(0)
    calls = [random_call(rng, unit), random_call(rng, unit)]

    def short(calls, *args, **kwargs):                 # a replay that lost its last result
        return [torch.zeros(calls[0].scores.shape, dtype=torch.int64)], [{"cycles": 1}]
    monkeypatch.setattr(finetune_cosim, "replay_softmax_calls", short)
    with pytest.raises(ValueError, match="zip"):
        finetune_cosim.replay_calls(cfg, 32, 64, calls, simulator="verilator",
                                    backend="jobserver")


# -- zoforge cosim softmax: the total work bounded --------------------------------------------

def _no_drawing(monkeypatch):
    """Drawing a random softmax job fails the test (fast, where a bound is missing)."""
    import zoforge.sim.softmax_cosim as softmax_cosim

    def drawn(*args, **kwargs):
        raise AssertionError("a random job was drawn")
    monkeypatch.setattr(softmax_cosim, "random_call", drawn)
    return softmax_cosim


def test_softmax_cosim_work_bounded_at_the_product(capsys, monkeypatch):
    from zoforge.sim.softmax_cosim import MAX_RANDOM_SCORES, check_random_work
    _no_drawing(monkeypatch)
    assert MAX_RANDOM_SCORES == 1 << 22
    check_random_work(1, 4096, 1024)                        # exactly the bound
    check_random_work(4, 1024, 1024)
    for jobs, rows, length in ((1, 4097, 1024), (4097, 1, 1024), (1, 4096 * 1024 + 1, 1)):
        with pytest.raises(ConfigError) as error:
            check_random_work(jobs, rows, length)
        assert error.value.parameter == "--jobs x --max-rows x --max-len"
    code = main(["cosim", "softmax", "--jobs", "1000", "--max-rows", "4096",
                 "--max-len", "1024"])
    message = capsys.readouterr().err
    assert code == 2 and message.count("\n") == 1
    assert message.startswith("zoforge: error: --jobs x --max-rows x --max-len must be at "
                              "most 4,194,304") and "1000 x 4096 x 1024" in message


def test_softmax_cosim_refuses_before_drawing(monkeypatch):
    """The bound comes before any random job: one over it draws nothing."""
    from zoforge.hw.softmax.config import SoftmaxConfig
    from zoforge.sim.softmax_host import SoftmaxCosimOptions
    softmax_cosim = _no_drawing(monkeypatch)
    with pytest.raises(ConfigError):
        softmax_cosim.cosim_random(SoftmaxConfig(max_len=1024),
                                   SoftmaxCosimOptions(jobs=2, max_rows=2049))
    with pytest.raises(AssertionError, match="drawn"):      # exactly the bound: it goes on
        softmax_cosim.cosim_random(SoftmaxConfig(max_len=1024),
                                   SoftmaxCosimOptions(jobs=2, max_rows=2048))


def test_engine_results_refuse_fewer_counters_than_jobs():
    """A host program that returns fewer jobs' counters than it ran jobs is an error, not
    a verdict over the jobs it returned."""
    import numpy as np

    from zoforge.sim.engine_cosim import EngineCosim, output_beats, random_job
    cosim = EngineCosim(GELU_ENGINE)
    rng = np.random.default_rng(0)
    jobs = [random_job(rng, 3, 4, 5, raw=True) for _ in range(2)]
    words = np.zeros(output_beats(3, 5, 4, 4, True) * 4, np.uint32)
    stats = [{"cycles": 1, "array_cycles": 0, "irq": True}]
    assert len(cosim.check_results(jobs[:1], [words], stats)) == 1
    with pytest.raises(ValueError, match="zip"):
        cosim.check_results(jobs, [words, words], stats)
