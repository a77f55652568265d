"""The mapping the tool picks (``sim/mapping.py``): the branch lanes of a ``hw-mlp`` linear
classifier, pinned by a table worked out by hand, the cycle counts it compares held against
the RTL's measured ones, and ``--branch-lanes`` on the command line (auto by default,
explicit values kept, one-line errors)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from zoforge.cli import main
from zoforge.errors import ConfigError
from zoforge.golden.zo import train as train_module
from zoforge.golden.zo.config import TrainConfig
from zoforge.golden.zo.features import pooled_shape
from zoforge.sim.mapping import (branch_lanes_cycles, choose_branch_lanes, parse_branch_lanes,
                                 with_chosen_branch_lanes)

FIGURES = json.loads((Path(__file__).parent.parent / "docs" / "figures.json").read_text())


def head(**changes) -> TrainConfig:
    """``zoforge demo``'s training: 4 x 4, q 4, batch 16, a linear classifier."""
    fields = dict(method="hw-prge", trainable="hw-mlp", perturbation="pezo-onthefly",
                  hidden=0, queries=4, batch=16, rows=4, cols=4)
    return TrainConfig(**{**fields, **changes})


# (rows, cols, queries, features K, classes N) -> B. Worked out by hand from the step's
# parts (docs/zo-layer.md): branch work ~ 2q * M/C * K * N_B / R (N_B: N padded to F = R/B),
# one fill/drain per branch job (2q jobs at B = 1, q / (B/2) at B >= 2), update walks of
# K * N_B / R words taking Q = B/2 transfers each (q * Q walks' worth a step).
TABLE = [
    # the demo: N = 2 on 4 rows. B = 1 pads to 4 columns (twice the branch work);
    # B = 2 (F = 2) fits; B = 4 (F = 1) fits too but doubles the update walks
    ((4, 4, 4, 384, 2), 2),
    # 8 x 8: B = 4 (F = 2) fits N = 2; B = 2 pads to 4; B = 8 fits, 4x walks
    ((8, 8, 4, 384, 2), 4),
    # 2 x 2: N = 2 fills the rows at B = 1 and 2; B = 2 halves the branch jobs (fill/drain)
    ((2, 2, 4, 384, 2), 2),
    # N = R = 4: no padding at any B; B = 2 halves the jobs, B = 4 doubles the walks
    ((4, 4, 4, 384, 4), 2),
    # q = 1 or 3: B = 4 (two queries a job) is not allowed; B = 2 as above
    ((4, 4, 1, 384, 2), 2),
    ((4, 4, 3, 384, 2), 2),
    # 3 classes on 8 rows: B = 8 pads least (3) but walks every word 4 times; B = 4 pads
    # to 4 with 2x walks; B = 2 pads to 4 with single walks: B = 2
    ((8, 8, 4, 384, 3), 2),
    # one row: only B = 1
    ((1, 4, 4, 384, 2), 1),
    # K = 6 is not a multiple of B = 4: B = 2
    ((8, 4, 4, 6, 2), 2),
]


@pytest.mark.parametrize("shape, lanes", TABLE)
def test_the_chosen_branch_lanes_by_hand(shape, lanes):
    rows, cols, queries, features, classes = shape
    cfg = head(rows=rows, cols=cols, queries=queries)
    assert choose_branch_lanes(cfg, features, classes) == lanes


def test_a_tie_goes_to_the_smaller_b():
    """9 classes on 4 x 4, batch 4, K 16, q 8: the model gives B = 2 and B = 4 the same
    cycles (1,458 a step, B = 1 1,994; the shallow tiles at their depth since the skewed
    drain, so the tie moved from 6 classes on 4 x 8, q 2), and the chooser takes B = 2."""
    cfg = head(batch=4, queries=8)
    cycles = branch_lanes_cycles(cfg, 16, 9)
    assert cycles[2] == cycles[4] < cycles[1]
    assert choose_branch_lanes(cfg, 16, 9) == 2


def test_the_layer_holds_the_classes_padded_to_a_word():
    """The design's N capacity: 5 classes padded to 4 / B features (but at least the rows)."""
    assert [head(branch_lanes=b).layer_design(384, 5).max_n for b in (1, 2, 4)] == [8, 6, 5]
    assert head(branch_lanes=2).layer_design(384, 2).branch_lanes == 2


def test_a_hidden_layer_keeps_one_branch_per_job():
    assert choose_branch_lanes(head(hidden=8), 384, 2) == 1
    with pytest.raises(ConfigError) as error:
        branch_lanes_cycles(head(hidden=8), 384, 2)
    assert str(error.value).startswith("hidden") and "\n" not in str(error.value)


def test_the_compared_cycles_are_the_rtls():
    """The cycle counts the chooser compares, against the RTL's STEP_CYCLES measured on the
    demo's head (docs/figures.json: bench_zolayer_busy's rows and the demo's run at B = 1,
    which had stalls on every stream); B = 1 is about twice B = 2 (twice the columns)."""
    measured = {(row["array"], row["branch_lanes"]): row["cycles_per_step"]
                for row in FIGURES["busy"]["rows"] if row["n"] == 2}
    four = branch_lanes_cycles(head(), 384, 2)
    eight = branch_lanes_cycles(head(rows=8, cols=8), 384, 2)
    assert sorted(four) == [1, 2, 4] and sorted(eight) == [1, 2, 4, 8]
    assert four[2] == measured[(4, 2)] and eight[4] == measured[(8, 4)]
    assert branch_lanes_cycles(head(rows=2, cols=2), 384, 2)[1] == measured[(2, 1)]
    assert 1.9 < four[1] / four[2] < 2.0
    assert four[1] == pytest.approx(15_040, rel=0.01)       # the demo at B = 1 (stalls 0.1)


def test_with_chosen_branch_lanes_reads_the_shape(tmp_path):
    """The tiny model (32 features) and the default data (2 classes), q 2, batch 8: B = 4
    (one branch job a step, F = 1); other trainables and hidden layers are left alone."""
    cfg = head(model="tiny", queries=2, batch=8, n_train=64)
    assert pooled_shape(cfg) == (32, 2)
    assert with_chosen_branch_lanes(cfg).branch_lanes == choose_branch_lanes(cfg, 32, 2) == 4
    assert with_chosen_branch_lanes(head(hidden=8)).branch_lanes == 1
    plain = TrainConfig(trainable="head")
    assert with_chosen_branch_lanes(plain) is plain


@pytest.mark.parametrize("text, value", [("auto", None), ("AUTO", None), ("1", 1), ("4", 4)])
def test_parse_branch_lanes(text, value):
    assert parse_branch_lanes(text) == value


@pytest.mark.parametrize("text", ["3", "0", "64", "two", ""])
def test_bad_branch_lanes_values_name_the_allowed_ones(text):
    with pytest.raises(ConfigError) as error:
        parse_branch_lanes(text)
    message = str(error.value)
    assert message.startswith("--branch-lanes must be auto or one of 1, 2, 4, 8, 16, 32")
    assert "\n" not in message


# -- zoforge train --------------------------------------------------------------------------

TRAIN = ["train", "--method", "hw-prge", "--trainable", "hw-mlp", "--perturbation",
         "pezo-onthefly", "--model", "tiny", "--hidden", "0", "--queries", "2", "--batch",
         "8", "--n-train", "64", "--n-val", "16", "--n-test", "16", "--steps", "1",
         "--no-progress"]


@pytest.fixture
def trained(monkeypatch, tmp_path):
    """The configurations ``zoforge train`` hands the trainer (the training itself skipped)."""
    seen = []

    def fake_train(cfg):
        seen.append(cfg)
        return dict.fromkeys(("accuracy_before", "accuracy_after", "final_loss",
                              "steps_per_s"), 0.0)
    monkeypatch.setattr(train_module, "train", fake_train)
    return seen


@pytest.mark.parametrize("extra, lanes", [([], 4), (["--branch-lanes", "auto"], 4),
                                          (["--branch-lanes", "1"], 1),
                                          (["--branch-lanes", "2"], 2)])
def test_train_picks_the_branch_lanes_unless_given(tmp_path, trained, extra, lanes):
    out = tmp_path / "run"
    assert main([*TRAIN, "--out", str(out), "--cache-dir", str(tmp_path / "c"), *extra]) == 0
    (cfg,) = trained
    assert cfg.branch_lanes == lanes


def test_train_keeps_the_branch_lanes_of_a_config_file(tmp_path, trained):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"branch_lanes": 1}))
    assert main([*TRAIN, "--config", str(config), "--out", str(tmp_path / "run")]) == 0
    assert trained[0].branch_lanes == 1


@pytest.mark.parametrize("extra, expected", [
    (["--branch-lanes", "3"], "--branch-lanes must be auto or one of 1, 2, 4"),
    (["--branch-lanes", "8"], "--branch-lanes must be a divisor of rows = 4"),
    (["--branch-lanes", "2", "--hidden", "4"], "--branch-lanes must be 1 with a hidden"),
    (["--branch-lanes", "4", "--queries", "3"], "--queries must be a multiple of"),
])
def test_train_bad_branch_lanes_are_one_line_errors(tmp_path, trained, capsys, extra,
                                                    expected):
    assert main([*TRAIN, "--out", str(tmp_path / "run"), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and expected in err, err
    assert trained == []


def test_branch_lanes_is_only_for_hw_mlp(tmp_path, trained, capsys):
    assert main(["train", "--model", "tiny", "--branch-lanes", "2", "--out",
                 str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--branch-lanes must be used only with trainable hw-mlp" in err, err


def test_a_stored_trainings_key_is_unchanged_by_the_new_field():
    """``branch_lanes`` came after results were stored: at 1 (every earlier result's value)
    a training's key hashes the same fields as before, so a store's finished trainings keep
    their keys; any other value is part of the key."""
    from zoforge.golden.zo.config import NOT_RESULT, TrainConfig
    from zoforge.sweep.spec import stable_key, train_key
    hw = dict(trainable="hw-mlp", method="hw-prge", perturbation="pezo-onthefly", batch=8,
              hidden=0)
    one, two = TrainConfig(**hw), TrainConfig(**hw, branch_lanes=2)
    before = {k: v for k, v in one.field_values().items()
              if k not in NOT_RESULT and k != "branch_lanes"}   # the fields hashed before it
    assert train_key(one) == stable_key("train", before)
    assert two.result_fields()["branch_lanes"] == 2
    assert train_key(one) != train_key(two)
