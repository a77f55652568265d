"""The few-shot mode of ``zoforge finetune`` (issue 33, items 1-2): the configuration's
protocol defaults and limits, the draw of the few-shot set (k per class, outside the head's
and the test split's examples, a stream of its own per seed), the steps' batches, the
no-signal control, the training loss (recomputed here from the masters by a hand-written
cross-entropy) and the JSON of a run, its keys equal to the values they come from.

Every model is the small random BERT (``tiny``) on a few examples; the draw's own checks
run on made-up labels.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from zoforge.cli import main
from zoforge.config import dump_config, load_config
from zoforge.errors import ConfigError
from zoforge.golden.data import load_dataset, split
from zoforge.golden.finetune.calls import GoldenUnits
from zoforge.golden.finetune.config import FinetuneConfig
from zoforge.golden.finetune.fewshot import draw
from zoforge.golden.finetune.model import FloatLinears, IntegerLinears
from zoforge.golden.finetune.train import ZoFinetune, curve_steps, load_model, prepare

#: The few-shot run of these tests: 4 examples per class (8, one full batch), q 1.
FEW = FinetuneConfig(model="tiny", blocks=1, seq_len=8, n_train=40, n_test=20,
                     calibration=20, k_shot=4, rank=4, seed=3, split_seed=1)
#: The documented second seed words of the draw and of the control's signs.
DRAW_WORD, SIGN_WORD = 2**32 + 33, 2**32 + 34


# -- by hand -----------------------------------------------------------------------------------

def hand_cross_entropy(logits: torch.Tensor, labels) -> float:
    """Mean over the rows of ``logsumexp(z) - z[label]``, in plain Python."""
    rows = logits.tolist()
    total = 0.0
    for row, label in zip(rows, list(map(int, labels))):
        peak = max(row)
        total += peak + math.log(sum(math.exp(v - peak) for v in row)) - row[label]
    return total / len(rows)


def hand_loss(prepared, masters, arithmetic: str) -> float:
    """The unperturbed training loss over the whole training set, one forward."""
    ids, mask, labels = prepared.train
    model, cfg = prepared.model, prepared.cfg
    if arithmetic == "int8":
        units = GoldenUnits(cfg.generator().golden(), cfg.layer_rows)
        linears = IntegerLinears(model, units, masters)
    else:
        linears = FloatLinears(model, masters)
    return hand_cross_entropy(model.logits(ids, mask, linears), labels)


def hand_draw(labels, excluded, k: int, seed: int) -> np.ndarray:
    """The documented draw: per class in class order, ``choice(eligible, k)`` without
    replacement from ``default_rng(SeedSequence([seed, DRAW_WORD]))``."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, DRAW_WORD]))
    excluded = set(map(int, excluded))
    out = []
    for c in range(int(max(labels)) + 1):
        pool = [i for i, label in enumerate(labels) if label == c and i not in excluded]
        out += list(rng.choice(np.array(pool), k, replace=False))
    return np.array(out)


# -- the configuration ---------------------------------------------------------------------------

def test_unset_step_settings_take_the_modes_defaults():
    """Mini-batch mode: q 4, lr 2e-5, batch 4, every block adapted; few-shot: q 1, lr 4e-4,
    the whole set of k x 2 classes as one batch and the top 3 blocks adapted, or all of
    them when 3 or fewer are kept (eps 4e-3 in both)."""
    plain, few = FinetuneConfig(), FinetuneConfig(k_shot=16)
    assert (plain.k_shot, plain.queries, plain.lr, plain.batch, plain.eps,
            plain.adapted_blocks, plain.first_adapted) == (0, 4, 2e-5, 4, 4e-3, 0, 0)
    assert (few.queries, few.lr, few.batch, few.eps, few.adapted_blocks,
            few.first_adapted) == (1, 4e-4, 32, 4e-3, 3, 3)
    for blocks, adapted in ((4, 3), (3, 0), (2, 0), (1, 0)):
        assert FinetuneConfig(k_shot=16, blocks=blocks).adapted_blocks == adapted, blocks
    classes = load_dataset().num_classes
    assert FinetuneConfig(k_shot=5).batch == 5 * classes == 10


def test_given_step_settings_win_in_either_mode():
    given = FinetuneConfig(k_shot=16, queries=3, lr=1e-4, batch=8)
    assert (given.queries, given.lr, given.batch) == (3, 1e-4, 8)
    assert FinetuneConfig(queries=1, lr=2e-4, batch=2) == FinetuneConfig(
        queries=1, lr=2e-4, batch=2, k_shot=0)
    # resolved when made: equal to the same numbers given, and kept through a file
    assert FinetuneConfig(k_shot=16) == FinetuneConfig(k_shot=16, queries=1, lr=4e-4,
                                                       batch=32, adapted_blocks=3)
    assert FinetuneConfig(k_shot=16, adapted_blocks=0).first_adapted == 0


def test_a_fewshot_configuration_round_trips_through_toml(tmp_path):
    cfg = FinetuneConfig(k_shot=7, model="tiny", blocks=2)
    loaded = load_config(dump_config(cfg, tmp_path / "f.toml"), (FinetuneConfig,))
    assert loaded == cfg and (loaded.batch, loaded.queries, loaded.lr) == (14, 1, 4e-4)


@pytest.mark.parametrize("values, message", [
    ({"k_shot": -1}, "k_shot must be an integer with 0 <= value <= 10000 (got -1)"),
    ({"k_shot": 10_001}, "k_shot must be an integer with 0 <= value <= 10000 (got 10001)"),
    ({"k_shot": 16, "batch": 33},
     "batch must be at most k_shot x 2 classes = 32 (the few-shot set) (got 33)"),
    ({"k_shot": 65}, "k_shot must be at most 64 with seq_len 32 (the whole few-shot set is "
                     "one batch of at most 1024 examples and 4096 tokens; or give --batch) "
                     "(got 65)"),
    ({"k_shot": 33, "seq_len": 64}, "k_shot must be at most 32 with seq_len 64"),
    ({"k_shot": 513, "seq_len": 2}, "k_shot must be at most 512 with seq_len 2"),
    ({"k_shot": 16, "seq_len": 513}, "seq_len must be an integer with 2 <= value <= 512"),
    ({"batch": 11, "n_train": 10, "calibration": 10},
     "batch must be at most n_train = 10 (got 11)"),
])
def test_bad_fewshot_values_are_one_line_errors(values, message):
    with pytest.raises(ConfigError) as error:
        FinetuneConfig(**values)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


@pytest.mark.parametrize("values, batch", [
    ({"k_shot": 16, "batch": 32}, 32),                 # the set itself
    ({"k_shot": 64}, 128),                             # 128 x 32 = 4096 tokens exactly
    ({"k_shot": 512, "seq_len": 2}, 1024),             # 1024 examples exactly
    ({"k_shot": 65, "batch": 4}, 4),                   # a mini-batch of a larger set
    ({"k_shot": 16, "n_train": 10, "calibration": 10}, 32),   # n_train does not bound it
    ({"k_shot": 0, "batch": 10, "n_train": 10, "calibration": 10}, 10),
])
def test_values_at_the_limits_are_accepted(values, batch):
    assert FinetuneConfig(**values).batch == batch


# -- the draw --------------------------------------------------------------------------------------

#: Made-up labels of three classes of unequal sizes (12, 9, 7 examples), interleaved.
LABELS = np.array([0, 1, 2, 0, 0, 1, 2, 0, 1, 0, 2, 0, 1, 0, 0, 2, 1, 0, 1, 2, 0, 1, 0, 2,
                   1, 0, 2, 1])
EXCLUDED = [0, 1, 2, 5, 6, 9, 14, 20, 27]


def test_the_draw_takes_k_per_class_outside_the_excluded_in_class_order():
    index = draw(LABELS, EXCLUDED, 3, seed=5)
    assert len(index) == 9 and len(set(index.tolist())) == 9
    assert LABELS[index].tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert not set(index.tolist()) & set(EXCLUDED)
    assert index.tolist() == hand_draw(LABELS, EXCLUDED, 3, 5).tolist()


def test_the_draw_is_fixed_by_its_seed_and_differs_across_seeds():
    assert draw(LABELS, EXCLUDED, 3, 0).tolist() == draw(LABELS, EXCLUDED, 3, 0).tolist()
    sets = {tuple(draw(LABELS, EXCLUDED, 3, seed).tolist()) for seed in range(4)}
    assert len(sets) == 4
    for seed in range(4):
        assert draw(LABELS, EXCLUDED, 3, seed).tolist() == hand_draw(
            LABELS, EXCLUDED, 3, seed).tolist()


def test_the_draw_may_take_every_eligible_example_and_no_more():
    """Eligible per class: 12 - 4 = 8 (class 0), 9 - 3 = 6 (class 1), 7 - 2 = 5 (class 2)."""
    eligible = [sum(1 for i, l in enumerate(LABELS) if l == c and i not in EXCLUDED)
                for c in range(3)]
    assert eligible == [8, 6, 5]
    index = draw(LABELS, EXCLUDED, 5, 1)
    assert sorted(index[10:].tolist()) == [i for i, l in enumerate(LABELS)
                                          if l == 2 and i not in EXCLUDED]
    with pytest.raises(ConfigError) as error:
        draw(LABELS, EXCLUDED, 6, 1)
    assert str(error.value) == ("k_shot must be at most 5 (the examples per class outside "
                                "the head's n_train and the test split) (got 6)")


# -- the prepared run -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def few_shot():
    torch.set_num_threads(1)
    model = load_model(FEW)
    return prepare(FEW, model), model


def test_the_fewshot_set_is_drawn_outside_the_heads_and_the_test_examples(few_shot):
    prepared, (_, tokenizer) = few_shot
    data = load_dataset()
    splits = split(data, FEW.split_seed, FEW.n_train, 0, FEW.n_test)
    used = set(splits.train.texts) | set(splits.test.texts)
    excluded = [i for i, text in enumerate(data.texts) if text in used]
    assert len(excluded) == 40 + 20
    index = prepared.fewshot_index
    assert index.tolist() == hand_draw(data.labels, excluded, 4, FEW.seed).tolist()
    texts = [data.texts[i] for i in index]
    assert not set(texts) & used
    ids, mask, labels = prepared.train
    assert labels.tolist() == data.labels[index].tolist() == [0] * 4 + [1] * 4
    expected = tokenizer(texts, padding="max_length", truncation=True, max_length=8,
                         return_tensors="pt")
    assert torch.equal(ids, expected["input_ids"]) and torch.equal(
        mask, expected["attention_mask"])
    # the head was fitted on (and the test split is) the splits' examples, unchanged
    assert prepared.probe[2].tolist() == splits.train.labels.tolist()
    assert prepared.test[2].tolist() == splits.test.labels.tolist()
    assert len(prepared.probe[0]) == 40 and len(prepared.test[0]) == 20


def test_another_seed_draws_another_set(few_shot):
    _, model = few_shot
    other = prepare(FEW.replace(seed=4), model)
    assert set(other.fewshot_index.tolist()) != set(few_shot[0].fewshot_index.tolist())


def test_without_k_shot_the_steps_draw_from_the_heads_examples(few_shot):
    plain = prepare(FEW.replace(k_shot=0, batch=4), few_shot[1])
    assert plain.fewshot_index is None and plain.train is plain.probe
    assert len(plain.train[2]) == 40


def test_a_full_batch_is_the_set_in_order_a_mini_batch_is_drawn_from_it(few_shot):
    prepared = few_shot[0]
    full = ZoFinetune(prepared, "float")
    assert [full.batch(t).tolist() for t in (0, 7)] == [list(range(8))] * 2
    prepared.cfg = FEW.replace(batch=3)
    try:
        mini = ZoFinetune(prepared, "float")
        for t in (0, 1, 9):
            expected = np.random.default_rng([FEW.seed, t]).choice(8, 3, replace=False)
            assert mini.batch(t).tolist() == expected.tolist()
    finally:
        prepared.cfg = FEW


# -- the training loss and the control --------------------------------------------------------------

@pytest.mark.parametrize("arithmetic", ["int8", "float"])
def test_the_training_loss_is_the_cross_entropy_over_the_whole_set(few_shot, arithmetic):
    """After 3 steps (nonzero masters), the 8 examples at once (the hand forward's shapes:
    equal to rounding), in parts of 3 (3 + 3 + 2) and of 7 (7 + 1): float32 sums in other
    shapes, equal to 1e-3 (one example left out moves the mean by far more)."""
    run = ZoFinetune(few_shot[0], arithmetic)
    for _ in range(3):
        run.step()
    assert any(bool(t.abs().sum()) for t in run.masters.values())
    expected = hand_loss(few_shot[0], run.masters, arithmetic)
    assert run.train_loss() == pytest.approx(expected, rel=1e-12)
    for part in (3, 7):
        assert run.train_loss(batch=part) == pytest.approx(expected, rel=1e-3), part


def test_the_random_sign_control_flips_g_by_its_own_seeded_stream(few_shot):
    """q = 2, float: each step's g of the control is the plain step's g (same masters)
    times the next sign of ``default_rng(SeedSequence([seed, SIGN_WORD]))``."""
    prepared = few_shot[0]
    prepared.cfg = FEW.replace(queries=2)
    try:
        signs = np.random.default_rng(np.random.SeedSequence([FEW.seed, SIGN_WORD]))
        control = ZoFinetune(prepared, "float", control="random-sign")
        drawn = []
        for _ in range(3):
            plain = ZoFinetune(prepared, "float")
            plain.masters = {k: v.clone() for k, v in control.masters.items()}
            plain.step_index = control.step_index
            plain.generator.restore(control.generator.save())
            grads = plain.step().grads
            drawn += [int(signs.choice((-1, 1))) for _ in grads]
            assert control.step().grads == [s * g for s, g in zip(drawn[-2:], grads)]
        assert sorted(set(drawn)) == [-1, 1]          # both signs met, so flips are seen
    finally:
        prepared.cfg = FEW
    with pytest.raises(ConfigError, match="^control must be one of none, random-sign "):
        ZoFinetune(prepared, "int8", control="shuffle")


def test_curve_steps_are_every_tenth_step_and_the_last():
    assert curve_steps(21) == [0, 10, 20, 21]
    assert curve_steps(20) == [0, 10, 20]
    assert curve_steps(9) == [0, 9]
    assert curve_steps(0) == [0]
    assert curve_steps(7, every=3) == [0, 3, 6, 7]


# -- the command --------------------------------------------------------------------------------------

TINY = ["finetune", "--model", "tiny", "--blocks", "1", "--seq-len", "8", "--n-train", "40",
        "--n-test", "20", "--calibration", "20", "--rank", "4", "--seed", "3",
        "--split-seed", "1", "--quiet"]


@pytest.fixture(scope="module")
def fewshot_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fewshot")
    code = main([*TINY, "--k-shot", "4", "--steps", "21", "--out", str(tmp / "out"),
                 "--json", str(tmp / "run.json")])
    return code, json.loads((tmp / "run.json").read_text())


def test_the_json_reports_the_training_loss_curve_of_the_run(fewshot_run, few_shot):
    """Every checkpoint's loss recomputed here: the same configuration stepped through the
    library, the loss of its masters by the hand cross-entropy."""
    code, result = fewshot_run
    assert code == 0 and result["steps"] == 21
    assert result["config"] == FEW.replace(steps=21).to_dict()
    assert result["curve_steps"] == [0, 10, 20, 21]
    for arithmetic, key in (("int8", "train_loss"), ("float", "float_train_loss")):
        run, expected = ZoFinetune(few_shot[0], arithmetic), []
        for done in range(22):
            if done in (0, 10, 20, 21):
                expected.append(hand_loss(few_shot[0], run.masters, arithmetic))
            if done < 21:
                run.step()
        assert result[key + "_curve"] == pytest.approx(expected, rel=1e-12)
        assert result[key + "_before"] == result[key + "_curve"][0]
        assert result[key + "_after"] == result[key + "_curve"][-1]
    assert result["train_loss_after"] != result["float_train_loss_after"]


def test_the_protocols_defaults_come_with_k_shot_alone(fewshot_run):
    config = fewshot_run[1]["config"]
    assert (config["k_shot"], config["queries"], config["lr"], config["batch"],
            config["eps"]) == (4, 1, 4e-4, 8, 4e-3)


def test_a_too_large_k_for_the_data_is_a_one_line_error(tmp_path, capsys):
    """Class 0 (negative) has 5384 examples, 20 + 10 of them in the head's and the test
    split: 5354 left to draw from."""
    data = load_dataset()
    splits = split(data, 1, 40, 0, 20)
    left = int((data.labels == 0).sum() - (splits.train.labels == 0).sum()
               - (splits.test.labels == 0).sum())
    code = main([*TINY, "--k-shot", str(left + 1), "--batch", "2", "--steps", "0",
                 "--no-float", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err == (f"zoforge: error: --k-shot must be at most {left} (the "
                                 "examples per class outside the head's n_train and the test "
                                 f"split) (got {left + 1})\n")
