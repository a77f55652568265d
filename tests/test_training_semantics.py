"""The minibatch sequence of a training, pinned: step ``t`` of a run with seed ``s`` trains on
``batch`` distinct training-split indices drawn by ``numpy.random.default_rng([s, t])``
(docs/zo-training.md), in ``batch_index`` and in the training loop that uses it."""
from __future__ import annotations

import json

import numpy as np
import pytest

from zoforge.golden.zo import train as train_module
from zoforge.golden.zo.config import TrainConfig
from zoforge.golden.zo.train import batch_index, train

#: (seed, step) -> the batch of 8 out of 64, as numpy 1.x/2.x's PCG64 draws it (recorded)
PINNED = {(0, 0): [48, 4, 1, 30, 18, 16, 2, 36], (0, 1): [33, 49, 58, 18, 51, 14, 29, 61],
          (1, 0): [57, 26, 2, 60, 51, 8, 44, 29], (7, 3): [53, 56, 6, 14, 21, 46, 31, 41]}


def derived_batch(seed: int, step: int, n_train: int, batch: int) -> list[int]:
    """The definition, written out: a PCG64 stream seeded by the sequence (seed, step), then
    ``batch`` indices without replacement."""
    generator = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, step])))
    return generator.choice(n_train, size=batch, replace=False).tolist()


def test_the_batch_sequence_is_pinned():
    for (seed, step), expected in PINNED.items():
        assert batch_index(seed, step, 64, 8).tolist() == expected, (seed, step)


@pytest.mark.parametrize("seed", [0, 1, 12345])
def test_every_step_and_seed_draws_its_own_batch(seed):
    batches = [batch_index(seed, step, 2000, 16).tolist() for step in range(30)]
    for step, drawn in enumerate(batches):
        assert drawn == derived_batch(seed, step, 2000, 16), step
        assert len(set(drawn)) == 16 and all(0 <= i < 2000 for i in drawn)
    assert len({tuple(b) for b in batches}) == 30                # the step moves the batch
    other = [batch_index(seed + 1, step, 2000, 16).tolist() for step in range(30)]
    assert all(a != b for a, b in zip(batches, other))            # so does the seed


def test_the_training_loop_trains_step_t_on_batch_t(tmp_path, monkeypatch):
    """The indices the optimizer is given at each step of ``train`` (seed 3: the seed counts
    too), against the definition."""
    rng = np.random.default_rng(0)
    words = ["great", "fun", "dull", "bland", "the", "film"]
    lines = [json.dumps({"text": " ".join(rng.choice(words, 4)) + f" {i}", "label": i % 2})
             for i in range(120)]
    data = tmp_path / "words.jsonl"
    data.write_text("\n".join(lines) + "\n")
    seen, real = [], train_module.build_optimizer

    def recording(cfg, trainable):
        optimizer = real(cfg, trainable)
        step = optimizer.step

        def recorded(index):
            seen.append(np.asarray(index).tolist())
            return step(index)
        optimizer.step = recorded
        return optimizer
    monkeypatch.setattr(train_module, "build_optimizer", recording)
    cfg = TrainConfig(model="tiny", data=str(data), n_train=40, n_val=20, n_test=20,
                      max_len=8, batch=4, steps=5, seed=3, progress=False,
                      out=str(tmp_path / "run"), cache_dir=str(tmp_path / "cache"))
    train(cfg)
    assert seen == [derived_batch(3, t, 40, 4) for t in range(5)]
