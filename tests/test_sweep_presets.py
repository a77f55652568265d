"""The full PeZO presets on the default model and data (slow: see docs/sweeps.md for the CPU
time each takes). Each must finish every point and show what docs/sweeps.md found on our
problem (d = 770): the configuration with fewer distinct perturbation vectors is the less
accurate one."""
from __future__ import annotations

import pytest

from zoforge.cli import main
from zoforge.sweep.results import group_runs, read_runs
from zoforge.sweep.store import Store

pytestmark = pytest.mark.slow

# preset -> (swept key, a value with few distinct vectors, one with many)
TRENDS = {"pezo-fig3": ("pool_size", 255, 65535), "pezo-fig4": ("bits", 6, 12),
          "pezo-rng-count": ("n_rng", 15, 63)}


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
