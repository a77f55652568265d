"""The foundation: namespace layout, CLI tree, one-line errors, co-simulation harness, lint."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from zoforge.cli import build_parser, main
from zoforge.errors import ConfigError, check_choice, check_int_range, check_mersenne
from zoforge.hw.export import to_verilog
from zoforge.sim.cosim import run_cocotb
from zoforge.sim.lint import lint_verilog
from zoforge.sim.selftest import Counter


def test_everything_lives_under_the_zoforge_namespace(tmp_path):
    for name in ("zoforge.hw", "zoforge.hw.rng", "zoforge.hw.engine", "zoforge.sim",
                 "zoforge.golden", "zoforge.boards", "zoforge.reports", "zoforge.cli"):
        assert importlib.util.find_spec(name) is not None, name
    # Installing zoforge must not shadow generically named top-level packages: asked from
    # outside the checkout (whose own folders a Python started in it would find, whatever
    # the folder's name), none of them resolves to a file of the checkout.
    probe = ("import importlib.util, json; print(json.dumps({n: getattr(importlib.util."
             "find_spec(n), 'origin', None) for n in ('hw', 'sim', 'golden', 'boards', "
             "'reports')}))")
    found = json.loads(subprocess.run([sys.executable, "-c", probe], cwd=tmp_path,
                                      capture_output=True, text=True, check=True).stdout)
    root = str(Path(__file__).resolve().parent.parent)
    assert not {name: origin for name, origin in found.items()
                if origin and origin.startswith(root)}


@pytest.mark.parametrize("check, args, fragment", [
    (check_int_range, ("--bits", 3, 4, 20), "--bits must be an integer with 4 <= value <= 20 (got 3)"),
    (check_int_range, ("--bits", "x", 4, 20), "(got x)"),
    (check_mersenne, ("--n-rng", 8, 3, 255), "--n-rng must be of the form 2^k - 1"),
    (check_mersenne, ("--n-rng", 511, 3, 255), "(got 511)"),
    (check_choice, ("--strategy", "lfsr", ["onthefly", "pregen"]), "one of onthefly, pregen"),
])
def test_checks_raise_one_line_errors_naming_the_parameter(check, args, fragment):
    with pytest.raises(ConfigError) as info:
        check(*args)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_checks_accept_valid_values():
    assert check_mersenne("--n-rng", 31, 3, 255) == 31
    assert check_int_range("--bits", 20, 4, 20) == 20


def _command_paths(parser, prefix=()):
    """Every command path (("generate", "rng"), ...) in the argparse tree."""
    if parser._subparsers is None:
        yield prefix
        return
    for action in parser._subparsers._group_actions:
        for name, sub in action.choices.items():
            yield from _command_paths(sub, prefix + (name,))


def test_every_command_has_help(capsys):
    paths = list(_command_paths(build_parser()))
    assert paths, "no commands registered"
    for path in paths:
        with pytest.raises(SystemExit) as info:
            main([*path, "--help"])
        assert info.value.code == 0
        assert "usage: zoforge " + " ".join(path) in capsys.readouterr().out


def test_config_error_is_one_line_on_stderr(capsys, monkeypatch):
    def failing_handler(args):
        raise ConfigError("--n-rng", "of the form 2^k - 1 with 3 <= value <= 255", 8)

    import zoforge.cli as cli
    parser = build_parser()
    parser._subparsers._group_actions[0].add_parser("fail").set_defaults(func=failing_handler)
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    assert cli.main(["fail"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("zoforge: error: --n-rng")


def test_console_entry_point_runs():
    proc = subprocess.run([sys.executable, "-m", "zoforge", "--help"], capture_output=True,
                          text=True)
    assert proc.returncode == 0 and "usage: zoforge" in proc.stdout


def test_generated_verilog_is_lint_clean_with_the_waivers():
    assert lint_verilog(to_verilog(Counter(), "counter"), "counter").clean


@pytest.mark.parametrize("verilog, expected", [
    ("module top(input a, input forgotten_input, output b);\nassign b = a;\nendmodule\n",
     "forgotten_input"),
    ("module top(input a, output [1:0] b);\nassign b = a;\nendmodule\n", "WIDTHEXPAND"),
])
def test_lint_reports_real_problems(verilog, expected):
    result = lint_verilog(verilog, "top")
    assert not result.clean
    assert any(expected in line for line in result.messages)


def test_cosim_harness_round_trip(every_simulator):
    verilog = to_verilog(Counter(), "counter")
    result = run_cocotb(verilog=verilog, toplevel="counter",
                        test_module="zoforge.sim.benches.selftest", args={"cycles": 300},
                        simulator=every_simulator)
    assert result.passed, result.failures
    assert result.results["count"] == 300 % 256


def test_cosim_harness_records_switching_activity():
    verilog = to_verilog(Counter(), "counter")
    result = run_cocotb(verilog=verilog, toplevel="counter",
                        test_module="zoforge.sim.benches.selftest", args={"cycles": 40},
                        simulator="verilator", saif=True)
    assert result.passed
    assert result.waves is not None and result.waves.suffix == ".saif"
    text = result.waves.read_text()
    assert "count" in text and "(TC" in text


def test_cosim_rejects_unknown_simulator():
    with pytest.raises(ConfigError, match="simulator"):
        run_cocotb(verilog="", toplevel="x", test_module="x", simulator="modelsim")


def test_a_passing_run_removes_its_temporary_folder(tmp_path, monkeypatch):
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    result = run_cocotb(verilog=to_verilog(Counter(), "counter"), toplevel="counter",
                        test_module="zoforge.sim.benches.selftest", args={"cycles": 20})
    assert result.passed and result.data_dir is None
    assert list(tmp_path.iterdir()) == []
