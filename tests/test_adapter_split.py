"""The split adapter mapping (golden/finetune/split.py): X·W and U = requant(X·A) on the
engine, the ZO layer only U·Tp. Its result equals the direct adapter call value by value
(random shapes; X·W at both extremes and past the 32-bit wrap, U saturating both ends,
masters at both ends of the 24-bit format, every sign and flag), checked against the
direct golden call and against a derivation in Python integers; the generator walks the
same; a whole ZoFinetune step through SplitUnits equals the direct one bit for bit."""
from __future__ import annotations

import pytest
import torch

from zoforge.golden.finetune.calls import AdapterCall, EngineCall, GoldenUnits, UpdateCall
from zoforge.golden.finetune.config import FinetuneConfig
from zoforge.golden.finetune.split import (SplitUnits, combine, narrow_call,
                                           split_adapter_call)
from zoforge.golden.finetune.train import ZoFinetune, prepare
from zoforge.golden.models import tiny_encoder
from zoforge.golden.zolayer.model import draw_perturbation

ROWS = 4
CFG = FinetuneConfig(blocks=1, seq_len=8, batch=2, queries=2, n_train=8, n_test=4,
                     calibration=4, rank=4, engine_rows=4, engine_cols=4)


def units(**kw):
    return GoldenUnits(CFG.generator().golden(), ROWS, **kw)


def _ints(shape, low, high, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(low, high + 1, shape, generator=g, dtype=torch.int64)


def call(m=5, k=12, n=8, r=4, seed=0, sign=1, x=None, w=None, a=None, master=None,
         u_mult=40_000, u_shift=20, eps_shift=2, save=False, restore=False):
    x = _ints((m, k), -128, 127, seed) if x is None else x
    w = _ints((k, n), -128, 127, seed + 1) if w is None else w
    a = _ints((k, r), -128, 127, seed + 2) if a is None else a
    master = _ints((r, n), -2 ** 23, 2 ** 23 - 1, seed + 3) if master is None else master
    return AdapterCall("block0.query", x.to(torch.int8), w.to(torch.int8), a.to(torch.int8),
                       master, u_mult, u_shift, sign, eps_shift, save, restore)


def split_run(target, c):
    xw_call, u_call = split_adapter_call(c)
    return combine(target(xw_call), target(narrow_call(c, target(u_call))))


def python_adapter(c, z):
    """The adapter's output in Python integers, from the docstring's formulas (a second
    route: no torch matmul, no golden helper), with ``z`` the perturbation drawn."""
    def wrap(v):
        return (v + 2 ** 31) % 2 ** 32 - 2 ** 31
    x, w, a, t = (v.tolist() for v in (c.x, c.w, c.a, c.master))
    m, k, n, r = len(x), len(w), len(w[0]), len(a[0])
    u = []
    for i in range(m):
        row = []
        for j in range(r):
            acc = wrap(sum(x[i][kk] * a[kk][j] for kk in range(k)))
            s = c.u_shift
            row.append(max(-128, min(127, (acc * c.u_mult + ((1 << s) >> 1)) >> s)))
        u.append(row)
    tp = [[(t[j][col] >> 8) if not c.sign else
           max(-2 ** 15, min(2 ** 15 - 1, (t[j][col] >> 8) + c.sign * (int(z[j][col])
                                                                     >> c.eps_shift)))
           for col in range(n)] for j in range(r)]
    return torch.tensor([[wrap(sum(x[i][kk] * w[kk][col] for kk in range(k))
                               + sum(u[i][j] * tp[j][col] for j in range(r)))
                          for col in range(n)] for i in range(m)], dtype=torch.int64)


def assert_split_equals_direct(c):
    direct_units, split_units = units(), units()
    direct = direct_units(c)
    split = split_run(split_units, c)
    assert torch.equal(split, direct)
    assert direct_units.generator.save() == split_units.generator.save()
    return direct


@pytest.mark.parametrize("seed", range(6))
def test_random_shapes_equal_direct_and_python(seed):
    g = torch.Generator().manual_seed(100 + seed)
    m, k = (int(v) for v in torch.randint(1, 20, (2,), generator=g))
    n, r = ROWS * int(torch.randint(1, 4, (1,), generator=g)), ROWS * (1 + seed % 2)
    sign = (1, -1, 0)[seed % 3]
    c = call(m, k, n, r, seed=seed, sign=sign, u_shift=int(10 + seed * 3))
    direct = assert_split_equals_direct(c)
    draw = units()
    z = draw_perturbation(draw.generator, ROWS, r, n) if sign else None
    assert torch.equal(direct, python_adapter(c, z))


def _full(shape, value):
    return torch.full(shape, value, dtype=torch.int64)


@pytest.mark.parametrize("xv, wv", [(-128, -128), (127, 127), (-128, 127), (127, -128)])
@pytest.mark.parametrize("sign", [1, -1, 0])
def test_extreme_x_w_and_u_saturating(xv, wv, sign):
    """X·W at +-2^14 K, U = requant(X·A) saturated at both ends (A of both signs, a large
    multiplier), masters at both ends of the 24-bit format, eps_shift 0 (Tp saturates)."""
    k, r, n = 64, 4, 8
    a = torch.cat([_full((k, 2), -128), _full((k, 2), 127)], dim=1)
    master = torch.tensor([[-2 ** 23, 2 ** 23 - 1] * 4, [2 ** 23 - 1, -2 ** 23] * 4,
                           [0, -1] * 4, [255, -256] * 4])
    c = call(3, k, n, r, sign=sign, x=_full((3, k), xv), w=_full((k, n), wv), a=a,
             master=master, u_mult=65535, u_shift=0, eps_shift=0)
    u = units()(split_adapter_call(c)[1])
    assert set(u.flatten().tolist()) == {-128, 127}          # both saturation ends
    assert_split_equals_direct(c)
    xw = units()(split_adapter_call(c)[0])
    assert torch.equal(xw, _full((3, n), xv * wv * k))         # the product's extreme


@pytest.mark.parametrize("k", [2 ** 17 - 4, 2 ** 17 + 4])
def test_sum_past_the_32_bit_wrap(k):
    """X·W = 2^14 K: just below 2^31 (U·Tp = 4 x 127 x 32767 carries the sum past it) and
    past it (X·W and X·A wrap negative, U = -128, the sum wraps back): both sides wrap mod
    2^32 alike (plain: Tp = T >> 8 = 32767 exactly)."""
    r, n = 4, 4
    c = call(1, k, n, r, sign=0, x=_full((1, k), -128), w=_full((k, n), -128),
             a=_full((k, r), -128), master=_full((r, n), 2 ** 23 - 1), u_mult=65535,
             u_shift=0, eps_shift=0)
    direct = assert_split_equals_direct(c)

    def wrap(v):
        return (v + 2 ** 31) % 2 ** 32 - 2 ** 31
    u = 127 if wrap(2 ** 14 * k) > 0 else -128
    exact = wrap(2 ** 14 * k) + r * u * (2 ** 15 - 1)
    assert not -2 ** 31 <= exact < 2 ** 31                     # the sum itself wraps
    assert torch.equal(direct, torch.full((1, n), wrap(exact)))


def test_save_restore_flags_walk_the_generator_alike():
    """A step's flag pattern (save on +, restore on -, plain, update with restore) on both
    sides: every result and the generator's state equal after each call."""
    direct_units, split_units = units(), units()
    sequence = [call(seed=1, sign=1, save=True), call(seed=2, sign=1),
                call(seed=1, sign=-1, restore=True), call(seed=2, sign=-1),
                call(seed=3, sign=0)]
    for c in sequence:
        assert torch.equal(split_run(split_units, c), direct_units(c))
        assert split_units.generator.save() == direct_units.generator.save()
    update = UpdateCall("block0.query", sequence[0].master, -77, 3, 10, restore=True)
    assert torch.equal(SplitUnits(split_units)(update), direct_units(update))


def test_split_calls_are_engine_and_narrow_layer_jobs():
    c = call(m=6, k=12, n=8, r=4, u_mult=1234, u_shift=17)
    xw, u = split_adapter_call(c)
    assert isinstance(xw, EngineCall) and xw.raw and xw.name == "block0.query.xw"
    assert torch.equal(xw.w, c.w) and not xw.bias.any()
    assert not u.raw and tuple(u.w.shape) == (12, 4) and not u.bias.any()
    assert u.multiplier.tolist() == [1234] * 4 and u.shift.tolist() == [17] * 4
    values = units()(u)
    narrow = narrow_call(c, values)
    assert tuple(narrow.x.shape) == (6, 4) and narrow.x.dtype == torch.int8
    assert (narrow.u_mult, narrow.u_shift) == (1, 0) and not narrow.w.any()
    assert torch.equal(narrow.a, torch.eye(4, dtype=torch.int8))
    assert (narrow.sign, narrow.save, narrow.restore) == (c.sign, c.save, c.restore)


# -- a whole step ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def prepared():
    model = tiny_encoder(hidden=32, layers=1, heads=2, intermediate=64)
    return prepare(CFG, model_and_tokenizer=model)


def test_whole_step_through_split_units_is_bit_exact(prepared):
    direct_units = units(record=True)
    inner = units(record=True)
    direct = ZoFinetune(prepared, "int8", units=direct_units)
    split = ZoFinetune(prepared, "int8", units=SplitUnits(inner))
    for _ in range(2):
        a, b = direct.step(), split.step()
        assert a.losses == b.losses and a.grads == b.grads
        assert set(a.masters) == set(b.masters)
        for name in a.masters:
            assert torch.equal(a.masters[name], b.masters[name]), name
    assert any(m.abs().sum() > 0 for m in a.masters.values())       # the step moved
    assert direct_units.generator.save() == inner.generator.save()
    assert split.units.generator_state() == direct_units.generator_state()
    adapters = [c for c in direct_units.log if isinstance(c, AdapterCall)]
    narrow = [c for c in inner.log if isinstance(c, AdapterCall)]
    assert len(adapters) == len(narrow) > 0
    assert all(c.x.shape[1] == c.master.shape[0] for c in narrow)        # K = r
    engine = sum(isinstance(c, EngineCall) for c in inner.log)
    assert engine == sum(isinstance(c, EngineCall) for c in direct_units.log) \
        + 2 * len(adapters)


@pytest.mark.slow
@pytest.mark.ci
def test_split_step_on_verilator_is_bit_exact(prepared):
    """SplitUnits(RtlUnits(..., "all")): one step with every X·W and U on the RTL engine and
    the narrow adapters (K = r, no load_w or frozen_w, their branches with zero_w) on the
    RTL ZO layer equals the direct golden step; every call is also compared with the RTL
    units' own golden model."""
    from zoforge.sim.finetune_cosim import RtlUnits    # Verilator: slow tests only
    direct_units = units(record=True)
    record = ZoFinetune(prepared, "int8", units=direct_units).step()
    with SplitUnits(RtlUnits(CFG, 32, 64, "all")) as rtl:
        step = ZoFinetune(prepared, "int8", units=rtl).step()
        by_name = dict(rtl.cycles_by_name)
        layer_jobs = list(rtl.layer.jobs)
        adapters = sum(isinstance(c, AdapterCall) for c in direct_units.log)
        assert rtl.rtl_calls == len(direct_units.log) + 2 * adapters
    # the narrow adapters (W' = 0) ran no load_w or frozen_w, every branch with zero_w
    assert not {"load_w", "frozen_w"} & {job["job"] for job in layer_jobs}
    branches = [job for job in layer_jobs if job["job"] == "branch"]
    assert len(branches) == adapters and all(job["zero_w"] for job in branches)
    assert step.grads == record.grads and step.losses == record.losses
    for name, master in record.masters.items():
        assert torch.equal(step.masters[name], master), name
    assert {"block0.query.xw engine", "block0.query.u engine",
            "block0.query adapter"} <= set(by_name)
    print(f"split step on the RTL: {sum(by_name.values())} cycles; per call: {by_name}")
