"""Every generator strategy in the fine-tuning (issue 33 item 4): FinetuneConfig's
``strategy``, the z stream the int8 units and the float twin draw, save/restore, errors.

The z the int8 units drew is derived here by a second route: the units' call log (flags and
shapes only) replayed on a generator built in the test from the strategy's own
configuration, each word of ``rows`` values one ``take(rows)`` in the hardware's order
(panels of ``rows`` features outer, k inner); each logged update is then recomputed by hand
from that z and checked against the master the next step started from.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

from call_replay import walk_calls
from zoforge.cli import main
from zoforge.errors import ConfigError
from zoforge.golden.finetune.calls import GoldenUnits, UpdateCall
from zoforge.golden.finetune.config import FinetuneConfig
from zoforge.golden.finetune.train import ZoFinetune, load_model, prepare
from zoforge.golden.rng import (GaussianConfig, MaskedConfig, OnTheFlyConfig, PregenConfig,
                                STRATEGIES)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

#: A few-shot run on the tiny BERT: 4 examples per class, one full batch, q 2 (so the
#: restore of the second query is exercised), 2 steps.
BASE = FinetuneConfig(model="tiny", blocks=1, seq_len=8, n_train=40, n_test=20,
                      calibration=20, k_shot=4, rank=4, queries=2, seed=1)
STEPS = 2
#: Each strategy with non-default parameters, and its generator built here by hand.
CASES = {
    "onthefly": (dict(n_rng=15, bits=6), OnTheFlyConfig(n_rng=15, bits=6)),
    "pregen": (dict(bits=12, pool_size=255, pool_seed=5),
               PregenConfig(pool_size=255, bits=12, banks=4, pool_seed=5)),
    "gaussian": (dict(n_rng=4, bits=10, terms=2), GaussianConfig(n_rng=4, bits=10, terms=2)),
    "masked": (dict(n_rng=7, bits=8), MaskedConfig(n_rng=7, bits=8)),
}
MASTER_LIMIT = 1 << 23           # int24 masters


@pytest.fixture(scope="module")
def prepared():
    return prepare(BASE, load_model(BASE))


def test_every_strategy_is_covered():
    assert set(CASES) == set(STRATEGIES)


def test_the_default_generator_is_unchanged():
    cfg = FinetuneConfig()
    assert (cfg.strategy, cfg.n_rng, cfg.bits) == ("onthefly", 7, 8)
    assert cfg.generator() == OnTheFlyConfig(n_rng=7, bits=8, snapshot=True)
    assert cfg.layer_design(384, 1536).generator() == cfg.generator()


@pytest.mark.parametrize("strategy", CASES)
def test_generator_and_layer_carry_the_strategy(strategy):
    fields, by_hand = CASES[strategy]
    cfg = BASE.replace(strategy=strategy, **fields)
    assert cfg.generator() == by_hand.replace(snapshot=True)
    layer = cfg.layer_design(32, 64)
    assert layer.variant == strategy and layer.generator() == cfg.generator()


@pytest.mark.parametrize("strategy", CASES)
def test_restore_reproduces_the_stream(strategy):
    golden = CASES[strategy][1].golden(state=3)
    golden.take(5)
    saved = golden.save()
    first = golden.take(37)
    golden.take(11)
    golden.restore(saved)
    assert (golden.take(37) == first).all() and len(set(first.tolist())) > 1


def hand_draw(generator, rows: int, k_t: int, n: int) -> torch.Tensor:
    """Words of ``rows`` values, one ``take(rows)`` each: panel p outer, k inner; word
    (p, k) holds T[k, p*rows + f] in lane f."""
    z = torch.zeros(k_t, n, dtype=torch.int64)
    for p in range(n // rows):
        for k in range(k_t):
            z[k, p * rows:(p + 1) * rows] = torch.as_tensor(generator.take(rows))
    return z


def replay(log: list, generator, rows: int) -> list[tuple[object, torch.Tensor]]:
    """The z of every logged call that draws one, from the flags and shapes alone."""
    return [(call, z) for call, z in walk_calls(
        log, generator, lambda r, n: hand_draw(generator, rows, r, n)) if z is not None]


def hand_update(call: UpdateCall, z: torch.Tensor) -> torch.Tensor:
    """T - round(g z eta_mult 2^-eta_shift) (half up), clamped to int24."""
    product = call.g * z * call.eta_mult
    step = (product + (1 << (call.eta_shift - 1))) >> call.eta_shift if call.eta_shift \
        else product
    return (call.master - step).clamp(-MASTER_LIMIT, MASTER_LIMIT - 1)


@pytest.mark.parametrize("strategy", CASES)
def test_int8_units_and_float_twin_draw_the_same_z_stream(prepared, strategy):
    fields, by_hand = CASES[strategy]
    cfg = BASE.replace(strategy=strategy, **fields)
    run = dataclasses.replace(prepared, cfg=cfg)
    units = GoldenUnits(cfg.generator().golden(), cfg.layer_rows, record=True)
    int8 = ZoFinetune(run, "int8", units=units)
    twin = ZoFinetune(run, "float")
    drawn = []
    draw = twin._draw
    twin._draw = lambda shape: drawn.append(draw(shape)) or drawn[-1]
    grads = []
    for _ in range(STEPS):
        grads += int8.step().grads
        twin.step()
    assert any(g != 0 for g in grads)
    replayed = replay(units.log, by_hand.golden(), cfg.layer_rows)
    # per query: 2 branches x adapters, then one update per adapter
    assert len(replayed) == len(drawn) == STEPS * cfg.queries * 3 * len(int8.names)
    for (_, z), twin_z in zip(replayed, drawn):
        assert torch.equal(z, twin_z.to(torch.int64))
    # each perturbation drawn three times (+, -, the update), a new one per query and adapter
    assert len({tuple(z.flatten().tolist()) for _, z in replayed}) == len(replayed) // 3
    # the int8 units used that z: each update recomputed by hand is the next master
    updates = [(call, z) for call, z in replayed if isinstance(call, UpdateCall)]
    following = {}
    for call, z in updates:
        if call.name in following:
            assert torch.equal(following[call.name], call.master)
        following[call.name] = hand_update(call, z)
    for name, master in int8.masters.items():
        assert torch.equal(following[name], master)


@pytest.mark.parametrize("fields, expected", [
    (dict(strategy="pool"), "strategy must be one of onthefly, pregen, gaussian, masked"),
    (dict(n_rng=8), "n_rng must be of the form 2^k - 1"),
    (dict(n_rng=3), "n_rng must be at least rows = 4"),
    (dict(strategy="gaussian", n_rng=2), "n_rng must be at least rows = 4"),
    (dict(strategy="gaussian", bits=5), "bits must be an integer with 6 <= value <= 20"),
    (dict(strategy="gaussian", terms=0), "terms must be an integer with 1 <= value <= 16"),
    (dict(strategy="pregen", pool_size=100), "pool_size must be of the form 2^k - 1"),
    (dict(strategy="pregen", layer_rows=3, rank=6), "layer_rows must be one of 1, 2, 4"),
    (dict(pool_size=255), "pool_size must be left at 4095 with strategy onthefly (used by "
                          "pregen)"),
    (dict(strategy="pregen", n_rng=15), "n_rng must be left at 7 with strategy pregen"),
    (dict(strategy="masked", terms=2), "terms must be left at 3 with strategy masked"),
    (dict(strategy="onthefly", bits=4), "eps must be a value with"),
])
def test_bad_generator_fields_are_one_line_errors(fields, expected):
    with pytest.raises(ConfigError) as error:
        FinetuneConfig(**fields)
    assert expected in str(error.value) and "\n" not in str(error.value)


def test_the_cli_refuses_a_bad_strategy_in_one_line(capsys, tmp_path):
    assert main(["finetune", "--strategy", "pregen", "--n-rng", "15", "--out",
                 str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--n-rng must be left at 7 with strategy pregen" in err and "\n" not in err
