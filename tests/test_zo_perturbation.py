"""Perturbation sources: regeneration from state, bit-exactness with the PeZO goldens,
scaling, and one-line errors."""
import json
import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

from zoforge.errors import ConfigError
from zoforge.golden.rng import (GaussianConfig, GaussianGolden, MaskedConfig, OnTheFlyConfig,
                                OnTheFlyGolden, PregenConfig, PregenGolden)
from zoforge.golden.zo.perturbation import (SOURCES, expected_gaussian_norm,
                                            make_perturbation,
                                            scale_chunks_to_gaussian_norm)


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_regenerates_from_small_state(name):
    source = make_perturbation(name, seed=3)
    source.draw(50)
    state = source.state_dict()
    assert len(json.dumps(state)) < 200          # a seed/counter or generator state, no z
    first = [source.draw(d) for d in (1000, 77, 1000)]
    source.load_state_dict(json.loads(json.dumps(state)))
    again = [source.draw(d) for d in (1000, 77, 1000)]
    for a, b in zip(first, again):
        assert a.dtype == torch.float32 and torch.equal(a, b)
    assert not torch.equal(first[0], first[2])   # the stream advances


def _splitmix64(x):
    """One SplitMix64 output, written out independently of zoforge's."""
    mask = 2 ** 64 - 1
    z = (x + 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


def test_pezo_sources_are_the_generator_goldens():
    # --seed picks the start state (splitmix64(seed) mod the number of states); the pool's
    # contents are the hardware parameter --pool-seed.
    onthefly = make_perturbation("pezo-onthefly", seed=5, n_rng=15, bits=10)
    states = math.lcm(2 ** 10 - 1, 15)
    golden = OnTheFlyGolden(n_rng=15, bits=10, start=_splitmix64(5) % states)
    pregen = make_perturbation("pezo-pregen", seed=9, pool_size=1023, bits=12, banks=4,
                               pool_seed=3)
    pool = PregenGolden(pool_size=1023, bits=12, banks=4, pool_seed=3,
                        pointer=_splitmix64(9) % 1023)
    for d in (100, 4096, 1):
        assert torch.equal(onthefly.draw(d), golden.take_float(d))
        assert torch.equal(pregen.draw(d), pool.take_float(d))


def test_gaussian_hw_is_the_clt_generator_golden():
    source = make_perturbation("gaussian-hw", seed=4, n_rng=31, bits=10, terms=4)
    golden = GaussianGolden(n_rng=31, bits=10, terms=4, start=_splitmix64(4) % (2 ** 10 - 1))
    for d in (100, 31 * 7, 1, 5000):
        assert torch.equal(source.draw(d), golden.take_float(d))
    defaults = make_perturbation("gaussian-hw").hardware()
    assert (defaults.n_rng, defaults.bits, defaults.terms) == (1024, 16, 3)


def test_hardware_generator_of_each_source():
    assert make_perturbation("pezo-onthefly", n_rng=15, bits=6).hardware() == \
        OnTheFlyConfig(n_rng=15, bits=6)
    assert make_perturbation("pezo-pregen", pool_size=1023, banks=4).hardware() == \
        PregenConfig(pool_size=1023, banks=4)
    assert make_perturbation("gaussian-hw", n_rng=8, bits=12).hardware() == \
        GaussianConfig(n_rng=8, bits=12)
    assert make_perturbation("masked-onthefly", n_rng=7, bits=9).hardware() == \
        MaskedConfig(n_rng=7, bits=9)
    for software in ("gaussian", "rademacher", "uniform-scaled", "uniform-naive"):
        assert make_perturbation(software).hardware() is None


@pytest.mark.parametrize("name", ["pezo-onthefly", "pezo-pregen", "gaussian-hw",
                                  "masked-onthefly"])
def test_seed_zero_starts_in_the_reset_state_and_seeds_differ(name):
    draws = {seed: make_perturbation(name, seed=seed).draw(500) for seed in (0, 1, 2)}
    reset = make_perturbation(name, seed=0).generator
    assert reset.state == 0
    assert not torch.equal(draws[1], draws[2]) and not torch.equal(draws[0], draws[1])


def test_uniform_naive_is_the_unscaled_onthefly_stream():
    n, bits = 31, 8
    naive = make_perturbation("uniform-naive", seed=2, n_rng=n, bits=bits)
    scaled = make_perturbation("pezo-onthefly", seed=2, n_rng=n, bits=bits)
    u, z = naive.draw(n * 40), scaled.draw(n * 40)
    assert float(u.abs().max()) < 1.0
    for u_cycle, z_cycle in zip(u.view(40, n), z.view(40, n)):   # one 2^k per cycle
        ratios = (z_cycle / u_cycle)[u_cycle != 0].unique()
        assert len(ratios) == 1 and float(torch.log2(ratios[0])).is_integer()
        assert torch.equal(z_cycle, u_cycle * ratios[0])
    assert naive.state_dict() == scaled.state_dict()


@settings(max_examples=20, deadline=None)
@given(d=st.integers(1, 3000), chunk=st.integers(0, 300), seed=st.integers(0, 1000))
def test_uniform_scaled_chunks_have_the_gaussian_norm(d, chunk, seed):
    z = make_perturbation("uniform-scaled", seed=seed, chunk=chunk).draw(d)
    size = d if chunk == 0 else chunk
    for start in range(0, d, size):
        piece = z[start:start + size].double()
        assert float(piece.norm()) == pytest.approx(expected_gaussian_norm(piece.numel()),
                                                    rel=1e-5)


def test_expected_gaussian_norm_closed_forms():
    assert expected_gaussian_norm(1) == pytest.approx(math.sqrt(2 / math.pi))
    assert expected_gaussian_norm(2) == pytest.approx(math.sqrt(math.pi / 2))
    assert expected_gaussian_norm(10 ** 6) == pytest.approx(1000.0, rel=1e-6)
    sample = torch.randn(2000, 64, generator=torch.Generator().manual_seed(0)).norm(dim=1)
    assert float(sample.mean()) == pytest.approx(expected_gaussian_norm(64), rel=0.01)


def test_scale_chunks_keeps_zero_chunk_zero():
    u = torch.tensor([0.0, 0.0, 0.5, -0.5])
    assert torch.equal(scale_chunks_to_gaussian_norm(u, 2)[:2], torch.zeros(2))


def test_distributions():
    g = make_perturbation("gaussian", seed=1).draw(200_000)
    assert abs(float(g.mean())) < 0.01 and float(g.std()) == pytest.approx(1.0, abs=0.01)
    r = make_perturbation("rademacher", seed=1).draw(10_000)
    assert set(r.unique().tolist()) == {-1.0, 1.0}
    assert abs(float(r.mean())) < 0.05


@pytest.mark.parametrize("kwargs, flag", [
    ({"name": "pezo-onthefly", "n_rng": 8}, "n_rng"),
    ({"name": "pezo-pregen", "pool_size": 4096}, "pool_size"),
    ({"name": "uniform-scaled", "chunk": -1}, "chunk"),
    ({"name": "gaussian-hw", "terms": 0}, "terms"),
    ({"name": "gaussian-hw", "n_rng": 4096, "bits": 8}, "bits"),
    ({"name": "normal"}, "perturbation"),
])
def test_bad_parameters_name_the_flag(kwargs, flag):
    with pytest.raises(ConfigError) as error:
        make_perturbation(**kwargs)
    assert str(error.value).startswith(flag) and "\n" not in str(error.value)
