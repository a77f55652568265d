"""``zoforge finetune --out DIR`` keeps the board-sized accelerator it priced as
``DIR/accelerator.toml``, the configuration ``zoforge generate accelerator --config`` reads
(the design a user builds); a later run of ``--design units`` on the same folder removes it
(the file would name a design that run did not price)."""
from __future__ import annotations

import json

import pytest

from zoforge.cli import main
from zoforge.config import load_config
from zoforge.hw.accel.config import AcceleratorConfig

TINY = ["finetune", "--model", "tiny", "--blocks", "1", "--seq-len", "8", "--steps", "0",
        "--batch", "2", "--n-train", "20", "--n-test", "8", "--calibration", "8",
        "--no-float", "--quiet"]


@pytest.mark.slow
@pytest.mark.ci
def test_the_priced_accelerator_is_kept_as_its_configuration(tmp_path):
    out = tmp_path / "run"
    assert main([*TINY, "--board", "zcu102", "--out", str(out)]) == 0
    result = json.loads((out / "finetune.json").read_text())
    kept = load_config(out / "accelerator.toml", (AcceleratorConfig,))
    assert result["design"] == "accelerator"
    assert kept.to_dict() == result["accelerator"] and kept.board == "zcu102"
    assert kept.engines >= 1 and kept.dsp == result["dsp"]
    assert main([*TINY, "--design", "units", "--out", str(out)]) == 0
    assert not (out / "accelerator.toml").exists()
    assert (out / "finetune.json").is_file()
