"""The checkpoint of a fine-tuning run (``OUT/checkpoint.json`` of ``zoforge finetune``,
:class:`zoforge.sim.finetune_run.FinetuneRun`): JSON, never pickle.

What it holds (:func:`checkpoint`): ``format``; ``key``, what a checkpoint must match to be
resumed (the configuration, ``config``, and whether the float twin runs, ``float_twin``),
and ``digest``, :func:`zoforge.config.data_hash` of ``key``; ``step``, the steps done;
``int8`` and ``float``, the runs' states between steps
(:meth:`~zoforge.golden.finetune.train.ZoFinetune.state`: masters, generator, control
stream; ``float`` None without the twin); ``result``, the result so far (:data:`RESULT_KEYS`:
the accuracies before, the per-step losses and the few-shot curves, cut to ``step``); and
``seconds``, the host's seconds of those steps.

:func:`read_checkpoint` reads one back, checking field by field: a checkpoint that cannot
be used (unreadable, not JSON, non-finite numbers, keys or types that are not the above, a
digest that is not its key's, a step outside the run, lists whose lengths do not match the
step: a damaged one) is set aside as ``checkpoint.json.damaged`` with a one-line notice, and
the run starts from step 0, as ``zoforge train`` does; one of another configuration is a
one-line error naming ``--out`` and the differing flags. The states themselves are checked
when loaded (:meth:`~zoforge.golden.finetune.train.ZoFinetune.load_state`, after the model:
a state that does not fit it is damaged too, :func:`set_aside`).
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from zoforge.config import data_hash, flag_name
from zoforge.errors import ConfigError, printable
from zoforge.inputs import read_text
from zoforge.outputs import set_aside as rename
from zoforge.outputs import write_text

__all__ = ["CHECKPOINT", "FORMAT", "RESULT_KEYS", "MAX_BYTES", "run_key", "checkpoint",
           "read_checkpoint", "set_aside", "write_checkpoint"]

CHECKPOINT = "checkpoint.json"
FORMAT = "zoforge-finetune-checkpoint-1"
#: The result's keys a checkpoint keeps (the rest is computed after the steps).
RESULT_KEYS = ("accuracy_before", "float_accuracy_before", "loss", "float_loss",
               "train_loss_curve", "float_train_loss_curve")
#: Largest checkpoint read (its masters: 2 x blocks x rank x hidden numbers, twice).
MAX_BYTES = 1 << 30
_KEYS = {"format", "key", "digest", "step", "int8", "float", "result", "seconds"}


def run_key(cfg, float_twin: bool) -> dict:
    """What a checkpoint must match to be resumed: the configuration
    (:meth:`~zoforge.golden.finetune.config.FinetuneConfig.key_dict`) and the float twin."""
    return {"config": cfg.key_dict(), "float_twin": bool(float_twin)}


def checkpoint(key: dict, step: int, int8: dict, float_state: dict | None, result: dict,
               curve_steps: list[int], seconds: float) -> dict:
    """The checkpoint after ``step`` steps: the states and ``result``'s lists cut to
    ``step`` (a list may already hold the next step's entry)."""
    points = sum(1 for s in curve_steps if s <= step)
    kept = {"accuracy_before": result["accuracy_before"],
            "float_accuracy_before": result["float_accuracy_before"],
            "loss": result["loss"][:step], "float_loss": result["float_loss"][:step],
            "train_loss_curve": result["train_loss_curve"][:points],
            "float_train_loss_curve": result["float_train_loss_curve"][:points]}
    return {"format": FORMAT, "key": key, "digest": data_hash(key), "step": step,
            "int8": int8, "float": float_state, "result": kept, "seconds": seconds}


def write_checkpoint(out: Path, state: dict) -> None:
    """Write ``state`` to ``out/checkpoint.json`` atomically (never through a link)."""
    write_text(out / CHECKPOINT, json.dumps(state, allow_nan=False), root=out)


def set_aside(path: Path, problem: str) -> None:
    """Move an unusable checkpoint to ``checkpoint.json.damaged`` with a one-line notice
    (the run starts from step 0)."""
    damaged = rename(path, root=path.parent, flag="--out")
    print(f"zoforge: the checkpoint {printable(str(path))} is damaged ({printable(problem)}); "
          f"moved it to {damaged.name} and starting from step 0", file=sys.stderr)


def read_checkpoint(out: Path, key: dict, steps: int, curve_steps: list[int]) -> dict | None:
    """The checkpoint in ``out`` of the run ``key`` of ``steps`` steps, or None: none there,
    or a damaged one (set aside). Another configuration's: a one-line error."""
    path = out / CHECKPOINT
    if not path.is_file():
        return None
    try:
        state = json.loads(read_text(path, "--out", MAX_BYTES), parse_constant=_no_constant)
    except (ConfigError, ValueError, RecursionError) as error:
        return set_aside(path, f"cannot be read: {str(error).splitlines()[0][:200]}")
    problem = _problem(state, steps, curve_steps)
    if problem is None and state["digest"] != data_hash(state["key"]):
        problem = "its digest is not its configuration's"
    if problem is not None:
        return set_aside(path, problem)
    if state["key"] != key:
        raise ConfigError("--out", "a new folder, or one whose checkpoint has the same "
                          "configuration", f"{out}: differs in {_differences(state['key'], key)}")
    return state


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number")


def _differences(theirs: dict, ours: dict) -> str:
    """The flags whose values differ between two run keys."""
    old, new = theirs.get("config"), ours["config"]
    names = [] if isinstance(old, dict) else ["the configuration"]
    if isinstance(old, dict):
        names = [flag_name(k) for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    if theirs.get("float_twin") != ours["float_twin"]:
        names.append("--float")
    return ", ".join(names) or "its key"


def _problem(state, steps: int, curve_steps: list[int]) -> str | None:
    """What makes ``state`` not a checkpoint of a run of ``steps`` steps, or None."""
    if not isinstance(state, dict):
        return f"holds a {type(state).__name__}, not a checkpoint"
    if set(state) != _KEYS:
        return "does not have the keys " + ", ".join(sorted(_KEYS))
    if state["format"] != FORMAT:
        return f"format is not {FORMAT}"
    key = state["key"]
    if not (isinstance(key, dict) and set(key) == {"config", "float_twin"}
            and isinstance(key["config"], dict) and type(key["float_twin"]) is bool):
        return "key is not a configuration and a float_twin flag"
    if not isinstance(state["digest"], str):
        return "digest is not a string"
    step = state["step"]
    if type(step) is not int or not 0 <= step <= steps:
        return f"step {step!r} is not a step count of 0 to {steps}"
    for name in ("int8", "float"):
        value = state[name]
        if name == "float" and value is None and not key["float_twin"]:
            continue
        if not isinstance(value, dict) or value.get("step_index") != step:
            return f"{name} is not a run's state at step {step}"
    if not _finite(state["seconds"]) or state["seconds"] < 0:
        return "seconds is not a finite number >= 0"
    return _result_problem(state["result"], step, key["float_twin"],
                           sum(1 for s in curve_steps if s <= step))


def _result_problem(result, step: int, twin: bool, points: int) -> str | None:
    if not isinstance(result, dict) or set(result) != set(RESULT_KEYS):
        return "result does not have the keys " + ", ".join(RESULT_KEYS)
    for name in ("accuracy_before", "float_accuracy_before"):
        if not _finite(result[name]) or not 0 <= result[name] <= 1:
            return f"result.{name} is not an accuracy"
    lengths = {"loss": step, "float_loss": step if twin else 0, "train_loss_curve": points,
               "float_train_loss_curve": points if twin else 0}
    for name, length in lengths.items():
        value = result[name]
        if not isinstance(value, list) or len(value) != length:
            return f"result.{name} is not a list of {length} numbers"
        if not all(_finite(item) for item in value):
            return f"result.{name} holds a value that is not a finite number"
    return None


def _finite(value) -> bool:
    return type(value) in (int, float) and math.isfinite(value)
