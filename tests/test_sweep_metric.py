"""A sweep ranks by its task kind's metric: a fine-tuning sweep by the final training loss
(lower is better), a head-level one by the accuracy. Results dicts only, no training;
every expected value is worked out by hand here."""
from __future__ import annotations

import math

import pytest

from zoforge.errors import ConfigError
from zoforge.sweep.recommend import recommend, summary_lines
from zoforge.sweep.results import Group, Measure, Run, group_runs, metric_tolerance
from zoforge.sweep.table import configuration_table


def _run(name: str, seed: int, loss: float, accuracy: float, lut: float, task="finetune"):
    config = {"perturbation": "pezo-onthefly", "name": name, "seed": seed}
    if task is not None:
        config["task"] = task
    return Run(index=seed, swept={"name": name, "seed": seed}, config=config,
               train_key=f"{name}{seed}", hw_key=name, train_status="done",
               train={"accuracy_after": accuracy, "final_loss": loss}, train_error=None,
               report_status="done", hardware={"LUT": Measure(lut, "yosys-estimate", "t")})


def _groups(c_losses=(0.55, 0.65)):
    # a: mean loss 0.4 (sd 0, lowest), 300 LUT; b: mean 0.5 sd 0, 100 LUT;
    # c: losses c_losses, 50 LUT, accuracy the highest (1.0) but loss the worst
    runs = [_run("a", s, 0.4, 0.1, 300) for s in (0, 1)]
    runs += [_run("b", s, 0.5, 0.2, 100) for s in (0, 1)]
    runs += [_run("c", s, loss, 1.0, 50) for s, loss in enumerate(c_losses)]
    return {g.label["name"]: g for g in group_runs(runs)}


def test_finetune_groups_rank_by_the_lowest_final_loss():
    groups = _groups()
    assert groups["c"].quality == pytest.approx(0.6)
    # by accuracy c would win; by loss, a (0.4) beats b (0.5) beyond noise (sd 0)
    best = recommend(list(groups.values())).best
    assert best.group is groups["a"]
    assert best.role == "lowest final training loss"
    # the front: a (lowest loss), b (cheaper than a), c (cheapest); none dominated
    assert [g.label["name"] for g in recommend(list(groups.values())).front] == ["c", "b", "a"]


def test_the_noise_test_on_the_loss_at_exactly_two_standard_errors():
    # c's two losses mean -+ spread/2: sd = spread/sqrt(2), SE against b (sd 0) =
    # sd/sqrt(2) = spread/2, so 2 SE = spread. b (0.5) is the lowest; c, cheaper, is
    # picked while its mean is within 2 SE of b's and not one float beyond.
    spread = 0.25                      # |x - y|, so the tolerance is 0.25 exactly
    for gap in (0.25, math.nextafter(0.25, 1.0)):
        mean = 0.5 + gap
        groups = {g.label["name"]: g for g in group_runs(
            [_run("b", s, 0.5, 0.2, 100) for s in (0, 1)]
            + [_run("c", s, mean + d, 0.2, 50) for s, d in ((0, -spread / 2),
                                                            (1, spread / 2))])}
        tolerance = metric_tolerance(groups["b"], groups["c"])
        assert tolerance == pytest.approx(spread)
        gap_seen = groups["c"].quality - groups["b"].quality
        best = recommend(list(groups.values())).best
        # within 2 SE: the cheaper c; beyond: the lower-loss b
        expected = "c" if gap_seen <= tolerance else "b"
        assert best.group.label["name"] == expected
        assert groups["c"].front_noise
    # and once the gap is clearly outside the noise, b is the pick
    groups = {g.label["name"]: g for g in group_runs(
        [_run("b", s, 0.5, 0.2, 100) for s in (0, 1)]
        + [_run("c", s, 0.8 + d, 0.2, 50) for s, d in ((0, -0.125), (1, 0.125))])}
    assert recommend(list(groups.values())).best.group is groups["b"]
    assert groups["c"].front_noise and groups["b"].front_noise   # c is cheaper


def test_a_group_worse_in_loss_and_lut_leaves_the_front():
    groups = _groups()
    extra = [_run("d", s, 0.45, 0.9, 400) for s in (0, 1)]       # worse than a in both
    named = {g.label["name"]: g for g in group_runs(
        [r for g in groups.values() for r in g.runs] + extra)}
    assert not named["d"].front and not named["d"].front_noise
    assert named["a"].front


def test_the_table_and_summary_name_the_metric():
    groups = list(_groups().values())
    header, rows = configuration_table([r for g in groups for r in g.runs], groups)
    assert "final training loss (the metric, lower is better)" in header
    lines = summary_lines(recommend(groups))
    assert lines[0].startswith("lowest final training loss: name=a: final training loss 0.400")
    assert "final training loss" in lines[3]         # the knee's why
    assert "accuracy" not in " ".join(lines)
    assert "two mean final losses differ" in recommend(groups).noise_test


def test_head_level_groups_still_rank_by_accuracy():
    runs = [_run("a", s, 0.4, 0.1, 300, task=None) for s in (0, 1)]
    runs += [_run("c", s, 0.6, 0.9, 50, task=None) for s in (0, 1)]
    best = recommend(group_runs(runs)).best
    assert best.group.label["name"] == "c" and best.role == "most accurate"
    assert summary_lines(recommend(group_runs(runs)))[0].startswith(
        "most accurate: name=c: accuracy 0.900")


def test_a_sweep_mixing_task_kinds_is_refused_in_one_line():
    runs = [_run("a", 0, 0.4, 0.1, 300), _run("b", 0, 0.4, 0.1, 300, task="train")]
    with pytest.raises(ConfigError) as refused:
        group_runs(runs)
    assert "\n" not in str(refused.value)
    assert "finetune and train" in str(refused.value)
