"""The ZO training loop: batches, evaluation, checkpoint/resume, result.json and plot.

Batch ``t`` is ``numpy.random.default_rng([seed, t]).choice(n_train, batch, replace=False)``
so it depends only on the step. A checkpoint (``OUT/checkpoint.pt``, written atomically
every ``checkpoint_every`` steps and at the end) holds theta, the optimizer's state (which
includes the perturbation source's state, never a perturbation vector) and the history;
a run started again on the same ``OUT`` with the same configuration continues from it and
ends with the same parameters, bit for bit, as an uninterrupted run. A checkpoint that
cannot be used (unreadable, missing keys, wrong types, tensors of other shapes or dtypes
than the model's and the optimizer's, a step outside its history, non-finite values: a
damaged one) is set aside as ``checkpoint.pt.damaged`` with a notice, and the run starts
from step 0.

``OUT/result.json``: ``accuracy_before`` / ``accuracy_after`` (test split),
``test_loss_before`` / ``test_loss_after``, ``final_loss`` (mean training loss of the last
``min(50, steps)`` steps), ``steps_per_s`` (optimizer steps only, evaluation excluded,
accumulated over resumptions), validation accuracies, ``d`` and the full configuration.
``OUT/training.png``: training loss and validation accuracy against the step.

Before any work ``out`` is checked (a writable folder or one that can be created, not an
existing file) and none of these outputs may be a symbolic link: they are written to a
temporary file renamed into place, never through a link. A training whose loss becomes
non-finite or exceeds :data:`DIVERGED` times its first step's (at least 1) stops with a
one-line error naming ``lr``.
"""
from __future__ import annotations

import io
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from zoforge.errors import ConfigError, printable
from zoforge.golden.zo.config import HARDWARE_METHOD, TrainConfig
from zoforge.golden.zo.dual import DualForwardPRGE
from zoforge.golden.zo.features import build_trainable
from zoforge.golden.zo.hwmlp import HardwarePRGE
from zoforge.golden.zo.optimizers import make_optimizer
from zoforge.inputs import open_regular
from zoforge.outputs import (check_out_dir, check_targets, make_out_dir, output_path, set_aside,
                             write_bytes, write_text)

__all__ = ["train", "batch_index", "build_optimizer", "Interrupted"]

CHECKPOINT = "checkpoint.pt"
OUTPUTS = (CHECKPOINT, "result.json", "training.png")
#: A loss this many times the first step's (or 1, if larger) means training diverged.
DIVERGED = 1000.0


class Interrupted(RuntimeError):
    """Raised by :func:`train` when ``stop_after`` steps have run (tests of resumption)."""


def batch_index(seed: int, step: int, n_train: int, batch: int) -> np.ndarray:
    return np.random.default_rng([seed, step]).choice(n_train, batch, replace=False)


def build_optimizer(cfg: TrainConfig, trainable):
    perturbation = cfg.perturbation_source()
    if cfg.method == HARDWARE_METHOD:
        return HardwarePRGE(trainable, perturbation, cfg.lr, cfg.eps, cfg.queries)
    if cfg.dual:
        return DualForwardPRGE(trainable, perturbation, cfg.lr, cfg.eps, cfg.queries)
    return make_optimizer(cfg.method, trainable, perturbation, lr=cfg.lr, eps=cfg.eps,
                          queries=cfg.queries, inner=cfg.inner, outer=cfg.outer,
                          hessian_smooth=cfg.hessian_smooth, d_min=cfg.d_min,
                          d_max=cfg.d_max, layer_steps=cfg.layer_steps)


def _save(path: Path, state: dict) -> None:
    # serialised in memory first: torch.save on a full disk raises a RuntimeError of its
    # own; write_bytes makes any failed write one line, with nothing under the final name
    buffer = io.BytesIO()
    torch.save(state, buffer)
    write_bytes(path, buffer.getvalue(), root=path.parent, flag="out")


def _read_checkpoint(path: Path, cfg: TrainConfig) -> dict | None:
    """The checkpoint to resume from (tensors and plain values only: never unpickled code),
    or None: none there, or an unusable one, set aside (:func:`_set_aside`). One of another
    configuration, or of more steps than ``cfg.steps``, is a one-line error (the user's
    choice of ``out``)."""
    if not path.is_file():
        return None
    try:
        with open_regular(path, "out") as handle:
            state = torch.load(handle, weights_only=True)
    except ConfigError:
        raise
    except Exception as error:           # truncated, not a checkpoint, or unsafe content
        return _set_aside(path, f"cannot be read ({type(error).__name__})")
    problem = _shape_problem(state)
    if problem:
        return _set_aside(path, problem)
    if state["config"] != cfg.resume_key():
        changed = sorted(k for k in cfg.resume_key()
                         if state["config"].get(k) != cfg.resume_key()[k])
        raise ConfigError("out", "a new directory, or one whose checkpoint has the same "
                          "configuration", f"{path.parent}: differs in {', '.join(changed)}")
    if state["step"] > cfg.steps:
        raise ConfigError("steps", f"at least the {state['step']} steps of the checkpoint in "
                          f"{path.parent} (or a new out)", cfg.steps)
    return state


def _shape_problem(state) -> str | None:
    """What makes ``state`` not a checkpoint of :func:`train` (keys, types, the step range,
    the history's length), or None; the tensors are checked against the model later
    (:func:`_resume`)."""
    if not isinstance(state, dict):
        return f"holds a {type(state).__name__}, not a checkpoint"
    missing = {"config", "step", "theta", "optimizer", "history", "seconds",
               "accuracy_before", "test_loss_before"} - set(state)
    if missing:
        return f"has no {', '.join(sorted(missing))}"
    step, history = state["step"], state["history"]
    if not isinstance(state["config"], dict) or not isinstance(history, dict):
        return "config or history is not a table"
    if type(step) is not int or step < 0:
        return f"step {step!r} is not a step count"
    losses = history.get("loss")
    if not isinstance(losses, list) or len(losses) != step:
        return "its loss history does not match its step"
    return _mismatch({"val_step": [], "val_accuracy": []},
                     {k: v for k, v in history.items() if k != "loss"}, "history") or \
        _mismatch({"seconds": 0.0, "accuracy_before": 0.0, "test_loss_before": 0.0,
                   "losses": losses},
                  {"seconds": state["seconds"], "accuracy_before": state["accuracy_before"],
                   "test_loss_before": state["test_loss_before"], "losses": losses}, "")


def _mismatch(template, value, name: str) -> str | None:
    """Where ``value`` differs from ``template`` in structure (keys, types, tensor shapes
    and dtypes) or holds a non-finite number, or None. A list is checked for finite values
    only (its length varies); a None in ``template`` allows anything finite."""
    where = name or "a value"
    if isinstance(value, torch.Tensor):
        if isinstance(template, torch.Tensor) and (value.shape != template.shape
                                                   or value.dtype != template.dtype):
            return (f"{where} is a {value.dtype} tensor of shape {tuple(value.shape)}, not "
                    f"{template.dtype} {tuple(template.shape)}")
        if not isinstance(template, (torch.Tensor, type(None))):
            return f"{where} is a tensor, not a {type(template).__name__}"
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            return f"{where} holds non-finite values"
        return None
    if isinstance(template, dict):
        if not isinstance(value, dict) or set(value) != set(template):
            return f"{where} does not have the keys {', '.join(map(str, sorted(template)))}"
        for key in template:
            if problem := _mismatch(template[key], value[key], f"{name}.{key}".lstrip(".")):
                return problem
        return None
    if isinstance(value, (list, tuple)):
        if not isinstance(template, (list, tuple, type(None))):
            return f"{where} is a {type(value).__name__}"
        for index, item in enumerate(value):
            if problem := _mismatch(None, item, f"{where}[{index}]"):
                return problem
        return None
    if isinstance(value, float) and not np.isfinite(value):
        return f"{where} is not finite ({value})"
    if template is None:
        return None
    if isinstance(template, float) and type(value) in (int, float):
        return None
    if type(value) is not type(template):
        return f"{where} is a {type(value).__name__}, not a {type(template).__name__}"
    return None


def _set_aside(path: Path, problem: str) -> None:
    """Move an unusable checkpoint to ``checkpoint.pt.damaged`` with a notice; None (the
    training starts from step 0)."""
    damaged = set_aside(path, root=path.parent, flag="out")
    print(f"zoforge: the checkpoint {printable(str(path))} is damaged ({printable(problem)}); "
          f"moved it to {damaged.name} and starting from step 0", file=sys.stderr)
    return None


def _resume(path: Path, state: dict, trainable, optimizer) -> bool:
    """Load ``state`` into the model and optimizer if its tensors fit them (shapes, dtypes,
    finite values); else set the checkpoint aside (False: start from step 0 with a new
    optimizer)."""
    template = {"theta": trainable.theta, "optimizer": optimizer.state_dict()}
    problem = _mismatch(template, {"theta": state["theta"], "optimizer": state["optimizer"]},
                        "")
    if problem is None:
        initial = trainable.theta.clone()
        try:
            trainable.theta.copy_(state["theta"])
            optimizer.load_state_dict(state["optimizer"])
            return True
        except Exception as error:      # a state the optimizer cannot take
            trainable.theta.copy_(initial)     # step 0 starts from the model's own theta
            problem = f"the optimizer cannot load it ({type(error).__name__})"
    _set_aside(path, problem)
    return False


def train(cfg: TrainConfig, stop_after: int | None = None, on_step=None) -> dict:
    """Run (or resume) the training of ``cfg``; returns the result dictionary.
    ``on_step(step, steps)``, if given, is called after every step (progress reports: a
    sweep worker's; it must be cheap and changes nothing)."""
    out = check_out_dir("out", cfg.out)
    check_targets(out, [out / name for name in OUTPUTS])
    state = _read_checkpoint(out / CHECKPOINT, cfg)
    torch.set_num_threads(cfg.threads)
    trainable, info = build_trainable(cfg)
    optimizer = build_optimizer(cfg, trainable)
    make_out_dir("out", out)
    if state is not None and not _resume(out / CHECKPOINT, state, trainable, optimizer):
        state, optimizer = None, build_optimizer(cfg, trainable)
    if state is None:
        accuracy_before, loss_before = trainable.evaluate(trainable.theta, "test")
        state = {"step": 0, "seconds": 0.0, "accuracy_before": accuracy_before,
                 "test_loss_before": loss_before,
                 "history": {"loss": [], "val_step": [], "val_accuracy": []}}
    history = state["history"]
    bar = _progress(cfg, state["step"])
    try:
        for step in range(state["step"], cfg.steps):
            index = batch_index(cfg.seed, step, cfg.n_train, cfg.batch)
            start = time.perf_counter()
            loss = optimizer.step(index)
            state["seconds"] += time.perf_counter() - start
            _check_divergence(cfg, loss, step, history["loss"])
            history["loss"].append(loss)
            state["step"] = step + 1
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.4f}")
            if on_step is not None:
                on_step(state["step"], cfg.steps)
            if state["step"] % cfg.eval_every == 0 or state["step"] == cfg.steps:
                accuracy, _ = trainable.evaluate(optimizer.current_theta(), "val")
                history["val_step"].append(state["step"])
                history["val_accuracy"].append(accuracy)
            if state["step"] % cfg.checkpoint_every == 0 or state["step"] == cfg.steps:
                _save(out / CHECKPOINT, {**state, "config": cfg.resume_key(),
                                         "theta": trainable.theta.clone(),
                                         "optimizer": optimizer.state_dict()})
            if stop_after is not None and state["step"] >= stop_after:
                raise Interrupted(f"stopped after step {state['step']}")
    finally:
        if bar is not None:
            bar.close()
    theta = optimizer.finish()
    accuracy_after, loss_after = trainable.evaluate(theta, "test")
    losses = history["loss"]
    result = {
        "accuracy_before": state["accuracy_before"], "accuracy_after": accuracy_after,
        "test_loss_before": state["test_loss_before"], "test_loss_after": loss_after,
        "final_loss": float(np.mean(losses[-50:])) if losses else None,
        "steps": state["step"],
        "steps_per_s": state["step"] / state["seconds"] if state["seconds"] else None,
        "val_step": history["val_step"], "val_accuracy": history["val_accuracy"],
        "chance_accuracy": 1.0 / info["num_classes"], **info,
        "config": cfg.to_dict(),
    }
    write_text(out / "result.json", json.dumps(result, indent=1), root=out)
    _plot(out / "training.png", losses, history, cfg)
    return result


def _check_divergence(cfg: TrainConfig, loss: float, step: int, losses: list[float]) -> None:
    """Stop (one-line error naming lr) when the loss is not finite or exceeds
    :data:`DIVERGED` times the first step's loss (at least 1)."""
    first = losses[0] if losses else loss
    bound = DIVERGED * max(first, 1.0) if np.isfinite(first) else np.inf
    if not np.isfinite(loss) or loss > bound:
        raise ConfigError("lr", f"small enough that training converges: the training loss "
                          f"diverged to {loss:.3g} at step {step + 1} (first step "
                          f"{first:.3g}); lower lr (or eps)", cfg.lr)


def _progress(cfg: TrainConfig, initial: int):
    if not cfg.progress:
        return None
    from tqdm import tqdm   # only with a progress bar
    return tqdm(total=cfg.steps, initial=initial, desc=f"{cfg.method}/{cfg.perturbation}",
                unit="step", dynamic_ncols=True)


def _plot(path: Path, losses: list[float], history: dict, cfg: TrainConfig) -> None:
    import matplotlib   # slow to import: only when a plot is written
    matplotlib.use("Agg")   # before pyplot is imported: no display here
    import matplotlib.pyplot as plt
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    steps = np.arange(1, len(losses) + 1)
    left.plot(steps, losses, lw=0.5, alpha=0.4, label="per step")
    if len(losses) >= 20:
        window = max(len(losses) // 50, 10)
        smooth = np.convolve(losses, np.ones(window) / window, mode="valid")
        left.plot(steps[window - 1:], smooth, lw=1.5, label=f"mean of {window}")
    left.set(xlabel="step", ylabel="training loss", title="loss")
    left.legend()
    right.plot(history["val_step"], history["val_accuracy"], marker=".")
    right.set(xlabel="step", ylabel="validation accuracy", title="accuracy")
    figure.suptitle(f"{cfg.method} / {cfg.perturbation} / {cfg.trainable}, "
                    f"q={cfg.queries} B={cfg.batch} lr={cfg.lr:g} eps={cfg.eps:g}")
    figure.tight_layout()
    with output_path(path, root=path.parent) as tmp:
        figure.savefig(tmp, dpi=110, format="png")
    plt.close(figure)
