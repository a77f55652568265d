"""SWEEP.toml is read strictly: every bad key or value anywhere is one line naming the key
where it was written and its allowed values, before anything runs; the presets validate."""
from __future__ import annotations

from pathlib import Path

import pytest

from zoforge.cli import main
from zoforge.errors import ConfigError
from zoforge.sweep.presets import PRESETS, preset
from zoforge.sweep.spec import read_sweep, sweep_from_dict

GOOD = """
name = "s"
[train]
model = "tiny"
steps = 10
[grid]
bits = [6, 8]
seed = [0, 1]
[[points]]
perturbation = "pezo-onthefly"
n_rng = 7
"""

BAD = [
    ('colour = "red"\n', "key 'colour' in {f} must be one of name, description, paper, train"),
    ("[train]\nnrng = 7\n", "key 'train.nrng' in {f} must be one of method, perturbation"),
    ('[train]\nout = "x"\n', "(out, progress, threads are set by the sweep)"),
    ("[train]\nnrng = 7\n", "cache_dir; did you mean n_rng?"),
    ('[train]\nsteps = true\n', "train.steps in {f} must be an integer (got True of type bool)"),
    ('[train]\nlr = 1\n[grid]\nseed = [0, true]\n', "grid.seed in {f} must be an integer"),
    ('[train]\nsteps = "many"\n', "train.steps in {f} must be an integer (got 'many' of type str)"),
    ('[train]\nperturbation = "pezo-onthefly"\n[grid]\nn_rng = [7, 8]\n',
     "grid.n_rng in {f} must be of the form 2^k - 1 with 3 <= value <= 255 (got 8)"),
    ("[grid]\nbits = 8\n", "grid.bits in {f} must be a non-empty list of values (got 8)"),
    ('[[points]]\nperturbation = "pezo-onthefly"\nn_rng = 63\nbits = 6\n',
     "points[0].bits in {f} must be an integer with 7 <= value <= 20"),
    ('[[points]]\nperturbation = "pezo-pregen"\npool_size = 100\n',
     "points[0].pool_size in {f} must be of the form 2^k - 1 with 255 <= value <= 65535"),
    ('[train]\nmethod = "adam"\n', "train.method in {f} must be one of mezo, prge"),
    ('[hardware]\nlayout = "diagonal"\n',
     "hardware.layout in {f} must be one of replicated, striped (got diagonal)"),
    ("[hardware]\nbits = 8\n", "key 'hardware.bits' in {f} must be one of"),
    ("[report]\nclock_mhz = 5000\n",
     "clock_mhz in [report] of {f} must be a frequency with"),
    ('[report]\nboard = "zcu104"\n', "board in [report] of {f} must be one of"),
    ("[report]\ncycles = 5\n", "key 'cycles' in [report] of {f} must be one of board, "),
    ("[search]\npopulation = 1\n", "population in [search] of {f} must be an integer with 2"),
    ('[train]\nsteps = 5\n[grid]\nseed = [0]\n[[points]]\nseed = 1\n',
     "points[0].seed in {f} must be a key that is not also in [grid]"),
]


@pytest.mark.parametrize("text, expected", BAD)
def test_bad_sweep_files_give_one_line_naming_the_key(tmp_path, text, expected):
    path = tmp_path / "SWEEP.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as error:
        read_sweep(path)
    message = str(error.value)
    assert "\n" not in message
    assert expected.format(f=path) in message


def test_the_command_line_prints_the_error_and_creates_nothing(tmp_path, capsys):
    path = tmp_path / "SWEEP.toml"
    path.write_text(GOOD.replace("bits = [6, 8]", "bits = [6, 99]"))
    store = tmp_path / "store"
    assert main(["sweep", "--config", str(path), "--store", str(store)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert err.startswith(f"zoforge: error: grid.bits in {path} must be an integer with")
    assert not store.exists()


@pytest.mark.parametrize("argv, expected", [
    (["--grid", "bits"], "--grid must be KEY=VALUE (got bits)"),
    (["--set", "colour.x=1"], "--set must be KEY=VALUE with KEY a training option"),
    (["--executor", "ray"], "--executor must be one of local, dask (got ray)"),
    (["--executor", "dask", "--scheduler", "tcp://127.0.0.1:1", "--jobs", "2"],
     "--jobs must be given only with --executor local, or --executor dask without"),
    (["--executor", "local", "--scheduler", "tcp://127.0.0.1:1"],
     "--scheduler must be given only with --executor dask"),
    (["--budget", "lutt=5"], "--budget key 'lutt' must be one of lut, ff, bram18, dsp, "
                             "power; did you mean lut?"),
    (["--budget", "power=-1"], "--budget power must be a number >= 0 (got -1)"),
    (["--budget", "lut"], "--budget must be KEY=LIMIT,... with KEY one of lut"),
    (["--connect-timeout-s", "0"], "--connect-timeout-s must be a number of seconds"),
    (["--connect-timeout-s", "nan"], "--connect-timeout-s must be a number of seconds"),
    (["--preset", "fig9"], "--preset must be one of tiny, pezo-fig3"),
    (["--preset", "pezo-fgi4"], "--preset must be one of tiny, pezo-fig3, pezo-fig4, "
                                "pezo-rng-count, small-d, tiny-finetune, pezo-fig3-lora, "
                                "pezo-fig4-lora; did you mean pezo-fig4? (got pezo-fgi4)"),
])
def test_bad_flags_give_one_line(tmp_path, capsys, argv, expected):
    base = ["sweep", "--store", str(tmp_path / "s"), "--set", "model=tiny"]
    assert main(base + argv) == 2
    assert expected in capsys.readouterr().err


def test_points_keys_and_shared_reports(tmp_path):
    path = tmp_path / "SWEEP.toml"
    path.write_text(GOOD)
    sweep = read_sweep(path)
    assert len(sweep.points) == 4
    assert sweep.points[0].swept == {"perturbation": "pezo-onthefly", "n_rng": 7, "bits": 6,
                                     "seed": 0}
    assert len({p.train_key for p in sweep.points}) == 4
    assert len({p.hw_key for p in sweep.points}) == 2          # the seed is not hardware
    assert [kind for _, kind, _ in sweep.tasks()] == ["report", "train", "train", "report",
                                                      "train", "train"]
    again = read_sweep(path)                                  # keys are stable
    assert [p.train_key for p in again.points] == [p.train_key for p in sweep.points]
    changed = sweep_from_dict({**sweep.data, "report": {"clock_mhz": 200}})
    assert changed.points[0].train_key == sweep.points[0].train_key
    assert changed.points[0].hw_key != sweep.points[0].hw_key   # report options count


def test_identical_trainings_are_one_point():
    sweep = sweep_from_dict({"train": {"model": "tiny", "perturbation": "gaussian"},
                             "grid": {"seed": [0, 0, 1]}})
    assert len(sweep.points) == 2 and sweep.where[0, (0,)] == sweep.where[0, (0,)] == 0


def test_hardware_options_reach_the_generators_that_have_them():
    sweep = sweep_from_dict({"train": {"model": "tiny"}, "hardware": {"layout": "striped"},
                             "points": [{"perturbation": "pezo-pregen"},
                                        {"perturbation": "pezo-onthefly"}]})
    assert sweep.points[0].generator.layout == "striped"
    assert sweep.points[1].generator.variant == "onthefly"


@pytest.mark.parametrize("name, points", [("tiny", 6), ("pezo-fig3", 27), ("pezo-fig4", 21),
                                          ("pezo-rng-count", 15), ("small-d", 24)])
def test_presets_validate(name, points):
    sweep = sweep_from_dict(preset(name), default_name=name)
    assert len(sweep.points) == points
    assert set(PRESETS) == {"tiny", "pezo-fig3", "pezo-fig4", "pezo-rng-count",
                            "small-d", "tiny-finetune", "pezo-fig3-lora", "pezo-fig4-lora"}


def test_print_config_round_trips(tmp_path, capsys):
    assert main(["sweep", "--preset", "pezo-fig3", "--print-config"]) == 0
    path = tmp_path / "fig3.toml"
    path.write_text(capsys.readouterr().out)
    again = read_sweep(path)
    original = sweep_from_dict(preset("pezo-fig3"))
    assert [p.train_key for p in again.points] == [p.train_key for p in original.points]
    assert [p.hw_key for p in again.points] == [p.hw_key for p in original.points]


def test_the_example_in_the_docs_validates(tmp_path):
    docs = (Path(__file__).resolve().parent.parent / "docs" / "sweeps.md").read_text()
    example = docs.split("```toml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "SWEEP.toml"
    path.write_text(example)
    sweep = read_sweep(path)
    assert len(sweep.points) == 2 * 3 * 3
    assert {p.generator.variant for p in sweep.points} == {"onthefly", "pregen"}


def test_quick_flags_build_a_sweep(tmp_path, capsys):
    assert main(["sweep", "--set", "model=tiny", "--set", "perturbation=pezo-onthefly",
                 "--set", "n_rng=7", "--grid", "bits=6,8", "--grid", "seed=0,1",
                 "--set", "report.clock_mhz=250", "--print-config"]) == 0
    out = capsys.readouterr().out
    assert 'perturbation = "pezo-onthefly"' in out and "clock_mhz = 250" in out


def test_a_huge_grid_is_refused_before_any_point_is_built(monkeypatch):
    from zoforge.sweep import spec

    built = []
    monkeypatch.setattr(spec, "TrainConfig", lambda **kw: built.append(kw))
    data = {"train": {"model": "tiny"},
            "grid": {"seed": list(range(1000)), "steps": list(range(1, 1001))}}
    with pytest.raises(ConfigError) as error:
        sweep_from_dict(data, source="SWEEP.toml")
    assert built == []                                   # refused before expansion
    message = str(error.value)
    assert "\n" not in message
    assert message == ("grid in SWEEP.toml must be a sweep of at most 10,000 points "
                       "(got 1000 seed x 1000 steps = 1,000,000)")
    assert spec.MAX_POINTS == 10_000


def test_the_command_line_refuses_a_huge_grid_in_one_line(tmp_path, capsys):
    values = ",".join(str(v) for v in range(1, 1001))
    assert main(["sweep", "--set", "model=tiny", "--grid", f"seed={values}",
                 "--grid", f"steps={values}", "--store", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "at most 10,000 points" in err
    assert not (tmp_path / "s").exists()
    many = ",".join("1" for _ in range(10_001))
    assert main(["sweep", "--set", "model=tiny", "--grid", f"seed={many}",
                 "--store", str(tmp_path / "s")]) == 2
    assert "--grid seed must be at most 10,000 values" in capsys.readouterr().err


@pytest.mark.parametrize("argv, expected", [
    (["--set", "nrng=7"], "key 'train.nrng' (set by --set nrng) must be one of"),
    (["--set", "nrng=7"], "; did you mean n_rng?"),
    (["--grid", "nrng=7,15"], "key 'grid.nrng' (set by --grid nrng) must be one of"),
    (["--set", "bits=66"],
     "train.bits (set by --set bits) must be an integer with 4 <= value <= 20 (got 66)"),
    (["--grid", "bits=6,66"],
     "grid.bits (set by --grid bits) must be an integer with 4 <= value <= 20 (got 66)"),
    (["--set", "report.clock_mhz=5000"],
     "report.clock_mhz (set by --set report.clock_mhz) must be a frequency with"),
    (["--set", "report.clck=5"], "key 'report.clck' (set by --set report.clck) must be one "
                                 "of board, clock_mhz"),
    (["--set", "search.population=1"],
     "search.population (set by --set search.population) must be an integer with 2"),
    (["--trials", "0"], "--trials must be an integer >= 1"),
])
def test_errors_blame_the_flag_that_set_the_value(tmp_path, capsys, argv, expected):
    assert main(["sweep", "--preset", "tiny", "--store", str(tmp_path / "s")] + argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and expected in err, err
    assert "preset tiny" not in err                       # the preset is not to blame


def test_a_grid_flag_replaces_the_preset_s_values_of_its_key(capsys):
    import tomllib

    assert main(["sweep", "--preset", "tiny", "--grid", "bits=6,8", "--print-config"]) == 0
    data = tomllib.loads(capsys.readouterr().out)
    assert data["grid"]["bits"] == [6, 8]
    assert all("bits" not in entry for entry in data["points"])
    sweep = sweep_from_dict(data)
    assert {p.train.bits for p in sweep.points
            if p.train.perturbation == "pezo-onthefly"} == {6, 8}
