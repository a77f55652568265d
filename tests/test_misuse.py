"""Misuse (issue 13): bad inputs to every subcommand are refused before any work starts.

The rule every case checks: exit code 2, and stderr is exactly one line

    zoforge: error: PARAMETER ...

beginning with the parameter the user got wrong, as they wrote it: a flag (``--out must be
...``), a key of a file (``inner in cfg.json must be ...``), an environment variable
(``ZOFORGE_CACHE ...``) or, for what argparse itself rejects (an unknown option, ``abc``
for a number), argparse's message on the same single line (``argument --rows: invalid int
value: 'abc'``). No traceback, nothing on stdout (no work was started). In process,
:func:`zoforge.cli.main` returns 2 for zoforge's own checks and raises ``SystemExit(2)`` for
argparse's (as ``--help`` raises ``SystemExit(0)``); ``python -m zoforge`` exits 2 for both
(a few cases run in a subprocess to show it).

Each case names its argv with placeholders for files the module fixture prepares
(``{tmp}``, ``{file}``, ``{data}``, ...). Nothing here co-simulates, synthesizes or trains
beyond the first steps of one diverging run: validation fails first.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from zoforge.cli import main

# -- files the cases refer to ---------------------------------------------------------------

POSITIVE = ["great", "wonderful", "superb", "moving", "brilliant", "charming", "fun"]
NEGATIVE = ["awful", "boring", "dull", "terrible", "messy", "tedious", "bland"]


def _jsonl(path: Path, rows) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("misuse")
    rng = np.random.default_rng(0)
    good = []
    for i in range(80):
        label = i % 2
        words = rng.choice(POSITIVE if label else NEGATIVE, size=4)
        good.append({"text": " ".join(words) + f" {i}", "label": label})
    f = {"tmp": str(tmp)}
    f["data"] = _jsonl(tmp / "words.jsonl", good)
    (tmp / "a-file").write_text("not a folder\n")
    f["file"] = str(tmp / "a-file")
    f["missing"] = str(tmp / "no-such-file.jsonl")
    binary = bytes(rng.integers(0, 256, 4096, dtype=np.uint8))
    (tmp / "binary.jsonl").write_bytes(binary)
    (tmp / "binary.csv").write_bytes(binary)
    (tmp / "binary.toml").write_bytes(binary)
    (tmp / "binary.json").write_bytes(binary)
    (tmp / "empty.jsonl").write_text("")
    (tmp / "empty.csv").write_text("")
    (tmp / "header-only.csv").write_text("text,label\n")
    (tmp / "malformed.jsonl").write_text('{"text": "fine", "label": 1}\n{"text": "cut", "lab\n')
    (tmp / "list-rows.jsonl").write_text("[1, 2]\n[3, 4]\n")
    (tmp / "latin1.csv").write_bytes("text,label\ncaf\xe9 cr\xe8me,1\nna\xefve,0\n"
                                     .encode("latin-1"))
    (tmp / "broken.jsonl.gz").write_bytes(b"\x1f\x8b\x08\x00garbage, not gzip data")
    (tmp / "no-columns.csv").write_text("review,stars\nnice,5\nbad,1\n")
    _jsonl(tmp / "one-class.jsonl", [dict(row, label=1) for row in good])
    _jsonl(tmp / "null-label.jsonl", [dict(row, label=None) if i == 5 else row
                                      for i, row in enumerate(good)])
    _jsonl(tmp / "no-label.jsonl", [{"text": row["text"]} if i == 7 else row
                                    for i, row in enumerate(good)])
    _jsonl(tmp / "null-text.jsonl", [dict(row, text=None) if i == 3 else row
                                     for i, row in enumerate(good)])
    _jsonl(tmp / "empty-text.jsonl", [dict(row, text="  ") if i == 3 else row
                                      for i, row in enumerate(good)])
    (tmp / "missing-cell.csv").write_text("text,label\n" + "".join(
        f"{row['text']},{'' if i == 4 else row['label']}\n" for i, row in enumerate(good)))
    for name, values in {"inner-no": {"inner": "no"}, "model-int": {"model": 5},
                         "lr-string": {"lr": "0.1"}, "steps-float": {"steps": 1.5},
                         "progress-int": {"progress": 1}, "seed-bool": {"seed": True},
                         "cache-list": {"cache_dir": ["a"]},
                         "unknown-key": {"learning_rate": 0.1}}.items():
        (tmp / f"{name}.json").write_text(json.dumps(values))
    (tmp / "array.json").write_text("[1, 2, 3]")
    os.mkfifo(tmp / "fifo.json")                         # must be refused, never opened
    (tmp / "duplicate.json").write_text('{"lr": 0.1, "lr": 0.2}')
    (tmp / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp / "forged.json").write_text(json.dumps({"method": "x\nzoforge: error: fine"}))
    (tmp / "design-bad-type.toml").write_text(
        'zoforge_config = 1\nkind = "rng"\nstrategy = "onthefly"\nsnapshot = "no"\n')
    (tmp / "design-bad-kind.toml").write_text('zoforge_config = 1\nkind = "cpu"\n')
    (tmp / "rng-bad-bits.json").write_text(json.dumps({"kind": "rng", "strategy": "onthefly",
                                                       "bits": "8"}))
    (tmp / "sweep-bad.toml").write_text("[train\nsteps = ")
    (tmp / "sweep-type.toml").write_text('[train]\nmodel = "tiny"\ninner = "no"\n')
    reports = tmp / "vivado-garbage"
    reports.mkdir()
    (reports / "top_utilization_place.rpt").write_bytes(binary)
    (reports / "top_timing.rpt").write_bytes(binary[:100])
    text_reports = tmp / "vivado-text-garbage"
    text_reports.mkdir()
    (text_reports / "top_utilization_place.rpt").write_text("this is not a report\n" * 20)
    (text_reports / "top_power.rpt").write_text("| nothing | here |\n")
    (tmp / "vivado-fifo").mkdir()
    os.mkfifo(tmp / "vivado-fifo" / "top_timing.rpt")       # must be refused, never opened
    empty_reports = tmp / "vivado-empty"
    empty_reports.mkdir()
    (tmp / "version-bool.json").write_text('{"zoforge_config": true, "lr": 0.1}')
    (tmp / "nested.json").write_text('{"lr": ' + "[" * 50 + "]" * 50 + "}")
    (tmp / "control.toml").write_text('kind = "rng"\nstrategy = "onthefly\\u001b[2J"\n')
    with open(tmp / "huge.jsonl", "wb") as handle:      # sparse: no disk space used
        handle.truncate((1 << 30) + 1)
    (tmp / "damaged-store").mkdir()
    (tmp / "damaged-store" / "sweep.db").write_bytes(b"SQLite format 3\x00" + binary)
    (tmp / "store-file").write_text("")
    (tmp / "out-dir").mkdir()
    return f


TRAIN = ["train", "--model", "tiny", "--data", "{data}", "--n-train", "20", "--n-val", "10",
         "--n-test", "10", "--max-len", "8", "--steps", "2", "--no-progress",
         "--cache-dir", "{tmp}/cache", "--out", "{run}"]
DUMP = ["rng", "dump"]


def train_without(*flags: str) -> list[str]:
    """TRAIN without ``flags`` (and their values; ``--no-progress`` has none)."""
    out, skip = [], False
    for arg in TRAIN:
        if skip:
            skip = False
        elif arg in flags:
            skip = arg != "--no-progress"
        else:
            out.append(arg)
    return out


NO_OUT = "{tmp}/never-written"

# (id, argv, the parameter the one line begins with, extra environment)
CASES = [
    # -- generate ---------------------------------------------------------------------------
    ("generate-out-empty", ["generate", "rng", "--out", ""], "--out"),
    ("generate-out-is-file", ["generate", "rng", "--out", "{file}"], "--out"),
    ("generate-out-under-file", ["generate", "rng", "--out", "{file}/sub"], "--out"),
    ("generate-out-unwritable", ["generate", "rng", "--out", "/proc/zoforge-misuse"], "--out"),
    ("generate-config-out-empty", ["generate", "--config", "{tmp}/design-bad-type.toml",
                                   "--out", ""], "--out"),
    ("generate-config-binary", ["generate", "--config", "{tmp}/binary.toml"], "--config"),
    ("generate-config-missing", ["generate", "--config", "{tmp}/nope.toml"], "--config"),
    ("generate-config-wrong-type", ["generate", "--config", "{tmp}/design-bad-type.toml",
                                    "--out", NO_OUT], "snapshot in"),
    ("generate-config-wrong-kind", ["generate", "--config", "{tmp}/design-bad-kind.toml",
                                    "--out", NO_OUT], "kind in"),
    ("generate-no-design", ["generate", "--out", NO_OUT], "DESIGN"),
    ("generate-negative-pool-seed", ["generate", "rng", "--strategy", "pregen",
                                     "--pool-seed", "-1", "--out", NO_OUT], "--pool-seed"),
    ("generate-option-of-other-strategy", ["generate", "rng", "--strategy", "onthefly",
                                           "--pool-size", "255", "--out", NO_OUT],
     "--pool-size"),
    ("generate-rows-not-a-number", ["generate", "engine", "--rows", "abc", "--out", NO_OUT],
     "argument --rows"),
    ("generate-engine-too-large", ["generate", "engine", "--rows", "64", "--cols", "64",
                                   "--pack", "8", "--max-m", "32768", "--max-k", "32768",
                                   "--max-n", "1024", "--out", NO_OUT], "--max-m"),
    ("generate-engine-memory-over-limit", ["generate", "engine", "--max-m", "4096",
                                           "--max-k", "4096", "--out", NO_OUT], "--max-m"),
    ("generate-zo-layer-max-m", ["generate", "zo-layer", "--max-m", "5", "--out", NO_OUT],
     "--max-m"),
    # the packed token buffer (4 k-steps a word) the largest memory: small N and r
    ("generate-zo-layer-too-large", ["generate", "zo-layer", "--max-m", "4096", "--max-k",
                                     "4096", "--max-n", "4", "--max-r", "4",
                                     "--out", NO_OUT], "--max-m"),
    ("cosim-zo-layer-frozen-too-large", ["cosim", "zo-layer", "--max-k", "4096", "--max-n",
                                         "4096"], "--max-n"),
    # -- cosim ------------------------------------------------------------------------------
    ("cosim-rng-negative-stimulus-seed", ["cosim", "rng", "--stimulus-seed", "-1"],
     "--stimulus-seed"),
    ("cosim-engine-negative-seed", ["cosim", "engine", "--seed", "-5"], "--seed"),
    ("cosim-engine-m-zero", ["cosim", "engine", "--m", "0"], "--m"),
    ("cosim-engine-too-large", ["cosim", "engine", "--max-m", "8192", "--max-k", "8192"],
     "--max-m"),
    ("cosim-gemm-backpressure-nan", ["cosim", "engine", "--backpressure", "nan"],
     "--backpressure"),
    ("cosim-engine-backend-bulk", ["cosim", "engine", "--backend", "bulk"], "--backend"),
    ("cosim-engine-jobserver-icarus", ["cosim", "engine", "--backend", "jobserver",
                                       "--simulator", "icarus"], "--backend"),
    ("cosim-rng-cycles-float", ["cosim", "rng", "--cycles", "1e9"], "argument --cycles"),
    ("cosim-rng-config-binary", ["cosim", "rng", "--config", "{tmp}/binary.json"],
     "--config"),
    ("cosim-rng-config-wrong-type", ["cosim", "rng", "--config", "{tmp}/rng-bad-bits.json"],
     "bits in"),
    ("cosim-rng-option-of-other-strategy", ["cosim", "rng", "--strategy", "gaussian",
                                            "--banks", "4"], "--banks"),
    ("cosim-zo-layer-q", ["cosim", "zo-layer", "--q", "17"], "--q"),
    ("cosim-zo-layer-negative-seed", ["cosim", "zo-layer", "--seed", "-1"], "--seed"),
    ("cosim-cache-with-space", ["cosim", "rng", "--cycles", "10"], "ZOFORGE_CACHE",
     {"ZOFORGE_CACHE": "{tmp}/cache with space"}),
    # -- build ------------------------------------------------------------------------------
    ("build-out-empty", ["build", "--design", "rng", "--out", ""], "--out"),
    ("build-out-is-file", ["build", "--design", "rng", "--out", "{file}"], "--out"),
    ("build-out-unwritable", ["build", "--design", "rng", "--out", "/proc/zoforge-misuse"],
     "--out"),
    ("build-vivado-binary-reports", ["build", "--design", "rng", "--out", NO_OUT,
                                     "--vivado-reports", "{tmp}/vivado-garbage"],
     "--vivado-reports"),
    ("build-vivado-text-garbage", ["build", "--design", "rng", "--out", NO_OUT,
                                   "--vivado-reports", "{tmp}/vivado-text-garbage"],
     "--vivado-reports"),
    ("build-vivado-fifo", ["build", "--design", "rng", "--out", NO_OUT,
                           "--vivado-reports", "{tmp}/vivado-fifo"], "--vivado-reports"),
    ("build-vivado-empty-folder", ["build", "--design", "rng", "--out", NO_OUT,
                                   "--vivado-reports", "{tmp}/vivado-empty"],
     "--vivado-reports"),
    ("build-vivado-a-file", ["build", "--design", "rng", "--out", NO_OUT,
                             "--vivado-reports", "{file}"], "--vivado-reports"),
    ("build-negative-activity-seed", ["build", "--design", "rng", "--out", NO_OUT,
                                      "--activity-seed", "-1"], "--activity-seed"),
    ("build-clock-nan", ["build", "--design", "rng", "--out", NO_OUT, "--clock-mhz", "nan"],
     "--clock-mhz"),
    ("build-engine-too-large", ["build", "--design", "engine", "--out", NO_OUT,
                                "--max-m", "8192", "--max-k", "8192"], "--max-m"),
    ("build-config-binary", ["build", "--config", "{tmp}/binary.toml", "--out", NO_OUT],
     "--config"),
    ("build-no-design", ["build", "--out", NO_OUT], "--design"),
    ("build-unknown-board", ["build", "--design", "rng", "--out", NO_OUT, "--board", "nope"],
     "--board"),
    ("build-cache-with-space", ["build", "--design", "rng", "--out", NO_OUT],
     "ZOFORGE_CACHE", {"ZOFORGE_CACHE": "{tmp}/cache with space"}),
    # -- rng dump ---------------------------------------------------------------------------
    ("dump-onthefly-too-many-values", DUMP + ["--n-rng", "255", "--bits", "10",
                                                      "--cycles", "10000000"],
     "--cycles"),
    ("dump-gaussian-too-many-values", DUMP + ["--strategy", "gaussian", "--n-rng", "3640",
                                              "--cycles", "10000000"], "--cycles"),
    ("dump-pregen-too-many-values", DUMP + ["--strategy", "pregen", "--length", "1073741824",
                                            "--count", "1000000"], "--length"),
    ("dump-negative-start", DUMP + ["--start", "-1"], "--start"),
    ("dump-start-beyond-int64", DUMP + ["--start", str(10**30)], "--start"),
    ("dump-negative-pool-seed", DUMP + ["--strategy", "pregen", "--pool-seed", "-1"],
     "--pool-seed"),
    ("dump-pool-size-with-onthefly", DUMP + ["--pool-size", "255"], "--pool-size"),
    ("dump-cycles-with-pregen", DUMP + ["--strategy", "pregen", "--cycles", "50"],
     "--cycles"),
    ("dump-length-with-onthefly", DUMP + ["--length", "50"], "--length"),
    ("dump-config-binary", DUMP + ["--config", "{tmp}/binary.toml"], "--config"),
    ("dump-no-what", ["rng"], "the following arguments"),
    # -- train ------------------------------------------------------------------------------
    ("train-out-empty", TRAIN + ["--out", ""], "--out"),
    ("train-out-is-file", TRAIN + ["--out", "{file}"], "--out"),
    ("train-out-unwritable", TRAIN + ["--out", "/proc/zoforge-misuse"], "--out"),
    ("train-negative-seed", TRAIN + ["--seed", "-1"], "--seed"),
    ("train-negative-split-seed", TRAIN + ["--split-seed", "-1"], "--split-seed"),
    ("train-negative-pool-seed", TRAIN + ["--perturbation", "pezo-pregen",
                                          "--pool-seed", "-1"], "--pool-seed"),
    ("train-data-missing", TRAIN + ["--data", "{missing}"], "--data"),
    ("train-data-empty", TRAIN + ["--data", "{tmp}/empty.jsonl"], "--data"),
    ("train-data-empty-csv", TRAIN + ["--data", "{tmp}/empty.csv"], "--data"),
    ("train-data-header-only", TRAIN + ["--data", "{tmp}/header-only.csv"], "--data"),
    ("train-data-binary-jsonl", TRAIN + ["--data", "{tmp}/binary.jsonl"], "--data"),
    ("train-data-binary-csv", TRAIN + ["--data", "{tmp}/binary.csv"], "--data"),
    ("train-data-malformed-jsonl", TRAIN + ["--data", "{tmp}/malformed.jsonl"], "--data"),
    ("train-data-rows-not-objects", TRAIN + ["--data", "{tmp}/list-rows.jsonl"], "--data"),
    ("train-data-wrong-encoding", TRAIN + ["--data", "{tmp}/latin1.csv"], "--data"),
    ("train-data-broken-gzip", TRAIN + ["--data", "{tmp}/broken.jsonl.gz"], "--data"),
    ("train-data-no-columns", TRAIN + ["--data", "{tmp}/no-columns.csv"], "--data"),
    ("train-data-one-class", TRAIN + ["--data", "{tmp}/one-class.jsonl"], "--data"),
    ("train-data-null-label", TRAIN + ["--data", "{tmp}/null-label.jsonl"], "--data"),
    ("train-data-no-label", TRAIN + ["--data", "{tmp}/no-label.jsonl"], "--data"),
    ("train-data-missing-csv-label", TRAIN + ["--data", "{tmp}/missing-cell.csv"], "--data"),
    ("train-data-null-text", TRAIN + ["--data", "{tmp}/null-text.jsonl"], "--data"),
    ("train-data-blank-text", TRAIN + ["--data", "{tmp}/empty-text.jsonl"], "--data"),
    ("train-data-a-folder", TRAIN + ["--data", "{tmp}"], "--data"),
    ("train-data-over-the-size-limit", TRAIN + ["--data", "{tmp}/huge.jsonl"], "--data"),
    ("train-lr-huge", TRAIN + ["--lr", "1e300"], "--lr"),
    ("train-lr-inf", TRAIN + ["--lr", "inf"], "--lr"),
    ("train-eps-huge", TRAIN + ["--eps", "1e300"], "--eps"),
    ("train-max-len-huge", TRAIN + ["--max-len", "1000000"], "--max-len"),
    ("train-num-layers-beyond-model", TRAIN + ["--num-layers", "100"], "--num-layers"),
    ("train-num-layers-zero", TRAIN + ["--num-layers", "0"], "--num-layers"),
    ("train-lora-layers-beyond-model", TRAIN + ["--trainable", "lora-fa",
                                                "--lora-layers", "3"], "--lora-layers"),
    ("train-threads-huge", TRAIN + ["--threads", "100000"], "--threads"),
    ("train-config-inner-no", TRAIN + ["--config", "{tmp}/inner-no.json"], "inner in"),
    ("train-config-model-int", train_without("--model") + ["--config", "{tmp}/model-int.json"],
     "model in"),
    ("train-config-lr-string", TRAIN + ["--config", "{tmp}/lr-string.json"], "lr in"),
    ("train-config-steps-float", train_without("--steps")
     + ["--config", "{tmp}/steps-float.json"], "steps in"),
    ("train-config-progress-int", train_without("--no-progress")
     + ["--config", "{tmp}/progress-int.json"], "progress in"),
    ("train-config-seed-bool", TRAIN + ["--config", "{tmp}/seed-bool.json"], "seed in"),
    ("train-config-cache-list", train_without("--cache-dir")
     + ["--config", "{tmp}/cache-list.json"], "cache_dir in"),
    ("train-config-unknown-key", TRAIN + ["--config", "{tmp}/unknown-key.json"],
     "key 'learning_rate' in"),
    ("train-config-not-object", TRAIN + ["--config", "{tmp}/array.json"], "the top level of"),
    ("train-config-binary", TRAIN + ["--config", "{tmp}/binary.json"], "--config"),
    ("train-config-fifo", TRAIN + ["--config", "{tmp}/fifo.json"], "--config"),
    ("train-config-duplicate-key", TRAIN + ["--config", "{tmp}/duplicate.json"], "key 'lr' in"),
    ("train-config-too-deep", TRAIN + ["--config", "{tmp}/deep.json"], "--config"),
    ("train-config-forged-line", TRAIN + ["--config", "{tmp}/forged.json"], "method in"),
    ("train-config-version-bool", TRAIN + ["--config", "{tmp}/version-bool.json"],
     "zoforge_config in"),
    ("train-config-nested", TRAIN + ["--config", "{tmp}/nested.json"], "--config"),
    ("generate-config-control-character", ["generate", "--config", "{tmp}/control.toml",
                                           "--out", NO_OUT], "strategy in"),
    ("train-cache-empty", train_without("--cache-dir"), "ZOFORGE_CACHE",
     {"ZOFORGE_CACHE": ""}),
    ("cosim-cache-relative", ["cosim", "rng", "--cycles", "10"], "ZOFORGE_CACHE",
     {"ZOFORGE_CACHE": "relative/cache"}),
    ("sweep-store-damaged", ["sweep", "--preset", "tiny", "--store", "{tmp}/damaged-store",
                             "--outputs-only"], "--store"),
    ("generate-config-fifo", ["generate", "--config", "{tmp}/fifo.json", "--out", NO_OUT],
     "--config"),
    ("sweep-config-fifo", ["sweep", "--config", "{tmp}/fifo.json", "--store", "{tmp}/store"],
     "--config"),
    ("train-pool-size-with-gaussian", TRAIN + ["--pool-size", "255"], "--pool-size"),
    ("train-rank-with-head", TRAIN + ["--rank", "4"], "--rank"),
    ("train-layer-steps-with-mezo", TRAIN + ["--layer-steps", "3"], "--layer-steps"),
    ("train-no-inner-with-mezo", TRAIN + ["--no-inner"], "--inner"),
    ("train-hidden-with-head", TRAIN + ["--hidden", "8"], "--hidden"),
    ("train-d-min-nan", TRAIN + ["--method", "hizoo", "--d-min", "nan"], "--d-min"),
    ("train-steps-not-a-number", TRAIN + ["--steps", "many"], "argument --steps"),
    ("train-lr-1e30", TRAIN + ["--lr", "1e30"], "--lr"),
    ("train-diverges", TRAIN + ["--lr", "1e5", "--steps", "20"], "--lr"),
    # -- demo -------------------------------------------------------------------------------
    ("demo-out-empty", ["demo", "--out", ""], "--out"),
    ("demo-out-is-file", ["demo", "--out", "{file}"], "--out"),
    ("demo-rng-out-is-file", ["demo", "--rng", "--out", "{file}"], "--out"),
    ("demo-json-is-folder", ["demo", "--out", NO_OUT, "--json", "{tmp}/out-dir"], "--json"),
    ("demo-steps-negative", ["demo", "--out", NO_OUT, "--steps", "-1"], "--steps"),
    ("demo-lr-inf", ["demo", "--out", NO_OUT, "--lr", "inf"], "--lr"),
    ("demo-stalls", ["demo", "--out", NO_OUT, "--stalls", "1"], "--stalls"),
    ("demo-rng-cycles-zero", ["demo", "--rng", "--out", NO_OUT, "--cycles", "0"],
     "--cycles"),
    ("demo-rng-simulator", ["demo", "--rng", "--out", NO_OUT, "--simulator", "modelsim"],
     "--simulator"),
    ("demo-option-of-other-strategy", ["demo", "--out", NO_OUT, "--strategy", "pregen",
                                       "--n-rng", "7"], "--n-rng"),
    ("demo-board", ["demo", "--out", NO_OUT, "--board", "nope"], "--board"),
    ("demo-training-flag-with-rng", ["demo", "--rng", "--out", NO_OUT, "--steps", "5"],
     "--steps"),
    ("demo-cache-with-space", ["demo", "--rng", "--out", NO_OUT], "ZOFORGE_CACHE",
     {"ZOFORGE_CACHE": "{tmp}/cache with space"}),
    # -- finetune ---------------------------------------------------------------------------
    ("finetune-blocks-zero", ["finetune", "--blocks", "0", "--out", NO_OUT], "--blocks"),
    ("finetune-blocks-beyond-model", ["finetune", "--blocks", "7", "--out", NO_OUT],
     "--blocks"),
    ("finetune-seq-len-513", ["finetune", "--seq-len", "513", "--out", NO_OUT], "--seq-len"),
    ("finetune-seq-len-beyond-model", ["finetune", "--model", "tiny", "--blocks", "1",
                                       "--seq-len", "200", "--out", NO_OUT], "--seq-len"),
    ("finetune-rank-not-multiple-of-rows", ["finetune", "--rank", "6", "--out", NO_OUT],
     "--rank"),
    ("finetune-rtl-bogus", ["finetune", "--rtl", "bogus", "--out", NO_OUT], "argument --rtl"),
    # beyond the co-simulation's limits (check_rtl_limits, MAX_COSIM_WORDS: at seq_len 32 a
    # batch of at most 4), refused once the model is loaded, before the data
    ("finetune-rtl-all-beyond-limits", ["finetune", "--rtl", "all", "--batch", "8",
                                        "--out", NO_OUT], "--batch"),
    ("finetune-batch-beyond-n-train", ["finetune", "--batch", "64", "--n-train", "32",
                                       "--out", NO_OUT], "--batch"),
    ("finetune-out-is-file", ["finetune", "--out", "{file}"], "--out"),
    ("finetune-json-is-folder", ["finetune", "--out", NO_OUT, "--json", "{tmp}/out-dir"],
     "--json"),
    ("finetune-threads-zero", ["finetune", "--out", NO_OUT, "--threads", "0"], "--threads"),
    ("finetune-rtl-cache-with-space", ["finetune", "--rtl", "adapters", "--out", NO_OUT],
     "ZOFORGE_CACHE", {"ZOFORGE_CACHE": "{tmp}/cache with space"}),
    ("finetune-config-binary", ["finetune", "--config", "{tmp}/binary.toml",
                                "--out", NO_OUT], "--config"),
    # -- sweep ------------------------------------------------------------------------------
    ("sweep-store-empty", ["sweep", "--preset", "tiny", "--store", ""], "--store"),
    ("sweep-store-is-file", ["sweep", "--preset", "tiny", "--store", "{tmp}/store-file"],
     "--store"),
    ("sweep-out-is-file", ["sweep", "--preset", "tiny", "--store", "{tmp}/store",
                           "--out", "{file}"], "--out"),
    ("sweep-out-empty", ["sweep", "--preset", "tiny", "--store", "{tmp}/store",
                         "--out", ""], "--out"),
    ("sweep-config-malformed", ["sweep", "--config", "{tmp}/sweep-bad.toml"], "--config"),
    ("sweep-config-binary", ["sweep", "--config", "{tmp}/binary.toml"], "--config"),
    ("sweep-config-wrong-type", ["sweep", "--config", "{tmp}/sweep-type.toml"], "train.inner"),
    ("sweep-unknown-preset", ["sweep", "--preset", "nope", "--store", "{tmp}/store"],
     "--preset"),
    ("sweep-set-negative-steps", ["sweep", "--set", "model=tiny", "--set", "steps=-1",
                                  "--store", "{tmp}/store"], "train.steps"),
    ("sweep-set-model-int", ["sweep", "--set", "model=5", "--store", "{tmp}/store"],
     "train.model"),
    ("sweep-grid-empty", ["sweep", "--grid", "bits=", "--store", "{tmp}/store"], "--grid"),
    ("sweep-jobs-zero", ["sweep", "--preset", "tiny", "--store", "{tmp}/store",
                         "--jobs", "0"], "--jobs"),
    ("sweep-jobs-huge", ["sweep", "--preset", "tiny", "--store", "{tmp}/store",
                         "--jobs", "100000"], "--jobs"),
    ("sweep-lease-nan", ["sweep", "--preset", "tiny", "--store", "{tmp}/store",
                         "--lease-s", "nan"], "--lease-s"),
    ("sweep-unknown-executor", ["sweep", "--preset", "tiny", "--store", "{tmp}/store",
                                "--executor", "ray"], "--executor"),
    ("sweep-no-store", ["sweep", "--preset", "tiny"], "--store"),
    # -- toolchain and the top level ----------------------------------------------------------
    ("toolchain-unknown-option", ["toolchain", "--verbose"], "unrecognized arguments"),
    # a flag's prefix is not the flag: --out is not cosim's --output (nor --steps' --step)
    ("abbreviated-flag", ["cosim", "engine", "--out", "{tmp}/x"], "unrecognized arguments: --out"),
    ("abbreviated-flag-finetune", ["finetune", "--step", "3"], "unrecognized arguments: --step"),
    ("no-command", [], "the following arguments"),
    ("unknown-command", ["frobnicate"], "argument COMMAND"),
]

# Cases refused only once the work has started (a diverging loss shows only in training).
AFTER_START = {"train-diverges"}


def _fill(value: str, files: dict, run: Path | None = None) -> str:
    return value.format(**files, run=run or Path(files["tmp"]) / "train-run")


def _ids(case):
    return case[0]


def _run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exit_:      # argparse's own errors (see the module docstring)
        return exit_.code


def _check_one_line(code: int, out: str, err: str, parameter: str) -> None:
    assert "Traceback" not in out + err
    lines = err.strip("\n").splitlines()
    assert code == 2, f"exit code {code}; stderr: {err!r}"
    assert len(lines) == 1, f"stderr is not one line: {err!r}"
    head = lines[0].removeprefix("zoforge: error: ")
    assert head != lines[0], lines[0]
    assert head.startswith(parameter), f"{lines[0]!r} does not begin with {parameter!r}"
    assert out == "", f"stdout: {out!r}"


def test_the_table_is_large_and_covers_every_command():
    assert len(CASES) >= 60
    from zoforge.cli import build_parser
    parser = build_parser()
    commands = set(parser._subparsers._group_actions[0].choices)
    covered = {case[1][0] for case in CASES if case[1]}
    assert commands <= covered, commands - covered


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_bad_input_is_one_line_naming_the_parameter(case, files, capsys, monkeypatch,
                                                   tmp_path):
    name, argv, parameter, *env = case
    cwd, run = tmp_path / "cwd", tmp_path / "train-run"
    cwd.mkdir()
    monkeypatch.chdir(cwd)                 # where `--out ""` would have written
    for key, value in (env[0] if env else {}).items():
        monkeypatch.setenv(key, _fill(value, files))
    code = _run([_fill(arg, files, run) for arg in argv])
    captured = capsys.readouterr()
    _check_one_line(code, captured.out, captured.err, parameter)
    assert not list(cwd.iterdir()), "something was written into the current folder"
    if name not in AFTER_START:
        assert not Path(_fill(NO_OUT, files)).exists(), "output folder created before the error"
        assert not run.exists(), "training output folder created before the error"
    else:
        assert "diverged" in captured.err and not (run / "result.json").exists()


# train-threads-huge CI's: train-out-empty takes the same command's real exit by default
SUBPROCESS_CASES = ["generate-out-is-file", "train-out-empty", "dump-onthefly-too-many-values",
                    "generate-rows-not-a-number",
                    pytest.param("train-threads-huge", marks=(pytest.mark.slow, pytest.mark.ci))]


@pytest.mark.parametrize("name", SUBPROCESS_CASES)
def test_real_exit_code_and_no_traceback(name, files, tmp_path):
    _, argv, parameter, *_ = next(case for case in CASES if case[0] == name)
    run = tmp_path / "train-run"
    proc = subprocess.run([sys.executable, "-m", "zoforge",
                           *[_fill(a, files, run) for a in argv]],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=dict(os.environ, HF_HUB_OFFLINE="1"))
    _check_one_line(proc.returncode, proc.stdout, proc.stderr, parameter)
    assert not list(tmp_path.iterdir())


# -- outputs never written through a symbolic link inside --out ------------------------------

def _outside(tmp_path: Path) -> Path:
    target = tmp_path / "outside" / "precious.txt"
    target.parent.mkdir()
    target.write_text("keep me\n")
    return target


def test_generate_never_writes_through_a_symlink_in_out(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["generate", "rng", "--n-rng", "7", "--bits", "5", "--out", str(out)]) == 0
    outside = _outside(tmp_path)
    verilog = out / "rng_onthefly_n7_b5.v"
    verilog.unlink()
    verilog.symlink_to(outside)
    capsys.readouterr()
    code = main(["generate", "rng", "--n-rng", "7", "--bits", "5", "--out", str(out)])
    captured = capsys.readouterr()
    _check_one_line(code, captured.out, captured.err, "--out")
    assert "symbolic link" in captured.err
    assert outside.read_text() == "keep me\n" and verilog.is_symlink()


def test_train_never_writes_through_a_symlink_in_out(tmp_path, files, capsys):
    out = tmp_path / "run"
    out.mkdir()
    outside = _outside(tmp_path)
    (out / "result.json").symlink_to(outside)
    argv = [_fill(a, files) for a in TRAIN] + ["--out", str(out)]
    code = main(argv)
    captured = capsys.readouterr()
    _check_one_line(code, captured.out, captured.err, "--out")
    assert outside.read_text() == "keep me\n"
    assert not (out / "checkpoint.pt").exists()          # refused before any work


def test_generate_writes_no_temporary_files(tmp_path):
    out = tmp_path / "out"
    assert main(["generate", "rng", "--n-rng", "7", "--bits", "5", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "design.toml", "rng_onthefly_n7_b5.json", "rng_onthefly_n7_b5.v",
        "rng_onthefly_n7_b5_lut.hex"]


def test_rng_dump_streams_the_same_rows_in_chunks(capsys, monkeypatch):
    """Dumps are written in bounded chunks; the CSV is the same as one block's."""
    import zoforge.cli.rng as rng_cli
    argv = [["rng", "dump", "--n-rng", "7", "--bits", "5", "--cycles", "100", "--start", "3"],
            ["rng", "dump", "--strategy", "gaussian", "--n-rng", "5", "--cycles", "90"],
            ["rng", "dump", "--strategy", "pregen", "--pool-size", "255", "--length", "300",
             "--count", "3"]]
    whole = []
    for args in argv:
        assert main(args) == 0
        whole.append(capsys.readouterr().out)
    monkeypatch.setattr(rng_cli, "CHUNK_VALUES", 17)
    for args, text in zip(argv, whole):
        assert main(args) == 0
        assert capsys.readouterr().out == text
