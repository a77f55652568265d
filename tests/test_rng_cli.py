"""``zoforge generate rng`` / ``rng dump`` / ``cosim rng``: files, CSV formats, one-line errors."""
import json

import numpy as np
import pytest

from zoforge.cli import main
from zoforge.golden.rng import OnTheFlyGolden, PregenGolden, lfsr_sequence, scale_lut


@pytest.mark.parametrize("argv, parameter", [
    (["rng", "dump", "--n-rng", "8"], "--n-rng"),
    (["rng", "dump", "--n-rng", "31", "--bits", "3"], "--bits"),
    (["rng", "dump", "--n-rng", "63", "--bits", "6"], "--bits"),
    (["rng", "dump", "--strategy", "pregen", "--pool-size", "1000"], "--pool-size"),
    (["rng", "dump", "--strategy", "pregen", "--banks", "5"], "--banks"),
    (["rng", "dump", "--strategy", "pregen", "--length", "0"], "--length"),
    (["rng", "dump", "--cycles", "0"], "--cycles"),
    (["rng", "dump", "--strategy", "uniform"], "--strategy"),
    (["generate", "rng", "--n-rng", "256", "--out", "unused"], "--n-rng"),
    (["generate", "rng", "--strategy", "pregen", "--layout", "diagonal", "--out", "unused"],
     "--layout"),
    (["generate", "rng", "--strategy", "gaussian", "--terms", "17", "--out", "unused"],
     "--terms"),
    (["cosim", "rng", "--bits", "40"], "--bits"),
    (["cosim", "rng", "--simulator", "modelsim"], "--simulator"),
    (["cosim", "rng", "--backpressure", "1.5"], "--backpressure"),
])
def test_invalid_parameters_give_one_line_naming_the_parameter(argv, parameter, capsys):
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"zoforge: error: {parameter} ")
    assert "Traceback" not in captured.err + captured.out


def test_dump_onthefly_csv(capsys):
    assert main(["rng", "dump", "--strategy", "onthefly", "--n-rng", "7", "--bits", "5",
                 "--cycles", "40", "--start", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "cycle,lut_index,scale_exp," + ",".join(f"v{p}" for p in range(7))
    assert len(lines) == 41
    rows = np.array([list(map(int, line.split(","))) for line in lines[1:]])
    S, lut = lfsr_sequence(5), scale_lut(7, 5)
    t = np.arange(3, 43)
    assert rows[:, 0].tolist() == t.tolist()
    assert rows[:, 1].tolist() == S[t % 31].tolist()
    assert rows[:, 2].tolist() == lut[S[t % 31]].tolist()
    lane = (np.arange(7)[None, :] + t[:, None]) % 7            # rotation
    np.testing.assert_array_equal(rows[:, 3:], S[(t[:, None] + lane * 4) % 31] - 16)
    # the emitted values are the raw values shifted by the scale exponent
    g = OnTheFlyGolden(7, 5, start=3)
    np.testing.assert_array_equal(g.take(7 * 40).reshape(40, 7),
                                  rows[:, 3:] << (rows[:, 2:3] - g.k_min))


def test_dump_pregen_csv(capsys):
    assert main(["rng", "dump", "--strategy", "pregen", "--pool-size", "255", "--pool-seed", "5",
                 "--length", "100", "--count", "4", "--bits", "8"]) == 0
    text = capsys.readouterr().out
    pool_part, perturbation_part = text.split("perturbation,j,pool_index,value\n")
    pool_lines = pool_part.splitlines()
    assert pool_lines[0] == "index,value" and len(pool_lines) == 256
    pool = PregenGolden(255, 8, 8, 5).pool
    assert [int(line.split(",")[1]) for line in pool_lines[1:]] == pool.tolist()
    rows = np.array([list(map(int, line.split(","))) for line in perturbation_part.splitlines()])
    assert rows.shape == (400, 4)
    position = np.arange(400)
    assert rows[:, 0].tolist() == (position // 100).tolist()
    assert rows[:, 1].tolist() == (position % 100).tolist()
    assert rows[:, 2].tolist() == (position % 255).tolist()   # leftover continues
    assert rows[:, 3].tolist() == pool[position % 255].tolist()


def test_generate_constant_lut_has_no_memory(tmp_path, capsys):
    assert main(["generate", "rng", "--n-rng", "31", "--bits", "8", "--out", str(tmp_path)]) == 0
    config = json.loads((tmp_path / "rng_onthefly_n31_b8.json").read_text())
    assert config["constant_shift"] is True and (config["W"], config["F"]) == (8, 6)
    assert config["memory_files"] == []
    verilog = (tmp_path / "rng_onthefly_n31_b8.v").read_text()
    assert "reg [" in verilog and " lut [" not in verilog and "always" in verilog
    assert "W=8 F=6" in capsys.readouterr().out


def test_generate_lut_and_pool_memory_files(tmp_path):
    assert main(["generate", "rng", "--n-rng", "7", "--bits", "5", "--out", str(tmp_path)]) == 0
    config = json.loads((tmp_path / "rng_onthefly_n7_b5.json").read_text())
    assert not config["constant_shift"]
    assert config["memory_files"] == ["rng_onthefly_n7_b5_lut.hex"]
    lut = [int(line, 16) for line in (tmp_path / "rng_onthefly_n7_b5_lut.hex").read_text().split()]
    assert lut == (scale_lut(7, 5) - config["lut"]["k_min"]).tolist()
    assert main(["generate", "rng", "--strategy", "pregen", "--pool-size", "255", "--banks", "4",
                 "--layout", "striped", "--out", str(tmp_path)]) == 0
    name = "rng_pregen_N255_q12_L4_striped"
    config = json.loads((tmp_path / f"{name}.json").read_text())
    assert config["memory_files"] == [f"{name}_bank{i}.hex" for i in range(4)]
    bank1 = [int(line, 16) for line in (tmp_path / f"{name}_bank1.hex").read_text().split()]
    pool = PregenGolden(255, 12, 4, 0).pool
    assert bank1[:3] == [int(pool[i]) & 0xFFF for i in (1, 5, 9)]


def test_cli_help_for_each_rng_command(capsys):
    for argv in (["generate", "rng", "--help"], ["rng", "dump", "--help"],
                 ["cosim", "rng", "--help"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 0
        assert "--strategy" in capsys.readouterr().out
