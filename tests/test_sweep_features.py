"""Shared work across a sweep's workers: the frozen-prefix features of one key are computed
once, the other trainings waiting for them (a file lock beside the cache entry)."""
from __future__ import annotations

import threading
import time

from zoforge.golden import models
from zoforge.golden.zo import features
from zoforge.golden.zo.config import TrainConfig


def test_parallel_trainings_compute_one_key_s_features_once(tmp_path, monkeypatch):
    calls = []
    real = models.hidden_states

    def slow_hidden_states(*args, **kwargs):
        calls.append(threading.get_ident())
        time.sleep(0.3)                 # long enough for the others to arrive meanwhile
        return real(*args, **kwargs)
    monkeypatch.setattr(models, "hidden_states", slow_hidden_states)
    cfg = TrainConfig(model="tiny", trainable="head", n_train=16, n_val=8, n_test=8,
                      steps=2, batch=4, cache_dir=str(tmp_path / "cache"), progress=False,
                      threads=1)
    features.load_model(cfg)            # the imports once, before the threads race on them
    errors = []

    def build():
        try:
            features.build_trainable(cfg)
        except Exception as error:      # noqa: BLE001 - reported by the assertion below
            errors.append(error)
    threads = [threading.Thread(target=build) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    splits = len(features.SPLITS)
    assert len(calls) == splits, f"{len(calls)} feature passes for {splits} splits"
    assert len(set(calls)) == 1           # one thread computed them, the others waited
