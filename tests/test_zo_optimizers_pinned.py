"""ZO optimizers pinned to hand-computed steps (issue 12).

Every optimizer in :mod:`zoforge.golden.zo.optimizers` runs one to six steps on a tiny
quadratic ``L(theta) = 1/2 sum_k h_k (theta_k - c_k)^2`` with *fixed* perturbation vectors
(:class:`FixedPerturbation`), and theta (and PeFoo's/HiZOO's ``D``/``E``) is compared with
values derived **independently of the module under test**: the one-step cases are worked
out by hand (the arithmetic is in the comments and the numbers are literals), the longer
runs are re-derived step by step in plain Python floats (float64) from the formulas in the
module docstring (``expect_*`` below). Nothing here calls the optimizers' own helpers.

Inputs are dyadic so that the first steps are exact; what rounding is left is the
optimizers' float32 theta/D arithmetic, hence ``rtol = 1e-6``.
"""
import math

import pytest
import torch

from zoforge.golden.zo.optimizers import RGE, make_optimizer
from zoforge.golden.zo.perturbation import Perturbation

RTOL, ATOL = 1e-6, 1e-7


# --------------------------------------------------------------------------- fakes

class FixedPerturbation(Perturbation):
    """Returns the given vectors in order; ``draw(d)`` checks the requested length."""

    name = "fixed"

    def __init__(self, vectors):
        self.vectors = [list(map(float, v)) for v in vectors]
        self.count = 0

    def draw(self, d):
        assert self.count < len(self.vectors), "more draws than planned"
        vector = self.vectors[self.count]
        assert len(vector) == d, f"draw {self.count}: asked for {d} values"
        self.count += 1
        return torch.tensor(vector, dtype=torch.float32)

    def state_dict(self):
        return {"count": self.count}

    def load_state_dict(self, state):
        self.count = int(state["count"])

    def config(self):
        return {"perturbation": self.name}


class FakeQuadratic:
    """The :class:`Trainable` interface the optimizers use (``theta`` float32, ``d``,
    ``layers``, ``kind``, ``losses(thetas (K, d), index) -> (K,)``) on the quadratic.
    The losses of the float32 copies are returned in float64, so that the comparison sees
    only the optimizer's own float32 arithmetic (the Hessian estimate ``l+ + l- - 2 l``
    would otherwise amplify float32 loss rounding). Every forward's copies and batch
    index are recorded."""

    kind = "toy"

    def __init__(self, theta, h, c, layers=None):
        self.h, self.c = list(map(float, h)), list(map(float, c))
        self.theta = torch.tensor(theta, dtype=torch.float32)
        self.layers = layers or [("head", slice(0, len(theta)))]
        self.forwards, self.indices = [], []

    @property
    def d(self):
        return self.theta.numel()

    def losses(self, thetas, index, split="train"):
        assert thetas.dtype == torch.float32 and thetas.shape[1] == self.d
        copies = thetas.tolist()
        self.forwards.append(copies)
        self.indices.append(index)
        return torch.tensor([loss(copy, self.h, self.c) for copy in copies],
                            dtype=torch.float64)


# ------------------------------------------------------- independent plain-Python model

def loss(theta, h, c):
    return 0.5 * sum(hk * (t - ck) ** 2 for t, hk, ck in zip(theta, h, c))


def expect_rge(theta, zs, h, c, lr, eps):
    """One RGE step (module docstring): g_i = (L(theta + eps z_i) - L(theta - eps z_i)) /
    (2 eps), theta <- theta - lr/q sum_i g_i z_i, all losses at the step's start."""
    q = len(zs)
    projected = []
    for z in zs:
        lp = loss([t + eps * zk for t, zk in zip(theta, z)], h, c)
        lm = loss([t - eps * zk for t, zk in zip(theta, z)], h, c)
        projected.append((lp - lm) / (2 * eps))
    new = list(theta)
    for z, g in zip(zs, projected):
        new = [t - lr * g / q * zk for t, zk in zip(new, z)]
    return new


def expect_preconditioned(variant, theta, D, E, p, block, h, c, lr, lam, a,
                          d_min=0.1, d_max=1e4):
    """One PeFoo / HiZOO step on ``block`` (module docstring); returns theta, D, E, l."""
    lo, hi = block.start, block.stop
    v = [pk / math.sqrt(dk) for pk, dk in zip(p, D)]             # D_{t-1}^{-1/2} p
    plus, minus = list(theta), list(theta)
    for k in range(lo, hi):
        plus[k] += lam * v[k - lo]
        minus[k] -= lam * v[k - lo]
    l0, lp, lm = loss(theta, h, c), loss(plus, h, c), loss(minus, h, c)
    proj = (lp - lm) / (2 * lam)
    dL = lp + lm - 2 * l0
    H = [dL / (2 * lam ** 2) * dk * (pk * pk - 1) for pk, dk in zip(p, D)]
    theta = list(theta)
    if variant == "pefoo":
        for k in range(lo, hi):
            theta[k] -= lr * proj * v[k - lo]                     # D_{t-1}
        E = [(1 - a) * ek + a * hk for ek, hk in zip(E, H)]
        D = [min(max(abs(ek), d_min), d_max) for ek in E]
    else:
        D = [(1 - a) * dk + a * abs(hk) for dk, hk in zip(D, H)]
        for k in range(lo, hi):
            theta[k] -= lr * proj * p[k - lo] / math.sqrt(D[k - lo])   # D_t
    return theta, D, E, l0


def assert_close(actual, expected, what=""):
    actual = actual.tolist() if isinstance(actual, torch.Tensor) else list(actual)
    assert len(actual) == len(expected), what
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert a == pytest.approx(e, rel=RTOL, abs=ATOL), f"{what}[{i}]: {a} != {e}"


def plus_minus(theta, z, eps):
    return ([t + eps * zk for t, zk in zip(theta, z)],
            [t - eps * zk for t, zk in zip(theta, z)])


# The RGE problem: h, c, theta_0 and four directions (three queries + one more step).
H3, C3, THETA3 = [1.0, 2.0, 4.0], [1.0, -1.0, 0.5], [0.5, 0.25, -0.5]
Z3 = [[1.0, -0.5, 2.0], [0.0, 1.0, -1.0], [0.5, 0.5, 0.25], [-1.0, 0.25, 0.5]]
LOOPS = [(False, False), (True, False), (False, True), (True, True)]


# ------------------------------------------------------------------------ MeZO / P-RGE

def test_mezo_one_step_by_hand():
    """theta = (0.5, 0.25, -0.5), z = (1, -0.5, 2), eps = 1/4, lr = 1/8:
    L(theta + eps z) = L(0.75, 0.125, 0) = (0.0625 + 2.53125 + 1) / 2 = 1.796875,
    L(theta - eps z) = L(0.25, 0.375, -1) = (0.5625 + 3.78125 + 9) / 2 = 6.671875,
    g = (1.796875 - 6.671875) / (2 eps) = -9.75  (= grad . z = -0.5 - 1.25 - 8),
    theta <- theta - lr g z = theta + 1.21875 z = (1.71875, -0.359375, 1.9375)."""
    toy = FakeQuadratic(THETA3, H3, C3)
    opt = RGE(toy, FixedPerturbation(Z3[:1]), lr=0.125, eps=0.25)
    returned = opt.step("batch-0")
    assert_close(toy.theta, [1.71875, -0.359375, 1.9375], "theta")
    assert_close(toy.theta, expect_rge(THETA3, Z3[:1], H3, C3, 0.125, 0.25), "theta")
    assert returned == pytest.approx((1.796875 + 6.671875) / 2, rel=RTOL)
    assert toy.indices == ["batch-0", "batch-0"]
    assert sorted(toy.forwards) == sorted([[[0.75, 0.125, 0.0]], [[0.25, 0.375, -1.0]]])


@pytest.mark.parametrize("method, outer, inner", [("mezo", False, False)]
                         + [("prge", o, i) for o, i in LOOPS])
def test_rge_three_queries_average_the_projected_gradients(method, outer, inner):
    """q = 3 on one batch: theta_1 = theta_0 - lr/3 sum_i g_i z_i with the g_i all taken at
    theta_0; by hand g_0 = -9.75, g_1 = grad . z_1 = 2.5 + 4 = 6.5,
    g_2 = -0.25 + 1.25 - 1 = 0. Every loop layout gives the same theta."""
    toy = FakeQuadratic(THETA3, H3, C3)
    opt = make_optimizer(method, toy, FixedPerturbation(Z3[:3]), lr=0.125, eps=0.25,
                         queries=3, outer=outer, inner=inner)
    opt.step(7)
    by_hand = [0.5 - 0.125 / 3 * (-9.75 * 1.0 + 6.5 * 0.0 + 0.0 * 0.5),
               0.25 - 0.125 / 3 * (-9.75 * -0.5 + 6.5 * 1.0 + 0.0 * 0.5),
               -0.5 - 0.125 / 3 * (-9.75 * 2.0 + 6.5 * -1.0 + 0.0 * 0.25)]
    assert_close(toy.theta, by_hand, "theta")
    assert_close(toy.theta, expect_rge(THETA3, Z3[:3], H3, C3, 0.125, 0.25), "theta")
    assert set(toy.indices) == {7}


@pytest.mark.parametrize("outer, inner, sizes", [
    (False, False, [1] * 6), (True, False, [3, 3]), (False, True, [2, 2, 2]),
    (True, True, [6])])
def test_prge_forward_layout(outer, inner, sizes):
    """The docstring's batching: outer stacks the q queries' copies (in query order) into
    one forward, inner puts +eps and -eps of one query in one forward, both: one forward
    of 2q copies. Every copy theta +- eps z_i is evaluated exactly once."""
    toy = FakeQuadratic(THETA3, H3, C3)
    RGE(toy, FixedPerturbation(Z3[:3]), lr=0.125, eps=0.25, queries=3,
        outer=outer, inner=inner).step(None)
    assert [len(f) for f in toy.forwards] == sizes
    pairs = [plus_minus(THETA3, z, 0.25) for z in Z3[:3]]
    everything = [copy for pair in pairs for copy in pair]
    assert sorted(c for f in toy.forwards for c in f) == sorted(everything)
    if outer and not inner:
        assert sorted(toy.forwards) == sorted([[p for p, _ in pairs], [m for _, m in pairs]])
    if inner and not outer:
        assert [sorted(f) for f in toy.forwards] == [sorted(pair) for pair in pairs]
    if outer and inner:        # queries 0, 1, 2 in order, each query's pair together
        order = [next(i for i, pair in enumerate(pairs) if c in pair) for c in toy.forwards[0]]
        assert order == [0, 0, 1, 1, 2, 2]


@pytest.mark.parametrize("method, outer, inner", [("mezo", False, False)]
                         + [("prge", o, i) for o, i in LOOPS])
def test_rge_applies_queries_in_order(method, outer, inner):
    """theta = (1, 1), L = |theta|^2 / 2, q = 2, lr = 2, eps = 1. z_0 = (1, 0) gives g_0 = 1
    and theta_0 += -1; z_1 = (2^-15, -2^-14) gives g_1 = 2^-15 - 2^-14 = -2^-15 and theta_0 +=
    2^-30. In float32 1 + 2^-30 == 1, so only the order i = 0, 1 ends at theta_0 = 2^-30
    (i = 1, 0 would end at 0)."""
    toy = FakeQuadratic([1.0, 1.0], [1.0, 1.0], [0.0, 0.0])
    zs = [[1.0, 0.0], [2.0 ** -15, -(2.0 ** -14)]]
    opt = make_optimizer(method, toy, FixedPerturbation(zs), lr=2.0, eps=1.0, queries=2,
                         outer=outer, inner=inner)
    opt.step(None)
    assert toy.theta[0].item() == 2.0 ** -30
    assert_close(toy.theta, [2.0 ** -30, 1.0 - 2.0 ** -29], "theta")


def test_prge_both_loops_equals_mezo_and_the_formula_over_steps():
    """Three steps of q = 2 (six fixed directions, reused cyclically): P-RGE with both loops
    (the make_optimizer default) and MeZO end at the same theta as the plain-Python RGE."""
    zs = [Z3[i % 4] for i in range(6)]
    thetas = {}
    for method in ("mezo", "prge"):
        toy = FakeQuadratic(THETA3, H3, C3)
        opt = make_optimizer(method, toy, FixedPerturbation(zs), lr=0.0625, eps=0.25,
                             queries=2)
        if method == "prge":
            assert opt.outer and opt.inner
        for _ in range(3):
            opt.step(None)
        thetas[method] = toy.theta.tolist()
    expected = THETA3
    for step in range(3):
        expected = expect_rge(expected, zs[2 * step:2 * step + 2], H3, C3, 0.0625, 0.25)
    assert_close(thetas["mezo"], expected, "mezo")
    assert_close(thetas["prge"], expected, "prge")
    assert_close(thetas["prge"], thetas["mezo"], "prge vs mezo")


# ------------------------------------------------------------------ PeFoo / HiZOO

# theta_0 = (0, 0), h = (2, 8), c = (1, -1/2), lambda = 1/2, a = 1/2, lr = 1/16.
H2, C2, THETA2 = [2.0, 8.0], [1.0, -0.5], [0.0, 0.0]
P2 = [[2.0, 0.5], [0.5, -1.5], [-1.0, 2.0]]
LAM, SMOOTH, LR = 0.5, 0.5, 0.0625
# Step 1 by hand (D_0 = E_0 = 1, so v = p = (2, 1/2)):
#   l  = L(0, 0)          = (2 + 8 * 0.25) / 2     = 2
#   l+ = L(1, 0.25)       = (0 + 8 * 0.5625) / 2   = 2.25
#   l- = L(-1, -0.25)     = (8 + 8 * 0.0625) / 2   = 4.25
#   proj = (2.25 - 4.25) / (2 * 0.5) = -2;   dL = 2.25 + 4.25 - 4 = 2.5
#   H = 2.5 / (2 * 0.25) * 1 * (p^2 - 1) = 5 * (3, -0.75) = (15, -3.75)
STEP1_H = [15.0, -3.75]


@pytest.mark.parametrize("d_min, d_max, D1", [(0.1, 1e4, [8.0, 1.375]),
                                              (0.1, 4.0, [4.0, 1.375]),
                                              (2.0, 1e4, [8.0, 2.0])])
def test_pefoo_one_step_by_hand(d_min, d_max, D1):
    """theta_1 = theta_0 - lr proj D_0^{-1/2} p = 0.125 (2, 0.5) = (0.25, 0.0625);
    E_1 = E_0 / 2 + H / 2 = (8, -1.375); D_1 = clip(|E_1|, D_min, D_max)."""
    toy = FakeQuadratic(THETA2, H2, C2)
    opt = make_optimizer("pefoo", toy, FixedPerturbation(P2[:1]), lr=LR, eps=LAM,
                         hessian_smooth=SMOOTH, d_min=d_min, d_max=d_max)
    assert opt.step("b") == pytest.approx(2.0, rel=RTOL)
    assert_close(toy.theta, [0.25, 0.0625], "theta")
    assert_close(opt.E, [0.5 + 0.5 * STEP1_H[0], 0.5 + 0.5 * STEP1_H[1]], "E")
    assert_close(opt.E, [8.0, -1.375], "E")
    assert_close(opt.D, D1, "D")
    assert toy.indices == ["b"] and [len(f) for f in toy.forwards] == [3]
    assert toy.forwards[0] == [[0.0, 0.0], [1.0, 0.25], [-1.0, -0.25]]


def test_hizoo_one_step_by_hand():
    """D_1 = D_0 / 2 + |H| / 2 = (8, 2.375), and HiZOO steps with the *new* D:
    theta_1 = 0 - lr (-2) p / sqrt(D_1) = 0.125 (2 / sqrt(8), 0.5 / sqrt(2.375))."""
    toy = FakeQuadratic(THETA2, H2, C2)
    opt = make_optimizer("hizoo", toy, FixedPerturbation(P2[:1]), lr=LR, eps=LAM,
                         hessian_smooth=SMOOTH)
    assert opt.step(None) == pytest.approx(2.0, rel=RTOL)
    assert_close(opt.D, [0.5 + 0.5 * 15.0, 0.5 + 0.5 * 3.75], "D")
    assert_close(toy.theta, [0.125 * 2.0 / math.sqrt(8.0), 0.125 * 0.5 / math.sqrt(2.375)],
                 "theta")
    assert toy.forwards[0] == [[0.0, 0.0], [1.0, 0.25], [-1.0, -0.25]]


@pytest.mark.parametrize("variant, d_max", [("pefoo", 1e4), ("pefoo", 4.0), ("hizoo", 1e4)])
def test_preconditioned_three_steps(variant, d_max):
    """Steps 2 and 3 use a D != 1: PeFoo must move theta with D_{t-1} (the D from before the
    step's own Hessian update), HiZOO with D_t."""
    toy = FakeQuadratic(THETA2, H2, C2)
    opt = make_optimizer(variant, toy, FixedPerturbation(P2), lr=LR, eps=LAM,
                         hessian_smooth=SMOOTH, d_min=0.1, d_max=d_max)
    theta, D, E = list(THETA2), [1.0, 1.0], [1.0, 1.0]
    for step, p in enumerate(P2):
        returned = opt.step(step)
        theta, D, E, l0 = expect_preconditioned(variant, theta, D, E, p, slice(0, 2), H2, C2,
                                                LR, LAM, SMOOTH, 0.1, d_max)
        assert returned == pytest.approx(l0, rel=RTOL)
        assert_close(toy.theta, theta, f"theta after step {step + 1}")
        assert_close(opt.D, D, f"D after step {step + 1}")
        if variant == "pefoo":
            assert_close(opt.E, E, f"E after step {step + 1}")
    assert not all(d == 1.0 for d in D)


def test_pefoo_second_step_by_hand():
    """Step 2 from theta_1 = (0.25, 0.0625), D_1 = (4, 1.375) (d_max = 4), p = (1/2, -3/2):
    v = p / sqrt(D_1) uses D_1, not the D_2 the step goes on to compute."""
    toy = FakeQuadratic(THETA2, H2, C2)
    opt = make_optimizer("pefoo", toy, FixedPerturbation(P2[:2]), lr=LR, eps=LAM,
                         hessian_smooth=SMOOTH, d_min=0.1, d_max=4.0)
    opt.step(None)
    opt.step(None)
    v = [0.5 / math.sqrt(4.0), -1.5 / math.sqrt(1.375)]
    # grad at theta_1 = h (theta_1 - c) = (2 * -0.75, 8 * 0.5625) = (-1.5, 4.5);
    # the quadratic's central difference is exact: proj = grad . v.
    proj = -1.5 * v[0] + 4.5 * v[1]
    assert_close(toy.theta, [0.25 - LR * proj * v[0], 0.0625 - LR * proj * v[1]], "theta")
    # dL = lambda^2 v^T diag(h) v, H = dL / (2 lambda^2) D_1 (p^2 - 1)
    scale = (2.0 * v[0] ** 2 + 8.0 * v[1] ** 2) / 2
    E2 = [0.5 * 8.0 + 0.5 * scale * 4.0 * (0.25 - 1),
          0.5 * -1.375 + 0.5 * scale * 1.375 * (2.25 - 1)]
    assert_close(opt.E, E2, "E")
    assert_close(opt.D, [min(max(abs(e), 0.1), 4.0) for e in E2], "D")


# ------------------------------------------------------------------------- PeFoo-L

# Two layers of two parameters: "enc" = theta[0:2], "head" = theta[2:4].
HL, CL, THETAL = [1.0, 2.0, 4.0, 8.0], [1.0, -1.0, 0.5, -0.25], [0.5, 0.25, -0.5, 0.0]
LAYERS = [("enc", slice(0, 2)), ("head", slice(2, 4))]
PL = [[2.0, 0.5], [0.5, -1.5], [1.5, 0.25], [-0.5, 2.0], [0.25, 1.5], [2.0, -0.5]]


def test_pefoo_l_layers_last_to_first_with_fresh_preconditioner():
    """layer_steps = 2: head, head, enc, enc, head, head. On every layer change D and E start
    again from 1, so the first step on a layer is a plain PeFoo step with D_0 = 1; only the
    active layer is perturbed, drawn and updated."""
    toy = FakeQuadratic(THETAL, HL, CL, layers=LAYERS)
    opt = make_optimizer("pefoo-l", toy, FixedPerturbation(PL), lr=LR, eps=LAM,
                         hessian_smooth=SMOOTH, layer_steps=2)
    blocks = [slice(2, 4), slice(2, 4), slice(0, 2), slice(0, 2), slice(2, 4), slice(2, 4)]
    theta, D, E, previous = list(THETAL), None, None, None
    for step, (p, block) in enumerate(zip(PL, blocks)):
        if block != previous:
            D, E = [1.0, 1.0], [1.0, 1.0]
        before = toy.theta.tolist()
        opt.step(None)
        theta, D, E, _ = expect_preconditioned("pefoo", theta, D, E, p, block, HL, CL,
                                               LR, LAM, SMOOTH)
        previous = block
        assert_close(toy.theta, theta, f"theta after step {step + 1}")
        assert_close(opt.D, D, f"D after step {step + 1}")
        assert_close(opt.E, E, f"E after step {step + 1}")
        frozen = [k for k in range(4) if not block.start <= k < block.stop]
        assert [toy.theta[k].item() for k in frozen] == [before[k] for k in frozen]
        for copy in toy.forwards[-1]:
            assert [copy[k] for k in frozen] == [before[k] for k in frozen]
