"""Training in the ZO-layer hardware's arithmetic: trainable ``hw-mlp``, method ``hw-prge``.

``hw-mlp`` is a classifier of full-weight ZO layers (:class:`~zoforge.golden.zolayer.network.
ZoNetwork`: ``F -> hidden -> classes``, or ``F -> classes`` with ``hidden`` 0) over the frozen
encoder's pooled features, which the host quantizes once to int8
(``input_scale = max |x_train| / 127``, round half to even, clamp to +-127). ``theta`` holds
the layers' 24-bit master copies as integers (exact in float32), layer after layer, each
row-major ``(K, N)``.

``hw-prge`` is the hardware's step (:meth:`ZoNetwork.step`): the perturbation source's
golden generator (``pezo-onthefly``, ``pezo-pregen``, ``gaussian-hw`` or
``masked-onthefly``, started where ``seed`` says, as the hardware's) drives the branches
and the update; ``lr`` and ``eps`` become the integer settings of
:func:`~zoforge.golden.zolayer.network.step_settings`, which the result reports. A golden run is the exact prediction of the same
run on the RTL: same batches, same g values, same masters after every step.

**Branches side by side** (``branch_lanes`` B > 1, the linear classifier only): the ZO
layer puts B branches of F = R / B features on its R rows (``docs/zo-layer.md``), so the
classes are padded to a multiple of F (not R) and a branch job computes the + and -
branches of Q = B / 2 queries at once. The step (:func:`grouped_step`) then takes each
job's Q perturbations in the layer's order for B lanes
(:func:`~zoforge.golden.zolayer.model.draw_perturbations`, the one definition)::

    for each group of Q queries:
        z_0 .. z_{Q-1} = draw_perturbations(generator, R, B, K, N)   # the job's transfers
        for j in range(Q):
            l+, l- = loss(X · op(T, +z_j)), loss(X · op(T, -z_j));  g_j = gradient(l+, l-)
            D += g_j * z_j
    T = applied_update(T, D, eta_mult, eta_shift)

(the hardware saves the generator before the job and restores it before each query's
accumulate, whose walk takes the job's Q transfers per word: the generator ends where one
draw of the job leaves it). With B = 1 it is :meth:`ZoNetwork.step`'s order.
"""
from __future__ import annotations

import torch

from zoforge.errors import ConfigError
from zoforge.golden.zo.optimizers import ZOOptimizer
from zoforge.golden.zo.trainable import Trainable
from zoforge.golden.zolayer.host import CrossEntropyHost
from zoforge.golden.zolayer.config import padded_classes
from zoforge.golden.zolayer.model import (applied_update, draw_perturbations, full_output,
                                          perturbed_operand)
from zoforge.golden.zolayer.network import StepSettings, ZoNetwork, step_settings

__all__ = ["HwMlpTrainable", "HardwarePRGE", "quantize_inputs", "grouped_step"]


def quantize_inputs(x: torch.Tensor, scale: float) -> torch.Tensor:
    """``clamp(round_half_even(x / scale), -127, 127)`` as int64."""
    return torch.round(x.double() / scale).clamp(-127, 127).to(torch.int64)


class HwMlpTrainable(Trainable):
    """The ZO-layer classifier over pooled features on an array of ``rows`` rows with
    ``branch_lanes`` branches side by side; see the module docstring."""

    kind = "hw-mlp"

    def __init__(self, splits, num_classes: int, hidden: int, rows: int, init_seed: int,
                 branch_lanes: int = 1):
        super().__init__(splits, num_classes, hw_arith=True)
        self.rows, self.branch_lanes = rows, branch_lanes
        if branch_lanes > 1 and hidden:
            raise ConfigError("branch_lanes", "1 with a hidden layer", branch_lanes)
        train_x = splits["train"].x
        peak = float(train_x.abs().max()) if train_x.numel() else 0.0
        self.input_scale = peak / 127 if peak > 0 else 1.0
        for data in splits.values():
            data.x = quantize_inputs(data.x, self.input_scale)
        features = rows // branch_lanes                 # a word's features
        widths = [train_x.shape[-1], *([hidden] if hidden else []),
                  padded_classes(num_classes, features)]
        self.network = ZoNetwork(features, widths)
        self.network.init_uniform(init_seed)
        self.network.calibrate(splits["train"].x, self.input_scale)
        self.host_scale = self.network.logit_scale
        offset, parts = 0, []
        for i, master in enumerate(self.network.masters):
            self.layers.append((f"layer.{i}", slice(offset, offset + master.numel())))
            offset += master.numel()
            parts.append(master.reshape(-1).to(torch.float32))
        self.theta = torch.cat(parts)

    def masters(self, theta: torch.Tensor) -> list[torch.Tensor]:
        return [theta[block].to(torch.int64).reshape(master.shape)
                for (_, block), master in zip(self.layers, self.network.masters)]

    def set_masters(self, masters) -> None:
        for (_, block), master in zip(self.layers, masters):
            self.theta[block] = master.reshape(-1).to(torch.float32)

    def outputs(self, theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """The hardware's unperturbed outputs ``(B, N)`` for one ``theta``."""
        return self.network.forward(x, masters=self.masters(theta))

    def logits(self, thetas, x, mask):
        return torch.stack([self.outputs(theta, x)[:, :self.num_classes].double()
                            * self.host_scale for theta in thetas]).float()


class HardwarePRGE(ZOOptimizer):
    """The ZO layer's integer P-RGE step on a :class:`HwMlpTrainable` (module docstring)."""

    def __init__(self, trainable, perturbation, lr: float, eps: float, queries: int = 1):
        super().__init__(trainable, perturbation, lr, eps)
        if not isinstance(trainable, HwMlpTrainable):
            raise ConfigError("method", "hw-prge only with trainable hw-mlp",
                              trainable.kind)
        if perturbation.hardware() is None:
            raise ConfigError("perturbation", "a hardware source (pezo-onthefly, "
                              "pezo-pregen, gaussian-hw, masked-onthefly) for method "
                              "hw-prge",
                              perturbation.name)
        per_job = max(1, trainable.branch_lanes // 2)
        if queries % per_job:
            raise ConfigError("queries", f"a multiple of branch_lanes / 2 = {per_job}",
                              queries)
        self.generator = perturbation.generator
        self.queries = queries
        self.settings = step_settings(lr, eps, queries, self.generator.frac_bits)
        self.host = CrossEntropyHost(trainable.num_classes, trainable.host_scale,
                                     self.settings.gain)
        self.last_grads: list[int] = []

    def step(self, index) -> float:
        x, _, labels = self.trainable.splits["train"].batch(index)
        trainable = self.trainable
        network = trainable.network
        network.load_masters(trainable.masters(trainable.theta))
        if trainable.branch_lanes == 1:
            losses, self.last_grads = network.step(self.generator, x, labels.numpy(),
                                                   self.host, self.queries, self.settings)
        else:
            master, losses, self.last_grads = grouped_step(
                network.masters[0], self.generator, trainable.rows, trainable.branch_lanes,
                x, labels.numpy(), self.host, self.queries, self.settings)
            network.load_masters([master])
        trainable.set_masters(network.masters)
        return sum(losses) / len(losses)


def grouped_step(master: torch.Tensor, generator, rows: int, branch_lanes: int,
                 x: torch.Tensor, labels, host: CrossEntropyHost, queries: int,
                 settings: StepSettings) -> tuple[torch.Tensor, list[float], list[int]]:
    """One step of a one-layer classifier (master ``(K, N)``) on ``rows`` rows with
    ``branch_lanes`` branches side by side (the module docstring's order): the new master,
    each branch's loss (``+``, ``-`` per query) and the g values."""
    e = settings.eps_shift
    accumulator = torch.zeros_like(master)
    losses, grads = [], []
    for _ in range(queries // max(1, branch_lanes // 2)):
        for z in draw_perturbations(generator, rows, branch_lanes, *master.shape):
            plus, minus = (host.loss(full_output(x, perturbed_operand(master, z, sign, e))
                                     .numpy(), labels) for sign in (1, -1))
            g = host.gradient(plus, minus)
            accumulator += g * z
            losses += [plus, minus]
            grads.append(g)
    return (applied_update(master, accumulator, settings.eta_mult, settings.eta_shift),
            losses, grads)
