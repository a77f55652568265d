"""benchmarks/finetune_accuracy.py writes only its generated part of
docs/finetune-accuracy.md (between its markers) and keeps the hand-written sections, and
keeps its stored runs apart by attention and nonlinear functions."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmark_scripts import benchmark_script

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench():
    with benchmark_script("finetune_accuracy") as module:
        yield module


def test_only_the_generated_part_is_replaced(bench):
    doc = f"# T\n\nintro\n{bench.BEGIN}\nold table\n{bench.END}\n\n## Kept\nhand text\n"
    new = bench.with_generated(doc, "new table\n")
    assert new == f"# T\n\nintro\n{bench.BEGIN}\nnew table\n{bench.END}\n\n## Kept\nhand text\n"
    assert bench.with_generated(new, "new table\n") == new          # idempotent


def test_the_doc_has_its_markers_and_keeps_its_sections(bench):
    doc = (ROOT / "docs" / "finetune-accuracy.md").read_text()
    new = bench.with_generated(doc, "X\n")
    assert new.count("## ") == doc.count("## ") > 0
    assert "## Why a few-shot protocol" in new and "X\n" + bench.END in new


@pytest.mark.parametrize("doc", ["no markers\n", "{END}\n{BEGIN}\n", "{BEGIN}\nonly begin\n",
                                 "{BEGIN}\na\n{END}\n{BEGIN}\nb\n{END}\n"])
def test_a_doc_without_one_pair_of_markers_is_refused(bench, doc):
    doc = doc.format(BEGIN=bench.BEGIN, END=bench.END)
    with pytest.raises(SystemExit, match="needs one '<!-- generated"):
        bench.with_generated(doc, "table\n")


def test_results_are_kept_per_attention_and_nonlinear(bench, tmp_path):
    """A stored line without ``attention``/``nonlinear`` ran host and float (every earlier
    run's values): it is read as such and never taken for an engines/integer run, nor one of
    those for it; the flags default to ``zoforge finetune``'s."""
    from zoforge.golden.finetune.config import FinetuneConfig
    old = {"row": "int8-zo", "seed": 0, "before": 0.7, "after": 0.75, "losses": []}
    new = {**old, "attention": "engines", "nonlinear": "integer", "after": 0.6}
    path = tmp_path / "results-200.jsonl"
    path.write_text(f"{json.dumps(old)}\n{json.dumps(new)}\n")
    assert bench.key(old) == ("int8-zo", 0, "host", "float")
    assert bench.load_results(path, "host", "float") == {("int8-zo", 0): old}
    assert bench.load_results(path, "engines", "integer") == {("int8-zo", 0): new}
    assert bench.load_results(path, "engines", "float") == {}
    args = bench.arguments([])
    product = FinetuneConfig()
    assert (args.attention, args.nonlinear) == (product.attention, product.nonlinear)
    cfg = bench.finetune_config(bench.arguments(["--attention", "host", "--nonlinear",
                                                 "float"]), 3)
    assert (cfg.attention, cfg.nonlinear, cfg.seed) == ("host", "float", 3)
