"""``zoforge finetune`` where the accelerator's step cannot be priced: a board without the
units' estimated clocks is a one-line error before any work (both designs), and a shape the
planner or the schedule cannot take still gives a run with every cost key, None, and a
summary that prints them as n/a (it raised a KeyError before)."""
from __future__ import annotations

import json

import pytest

from zoforge.boards.registry import board_names
from zoforge.cli import main
from zoforge.errors import ConfigError
from zoforge.golden.finetune.config import FinetuneConfig
from zoforge.reports import finetune_fields
from zoforge.reports.accel_cost import BOARD_STEP_KEYS
from zoforge.reports.step_price import UNIT_FIGURES
from zoforge.sim.finetune_run import COST_KEYS, CostContext

#: A board zoforge knows whose units have no estimated clock (today the ECP5 board).
UNPRICED_BOARDS = sorted(set(board_names()) - set(UNIT_FIGURES))


def test_there_is_a_board_without_the_units_figures():
    """The case below is reachable: ``--board`` accepts a board the price cannot clock."""
    assert UNPRICED_BOARDS


@pytest.mark.parametrize("design", ["accelerator", "units"])
@pytest.mark.parametrize("board", UNPRICED_BOARDS)
def test_a_board_without_figures_is_one_line_before_the_run(design, board, tmp_path, capsys):
    code = main(["finetune", "--model", "tiny", "--design", design, "--board", board,
                 "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"--board must be one of {', '.join(UNIT_FIGURES)} with --design {design}" in err
    assert board in err
    assert not (tmp_path / "o").exists()


def test_an_unpriced_shape_keeps_every_key(monkeypatch, capsys):
    """The planner's or the schedule's refusal: the reason printed, every key present."""
    def refuse(*args, **kwargs):
        raise ConfigError("--seq-len", "a length the schedule takes", 9)
    monkeypatch.setattr(finetune_fields, "board_step_fields", refuse)
    cfg = FinetuneConfig(model="tiny", blocks=2, seq_len=8, batch=2, queries=2, n_train=40,
                         n_test=20, calibration=20)
    fields = finetune_fields.accelerator_cost_fields(CostContext(cfg, 32, 64, 2, 2))
    assert "cost: not modelled (--seq-len must be a length the schedule takes" in \
        capsys.readouterr().out
    assert set(COST_KEYS) | set(BOARD_STEP_KEYS) <= set(fields)
    assert fields["design"] == "accelerator" and fields["board"] == "zcu102"
    assert all(fields[key] is None for key in (*COST_KEYS, *BOARD_STEP_KEYS)
               if key != "board")


def test_an_unpriced_run_prints_n_a(monkeypatch, tmp_path, capsys):
    """The whole command with the price refused: exit 0, the summary's board line n/a,
    the JSON's cost keys null."""
    def refuse(*args, **kwargs):
        raise ConfigError("--seq-len", "a length the schedule takes", 9)
    monkeypatch.setattr(finetune_fields, "board_step_fields", refuse)
    out, path = tmp_path / "o", tmp_path / "f.json"
    code = main(["finetune", "--model", "tiny", "--blocks", "1", "--seq-len", "8",
                 "--steps", "0", "--n-train", "8", "--n-test", "8", "--calibration", "8",
                 "--no-float", "--quiet", "--out", str(out), "--json", str(path)])
    printed = capsys.readouterr().out
    assert code == 0
    board_line = next(line for line in printed.splitlines() if line.startswith("on the board"))
    assert "n/a s per step at n/a MHz" in board_line and "n/a DSP" in board_line
    result = json.loads(path.read_text())
    assert result["dsp"] is None and result["fmax_mhz"] is None
    assert result["seconds_per_step_at_fmax"] is None
