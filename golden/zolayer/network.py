"""A classifier built from ZO layers, in the layers' integer arithmetic: the golden model of a
training run on the hardware.

The network (full-weight layers, :func:`~zoforge.golden.zolayer.model.full_output`)::

    x (B, F) int8 ─► layer 1 (F x H) ─► h = requantize(Y1, mult, shift, relu) int8 ─► ...
                 ─► last layer (H x N) ─► Y int32;  logits = Y[:, :classes] * logit_scale

``widths = (F, H..., N)``; no hidden width gives the linear classifier ``F x N``. ``N`` is the
class count rounded up to a multiple of the array's rows R (the padding columns are trained
like the others but never read by the loss). Requantization is the GEMM engine's
(:func:`zoforge.golden.engine.requantize`: round half up, saturate to int8, then ReLU).

**Scales** (host-side facts fixed when the network is made; the hardware sees integers):
weights are ``operand * 2^-WEIGHT_FRAC`` (master ``* 2^-(WEIGHT_FRAC + 8)``); the input is
``x_int * input_scale``; each hidden layer's requantization is calibrated once, on the
initial weights and a calibration batch, so that twice the largest ReLU output maps to 127
(``mult / 2^shift`` from :func:`~zoforge.golden.engine.quantize_multiplier`); the logits'
scale follows from those.

**Float settings to integers** (:func:`step_settings`, the host's choice, reported back):
a perturbation adds ``z_int >> e`` operand LSBs, i.e. ``eps = 2^(F - e - WEIGHT_FRAC)`` in
weight units for a generator with F fractional bits, so the requested ``eps`` is rounded to
the nearest such power of two; ``g = round((l+ - l-) / (2 eps) * 2^GRAD_FRAC)``; the
update ``lr / q * sum g z`` in master LSBs is ``eta / q * D`` with
``eta / q = lr / q * 2^(WEIGHT_FRAC + 8 - GRAD_FRAC - F)``, written as
``eta_mult * 2^-eta_shift`` with the largest ``eta_shift`` that keeps ``eta_mult`` in 16 bits.

**One generator for the network**: a perturbation of the network is layer 1's words, then
layer 2's, ... (each layer in the hardware's read order,
:func:`~zoforge.golden.zolayer.model.draw_perturbation`), so a branch consumes the
generator exactly as the hardware walking the layers in order does.

**A step** (P-RGE order; the host's loss and g are :class:`~.host.CrossEntropyHost`)::

    for i in range(q):
        save; Y+ = forward(+1); restore; Y- = forward(-1); restore
        g_i = host.gradient(host.loss(Y+), host.loss(Y-))
        for each layer: D += g_i * z (regenerated, layer order)
    for each layer: T = applied_update(T, D, eta_mult, eta_shift); D = 0
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch

from zoforge.errors import ConfigError, check_int_range
from zoforge.golden.engine import RequantParams, quantize_multiplier, requantize
from zoforge.golden.zolayer.config import Formats
from zoforge.golden.zolayer.host import CrossEntropyHost
from zoforge.golden.zolayer.model import (applied_update, draw_perturbation, full_output,
                                          perturbed_operand, saturate)

__all__ = ["ZoNetwork", "WEIGHT_FRAC", "GRAD_FRAC", "StepSettings",
           "step_settings"]

WEIGHT_FRAC = 12        # float weight = operand * 2^-WEIGHT_FRAC
GRAD_FRAC = 6           # g = round((l+ - l-) / (2 eps) * 2^GRAD_FRAC)


@dataclass(frozen=True)
class StepSettings:
    """The integer step settings for float ``lr`` / ``eps`` and what they amount to."""

    eps_shift: int
    eta_mult: int
    eta_shift: int
    eps: float          # the perturbation scale used (a power of two)
    lr: float           # the learning rate used (eta_mult's rounding)
    gain: float         # the host's g = round((l+ - l-) * gain)


def step_settings(lr: float, eps: float, queries: int, frac_bits: int) -> StepSettings:
    """Integers for ``lr``, ``eps`` and ``queries`` with a generator of ``frac_bits``
    fractional bits (see the module docstring); one-line errors when out of reach."""
    eps_shift = round(frac_bits - WEIGHT_FRAC - math.log2(eps))
    if not 0 <= eps_shift <= Formats.EPS_SHIFT_MAX:
        low, high = (2.0 ** (frac_bits - WEIGHT_FRAC - e) for e in (Formats.EPS_SHIFT_MAX, 0))
        raise ConfigError("eps", f"a value with {low:.3g} <= eps <= {high:.3g} for this "
                          "generator", eps)
    used_eps = 2.0 ** (frac_bits - eps_shift - WEIGHT_FRAC)
    eta = lr / queries * 2.0 ** (WEIGHT_FRAC + Formats.MASTER_FRAC - GRAD_FRAC - frac_bits)
    limit = (1 << Formats.ETA_MULT_BITS) - 1
    eta_shift = Formats.ETA_SHIFT_MAX
    while eta_shift > 0 and round(eta * 2.0 ** eta_shift) > limit:
        eta_shift -= 1
    eta_mult = round(eta * 2.0 ** eta_shift)
    if not 1 <= eta_mult <= limit:
        raise ConfigError("lr", "a learning rate the 16-bit eta_mult * 2^-eta_shift can "
                          "hold for this generator", lr)
    used_lr = eta_mult * 2.0 ** -eta_shift * queries / 2.0 ** (
        WEIGHT_FRAC + Formats.MASTER_FRAC - GRAD_FRAC - frac_bits)
    return StepSettings(eps_shift, eta_mult, eta_shift, used_eps, used_lr,
                        2.0 ** GRAD_FRAC / (2 * used_eps))


class ZoNetwork:
    """Masters and requantizations of a ZO-layer classifier; the generator (a golden
    generator, :mod:`zoforge.golden.rng`) is passed to what draws perturbations."""

    def __init__(self, rows: int, widths: Sequence[int]):
        widths = [int(w) for w in widths]
        if len(widths) < 2:
            raise ConfigError("widths", "input, hidden... and output widths", widths)
        for width in widths[1:]:
            if width % rows:
                raise ConfigError("hidden", f"a multiple of the array rows {rows}", width)
        self.rows, self.widths = rows, widths
        self.masters = [torch.zeros(k, n, dtype=torch.int64)
                        for k, n in zip(widths[:-1], widths[1:])]
        self.accumulators = [torch.zeros_like(t) for t in self.masters]
        self.requants: list[RequantParams] = []
        self.logit_scale = 1.0

    # -- set-up ---------------------------------------------------------------------------
    def init_uniform(self, seed: int) -> None:
        """Masters uniform in ``+-1/sqrt(fan_in)`` (float weights), seeded, rounded."""
        generator = torch.Generator().manual_seed(seed)
        for i, (k, n) in enumerate(zip(self.widths[:-1], self.widths[1:])):
            bound = k ** -0.5
            w = (torch.rand(k, n, generator=generator, dtype=torch.float64) * 2 - 1) * bound
            self.masters[i] = saturate(torch.round(w * 2.0 ** (WEIGHT_FRAC
                                                             + Formats.MASTER_FRAC))
                                       .to(torch.int64), Formats.MASTER_BITS)

    def calibrate(self, x: torch.Tensor, input_scale: float) -> float:
        """Fix each hidden layer's requantization from the current weights on ``x`` (see the
        module docstring); returns and keeps the logits' scale."""
        scale, h = float(input_scale), torch.as_tensor(x, dtype=torch.int64)
        self.requants = []
        for master in self.masters[:-1]:
            y = full_output(h, perturbed_operand(master, None, 0, 0))
            real = scale * 2.0 ** -WEIGHT_FRAC
            peak = float(y.clamp_min(0).max()) * real
            target = 2 * peak / 127 if peak > 0 else real
            params = quantize_multiplier(real / target)
            self.requants.append(params)
            h = requantize(y, params, relu=True).to(torch.int64)
            scale = real / (params.multiplier / 2.0 ** params.shift)
        self.logit_scale = scale * 2.0 ** -WEIGHT_FRAC
        return self.logit_scale

    def load_masters(self, masters: Sequence[torch.Tensor]) -> None:
        for i, t in enumerate(masters):
            self.masters[i] = torch.as_tensor(t, dtype=torch.int64).reshape(
                self.masters[i].shape).clone()

    # -- forward, step --------------------------------------------------------------------
    def forward(self, x: torch.Tensor, sign: int = 0, eps_shift: int = 0, generator=None,
                masters: Sequence[torch.Tensor] | None = None) -> torch.Tensor:
        """The last layer's outputs ``(B, N)`` (int64 values of int32) with every layer's
        weights ``T + sign * eps * z``, z drawn from ``generator`` (sign 0: unperturbed, no
        perturbation drawn); ``masters`` instead of the network's own, if given."""
        check_int_range("eps_shift", eps_shift, 0, Formats.EPS_SHIFT_MAX)
        if len(self.requants) != len(self.masters) - 1:
            raise ConfigError("network", "calibrated before use (calibrate())", "not yet")
        h = torch.as_tensor(x, dtype=torch.int64)
        for i, master in enumerate(self.masters if masters is None else masters):
            z = draw_perturbation(generator, self.rows, *master.shape) if sign else None
            y = full_output(h, perturbed_operand(master, z, sign, eps_shift))
            if i < len(self.requants):
                h = requantize(y, self.requants[i], relu=True).to(torch.int64)
        return y

    def step(self, generator, x: torch.Tensor, labels, host: CrossEntropyHost,
             queries: int, settings: StepSettings) -> tuple[list[float], list[int]]:
        """One ZO step on the batch ``x``; returns each branch's loss (``+``, ``-`` per
        query) and the g values."""
        losses, grads = [], []
        e = settings.eps_shift
        for _ in range(queries):
            start = generator.save()
            loss_plus = host.loss(self.forward(x, 1, e, generator).numpy(), labels)
            generator.restore(start)
            loss_minus = host.loss(self.forward(x, -1, e, generator).numpy(), labels)
            generator.restore(start)
            g = host.gradient(loss_plus, loss_minus)
            for accumulator in self.accumulators:
                accumulator += g * draw_perturbation(generator, self.rows, *accumulator.shape)
            losses += [loss_plus, loss_minus]
            grads.append(g)
        for i, accumulator in enumerate(self.accumulators):
            self.masters[i] = applied_update(self.masters[i], accumulator, settings.eta_mult,
                                             settings.eta_shift)
            accumulator.zero_()
        return losses, grads
