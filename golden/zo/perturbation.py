"""Perturbation sources for zeroth-order training, behind one interface.

A source produces the flat perturbation vector ``z`` (float32, length ``d``) of one query
with :meth:`Perturbation.draw`; each draw advances the source. Nothing ever stores ``z``:
``state_dict()`` is a few numbers (a seed and a draw counter, or a PeZO generator's state),
and ``load_state_dict()`` followed by the same draws regenerates the same vectors exactly.

Sources (``perturbation``):

* ``gaussian``  z ~ N(0, I) from torch's CPU generator (the MeZO baseline).
* ``rademacher`` z uniform over {-1, +1}.
* ``uniform-naive`` the raw lanes of the PeZO on-the-fly LFSR generator as fractions
  ``u / 2^(b-1)`` in (-1, 1), without the scale LUT: the failure case of PeZO Table 3.
* ``uniform-scaled`` z ~ U(-1, 1) from torch, split into chunks of ``chunk`` values
  (0: one chunk), each chunk scaled exactly (float) so that its norm equals the expected
  norm of a Gaussian vector of the chunk's length.
* ``pezo-onthefly`` / ``pezo-pregen`` the PeZO generators' golden models
  (:mod:`zoforge.golden.rng`), bit-exact with the RTL, including their own (power-of-two)
  modulus scaling. The pool's contents are a hardware parameter (``pool_seed``).
* ``gaussian-hw`` the hardware Gaussian baseline (n central-limit generators, each a sum of
  ``terms`` LFSR values; :class:`~zoforge.golden.rng.GaussianConfig`), bit-exact with its
  RTL: the MeZO row of PeZO's Table 6 as a training source.
* ``masked-onthefly`` the masked on-the-fly generator (issue 25;
  :class:`~zoforge.golden.rng.MaskedConfig`): PeZO's lanes XOR a rotating mask, bit-exact
  with its RTL, for diversity at small d.

The four hardware sources know the generator they are bit-exact with
(:meth:`Perturbation.hardware`: its configuration, from which ``zoforge build`` reports the
generator's cost); the software sources have none. ``n_rng`` / ``bits`` left as ``None``
take the generator configuration's defaults.

``seed`` means the same for every source: where its random sequence starts. Seeded torch
sources derive draw ``i``'s generator seed from ``(seed, i)`` with numpy's ``SeedSequence``,
so a draw depends only on its index; a PeZO generator starts in the state
:meth:`~zoforge.golden.rng.base.GoldenGenerator.initial_state` gives for the seed (seed 0:
the hardware's reset state).
"""
from __future__ import annotations

import numpy as np
import torch

from zoforge.errors import check_choice, check_int_range
from zoforge.golden.rng import (GaussianConfig, GeneratorConfig, MaskedConfig, OnTheFlyConfig,
                                PregenConfig)
from zoforge.golden.rng.norms import expected_gaussian_norm
from zoforge.golden.zo.names import SOURCE_NAMES

__all__ = ["Perturbation", "SOURCES", "make_perturbation", "expected_gaussian_norm",
           "scale_chunks_to_gaussian_norm"]


def scale_chunks_to_gaussian_norm(u: torch.Tensor, chunk: int) -> torch.Tensor:
    """Scale each ``chunk``-long piece of ``u`` (0: all of it) to the expected Gaussian norm."""
    d = u.numel()
    size = d if chunk <= 0 else chunk
    out = torch.empty_like(u)
    for start in range(0, d, size):
        piece = u[start:start + size]
        norm = float(piece.norm())
        factor = expected_gaussian_norm(piece.numel()) / norm if norm > 0 else 0.0
        out[start:start + size] = piece * factor
    return out


class Perturbation:
    """A source of perturbation vectors; see the module docstring."""

    name = ""

    def draw(self, d: int) -> torch.Tensor:
        raise NotImplementedError

    def state_dict(self) -> dict:
        raise NotImplementedError

    def load_state_dict(self, state: dict) -> None:
        raise NotImplementedError

    def config(self) -> dict:
        raise NotImplementedError

    def hardware(self) -> GeneratorConfig | None:
        """The hardware generator this source is bit-exact with (None: software only)."""
        return None


class _SeededTorch(Perturbation):
    """Counter-based torch source: draw i uses a generator seeded from (seed, i)."""

    def __init__(self, seed: int):
        self.seed = int(seed)
        self.count = 0

    def _generator(self) -> torch.Generator:
        key = np.random.SeedSequence([self.seed, self.count]).generate_state(2, np.uint32)
        self.count += 1
        return torch.Generator().manual_seed(int(key[0]) << 32 | int(key[1]))

    def draw(self, d: int) -> torch.Tensor:
        return self._sample(d, self._generator())

    def _sample(self, d: int, generator: torch.Generator) -> torch.Tensor:
        raise NotImplementedError

    def state_dict(self) -> dict:
        return {"seed": self.seed, "count": self.count}

    def load_state_dict(self, state: dict) -> None:
        self.seed, self.count = int(state["seed"]), int(state["count"])

    def config(self) -> dict:
        return {"perturbation": self.name, "seed": self.seed}


class Gaussian(_SeededTorch):
    name = "gaussian"

    def _sample(self, d, generator):
        return torch.randn(d, generator=generator)


class Rademacher(_SeededTorch):
    name = "rademacher"

    def _sample(self, d, generator):
        return torch.randint(0, 2, (d,), generator=generator).float().mul_(2).sub_(1)


class UniformScaled(_SeededTorch):
    name = "uniform-scaled"

    def __init__(self, seed: int, chunk: int = 0):
        super().__init__(seed)
        self.chunk = check_int_range("chunk", chunk, 0)

    def _sample(self, d, generator):
        u = torch.rand(d, generator=generator).mul_(2).sub_(1)
        return scale_chunks_to_gaussian_norm(u, self.chunk)

    def config(self):
        return {**super().config(), "chunk": self.chunk}


class _Golden(Perturbation):
    """Wraps a :mod:`zoforge.golden.rng` generator; its state is the generator's own."""

    def __init__(self, config: GeneratorConfig, seed: int):
        self.generator_config = config
        self.generator = config.golden()
        self.generator.state = self.generator.initial_state(seed)
        self._config = {**config.to_dict(), "seed": seed}

    def draw(self, d: int) -> torch.Tensor:
        return self.generator.take_float(d, dtype=torch.float32)

    def state_dict(self) -> dict:
        return {"generator": self.generator.save()}

    def load_state_dict(self, state: dict) -> None:
        self.generator.restore(state["generator"])

    def config(self) -> dict:
        return {"perturbation": self.name, **self._config}

    def hardware(self) -> GeneratorConfig:
        return self.generator_config


class PezoOnTheFly(_Golden):
    name = "pezo-onthefly"

    def __init__(self, n_rng: int = OnTheFlyConfig.n_rng, bits: int = OnTheFlyConfig.bits,
                 seed: int = 0):
        super().__init__(OnTheFlyConfig(n_rng=n_rng, bits=bits), seed)


class UniformNaive(PezoOnTheFly):
    """The on-the-fly generator's lanes before scaling: ``u / 2^(b-1)`` (same cycles, same
    rotation and the same state as ``pezo-onthefly``; only the scale LUT is left out)."""

    name = "uniform-naive"

    def draw(self, d: int) -> torch.Tensor:
        g = self.generator
        cycles = -(-d // g.n_rng)
        raw = g.cycle_table(g.state, cycles)["raw"].reshape(-1)[:d]
        g.state = g.state + cycles
        return torch.from_numpy(raw).to(torch.float32).mul_(2.0 ** -(g.bits - 1))

    def hardware(self) -> None:
        return None         # the on-the-fly lanes without its scale LUT: no such generator


class PezoPregen(_Golden):
    name = "pezo-pregen"

    def __init__(self, pool_size: int = PregenConfig.pool_size, bits: int = PregenConfig.bits,
                 banks: int = PregenConfig.banks, pool_seed: int = PregenConfig.pool_seed,
                 seed: int = 0):
        super().__init__(PregenConfig(pool_size=pool_size, bits=bits, banks=banks,
                                      pool_seed=pool_seed), seed)


class GaussianHw(_Golden):
    name = "gaussian-hw"

    def __init__(self, n_rng: int = GaussianConfig.n_rng, bits: int = GaussianConfig.bits,
                 terms: int = GaussianConfig.terms, seed: int = 0):
        super().__init__(GaussianConfig(n_rng=n_rng, bits=bits, terms=terms), seed)


class MaskedOnTheFly(_Golden):
    name = "masked-onthefly"

    def __init__(self, n_rng: int = MaskedConfig.n_rng, bits: int = MaskedConfig.bits,
                 seed: int = 0):
        super().__init__(MaskedConfig(n_rng=n_rng, bits=bits), seed)


SOURCES = {cls.name: cls for cls in (Gaussian, Rademacher, UniformNaive, UniformScaled,
                                     PezoOnTheFly, PezoPregen, GaussianHw, MaskedOnTheFly)}
if tuple(SOURCES) != SOURCE_NAMES:
    raise RuntimeError(f"perturbation sources {tuple(SOURCES)} differ from names.SOURCE_NAMES")


def make_perturbation(name: str, *, seed: int = 0, n_rng: int | None = None,
                      bits: int | None = None, pool_size: int = PregenConfig.pool_size,
                      banks: int = PregenConfig.banks, pool_seed: int = PregenConfig.pool_seed,
                      terms: int = GaussianConfig.terms, chunk: int = 0) -> Perturbation:
    """Build the source ``name`` (see :data:`SOURCES`) from CLI-style parameters.

    ``n_rng`` and ``bits`` default to the generator configuration's (on-the-fly and masked
    31 x 8, pre-generated 12 bits, hardware Gaussian 1024 x 16).
    """
    check_choice("perturbation", name, SOURCES)
    if name in ("gaussian", "rademacher"):
        return SOURCES[name](seed)
    if name == "uniform-scaled":
        return UniformScaled(seed, chunk)
    if name == "pezo-pregen":
        return PezoPregen(pool_size=pool_size, bits=PregenConfig.bits if bits is None else bits,
                          banks=banks, pool_seed=pool_seed, seed=seed)
    defaults = {"gaussian-hw": GaussianConfig, "masked-onthefly": MaskedConfig}.get(
        name, OnTheFlyConfig)
    sized = {"n_rng": defaults.n_rng if n_rng is None else n_rng,
             "bits": defaults.bits if bits is None else bits, "seed": seed}
    if name == "gaussian-hw":
        return GaussianHw(terms=terms, **sized)
    return SOURCES[name](**sized)
