"""ZO optimizers against their formulas: MeZO/P-RGE equivalence, P-RGE dual forwarding
(q = 1 included), the PeFoo Hessian estimator, HiZOO and the PeFoo-L layer schedule."""
import numpy as np
import pytest
import torch

from zoforge.errors import ConfigError
from zoforge.golden.zo.dual import DualForwardPRGE
from zoforge.golden.zo.optimizers import RGE, Preconditioned, make_optimizer
from zoforge.golden.zo.perturbation import make_perturbation
from zoforge.golden.zo.trainable import HeadTrainable, SplitData


class Quadratic:
    """L(theta) = 0.5 sum h_i (theta_i - c_i)^2, batched over copies; two 'layers'."""

    kind = "toy"

    def __init__(self, h, c):
        self.h, self.c = torch.as_tensor(h, dtype=torch.float64), torch.as_tensor(c).double()
        self.theta = torch.zeros(len(h), dtype=torch.float64)
        half = len(h) // 2
        self.layers = [("first", slice(0, half)), ("second", slice(half, len(h)))]
        self.calls = []

    @property
    def d(self):
        return self.theta.numel()

    def losses(self, thetas, index, split="train"):
        self.calls.append(len(thetas))
        return 0.5 * ((thetas.double() - self.c) ** 2 * self.h).sum(-1)


def head_problem(seed=0, n=64, hidden=12, classes=3):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, hidden, generator=generator)
    labels = torch.randint(0, classes, (n,), generator=generator).numpy()
    split = SplitData(x, None, labels)
    return HeadTrainable({"train": split, "val": split, "test": split}, classes,
                         head_init=torch.randn(classes, hidden, generator=generator) * 0.1)


def test_mezo_single_query_matches_the_formula():
    toy = Quadratic([1.0, 2.0, 3.0, 4.0], [1.0, -1.0, 0.5, 0.0])
    source = make_perturbation("gaussian", seed=4)
    z = source.draw(4).double()
    source.load_state_dict({"seed": 4, "count": 0})
    RGE(toy, source, lr=0.1, eps=1e-3).step(None)
    assert toy.calls == [1, 1]
    lp, lm = (float(toy.losses((toy.theta * 0 + s * 1e-3 * z)[None], None)) for s in (1, -1))
    expected = -0.1 * (lp - lm) / 2e-3 * z
    assert torch.allclose(toy.theta, expected, rtol=1e-6)


@pytest.mark.parametrize("outer, inner, calls", [(False, False, [1] * 8), (True, False, [4, 4]),
                                                 (False, True, [2] * 4), (True, True, [8])])
def test_prge_loops_batch_the_same_estimate(outer, inner, calls):
    results = {}
    for parallel in (False, True):
        toy = Quadratic(np.linspace(0.5, 3, 10), np.linspace(-1, 1, 10))
        opt = RGE(toy, make_perturbation("rademacher", seed=1), lr=0.05, eps=1e-2, queries=4,
                  outer=parallel and outer, inner=parallel and inner)
        for _ in range(5):
            opt.step(None)
        results[parallel] = toy.theta.clone()
        if parallel:
            assert toy.calls[:len(calls)] == calls
    assert torch.allclose(results[False], results[True], atol=1e-12)


def test_prge_equals_mezo_on_a_batched_head():
    thetas = []
    for method in ("mezo", "prge"):
        head = head_problem()
        opt = make_optimizer(method, head, make_perturbation("pezo-pregen", seed=1),
                             lr=0.05, eps=1e-2, queries=4)
        for step in range(10):
            opt.step(np.arange(step, step + 8))
        thetas.append(head.theta.clone())
    assert torch.allclose(*thetas, atol=1e-5)
    assert not torch.equal(thetas[0], head_problem().theta)


@pytest.mark.parametrize("queries", [1, 4])
def test_dual_forwarding_matches_prge(queries):
    plain, dual = head_problem(), head_problem()
    opt = make_optimizer("prge", plain, make_perturbation("gaussian", seed=7), lr=0.05,
                         eps=1e-2, queries=queries)
    module = DualForwardPRGE(dual, make_perturbation("gaussian", seed=7), lr=0.05, eps=1e-2,
                             queries=queries)
    for step in range(6):
        index = np.arange(step, step + 8)
        assert opt.step(index) == pytest.approx(module.forward(index), abs=1e-5)
    module.finish()
    assert torch.allclose(plain.theta, dual.theta, atol=1e-5)
    # The projected gradient is applied for every q (the old code dropped it for q = 1).
    assert (dual.theta - head_problem().theta).abs().max() > 1e-3


def test_pefoo_hessian_estimate_is_unbiased():
    h = [0.5, 2.0, 8.0, 30.0]
    toy = Quadratic(h, [0.0] * 4)
    opt = Preconditioned(toy, make_perturbation("gaussian", seed=0), lr=1e-9, eps=1e-3,
                         hessian_smooth=0.002, d_min=0.1, d_max=1e4)
    for _ in range(6000):
        opt.step(None)
    assert torch.allclose(opt.D.double(), torch.tensor(h, dtype=torch.float64), rtol=0.25)
    assert toy.calls[-1] == 3


@pytest.mark.parametrize("curvature, bound", [(1e-4, 0.1), (1e6, 1e4)])
def test_pefoo_clips_the_preconditioner(curvature, bound):
    toy = Quadratic([curvature] * 2, [0.0, 0.0])
    opt = Preconditioned(toy, make_perturbation("gaussian", seed=0), lr=1e-12, eps=1e-4,
                         hessian_smooth=0.05, d_min=0.1, d_max=1e4)
    for _ in range(300):
        opt.step(None)
    assert torch.allclose(opt.D, torch.full((2,), bound))


def test_preconditioned_methods_reduce_the_loss():
    for variant in ("pefoo", "hizoo"):
        toy = Quadratic(np.linspace(1, 20, 8), np.linspace(-1, 1, 8))
        start = float(toy.losses(toy.theta[None], None))
        opt = Preconditioned(toy, make_perturbation("gaussian", seed=2), lr=0.003, eps=1e-3,
                             variant=variant)
        for _ in range(1500):
            opt.step(None)
        assert float(toy.losses(toy.theta[None], None)) < 0.1 * start, variant
        assert bool((opt.D > 0).all())


def test_pefoo_l_updates_one_layer_last_to_first():
    toy = Quadratic([1.0] * 6, [1.0] * 6)
    opt = make_optimizer("pefoo-l", toy, make_perturbation("gaussian", seed=3), lr=0.1,
                         eps=1e-3, layer_steps=3)
    seen = []
    for step in range(12):
        before = toy.theta.clone()
        opt.step(None)
        changed = (toy.theta != before).nonzero().flatten().tolist()
        seen.append("second" if min(changed) >= 3 else "first" if max(changed) < 3 else "both")
    assert seen == ["second"] * 3 + ["first"] * 3 + ["second"] * 3 + ["first"] * 3


def test_pefoo_l_reinitialises_the_preconditioner_per_layer():
    toy = Quadratic([5.0] * 4, [0.0] * 4)
    opt = make_optimizer("pefoo-l", toy, make_perturbation("gaussian", seed=3), lr=0.01,
                         eps=1e-3, layer_steps=4, hessian_smooth=0.5)
    for _ in range(4):
        opt.step(None)
    assert not torch.equal(opt.D, torch.ones(2))
    state = opt.state_dict()
    opt.step(None)                                    # first step on the next layer
    assert opt.active == 1
    opt.load_state_dict(state)                        # restoring brings the old layer back
    assert opt.active == 0 and not torch.equal(opt.D, torch.ones(2))


@pytest.mark.parametrize("method, kwargs, flag", [
    ("prge", {"queries": 0}, "queries"), ("pefoo", {"queries": 2}, "queries"),
    ("mezo", {"lr": 0.0}, "lr"), ("hizoo", {"hessian_smooth": 2.0}, "hessian_smooth"),
    ("adam", {}, "method"),
])
def test_bad_optimizer_parameters(method, kwargs, flag):
    args = {"lr": 0.1, "eps": 1e-3, **kwargs}
    with pytest.raises(ConfigError) as error:
        make_optimizer(method, Quadratic([1.0, 1.0], [0, 0]),
                       make_perturbation("gaussian"), **args)
    assert str(error.value).startswith(flag)
