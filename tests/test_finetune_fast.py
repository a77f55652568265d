"""The golden fine-tuning's checkpoint (``ZoFinetune.state``/``load_state``) and its fast
paths (issue 33 item 3), each against a second route, bit for bit: a run resumed from a
checkpoint against the same run straight through; the int8 products against Python's
integers; the frozen blocks computed once per example against recomputing them on every
pass; the shared frozen products reused against none reused."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from zoforge.errors import ConfigError
from zoforge.golden.finetune import calls
from zoforge.golden.finetune.config import FinetuneConfig
from zoforge.golden.finetune.model import IntegerLinears
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


# -- the fast paths: the same values by a second route ------------------------------------

def wrap32(v: np.ndarray) -> np.ndarray:
    return (v + 2 ** 31) % 2 ** 32 - 2 ** 31


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (5, 1100, 3), (24, 32, 32), (64, 1536, 16)])
def test_the_int8_products_are_the_exact_integer_ones(m, k, n):
    rng = np.random.default_rng(m + k + n)
    cases = [rng.integers(-128, 128, (m, k)), np.full((m, k), -128), np.full((m, k), 127)]
    weights = [rng.integers(-128, 128, (k, n)), np.full((k, n), -128), np.full((k, n), 127)]
    for x, w in zip(cases, weights):
        tx, tw = torch.tensor(x, dtype=torch.int8), torch.tensor(w, dtype=torch.int8)
        exact = x.astype(object) @ w.astype(object)          # Python ints: no rounding
        assert calls.int8_product(tx, tw).tolist() == exact.tolist()
        for bias in (rng.integers(-2 ** 20, 2 ** 20, n), np.full(n, 2 ** 31 - 1),
                     np.full(n, -2 ** 31)):
            got = calls.gemm_int32(tx, tw, torch.tensor(bias, dtype=torch.int32))
            assert got.tolist() == wrap32((exact + bias).astype(np.int64)).tolist()


TWO_BLOCKS_TOP = CFG.replace(adapted_blocks=1)


@pytest.fixture(scope="module")
def top_only():
    """The tiny model with adapters on its top block only (block 0 frozen)."""
    return prepare(TWO_BLOCKS_TOP, load_model(TWO_BLOCKS_TOP))


class Recomputed(ZoFinetune):
    """The run before the cache: the frozen blocks computed again on every pass."""

    def frozen_input(self, split, index, units=None):
        return None

    def logits(self, split="test", batch=64):
        self._frozen.clear()
        return super().logits(split, batch)


class Counting:
    """Golden units that count the rows the block-0 maps (the frozen block) computed, and
    the score rows its integer softmax calls (``SoftmaxCall``, no ``x``) took."""

    def __init__(self, cfg):
        self.units = calls.GoldenUnits(cfg.generator().golden(), cfg.layer_rows)
        self.frozen_rows = self.softmax_rows = 0

    def __call__(self, call):
        if call.name.startswith("block0."):
            if isinstance(call, calls.SoftmaxCall):
                self.softmax_rows += call.scores.shape[:-1].numel()
            else:
                self.frozen_rows += call.x.shape[0]
        return self.units(call)


@pytest.mark.parametrize("arithmetic", ["int8", "float"])
def test_frozen_blocks_once_per_example_equal_recomputing_them(top_only, arithmetic):
    counting = Counting(TWO_BLOCKS_TOP)
    fast = ZoFinetune(top_only, arithmetic, units=counting)
    slow = Recomputed(top_only, arithmetic)
    seen = set()
    for _ in range(4):
        a, b = fast.step(), slow.step()
        assert a.losses == b.losses and a.grads == b.grads
        seen |= set(a.batch.tolist())
    for name in fast.names:
        assert torch.equal(fast.masters[name], slow.masters[name])
    assert fast.names == ["block1.query", "block1.value"]
    if arithmetic == "int8":       # each example's six block-0 maps ran once, not 2q times,
        # and with engine attention (the default) its scores and context jobs, per head
        assert TWO_BLOCKS_TOP.attention == "engines"
        heads = top_only.model.blocks[0].attention.self.num_attention_heads
        assert counting.frozen_rows == (6 + 2 * heads) * TWO_BLOCKS_TOP.seq_len * len(seen)
        assert TWO_BLOCKS_TOP.nonlinear == "integer"     # its softmax: each score row once
        assert counting.softmax_rows == heads * TWO_BLOCKS_TOP.seq_len * len(seen)
    assert torch.equal(fast.logits("test"), slow.logits("test"))
    assert fast.train_loss() == slow.train_loss()


def test_an_examples_frozen_input_is_the_same_in_any_batch(top_only):
    ids, mask, _ = top_only.train
    units = calls.GoldenUnits(TWO_BLOCKS_TOP.generator().golden(), TWO_BLOCKS_TOP.layer_rows)
    linears = IntegerLinears(top_only.model, units, {})
    batch = top_only.model.frozen_input(ids[:9], mask[:9], linears)
    alone = torch.cat([top_only.model.frozen_input(ids[i:i + 1], mask[i:i + 1], linears)
                       for i in range(9)])
    assert torch.equal(batch, alone)
    assert not torch.equal(batch, top_only.model.embed(ids[:9]))    # block 0 did run


def test_shared_frozen_products_are_reused_and_change_no_value(prepared, monkeypatch):
    """One step's calls with the reuse and without it (``shared=0``): every result equal,
    and the step computed fewer products with it (the 2q passes into block 0 share x)."""
    counts = []
    product = calls.int8_product

    def counted(x, w):
        counts[-1] += 1
        return product(x, w)
    monkeypatch.setattr(calls, "int8_product", counted)
    results = []
    for shared in (0, calls.GoldenUnits.shared):
        counts.append(0)
        units = calls.GoldenUnits(CFG.generator().golden(), CFG.layer_rows, record=True,
                                  shared=shared)
        log = []
        zo = ZoFinetune(prepared, "int8", units=lambda call: log.append(units(call)) or log[-1])
        zo.step()
        results.append((units.log, log, zo.masters))
    (calls0, out0, m0), (calls1, out1, m1) = results
    assert [(c.name, type(c)) for c in calls0] == [(c.name, type(c)) for c in calls1]
    assert all(torch.equal(a, b) for a, b in zip(out0, out1)) and len(out0) == len(out1)
    assert all(torch.equal(m0[name], m1[name]) for name in m0)
    # block 0's key (1 product), query and value (2 each) are shared by the 2q = 4 passes
    assert counts[0] - counts[1] == (2 * CFG.queries - 1) * 5


def test_a_reused_product_needs_equal_inputs():
    rng = np.random.default_rng(3)
    units = calls.GoldenUnits(CFG.generator().golden(), 4)
    w = torch.tensor(rng.integers(-128, 128, (16, 8)), dtype=torch.int8)
    bias = torch.zeros(8, dtype=torch.int32)
    x = torch.tensor(rng.integers(-128, 128, (3, 16)), dtype=torch.int8)
    first = units(calls.EngineCall("k", x, w, bias, None, None))
    x2 = x.clone()
    x2[2, 15] += 1 if x2[2, 15] < 127 else -1
    w2 = w.clone()
    w2[0, 0] = -w2[0, 0] - 1
    for xi, wi in ((x2, w), (x, w2), (x, w)):
        got = units(calls.EngineCall("k", xi, wi, bias, None, None))
        assert got.tolist() == (xi.numpy().astype(np.int64) @ wi.numpy()).tolist()
    assert torch.equal(first, got)
