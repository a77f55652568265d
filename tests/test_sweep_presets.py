"""The PeZO presets. The full head-level ones on the default model and data (slow: see
docs/sweeps.md for the CPU time each takes) must finish every point and show what
docs/sweeps.md found on our problem (d = 770): the configuration with fewer distinct
perturbation vectors is the less accurate one. The adapters' presets (``pezo-fig3-lora``,
``pezo-fig4-lora``; hours) must expand to the intended points, written out here."""
from __future__ import annotations

import itertools

import pytest

from zoforge.cli import main
from zoforge.golden.finetune.config import FinetuneConfig
from zoforge.sweep.presets import preset
from zoforge.sweep.results import group_runs, read_runs
from zoforge.sweep.spec import sweep_from_dict
from zoforge.sweep.store import Store

# preset -> (swept key, a value with few distinct vectors, one with many)
TRENDS = {"pezo-fig3": ("pool_size", 255, 65535), "pezo-fig4": ("bits", 6, 12),
          "pezo-rng-count": ("n_rng", 15, 63)}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(TRENDS))
def test_full_preset(name, tmp_path):
    store_dir = tmp_path / "store"
    assert main(["sweep", "--preset", name, "--store", str(store_dir), "--no-progress"]) == 0
    store = Store(store_dir)
    counts = store.counts(name)
    assert counts["done"] == sum(counts.values())
    key, few, many = TRENDS[name]
    groups = {g.config[key]: g for g in group_runs(read_runs(store, name))}
    assert groups[many].accuracy > groups[few].accuracy
    assert all(g.hardware["LUT"].source == "yosys-estimate" for g in groups.values())
    assert (store_dir / f"{name}.html").exists()


#: The adapters' presets: the shared protocol, and each point's generator fields.
LORA = dict(k_shot=16, adapted_blocks=2, lr=1e-3, steps=100)
LORA_POINTS = {
    "pezo-fig3-lora": [*(dict(strategy=s, n_rng=n) for s in ("onthefly", "masked")
                         for n in (7, 15, 31, 63)),
                       *(dict(strategy="pregen", bits=12, pool_size=p)
                         for p in (255, 1023, 4095, 16383)),
                       dict(strategy="gaussian")],
    "pezo-fig4-lora": [dict(strategy=s, bits=b) for s in ("onthefly", "masked", "pregen",
                                                          "gaussian") for b in (6, 8, 12, 16)],
}


@pytest.mark.parametrize("name", list(LORA_POINTS))
def test_lora_preset_expands_to_the_intended_points(name):
    sweep = sweep_from_dict(preset(name))
    expected = [FinetuneConfig(**LORA, **fields, seed=seed)
                for fields, seed in itertools.product(LORA_POINTS[name], (0, 1, 2))]
    assert [p.train for p in sweep.points] == expected
    assert all(p.train_spec()["task"] == "finetune" for p in sweep.points)
    assert len({p.train_key for p in sweep.points}) == len(expected)
    assert len({p.hw_key for p in sweep.points}) == len(LORA_POINTS[name])
    assert {p.generator for p in sweep.points} == {c.generator() for c in expected}
    assert not sweep.report.pnr and sweep.report.power
