"""``zoforge generate engine`` and ``zoforge cosim engine`` from the command line."""
import json

import pytest

from zoforge.cli import main
from zoforge.sim.lint import lint_verilog

SMALL = ["--rows", "3", "--cols", "2", "--pack", "2", "--max-m", "32", "--max-k", "32",
         "--max-n", "32"]     # the configuration tests/test_engine_cosim.py builds (cached)


def test_generate_engine_writes_lint_clean_verilog_and_config(tmp_path, capsys):
    assert main(["generate", "engine", "--rows", "2", "--cols", "4", "--out",
                 str(tmp_path)]) == 0
    verilog = (tmp_path / "engine_2x4.v").read_text()
    config = json.loads((tmp_path / "engine_2x4.json").read_text())
    assert config["rows"] == 2 and config["cols"] == 4 and config["design"] == "engine"
    assert "module engine_2x4" in verilog
    assert lint_verilog(verilog, "engine_2x4").clean
    assert "verilog:" in capsys.readouterr().out


@pytest.mark.parametrize("argv, fragment", [
    (["generate", "engine", "--rows", "0", "--out", "x"], "--rows must be"),
    (["generate", "engine", "--cols", "8", "--max-n", "4096", "--out", "x"], "--max-n must be"),
    (["cosim", "engine", *SMALL, "--m", "33"], "--m must be an integer with 1 <= value <= 32"),
    (["cosim", "engine", *SMALL, "--k", "0"], "--k must be"),
    (["cosim", "engine", *SMALL, "--backpressure", "1.5"], "--backpressure must be"),
])
def test_bad_parameters_are_one_line_errors(argv, fragment, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("zoforge: error: ") and fragment in err and "\n" not in err


def test_cosim_gemm_prints_the_json_report(simulator, capsys):
    code = main(["cosim", "engine", *SMALL, "--m", "7", "--k", "5", "--n", "9", "--seed", "3",
                 "--jobs", "2", "--per-channel", "--simulator", simulator])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["bit_exact"] is True
    assert report["ideal_cycles"] == 2 * -(-7 * 5 * 9 // 6)
    assert report["cycles"] > report["ideal_cycles"]
    assert report["pe_utilization"] == round(report["ideal_cycles"] / report["cycles"], 4)
    assert report["cycles_per_s"] > 0
