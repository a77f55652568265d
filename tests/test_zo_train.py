"""The training loop and `zoforge train`: learning, result.json and plot, checkpoint and
bit-identical resumption (in process and after SIGKILL), configuration files and errors."""
import json
from pathlib import Path
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from zoforge.cli import main
from zoforge.errors import ConfigError
from zoforge.golden.zo.config import TrainConfig
from zoforge.golden.zo.train import CHECKPOINT, Interrupted, train

POSITIVE = ["great", "wonderful", "superb", "moving", "brilliant", "charming", "fun"]
NEGATIVE = ["awful", "boring", "dull", "terrible", "messy", "tedious", "bland"]


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def words_data(tmp_path_factory):
    """A few hundred separable examples: labels follow the sentiment words used."""
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("data") / "words.jsonl"
    lines = []
    for i in range(400):
        label = i % 2
        words = rng.choice(POSITIVE if label else NEGATIVE, size=4)
        filler = rng.choice(["the", "film", "was", "a", "plot", "actors"], size=3)
        text = " ".join(rng.permutation(np.concatenate([words, filler])))
        lines.append(json.dumps({"text": f"{text} {i}", "label": label}))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def config(tmp_path, data, **overrides):
    values = dict(model="tiny", data=data, n_train=200, n_val=60, n_test=100, max_len=16,
                  batch=16, steps=30, eval_every=10, checkpoint_every=10, progress=False,
                  out=str(tmp_path / "run"), cache_dir=str(tmp_path / "cache"))
    values.update(overrides)
    return TrainConfig(**values)


def test_head_mezo_learns_and_writes_results(tmp_path, words_data):
    cfg = config(tmp_path, words_data, steps=300, lr=0.02, eval_every=100)
    result = train(cfg)
    assert result["accuracy_before"] == 0.5              # zero head: a constant prediction
    assert result["accuracy_after"] >= 0.8
    assert result["final_loss"] < result["test_loss_before"]
    saved = json.loads((tmp_path / "run" / "result.json").read_text())
    for key in ("accuracy_before", "accuracy_after", "final_loss", "steps_per_s", "config"):
        assert key in saved
    assert saved["config"] == cfg.to_dict() and saved["steps_per_s"] > 0
    assert (tmp_path / "run" / "training.png").stat().st_size > 10_000


@pytest.mark.parametrize("overrides", [
    dict(trainable="lora-fa", method="prge", queries=2, perturbation="pezo-onthefly",
         rank=4, lr=0.01),
    dict(trainable="lora-fa", method="pefoo-l", perturbation="pezo-pregen", layer_steps=4,
         rank=4, lr=0.01),
    dict(trainable="head", method="prge", dual=True, queries=1, lr=0.02),
])
def test_resume_is_bit_identical(tmp_path, words_data, overrides):
    whole = train(config(tmp_path / "a", words_data, **overrides))
    theta_whole = torch.load(tmp_path / "a" / "run" / CHECKPOINT, weights_only=False)["theta"]
    cut = config(tmp_path / "b", words_data, **overrides)
    with pytest.raises(Interrupted):
        train(cut, stop_after=15)                      # the last checkpoint is at step 10
    resumed = train(cut)
    state = torch.load(tmp_path / "b" / "run" / CHECKPOINT, weights_only=False)
    assert torch.equal(state["theta"], theta_whole)
    assert state["history"]["loss"] == json.loads(json.dumps(state["history"]["loss"]))
    assert resumed["accuracy_after"] == whole["accuracy_after"]
    assert resumed["final_loss"] == whole["final_loss"]
    assert resumed["val_accuracy"] == whole["val_accuracy"]


def test_resume_refuses_a_different_configuration(tmp_path, words_data):
    with pytest.raises(Interrupted):
        train(config(tmp_path, words_data), stop_after=10)
    with pytest.raises(Exception, match="out"):
        train(config(tmp_path, words_data, lr=0.5))


# a training killed and resumed in subprocesses (slow + ci: CI runs it; out of the default run's 10 CPU-minutes)
@pytest.mark.slow
@pytest.mark.ci
def test_cli_resumes_after_sigkill(tmp_path, words_data):
    args = ["train", "--model", "tiny", "--data", words_data, "--n-train", "200",
            "--n-val", "60", "--n-test", "100", "--max-len", "16", "--steps", "1500",
            "--checkpoint-every", "50", "--eval-every", "1000", "--lr", "0.02",
            "--no-progress", "--cache-dir", str(tmp_path / "cache")]
    reference = tmp_path / "reference"
    assert main(args + ["--out", str(reference)]) == 0
    killed = tmp_path / "killed"
    process = subprocess.Popen([sys.executable, "-m", "zoforge", *args, "--out", str(killed)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (killed / CHECKPOINT).exists() and time.time() < deadline:
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert not (killed / "result.json").exists()
    assert main(args + ["--out", str(killed)]) == 0
    a = torch.load(reference / CHECKPOINT, weights_only=False)
    b = torch.load(killed / CHECKPOINT, weights_only=False)
    assert torch.equal(a["theta"], b["theta"]) and a["history"]["loss"] == b["history"]["loss"]


def test_cli_config_file_and_flags(tmp_path, words_data, capsys):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"model": "tiny", "data": words_data, "n_train": 200,
                                "n_val": 60, "n_test": 100, "max_len": 16, "steps": 5,
                                "lr": 0.02, "progress": False,
                                "cache_dir": str(tmp_path / "cache")}))
    assert main(["train", "--config", str(path), "--steps", "7",
                 "--out", str(tmp_path / "run")]) == 0
    saved = json.loads((tmp_path / "run" / "result.json").read_text())
    assert saved["steps"] == 7 and saved["config"]["lr"] == 0.02


@pytest.mark.parametrize("argv, flag", [
    (["--method", "sgd"], "--method"), (["--n-rng", "8", "--perturbation", "pezo-onthefly"],
                                        "--n-rng"),
    (["--trainable", "full", "--method", "prge"], "--trainable"),
    (["--batch", "0"], "--batch"), (["--eps", "-1"], "--eps"),
    (["--dual", "--method", "mezo"], "--dual"), (["--trainable", "full", "--hw-arith"],
                                                 "--hw-arith"),
])
def test_bad_options_give_one_line_errors(tmp_path, capsys, argv, flag):
    code = main(["train", "--model", "tiny", "--steps", "1", "--no-progress",
                 "--n-train", "20", "--n-val", "4", "--n-test", "4",
                 "--cache-dir", str(tmp_path), "--out", str(tmp_path / "o"), *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith(f"zoforge: error: {flag}") and "\n" not in err


@pytest.mark.slow
def test_default_model_lora_fa_learns(tmp_path):
    """all-MiniLM-L6-v2 + Rotten Tomatoes, P-RGE on LoRA-FA + head: clearly above chance."""
    cfg = TrainConfig(trainable="lora-fa", method="prge", queries=2, batch=8, lr=1e-3,
                      eps=1e-2, steps=600, n_train=1000, n_val=200, n_test=400,
                      eval_every=200, checkpoint_every=200, progress=False,
                      out=str(tmp_path / "run"), cache_dir=str(tmp_path / "cache"))
    result = train(cfg)
    assert result["accuracy_before"] == 0.5 and result["accuracy_after"] >= 0.6


# -- reliability: caches and checkpoints that heal, nothing unpickled ------------------------

def test_feature_cache_is_keyed_by_the_data_contents(tmp_path, words_data):
    path = tmp_path / "data.jsonl"
    path.write_text(Path(words_data).read_text())
    first = train(config(tmp_path, str(path), steps=5, out=str(tmp_path / "one")))
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:                         # same file name, other contents: labels swapped
        row["label"] = 1 - row["label"]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    cache = tmp_path / "cache"
    before = set(cache.iterdir())
    second = train(config(tmp_path, str(path), steps=5, out=str(tmp_path / "two")))
    assert set(cache.iterdir()) - before            # a new entry, not the old data's
    assert second["accuracy_before"] == first["accuracy_before"]   # zero head: constant
    assert second["test_loss_before"] == first["test_loss_before"]


def test_damaged_feature_cache_is_rebuilt_with_a_notice(tmp_path, words_data, capsys):
    train(config(tmp_path, words_data, steps=3, out=str(tmp_path / "one")))
    (entry,) = (tmp_path / "cache").glob("*.pt")
    good = entry.read_bytes()
    entry.write_bytes(good[:len(good) // 3])                    # truncated
    again = train(config(tmp_path, words_data, steps=3, out=str(tmp_path / "two")))
    assert "damaged feature cache" in capsys.readouterr().err
    assert entry.read_bytes() == good and again["steps"] == 3   # rebuilt identically


def test_damaged_checkpoint_is_set_aside_and_training_restarts(tmp_path, words_data, capsys):
    cfg = config(tmp_path, words_data, steps=20)
    with pytest.raises(Interrupted):
        train(cfg, stop_after=10)
    checkpoint = tmp_path / "run" / CHECKPOINT
    checkpoint.write_bytes(checkpoint.read_bytes()[:100])
    result = train(cfg)
    assert "cannot be read" in capsys.readouterr().err
    assert (tmp_path / "run" / (CHECKPOINT + ".damaged")).is_file()
    reference = train(config(tmp_path, words_data, steps=20, out=str(tmp_path / "ref")))
    assert result["steps"] == 20 and result["accuracy_after"] == reference["accuracy_after"]
    assert torch.equal(torch.load(checkpoint, weights_only=True)["theta"],
                       torch.load(tmp_path / "ref" / CHECKPOINT, weights_only=True)["theta"])


def test_checkpoint_with_code_is_never_unpickled(tmp_path, words_data, capsys):
    cfg = config(tmp_path, words_data, steps=4)
    out = tmp_path / "run"
    out.mkdir()
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (Path.touch, (marker,))
    torch.save({"config": cfg.resume_key(), "step": 1, "theta": torch.zeros(1),
                "optimizer": Payload()}, out / CHECKPOINT)
    train(cfg)
    assert not marker.exists()
    assert "cannot be read" in capsys.readouterr().err


def test_fewer_steps_than_the_checkpoint_is_a_one_line_error(tmp_path, words_data):
    train(config(tmp_path, words_data, steps=10))
    with pytest.raises(ConfigError) as error:
        train(config(tmp_path, words_data, steps=5))
    assert str(error.value).startswith("steps") and "\n" not in str(error.value)
