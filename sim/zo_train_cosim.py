"""A golden training run replayed on the ZO layer's RTL: ``hw-mlp`` with no hidden layer.

:func:`cosim_training` runs ``steps`` steps of ``zoforge train --trainable hw-mlp --method
hw-prge --hidden 0`` (the linear classifier is one full-weight ZO layer) twice: in the golden
trainer (:mod:`zoforge.golden.zo.hwmlp`) and on the generated layer
(:mod:`zoforge.sim.benches.zo_layer` with the classification host), on the same batches
(``batch_index(seed, step)``, quantized features), from the same initial master and the same
integer step settings. Equal g values and masters after every step mean the golden run is the
exact prediction of the hardware's.
"""
from __future__ import annotations

import numpy as np

from zoforge.errors import ConfigError
from zoforge.golden.zo.config import TrainConfig
from zoforge.golden.zo.features import build_trainable
from zoforge.golden.zo.train import batch_index, build_optimizer
from zoforge.sim.zo_cosim import ZoCosimOptions, run_layer

__all__ = ["cosim_training"]


def cosim_training(cfg: TrainConfig, steps: int, simulator: str = "verilator",
                   source_idle: float = 0.0, sink_backpressure: float = 0.0,
                   backend: str = "cocotb") -> dict:
    """Golden and RTL training of ``cfg`` (``hw-mlp``, ``hidden`` 0) over ``steps`` steps;
    a summary with ``bit_exact``, the per-step losses, g values and accuracies. ``backend``:
    as :class:`~zoforge.sim.zo_cosim.ZoCosimOptions`' (``jobserver``: one persistent
    Verilator process for all the steps)."""
    if cfg.trainable != "hw-mlp" or cfg.hidden:
        raise ConfigError("--hidden", "0 with --trainable hw-mlp (one ZO layer)",
                          f"{cfg.trainable}, hidden {cfg.hidden}")
    if cfg.seed:
        raise ConfigError("--seed", "0 (the generated generator starts in its reset state)",
                          cfg.seed)
    trainable, info = build_trainable(cfg)
    optimizer = build_optimizer(cfg, trainable)
    (master,) = trainable.masters(trainable.theta)
    config = cfg.layer_design(features=master.shape[0], classes=info["num_classes"])
    settings = optimizer.settings
    xs, labels, losses, grads, masters = [], [], [], [], []
    accuracy_before = trainable.evaluate(trainable.theta, "test")[0]
    data_master = master.numpy().copy()
    for step in range(steps):
        x, _, y = trainable.splits["train"].batch(batch_index(cfg.seed, step, cfg.n_train,
                                                               cfg.batch))
        xs.append(x.numpy())
        labels.append(y.numpy())
        losses.append(optimizer.step(batch_index(cfg.seed, step, cfg.n_train, cfg.batch)))
        grads.append(list(optimizer.last_grads))
        masters.append(trainable.masters(trainable.theta)[0].numpy().copy())
    options = ZoCosimOptions(steps=steps, q=cfg.queries, m=cfg.batch, k=master.shape[0],
                             n=master.shape[1], r=1, eps_shift=settings.eps_shift,
                             eta_mult=settings.eta_mult, eta_shift=settings.eta_shift,
                             simulator=simulator, source_idle=source_idle,
                             sink_backpressure=sink_backpressure, seed=cfg.seed,
                             backend=backend)
    data = {"x": np.stack(xs), "labels": np.stack(labels), "master": data_master}
    rtl, result = run_layer(config, options, data, host=optimizer.host.to_dict())
    bench = result.results
    checks = {"grads": result.passed and bench.get("grads") == grads,
              "masters": result.passed and np.array_equal(rtl["masters"], np.stack(masters))}
    return {"bit_exact": all(checks.values()), "checks": checks,
            "failures": result.failures, "steps": steps, "loss_golden": losses,
            "grads_golden": grads, "grads_rtl": bench.get("grads"),
            "accuracy_before": accuracy_before,
            "accuracy_after": trainable.evaluate(trainable.theta, "test")[0],
            "settings": vars(settings), "design": config.to_dict(),
            "simulator": result.simulator}
