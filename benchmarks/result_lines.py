"""The results file of a resumable benchmark: one JSON object per line, appended as each run
finishes (``benchmarks/finetune_accuracy.py``, ``benchmarks/finetune_fewshot.py``)."""
from __future__ import annotations

import json
from pathlib import Path

from zoforge.files import atomic_write_text


def read_result_lines(path: Path) -> list[dict]:
    """The records of ``path`` (none if it does not exist). A last line cut short by a kill
    is dropped from the file (that run is done again); any other unreadable line stops the
    benchmark with the line's number."""
    records, kept = [], []
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    for number, line in enumerate(lines, 1):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if number == len(lines):
                atomic_write_text(path, "".join(text + "\n" for text in kept))
                break
            raise SystemExit(f"{path}:{number}: not a result line; move the file away")
        kept.append(line)
    return records
