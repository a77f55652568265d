"""``zoforge finetune``'s checkpoint and resumption (issue 34 item 5): a run interrupted at
step k and started again on its ``--out`` ends equal to an uninterrupted run (losses, the
few-shot curves and the masters, int8 and float, bit for bit); the checkpoint on disk holds
the masters the golden model reaches after k steps (derived here by a second route: a bare
:class:`ZoFinetune` stepped k times); another configuration's checkpoint is a one-line
error before any work, a damaged one is set aside with a one-line notice, and ``--rtl``
refuses to resume. The signal itself (a subprocess) is ``tests/test_interrupts.py``'s."""
from __future__ import annotations

import json

import pytest

from zoforge.cli import main
from zoforge.config import data_hash
from zoforge.golden.finetune.config import FinetuneConfig
from zoforge.sim import finetune_checkpoint as ckpt

#: Three steps of few-shot training (curve at 0 and 3), the float twin beside.
ARGS = ["finetune", "--model", "tiny", "--blocks", "1", "--seq-len", "8", "--steps", "3",
        "--k-shot", "2", "--n-train", "40", "--n-test", "8", "--calibration", "8",
        "--quiet", "--checkpoint-every", "100"]
CFG = FinetuneConfig(model="tiny", blocks=1, seq_len=8, steps=3, k_shot=2, n_train=40,
                     n_test=8, calibration=8)
#: What differs between two equal runs: the host's time.
TIMED = ("host_seconds_per_step",)


@pytest.fixture
def spy(monkeypatch):
    """The masters each ZO run holds when it is evaluated after its steps (by arithmetic),
    and a switch that raises KeyboardInterrupt inside step number ``stop_in`` (0-based,
    the int8 run's, in the middle of the step: its generator has moved)."""
    from zoforge.golden.finetune import train
    seen = {"masters": {}, "stop_in": None}
    step, evaluate = train.ZoFinetune.step, train.ZoFinetune.evaluate

    def stepping(self):
        if self.arithmetic == "int8" and self.step_index == seen["stop_in"]:
            seen["stop_in"] = None
            self.loss(*(t[:1] for t in self.prepared.train), self.masters, +1)   # half a step
            raise KeyboardInterrupt
        return step(self)

    def evaluating(self, *args, **kwargs):
        seen["masters"][self.arithmetic] = {k: v.clone() for k, v in self.masters.items()}
        return evaluate(self, *args, **kwargs)
    monkeypatch.setattr(train.ZoFinetune, "step", stepping)
    monkeypatch.setattr(train.ZoFinetune, "evaluate", evaluating)
    return seen


def _result(path):
    result = json.loads(path.read_text())
    return {k: v for k, v in result.items() if k not in TIMED}


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """An uninterrupted run: its result, and its masters after the steps."""
    from zoforge.golden.finetune import train
    tmp = tmp_path_factory.mktemp("straight")
    seen = {}
    evaluate = train.ZoFinetune.evaluate

    def evaluating(self, *args, **kwargs):
        seen[self.arithmetic] = {k: v.clone() for k, v in self.masters.items()}
        return evaluate(self, *args, **kwargs)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(train.ZoFinetune, "evaluate", evaluating)
        assert main([*ARGS, "--out", str(tmp / "out"), "--json", str(tmp / "r.json")]) == 0
    assert not (tmp / "out" / ckpt.CHECKPOINT).exists()      # finished: removed
    return _result(tmp / "r.json"), seen


def _equal_masters(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and a[k].equal(b[k])
                                        for k in a)


def test_an_interrupted_run_resumes_bit_for_bit(tmp_path, spy, straight, capsys):
    out = tmp_path / "out"
    spy["stop_in"] = 2                                    # in the third step
    assert main([*ARGS, "--out", str(out)]) == 130
    assert capsys.readouterr().err == "zoforge: interrupted\n"
    state = json.loads((out / ckpt.CHECKPOINT).read_text())
    assert state["step"] == 2 and state["key"] == ckpt.run_key(CFG, True)
    assert len(state["result"]["loss"]) == len(state["result"]["float_loss"]) == 2
    assert len(state["result"]["train_loss_curve"]) == 1          # the curve's step 0
    # the masters after 2 steps, by a second route: a bare ZoFinetune stepped twice
    from zoforge.golden.finetune.train import ZoFinetune, load_model, prepare
    prepared = prepare(CFG, load_model(CFG))
    for arithmetic in ("int8", "float"):
        bare = ZoFinetune(prepared, arithmetic)
        losses = [bare.step().loss for _ in range(2)]
        assert state[arithmetic]["masters"] == {k: v.tolist() for k, v in bare.masters.items()}
        assert state["result"]["loss" if arithmetic == "int8" else "float_loss"] == losses
    assert any(v != 0 for row in state["int8"]["masters"]["block0.query"] for v in row)
    capsys.readouterr()
    assert main([*ARGS, "--out", str(out), "--json", str(tmp_path / "r.json")]) == 0
    assert "resumed at step 2" in capsys.readouterr().out
    expected, masters = straight
    assert _result(tmp_path / "r.json") == expected
    for arithmetic in ("int8", "float"):
        assert _equal_masters(spy["masters"][arithmetic], masters[arithmetic])
    assert sorted(p.name for p in out.iterdir()) == sorted(       # --design accelerator
        ("finetune.json", "finetune.png", "config.toml", "accelerator.toml"))


def test_a_checkpoint_of_another_configuration_is_refused_before_any_work(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    key = ckpt.run_key(CFG.replace(lr=1e-3, seed=5), True)
    state = ckpt.checkpoint(key, 0, {"step_index": 0}, {"step_index": 0},
                            {"accuracy_before": 0.5, "float_accuracy_before": 0.5, "loss": [],
                             "float_loss": [], "train_loss_curve": [1.0],
                             "float_train_loss_curve": [1.0]}, [0, 3], 0.0)
    ckpt.write_checkpoint(out, state)
    for extra, differs in (([], "--lr, --seed"), (["--no-float", "--lr", "0.001", "--seed",
                                                    "5"], "--float")):
        assert main([*ARGS, "--out", str(out), *extra]) == 2
        err = capsys.readouterr().err
        assert err == (f"zoforge: error: --out must be a new folder, or one whose checkpoint "
                       f"has the same configuration (got {out}: differs in {differs})\n")
    assert main([*ARGS, "--out", str(out), "--lr", "0.001", "--seed", "5", "--rtl",
                 "adapters"]) == 2
    assert capsys.readouterr().err.startswith("zoforge: error: --rtl must be none to resume "
                                              f"the run checkpointed in {out} at step 0")
    assert sorted(p.name for p in out.iterdir()) == [ckpt.CHECKPOINT]     # no work done


GOOD = {"accuracy_before": 0.5, "float_accuracy_before": 0.25, "loss": [1.0, 2.0],
        "float_loss": [1.0, 2.0], "train_loss_curve": [0.5], "float_train_loss_curve": [0.5]}


def _damaged(**changes) -> str:
    """A checkpoint of ARGS' run at step 2, with ``changes`` (JSON text)."""
    key = ckpt.run_key(CFG, True)
    state = {"format": ckpt.FORMAT, "key": key, "digest": data_hash(key), "step": 2,
             "int8": {"step_index": 2}, "float": {"step_index": 2}, "result": dict(GOOD),
             "seconds": 1.5}
    for name, value in changes.items():
        if name in GOOD:
            state["result"][name] = value
        else:
            state[name] = value
    return json.dumps(state)


@pytest.mark.parametrize("text, problem", [
    ("{", "cannot be read"),
    ('{"step": NaN}', "cannot be read: NaN is not a number"),
    ("[1, 2]", "holds a list, not a checkpoint"),
    (_damaged(format="other"), "format is not"),
    (_damaged(digest="0" * 20), "its digest is not its configuration's"),
    (_damaged(step=4), "step 4 is not a step count of 0 to 3"),
    (_damaged(step=True), "step True is not a step count"),
    (_damaged(step=1), "int8 is not a run's state at step 1"),
    (_damaged(float=None), "float is not a run's state at step 2"),
    (_damaged(seconds=-1.0), "seconds is not a finite number >= 0"),
    (_damaged(loss=[1.0]), "result.loss is not a list of 2 numbers"),
    (_damaged(float_loss=[1.0, 7.0]).replace("7.0", "1e999"),
     "result.float_loss holds a value that is not a finite number"),
    (_damaged(train_loss_curve=[0.5, 0.4]), "result.train_loss_curve is not a list of 1"),
    (_damaged(accuracy_before=1.5), "result.accuracy_before is not an accuracy"),
    (_damaged(junk=1), "does not have the keys"),
])
def test_a_damaged_checkpoint_is_set_aside_with_one_line(tmp_path, capsys, text, problem):
    path = tmp_path / ckpt.CHECKPOINT
    path.write_text(text)
    assert ckpt.read_checkpoint(tmp_path, ckpt.run_key(CFG, True), 3, [0, 3]) is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and problem in err, err
    assert err.endswith("moved it to checkpoint.json.damaged and starting from step 0\n")
    assert not path.exists() and (tmp_path / "checkpoint.json.damaged").read_text() == text


def test_the_good_checkpoint_of_the_damaged_cases_is_read(tmp_path):
    """The template above is itself accepted (so each case fails for its own change)."""
    (tmp_path / ckpt.CHECKPOINT).write_text(_damaged())
    state = ckpt.read_checkpoint(tmp_path, ckpt.run_key(CFG, True), 3, [0, 3])
    assert state["step"] == 2 and state["result"] == GOOD


def test_a_state_that_does_not_fit_the_model_is_set_aside_and_the_run_starts_over(
        tmp_path, capsys, straight):
    """Masters of another shape: found when loaded into the run (after the model)."""
    out = tmp_path / "out"
    out.mkdir()
    text = _damaged()
    state = json.loads(text)
    state["int8"] = {"arithmetic": "int8", "step_index": 2, "masters": {"block0.query": [[1]]},
                     "generator": {}, "control": {}}
    (out / ckpt.CHECKPOINT).write_text(json.dumps(state))
    assert main([*ARGS, "--out", str(out), "--json", str(tmp_path / "r.json")]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is damaged (checkpoint must be a state with masters" in err
    assert _result(tmp_path / "r.json") == straight[0]           # from step 0
    assert (out / "checkpoint.json.damaged").exists()
