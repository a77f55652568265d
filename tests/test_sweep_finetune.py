"""The sweep's ``finetune`` task (issue 33 item 4): a SWEEP.toml with ``task = "finetune"``
expands to FinetuneConfig points, runs end to end through the store, and a fine-tuning task
interrupted mid-run goes on from its checkpoint to the uninterrupted result."""
from __future__ import annotations

import sqlite3

import pytest

from zoforge.cli import main
from zoforge.errors import ConfigError
from zoforge.golden.finetune.config import FinetuneConfig
from zoforge.golden.finetune.train import ZoFinetune
from zoforge.golden.zo.perturbation import make_perturbation
from zoforge.sweep.results import group_runs, read_runs
from zoforge.sim.finetune_checkpoint import run_key
from zoforge.sweep.spec import stable_key, sweep_from_dict, train_key
from zoforge.sweep.store import Store
from zoforge.sweep.tasks import (FINETUNE_CHECKPOINT, PERTURBATION_OF, TRAIN_FIELDS,
                                 finetune_spec, run_folder, run_task)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TINY = {"model": "tiny", "blocks": 1, "seq_len": 8, "n_train": 40, "n_test": 20,
        "calibration": 20, "k_shot": 4, "rank": 4}
#: One generator, two seeds, the cheapest report: the default run's end-to-end sweep.
SWEEP = {"name": "ft", "task": "finetune", "train": dict(TINY, steps=4),
         "points": [{"strategy": "masked"}], "grid": {"seed": [0, 1]},
         "report": {"activity_cycles": 10, "power": False, "pnr": False}}


def test_the_labels_are_the_head_level_sources_of_the_same_generators():
    for strategy, source in PERTURBATION_OF.items():
        assert make_perturbation(source).hardware().variant == strategy


def test_a_finetune_sweep_expands_to_finetune_points():
    sweep = sweep_from_dict(SWEEP)
    assert [p.train.seed for p in sweep.points] == [0, 1]
    point = sweep.points[0]
    assert point.train == FinetuneConfig(**TINY, steps=4, strategy="masked")
    assert point.generator == point.train.generator()
    spec = point.train_spec()
    fields = point.train.field_values()     # engines, integer: not the earlier values, kept
    assert (fields["attention"], fields["nonlinear"]) == ("engines", "integer")
    assert spec == {"task": "finetune", "perturbation": "masked-onthefly", **fields}
    assert point.train_key == stable_key("train", {"task": "finetune", **fields})
    assert [kind for _, kind, _ in sweep.tasks()] == ["report", "train", "train"]
    assert sweep.data["task"] == "finetune"
    assert "task" not in sweep_from_dict({"train": {"model": "tiny"}}).data


@pytest.mark.parametrize("data, expected", [
    (dict(SWEEP, task="finetuning"), "task in the sweep must be one of train, finetune "
                                     "(got finetuning)"),
    (dict(SWEEP, task=["finetune"]), "task in the sweep must be one of train, finetune"),
    (dict(SWEEP, train={"perturbation": "gaussian"}), "key 'train.perturbation' in the "
                                                      "sweep must be one of model, blocks"),
    (dict(SWEEP, grid={"n_rng": [7, 8]}), "grid.n_rng in the sweep must be of the form "
                                          "2^k - 1"),
    (dict(SWEEP, points=[{"strategy": "pregen", "n_rng": 15}]),
     "points[0].n_rng in the sweep must be left at 7 with strategy pregen"),
    (dict(SWEEP, train={"k_shot": -1}), "train.k_shot in the sweep must be an integer"),
])
def test_bad_finetune_sweeps_are_one_line_errors(data, expected):
    with pytest.raises(ConfigError) as error:
        sweep_from_dict(data)
    assert expected in str(error.value) and "\n" not in str(error.value)


@pytest.mark.slow        # ~20 CPU-s of training: CI's -m ci runs it (default-run CPU)
@pytest.mark.ci
def test_a_finetune_sweep_runs_end_to_end_through_the_store(tmp_path, capsys):
    path = tmp_path / "ft.toml"
    path.write_text('name = "ft"\ntask = "finetune"\n[train]\n'
                    + "".join(f"{k} = {v!r}\n".replace("'", '"') for k, v in TINY.items())
                    + 'steps = 4\nstrategy = "masked"\n[grid]\nseed = [0, 1]\n'
                    '[report]\nactivity_cycles = 10\npower = false\npnr = false\n')
    store_dir = tmp_path / "store"
    argv = ["sweep", "--config", str(path), "--store", str(store_dir), "--jobs", "1", "--no-progress"]
    assert main(argv) == 0
    store = Store(store_dir)
    try:
        runs = read_runs(store, "ft")
        assert [r.status for r in runs] == ["done", "done"]
        for run in runs:
            assert set(TRAIN_FIELDS) <= set(run.train)
            assert run.train["final_loss"] == run.train["train_loss_after"] > 0
            assert run.train["train_loss_curve"][-1] == run.train["final_loss"]
            assert run.train["curve_steps"] == [0, 4] and run.train["d"] == 4 * 32 * 2
            assert 0 <= run.train["accuracy_after"] <= 1
            assert run.hardware["LUT"].source == "yosys-estimate"
        assert runs[0].train["final_loss"] != runs[1].train["final_loss"]   # two seeds
        (group,) = group_runs(runs)
        assert group.n == 2 and group.config["perturbation"] == "masked-onthefly"
    finally:
        store.close()
    table = (store_dir / "ft.md").read_text()
    assert "masked-onthefly" in table and "## What to build" in table
    assert main(argv) == 0                      # finished: nothing runs again
    db = sqlite3.connect(store_dir / "sweep.db")
    try:
        rows = db.execute("SELECT status, attempts, completions FROM tasks").fetchall()
    finally:
        db.close()
    assert rows == [("done", 1, 1)] * 3


# three fine-tunings (about 4.5 CPU-seconds): CI runs it, the default run's resume is the
# end-to-end test's second sweep (nothing runs again)
@pytest.mark.slow
@pytest.mark.ci
def test_an_interrupted_finetune_task_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    spec = {"task": "finetune", "perturbation": "pezo-pregen",
            **FinetuneConfig(**TINY, steps=12, strategy="pregen", bits=12,
                             pool_size=255).field_values()}
    key = "train-resume"
    whole = run_task("train", key, spec, str(tmp_path / "whole"))
    assert whole["ok"], whole.get("traceback")
    step = ZoFinetune.step
    calls, kill_at = [], [11]

    def failing(self):
        calls.append(self.step_index)
        if self.step_index in kill_at:
            raise RuntimeError("killed")
        return step(self)
    monkeypatch.setattr(ZoFinetune, "step", failing)
    work = tmp_path / "again"
    broken = run_task("train", key, spec, str(work))
    assert not broken["ok"] and "killed" in broken["error"]
    assert (run_folder(work, key) / FINETUNE_CHECKPOINT).exists()
    calls.clear()
    kill_at.clear()
    resumed = run_task("train", key, spec, str(work))
    assert resumed["ok"], resumed.get("traceback")
    assert calls == [10, 11]                       # from the checkpoint at step 10
    timing = ("steps_per_s", "seconds_per_step")
    assert {k: v for k, v in resumed["result"].items() if k not in timing} == {
        k: v for k, v in whole["result"].items() if k not in timing}
    assert whole["result"]["train_loss_curve"][0] != whole["result"]["final_loss"]


#: A fine-tuning task as the store held it before ``attention`` existed (runs/lora, seed 0 of
#: pezo-fig4-lora, 2026-11-26): its spec and the key it was stored under.
STORED_BEFORE_ATTENTION = (
    "train-322524304d9cbb8caf80",
    {"adapted_blocks": 2, "batch": 32, "bits": 6, "blocks": 6, "calibration": 128,
     "engine_cols": 8, "engine_rows": 8, "eps": 0.004, "k_shot": 16, "layer_cols": 4,
     "layer_rows": 4, "lr": 0.001, "model": None, "n_rng": 7, "n_test": 1000,
     "n_train": 2000, "perturbation": "pezo-onthefly", "pool_seed": 0, "pool_size": 4095,
     "queries": 1, "rank": 8, "seed": 0, "seq_len": 32, "split_seed": 0, "steps": 100,
     "strategy": "onthefly", "task": "finetune", "terms": 3})


@pytest.mark.parametrize("attention", ["host", "engines"])
@pytest.mark.parametrize("nonlinear", ["float", "integer"])
def test_a_stored_spec_reads_back_as_the_run_it_was(attention, nonlinear):
    """Whatever the defaults, a spec the store keeps (:func:`finetune_spec`) reads back as
    the configuration that wrote it."""
    cfg = FinetuneConfig(**TINY, attention=attention, nonlinear=nonlinear)
    fields = {k: v for k, v in finetune_spec(cfg).items() if k not in ("task", "perturbation")}
    assert FinetuneConfig.from_result_fields(fields) == cfg
    stored = run_key(cfg, True)["config"]      # a checkpoint's: compared, never read back
    assert ("attention" in stored, "nonlinear" in stored) == \
        (attention != "host", nonlinear != "float")
    assert ("attention" in fields) == (attention != "host")
    assert ("nonlinear" in fields) == (nonlinear != "float")


def test_a_field_added_at_its_earlier_value_keeps_stored_keys_specs_and_checkpoints():
    """A field added later (``attention``, ``nonlinear``) at the value every earlier run had
    changes no stored key, spec or checkpoint match; another value is another task."""
    key, spec = STORED_BEFORE_ATTENTION
    fields = {k: v for k, v in spec.items() if k not in ("task", "perturbation")}
    cfg = FinetuneConfig.from_result_fields(fields)     # not today's defaults
    assert (cfg.attention, cfg.nonlinear) == ("host", "float")
    assert FinetuneConfig(**fields) == cfg.replace(attention="engines", nonlinear="integer")
    assert train_key(cfg) == key
    assert finetune_spec(cfg) == spec
    assert "attention" not in run_key(cfg, True)["config"]
    assert run_key(cfg, True)["config"] == {k: v for k, v in cfg.to_dict().items()
                                            if k not in ("attention", "nonlinear")}
    other = cfg.replace(attention="engines")
    assert train_key(other) != key
    assert finetune_spec(other)["attention"] == "engines"
    assert run_key(other, True)["config"]["attention"] == "engines"
    integer = cfg.replace(nonlinear="integer")   # the next field added so
    assert cfg.nonlinear == "float"
    assert train_key(integer) not in (key, train_key(other))
    assert finetune_spec(integer)["nonlinear"] == "integer"
    assert run_key(integer, True)["config"]["nonlinear"] == "integer"
