"""The ZO layer on the RTL against its golden model, value by value: one copy for the tests
that run a layer and then read its jobs' cycles."""
from __future__ import annotations

import numpy as np

from zoforge.sim.zolayer_cosim import golden_run, make_data, run_layer


def run_bit_exact(config, options) -> dict:
    """Run ``options`` on ``config``'s RTL; assert the run passed and its branches, masters
    and plain products equal the golden model's; the bench's results (jobs, cycles)."""
    data = make_data(config, options)
    rtl, result = run_layer(config, options, data)
    assert result.passed, result.failures
    golden = golden_run(config, options, data)
    for name in ("branches", "masters", "plain"):
        np.testing.assert_array_equal(rtl[name], golden[name], err_msg=name)
    return result.results
