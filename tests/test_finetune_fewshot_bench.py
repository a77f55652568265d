"""benchmarks/finetune_fewshot.py keys its stored runs by attention and nonlinear functions:
a result line written before those fields existed ran ``host`` and ``float`` (every earlier
run's values, not today's defaults) and is never taken for a run of other values, nor one of
those for it; the flags default to ``zoforge finetune``'s; every "Produced by" line of the
generated doc names both flags. No model is loaded (made-up records)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmark_scripts import benchmark_script

from zoforge.golden.finetune.config import FinetuneConfig

#: A line as the results file kept it before attention and nonlinear existed (the fields
#: of benchmarks/results/finetune_fewshot.jsonl's adapted_blocks 3, lr 4e-4 lines).
OLD = {"k_shot": 16, "total_steps": 200, "adapted_blocks": 3, "lr": 0.0004, "eps": 0.004}
RUNS = ("int8", "float", "control")


@pytest.fixture(scope="module")
def bench():
    with benchmark_script("finetune_fewshot") as module:
        yield module


def record(run: str, seed: int, ratio: float, **fields) -> dict:
    """A made-up result line with what the doc reads (a curve of 3 checkpoints)."""
    return {"row": run, "seed": seed, **OLD, **fields, "steps": [0, 100, 200],
            "curve": [1.0, (1 + ratio) / 2, ratio], "ratio": ratio, "accuracy_before": 0.7,
            "accuracy_after": 0.7, "cpu_seconds": 40.0, "eval_cpu_seconds": 10.0,
            "seconds": 99.0, "load_average": 5.0}


def write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_a_line_without_the_fields_ran_host_and_float(bench):
    key = bench.candidate(record("int8", 0, 0.3))
    assert key == (16, 200, 3, 0.0004, 0.004, "host", "float")
    cfg = bench.config(key, 1)
    assert cfg == FinetuneConfig(k_shot=16, steps=200, adapted_blocks=3, lr=4e-4, eps=4e-3,
                                 seed=1, attention="host", nonlinear="float")
    assert cfg == FinetuneConfig.from_result_fields(
        {"k_shot": 16, "steps": 200, "adapted_blocks": 3, "lr": 4e-4, "eps": 4e-3, "seed": 1})
    assert FinetuneConfig().attention != "host" or FinetuneConfig().nonlinear != "float"


def test_the_flags_default_to_the_products_defaults(bench, tmp_path):
    args = bench.arguments(["--adapted-blocks", "3", "--lr", "4e-4", "--results",
                            str(tmp_path / "r.jsonl")])
    product = FinetuneConfig()
    assert (args.attention, args.nonlinear) == (product.attention, product.nonlinear)
    assert args.keys == [(16, 200, 3, 4e-4, product.eps, product.attention,
                          product.nonlinear)]
    cfg = bench.config(args.keys[0], 0)
    assert (cfg.attention, cfg.nonlinear) == (product.attention, product.nonlinear)


@pytest.mark.parametrize("new", [{"attention": "engines", "nonlinear": "integer"},
                                 {"attention": "engines"}, {"nonlinear": "integer"}])
def test_a_stored_host_float_run_is_not_reused_for_another_and_back(bench, tmp_path, new):
    flags = ["--adapted-blocks", "3", "--lr", "4e-4", "--seeds", "0", "1"]
    named = {"attention": "host", "nonlinear": "float", **new}
    other = ["--attention", named["attention"], "--nonlinear", named["nonlinear"]]
    old = bench.arguments(flags + ["--attention", "host", "--nonlinear", "float"])
    fresh = bench.arguments(flags + other)
    path = write(tmp_path / "r.jsonl", [record(run, 0, 0.3) for run in RUNS])
    done = bench.load_results(path)
    assert bench.pending(done, old.keys, [0], list(RUNS)) == []          # resumed: all done
    assert bench.pending(done, fresh.keys, [0], list(RUNS)) == [(fresh.keys[0], 0,
                                                                 list(RUNS))]
    # the other way round: a line of the other values is not taken for host / float
    path = write(tmp_path / "r.jsonl", [record(run, 1, 0.4, **named) for run in RUNS])
    done = bench.load_results(path)
    assert bench.pending(done, fresh.keys, [1], list(RUNS)) == []
    assert bench.pending(done, old.keys, [1], list(RUNS)) == [(old.keys[0], 1, list(RUNS))]


def test_both_kinds_side_by_side_and_each_produced_by_line_names_its_flags(bench, tmp_path):
    new = {"attention": "engines", "nonlinear": "integer"}
    path = write(tmp_path / "r.jsonl",
                 [record(run, s, 0.3 + 0.01 * s) for run in RUNS for s in (0, 1)]
                 + [record(run, s, 0.5 + 0.01 * s, **new, commit="abc1234")
                    for run in RUNS for s in (0, 1)])
    done = bench.load_results(path)
    assert len(done) == 12
    args = bench.arguments(["--adapted-blocks", "3", "--lr", "4e-4", "--seeds", "0", "1",
                            "--results", str(path)])
    keys = sorted({key for key, _, _ in done})
    assert [k[5:] for k in keys] == [("engines", "integer"), ("host", "float")]
    command = bench.command_line(args.keys[0], [0, 1], 1, [3], [4e-4], [4e-3])
    text = bench.document(done, keys, args.keys[0], [0, 1], command, path)
    produced = [line for line in text.splitlines() if "Produced by `" in line]
    assert len(produced) == 2
    assert "--attention engines --nonlinear integer" in produced[0]
    assert "--attention host --nonlinear float" in produced[1]
    sections = text.split("\n## ")
    engines = next(s for s in sections if s.startswith("adapted_blocks 3, lr 0.0004, eps "
                                                       "0.004, engines"))
    host = next(s for s in sections if s.startswith("adapted_blocks 3, lr 0.0004, eps 0.004, "
                                                    "host"))
    assert "| 0 | 0.500 |" in engines and "| 0 | 0.300 |" in host      # each its own lines
    assert "commit abc1234" in engines and "commit not recorded" in host
    # the documented candidate (the flags': engines, integer) first with the plot, then the
    # same under host, float, compared with it seed by seed
    assert "finetune-fewshot.png" in engines and "finetune-fewshot.png" not in host
    assert text.index(engines) < text.index(host)
    assert "minus engines attention, integer nonlinear's" in host
    assert "int8 -0.200, -0.200 (seeds 0 1); float -0.200, -0.200" in host
