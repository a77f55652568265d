"""The golden fine-tuning's checkpoint (``ZoFinetune.state``/``load_state``) and its fast
paths (issue 33 item 3), each against a second route: a run resumed from a checkpoint
against the same run straight through, bit for bit."""
from __future__ import annotations

import json

import pytest
import torch

from zoforge.errors import ConfigError
from zoforge.golden.finetune.config import FinetuneConfig
from zoforge.golden.finetune.train import ZoFinetune, load_model, prepare

CFG = FinetuneConfig(model="tiny", blocks=2, seq_len=8, batch=3, queries=2, n_train=24,
                     n_test=8, calibration=8, rank=8, lr=2e-3, eps=4e-3, engine_rows=4,
                     engine_cols=4)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def prepared():
    return prepare(CFG, load_model(CFG))


def run(prepared, arithmetic, steps, control="random-sign"):
    zo = ZoFinetune(prepared, arithmetic, control=control)
    records = [zo.step() for _ in range(steps)]
    return zo, records


@pytest.mark.parametrize("arithmetic", ["int8", "float"])
def test_a_run_resumed_from_its_json_checkpoint_is_the_straight_run(prepared, arithmetic):
    straight, records = run(prepared, arithmetic, 4)
    first, _ = run(prepared, arithmetic, 2)
    saved = json.loads(json.dumps(first.state()))
    assert saved == first.state()
    resumed = ZoFinetune(prepared, arithmetic, control="random-sign")
    resumed.load_state(saved)
    assert resumed.step_index == 2
    later = [resumed.step() for _ in range(2)]
    for a, b in zip(records[2:], later):
        assert a.losses == b.losses and a.grads == b.grads
        assert (a.batch == b.batch).all()
    for name, master in straight.masters.items():
        assert master.dtype == resumed.masters[name].dtype
        assert torch.equal(master, resumed.masters[name])
    assert straight.state() == resumed.state()
    # the checkpoint moved something: a fresh run's masters are all zero
    assert any(master.abs().sum() > 0 for master in straight.masters.values())


def test_the_checkpoint_needs_the_golden_units(prepared):
    zo = ZoFinetune(prepared, "int8", units=lambda call: None)
    with pytest.raises(ConfigError, match="^checkpoint must be taken with the golden units"):
        zo.state()


def _bad(state, path, value):
    state = json.loads(json.dumps(state))
    target = state
    for key in path[:-1]:
        target = target[key]
    last = path[-1]
    if last == "STATE":        # the generator's state key (an int beside its strategy)
        last = next(key for key in target if key != "strategy")
    if value is KeyError:
        del target[last]
    else:
        target[last] = value
    return state


@pytest.mark.parametrize("arithmetic,path,value,message", [
    ("int8", ("step_index",), -1, "step_index an integer >= 0"),
    ("int8", ("step_index",), True, "step_index an integer >= 0"),
    ("int8", ("arithmetic",), "float", "arithmetic 'int8'"),
    ("int8", ("masters",), KeyError, "^checkpoint must be a dict of the keys arithmetic, control"),
    ("int8", ("masters", "block0.query", 0, 0), 2 ** 23,
     r"-8388608 <= value <= 8388607 \(got 8388608\)"),
    ("int8", ("masters", "block0.query", 0, 0), -2 ** 23 - 1, r"\(got -8388609\)"),
    ("int8", ("masters", "block0.query", 0, 0), 1.5, r"\(got 1.5\)"),
    ("int8", ("masters", "block0.query", 0), [0] * 31, "8 lists of 32 numbers"),
    ("int8", ("masters", "block1.value"), KeyError, "masters the adapters"),
    ("int8", ("masters", "block0.query"), "x", "8 lists of 32 numbers \\(got str\\)"),
    ("int8", ("generator", "STATE"), -1, "generator a saved onthefly state within its range"),
    ("int8", ("generator", "STATE"), 1.0, "generator a dict like"),
    ("int8", ("generator", "extra"), 1, "generator a dict like"),
    ("int8", ("generator", "strategy"), "gaussian", "generator a saved onthefly state"),
    ("int8", ("control", "bit_generator"), "MT19937", "control a numpy PCG64 state"),
    ("float", ("masters", "block0.value", 1, 2), float("nan"), r"finite numbers \(got nan\)"),
    ("float", ("masters", "block0.value", 1, 2), "1", r"finite numbers \(got 1\)"),
    ("float", ("generator", "STATE"), 10 ** 30, "generator a saved onthefly state within"),
])
def test_a_bad_checkpoint_is_a_one_line_error_that_changes_nothing(prepared, arithmetic, path,
                                                                    value, message):
    zo, _ = run(prepared, arithmetic, 1)
    before = zo.state()
    with pytest.raises(ConfigError, match="^checkpoint must be a ") as error:
        zo.load_state(_bad(before, path, value))
    assert "\n" not in str(error.value)
    assert error.match(message)
    assert zo.state() == before
