"""The trainable part of the classifier as a function of one flat parameter vector.

A classifier is a frozen encoder plus trainable parameters ``theta`` (float32, length d):

* ``head``: a linear head ``C x H`` (+ bias) on mean-pooled final hidden states. The frozen
  encoder runs once: the pooled features of every split are cached.
* ``lora-fa``: LoRA-FA on the ``query`` and ``value`` maps of the top ``lora_layers``
  encoder layers (A ``r x in`` frozen, uniform in +-1/sqrt(in) from the seed; B ``out x r``
  trained, initialised to 0; ``W x + (alpha / r) * B A x``), plus the head. The hidden
  states entering the first adapted layer are cached.
* ``full``: every encoder parameter plus the head (no cache; copies run one by one).

``theta`` is laid out per layer, in forward order (``layers`` lists ``(name, slice)``):
each adapted encoder layer's B matrices (query then value, row-major), then the head
(weight row-major, then bias). The head starts at zero, or (``head_init="prompt"``) with
each class's row set to the pooled embedding of ``"a {label} review"``.

:meth:`Trainable.losses` evaluates ``K`` parameter copies ``thetas (K, d)`` on the same
batch in one batched forward (the P-RGE layout): the frozen input is shared, every
adapted map adds its copy's LoRA term, and the result is each copy's mean cross-entropy.
With ``hw_arith`` every linear map of the trainable layers (the adapted layers' six maps,
with the merged weight ``W + (alpha/r) B A``, and the head) uses the engine's integer
arithmetic (:mod:`zoforge.golden.zo.hwarith`).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call

from zoforge.golden.models import LAYER_LINEARS, bert_layer, mean_pool
from zoforge.golden.zo.hwarith import int8_linear

__all__ = ["Trainable", "HeadTrainable", "LoraFATrainable", "FullTrainable", "SplitData",
           "LORA_TARGETS"]

LORA_TARGETS = ("query", "value")


class SplitData:
    """One split's cached inputs: ``x`` (pooled features or hidden states or token ids),
    ``mask`` (attention mask, or None) and ``labels`` (int64)."""

    def __init__(self, x: torch.Tensor, mask: torch.Tensor | None, labels: np.ndarray):
        self.x, self.mask = x, mask
        self.labels = torch.as_tensor(labels, dtype=torch.int64)

    def __len__(self) -> int:
        return len(self.labels)

    def batch(self, index) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        index = torch.as_tensor(np.asarray(index), dtype=torch.int64)
        x, labels = self.x[index], self.labels[index]
        if self.mask is None:
            return x, None, labels
        mask = self.mask[index]
        length = max(int(mask.sum(1).max()), 1)        # trim padding shared by the batch
        return x[:, :length], mask[:, :length], labels


class Trainable:
    """``theta`` (flat float32), its ``layers`` and batched losses; see the module doc."""

    kind = ""

    def __init__(self, splits: dict[str, SplitData], num_classes: int, hw_arith: bool):
        self.splits, self.num_classes, self.hw_arith = splits, num_classes, hw_arith
        self.theta = torch.zeros(0)
        self.layers: list[tuple[str, slice]] = []

    @property
    def d(self) -> int:
        return self.theta.numel()

    def logits(self, thetas: torch.Tensor, x, mask) -> torch.Tensor:
        """``(K, B, C)`` logits of the copies ``thetas (K, d)`` on one batch."""
        raise NotImplementedError

    def losses(self, thetas: torch.Tensor, index, split: str = "train") -> torch.Tensor:
        """Mean cross-entropy of each copy on the batch ``index`` of ``split`` -> ``(K,)``."""
        x, mask, labels = self.splits[split].batch(index)
        with torch.no_grad():
            logits = self.logits(thetas, x, mask)
        k, b, c = logits.shape
        return F.cross_entropy(logits.reshape(k * b, c), labels.repeat(k),
                               reduction="none").view(k, b).mean(1)

    @torch.no_grad()
    def evaluate(self, theta: torch.Tensor, split: str, batch: int = 256) -> tuple[float, float]:
        """``(accuracy, mean loss)`` of ``theta`` on a whole split."""
        data = self.splits[split]
        correct, total_loss = 0, 0.0
        for start in range(0, len(data), batch):
            index = np.arange(start, min(start + batch, len(data)))
            x, mask, labels = data.batch(index)
            logits = self.logits(theta[None], x, mask)[0]
            correct += int((logits.argmax(-1) == labels).sum())
            total_loss += float(F.cross_entropy(logits, labels, reduction="sum"))
        return correct / max(len(data), 1), total_loss / max(len(data), 1)

    def _head(self, thetas: torch.Tensor, pooled: torch.Tensor, per_copy: bool):
        """Head logits; ``pooled`` is ``(B, H)`` shared or ``(K, B, H)`` per copy."""
        head = self.layers[-1][1]
        hidden = pooled.shape[-1]
        w = thetas[:, head][:, :self.num_classes * hidden].reshape(-1, self.num_classes,
                                                                  hidden)
        b = thetas[:, head][:, self.num_classes * hidden:]
        if self.hw_arith:
            return int8_linear(pooled, w, b, per_copy_x=per_copy)
        if per_copy:
            return torch.baddbmm(b[:, None, :], pooled, w.transpose(1, 2))
        return torch.einsum("bh,kch->kbc", pooled, w) + b[:, None, :]


def _flat_head(head_init: torch.Tensor | None, num_classes: int, hidden: int) -> torch.Tensor:
    weight = torch.zeros(num_classes, hidden) if head_init is None else head_init.float()
    return torch.cat([weight.reshape(-1), torch.zeros(num_classes)])


class HeadTrainable(Trainable):
    kind = "head"

    def __init__(self, splits, num_classes, hw_arith=False, head_init=None):
        super().__init__(splits, num_classes, hw_arith)
        hidden = splits["train"].x.shape[-1]
        self.theta = _flat_head(head_init, num_classes, hidden)
        self.layers = [("head", slice(0, self.d))]

    def logits(self, thetas, x, mask):
        return self._head(thetas, x, per_copy=False)


class LoraFATrainable(Trainable):
    kind = "lora-fa"

    def __init__(self, splits, num_classes, encoder_layers, rank=16, alpha=32.0, seed=0,
                 hw_arith=False, head_init=None):
        super().__init__(splits, num_classes, hw_arith)
        self.encoder_layers = list(encoder_layers)
        self.rank, self.scale = rank, alpha / rank
        generator = torch.Generator().manual_seed(seed)
        self.lora_a, parts, offset = [], [], 0
        for i, layer in enumerate(self.encoder_layers):
            a_mats, start = {}, offset
            for name in LORA_TARGETS:
                linear = layer.get_submodule(LAYER_LINEARS[name])
                bound = 1.0 / linear.in_features ** 0.5
                a_mats[name] = (torch.rand(rank, linear.in_features, generator=generator)
                                * 2 - 1) * bound
                parts.append(torch.zeros(linear.out_features * rank))
                offset += linear.out_features * rank
            self.lora_a.append(a_mats)
            self.layers.append((f"encoder.{i}.lora_b", slice(start, offset)))
        hidden = splits["train"].x.shape[-1]
        parts.append(_flat_head(head_init, num_classes, hidden))
        self.layers.append(("head", slice(offset, offset + parts[-1].numel())))
        self.theta = torch.cat(parts)

    def _b_matrices(self, thetas, i):
        block = thetas[:, self.layers[i][1]]
        size = block.shape[1] // len(LORA_TARGETS)
        return {name: block[:, j * size:(j + 1) * size].reshape(len(thetas), -1, self.rank)
                for j, name in enumerate(LORA_TARGETS)}

    def _linear(self, layer, a_mats, b_mats):
        modules = {name: layer.get_submodule(path) for name, path in LAYER_LINEARS.items()}

        def linear(name, x):
            module = modules[name]
            per_copy = x.dim() == 4
            if self.hw_arith:
                if name in b_mats:
                    weight = module.weight + self.scale * b_mats[name] @ a_mats[name]
                    bias = module.bias.expand(len(weight), -1)
                    return int8_linear(x, weight, bias, per_copy_x=per_copy)
                if per_copy:
                    return torch.stack([int8_linear(copy, module.weight, module.bias)
                                        for copy in x])
                return int8_linear(x, module.weight, module.bias)
            y = F.linear(x, module.weight, module.bias)
            if name not in b_mats:
                return y
            xa = x @ a_mats[name].T                               # (B|K, ..., r)
            bt = b_mats[name].transpose(1, 2)                     # (K, r, out)
            delta = (xa.flatten(-3, -2) if per_copy else xa.flatten(0, 1)) @ bt
            return y + self.scale * delta.view(len(bt), *x.shape[-3:-1], -1)
        return linear

    def logits(self, thetas, x, mask):
        h = x
        for i, layer in enumerate(self.encoder_layers):
            h = bert_layer(layer, h, mask, self._linear(layer, self.lora_a[i],
                                                        self._b_matrices(thetas, i)))
        if h.dim() == 3:                                   # no adapted layer touched it
            h = h.expand(len(thetas), *h.shape)
        return self._head(thetas, mean_pool(h, mask), per_copy=True)


class FullTrainable(Trainable):
    kind = "full"

    def __init__(self, splits, num_classes, model, hw_arith=False, head_init=None):
        super().__init__(splits, num_classes, hw_arith)
        self.model = model
        self.names, self.shapes, parts = [], [], []
        for name, parameter in model.named_parameters():
            self.names.append(name)
            self.shapes.append(parameter.shape)
            parts.append(parameter.detach().reshape(-1).float())
        for name, block in self._group_names():
            self.layers.append((name, block))
        hidden = model.config.hidden_size
        parts.append(_flat_head(head_init, num_classes, hidden))
        total = sum(p.numel() for p in parts[:-1])
        self.layers.append(("head", slice(total, total + parts[-1].numel())))
        self.theta = torch.cat(parts)

    def _group_names(self):
        """Contiguous slices per top-level block (embeddings, encoder.layer.i, ...)."""
        groups, offset = [], 0
        for name, shape in zip(self.names, self.shapes):
            key = ".".join(name.split(".")[:3]) if name.startswith("encoder.layer.") \
                else name.split(".")[0]
            size = int(np.prod(shape))
            if groups and groups[-1][0] == key:
                groups[-1] = (key, slice(groups[-1][1].start, offset + size))
            else:
                groups.append((key, slice(offset, offset + size)))
            offset += size
        return groups

    def logits(self, thetas, x, mask):
        out = []
        for theta in thetas:
            params, offset = {}, 0
            for name, shape in zip(self.names, self.shapes):
                size = int(np.prod(shape))
                params[name] = theta[offset:offset + size].view(shape)
                offset += size
            hidden = functional_call(self.model, params, (x,),
                                     {"attention_mask": mask}).last_hidden_state
            out.append(self._head(theta[None], mean_pool(hidden, mask), per_copy=False)[0])
        return torch.stack(out)

