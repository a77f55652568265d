"""MiniLM in the accelerator's arithmetic: calibration, quantized maps, and the host's forward.

**Host and units.** The encoder's float parts (embeddings, attention scores and softmax,
LayerNorm, GELU, residuals, mean pooling, the loss) run on the host in float32 (with
``nonlinear`` ``float``; ``integer`` below):
:func:`zoforge.golden.models.bert_layer`, one function for the golden run and the
co-simulation. Every linear map is a call (:mod:`.calls`) made by the host's ``linear``
callback (:class:`IntegerLinears`): quantize the float input to int8, call a unit,
dequantize the int8 result (with ``nonlinear`` ``integer``, ``ffn_out`` instead takes
``ffn_in``'s GELU job's int8 result, below). ``key``, ``attn_out``, ``ffn_in``, ``ffn_out`` and the head run
on the GEMM engine; ``query`` and ``value`` (:data:`~.config.ADAPTED`) on the ZO layer,
which computes the frozen ``X·W`` and the adapter ``U·Tp`` together.

**Quantization** (post-training, on ``calibration`` training examples through the float
model, padding tokens included):

* weights (smoothed, below): int8 per output channel, ``s_w[n] = max_k |W[n, k]| / 127``,
  ``w = clamp(round_half_even(W / s_w), -127, 127)``;
* smoothing (SmoothQuant, Xiao et al. 2023): BERT's few outlier features would take a
  per-tensor int8 input's whole range, so each map's input channel k is divided by
  ``s_k = max|x_k|^0.5 / max_n|W[n, k]|^0.5`` on the host and W's column k multiplied by it
  (the product is unchanged; A is multiplied the same way);
* activations: int8 per tensor, ``s_x = percentile(|x / s|, ACT_PERCENTILE) / 127`` of each
  map's (smoothed) input, ``x = clamp(round_half_even(x / s / s_x), ±127)``;
* bias: int32 ``round_half_even(b / (s_x s_w[n]))``; output: the engine's requantizer
  (:func:`~zoforge.golden.engine.requantize`, per column ``mult/2^shift ≈ s_x s_w[n] /
  s_y[n]``) to int8 in per-column scales ``s_y[n] = max |y[:, n]| / 127`` (the requantizer
  is per column anyway, so BERT's outlier features keep their range without costing the
  others theirs); the head is raw (int32 logits times ``s_x s_w[n]``);
* LoRA-FA: ``A`` (``K x r``, uniform in ``±1/sqrt(K)`` from the seed, frozen) int8 per
  tensor; ``U = requant(X·A)`` in ``s_u = percentile(|x A|) / 127``; the trained operand
  ``Tp`` (int16, master ``T >> 8``) adds ``U·Tp`` to the accumulators of ``X·W``, so B's
  float value is ``Tp * s_x s_w[n] / s_u`` (:attr:`Adapter.column_scale`). On the ZO
  layer the host adds the bias and applies the same requantizer to the int32 result.

**Attention** (``cfg.attention``): ``host``, float32 as above; ``engines``, Q·K^T and P·V
as the engine's raw jobs per sequence and head (:mod:`.attention`: q, k, v int8 per tensor
in ``s = percentile(|t|, ACT_PERCENTILE) / 127`` of the float model's query, key and value
outputs, P int8 in 1/127), :class:`IntegerLinears` passing it to ``bert_layer``.

**Nonlinear functions** (``cfg.nonlinear``): ``float``, float32 as above; ``integer``, GELU,
the LayerNorms and the softmax as I-BERT's integer kernels (:mod:`.nonlinear`, the softmax
in :mod:`.attention`), their 16-bit input scales calibrated on the same examples (the peak
``|x|`` of the float model's GELU and LayerNorm inputs and, with host attention, scores).
The GELU is the engine's: ``ffn_in``'s call is a GELU job (:func:`.nonlinear.gelu_job`,
:mod:`zoforge.golden.engine_gelu`) whose int8 result is ``ffn_out``'s call's input as it
is, so between the two maps the host computes nothing: per column ``n`` the job's first
requantizer is ``quantize_multiplier(s_x s_w[n] / s)`` (the accumulators to i-GELU's int16
input of scale ``s``) and its second ``quantize_multiplier(g / (m[n] s'))`` (i-GELU's output
scale ``g`` to ``ffn_out``'s int8 input, with ``ffn_out``'s smoothing ``m[n]`` and per-tensor
input scale ``s'`` folded in); ``ffn_in``'s own output scales are not used. The LayerNorms
stay on the host's float32 values (quantize to 16 bits, kernel, dequantize).

The float twin (:class:`FloatLinears`) is the same model with every map in float32 and the
adapter's B = ``Tp_f * column_scale`` for a float operand ``Tp_f`` (same parametrization,
no rounding anywhere, float attention and nonlinear functions whatever the configuration):
the "same in float" of the accuracy comparison.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from zoforge.errors import ConfigError
from zoforge.golden.engine import RequantParams, quantize_multiplier, requantize
from zoforge.golden.finetune.attention import (WIDE_LEVELS, AttentionScales,
                                               EngineAttention, HostIntegerAttention,
                                               quantize_activation)
from zoforge.golden.finetune.calls import AdapterCall, EngineCall
from zoforge.golden.finetune.config import ADAPTED, FinetuneConfig
from zoforge.golden.finetune.integer_ops import GeluParams, LayerNormParams, SoftmaxParams
from zoforge.golden.finetune.nonlinear import (NONLINEAR_PERCENTILE, BlockNonlinear,
                                               IntegerNonlinear, gelu_job, layer_view,
                                               norm_modules)
from zoforge.golden.models import LAYER_LINEARS, bert_layer, mean_pool

__all__ = ["ACT_PERCENTILE", "QuantLinear", "Adapter", "QuantModel", "IntegerLinears",
           "FloatLinears", "quantize_activation", "smoothing", "SMOOTH_ALPHA", "check_model_limits", "adapter_names"]

ACT_PERCENTILE = 99.99


def _identity(x: torch.Tensor) -> torch.Tensor:
    """``bert_layer``'s ``gelu`` where ``ffn_in``'s call is the engine's GELU job."""
    return x

SMOOTH_ALPHA = 0.5      # SmoothQuant's migration strength (Xiao et al., 2023)


def _scale(values: list[torch.Tensor], percentile: float | None = None,
           levels: int = 127) -> float:
    """Per-tensor scale: the ``percentile`` (default :data:`ACT_PERCENTILE`) of ``|values|``
    over ``levels`` (1 where it is 0)."""
    flat = torch.cat([v.reshape(-1) for v in values]).abs().double().numpy()
    q = ACT_PERCENTILE if percentile is None else percentile
    peak = float(np.percentile(flat, q)) if flat.size else 0.0
    return peak / levels if peak > 0 else 1.0


def _wide_scale(values: list[torch.Tensor]) -> float:
    """An integer unit's 16-bit input scale (:mod:`.nonlinear`)."""
    return _scale(values, NONLINEAR_PERCENTILE, WIDE_LEVELS)


def _head_scores(q: torch.Tensor, k: torch.Tensor, heads: int) -> torch.Tensor:
    """The attention scores ``q·k^T / sqrt(d)`` per head of the maps' outputs ``q``, ``k``
    (``(B, L, H)``), for calibration."""
    q, k = (t.reshape(*t.shape[:-1], heads, -1).transpose(-3, -2) for t in (q, k))
    return q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])


def smoothing(inputs: list[torch.Tensor], weight: torch.Tensor) -> torch.Tensor:
    """SmoothQuant's per-input-channel factors ``s_k = max|x_k|^a / max_n|W[n, k]|^(1-a)``
    (``a`` = :data:`SMOOTH_ALPHA`; 1 where a channel is all zero)."""
    x_peak = torch.cat([x.reshape(-1, x.shape[-1]) for x in inputs]).abs().double().amax(0)
    w_peak = weight.abs().amax(0)
    s = x_peak ** SMOOTH_ALPHA / w_peak.clamp_min(1e-12) ** (1 - SMOOTH_ALPHA)
    return torch.where((x_peak > 0) & (w_peak > 0), s, torch.ones_like(s))


def _column_scales(values: list[torch.Tensor]) -> torch.Tensor:
    """Per-column output scales: ``max |y[:, n]| / 127`` over the calibration outputs."""
    flat = torch.cat([v.reshape(-1, v.shape[-1]) for v in values]).abs().double()
    peak = flat.amax(0)
    return torch.where(peak > 0, peak / 127, torch.ones_like(peak))


@dataclass
class QuantLinear:
    """One linear map in engine form: int8 ``weight (K, N)`` with per-column scales, int32
    ``bias``, the input scale and (``out_scale`` not None) the int8 output's requantizer."""

    weight: torch.Tensor
    weight_scale: torch.Tensor           # float64 (N,)
    smooth: torch.Tensor                 # float64 (K,): the host divides x by it
    bias: torch.Tensor                   # int32 (N,)
    in_scale: float
    out_scale: torch.Tensor | None       # float64 (N,): the int8 output's scale per column
    params: RequantParams | None
    float_weight: torch.Tensor           # float32 (N, K), the model's
    float_bias: torch.Tensor

    @classmethod
    def of(cls, module: torch.nn.Linear, inputs: list[torch.Tensor],
           out_scale: torch.Tensor | None) -> "QuantLinear":
        """Quantize ``module`` for the calibration ``inputs`` (see the module docstring)."""
        w = module.weight.detach().double()
        smooth = smoothing(inputs, w)
        x_scale = _scale([x / smooth.to(x.dtype) for x in inputs])
        w = w * smooth[None, :]
        peak = w.abs().amax(dim=1)
        w_scale = torch.where(peak > 0, peak / 127, torch.ones_like(peak))
        weight = torch.round(w / w_scale[:, None]).clamp(-127, 127).to(torch.int8).T
        acc_scale = x_scale * w_scale
        bias = torch.round(module.bias.detach().double() / acc_scale).to(torch.int32)
        params = None if out_scale is None else quantize_multiplier(acc_scale / out_scale)
        return cls(weight.contiguous(), w_scale, smooth, bias, x_scale, out_scale, params,
                   module.weight.detach().float(), module.bias.detach().float())

    def quantize_input(self, x: torch.Tensor) -> torch.Tensor:
        """The host's int8 input: ``quantize_activation(x / smooth, in_scale)``."""
        return quantize_activation(x.double() / self.smooth, self.in_scale)

    @property
    def acc_scale(self) -> torch.Tensor:
        """The accumulators' scale per column, ``s_x s_w[n]``."""
        return self.in_scale * self.weight_scale

    def engine_call(self, name: str, x: torch.Tensor) -> EngineCall:
        mult, shift = (None, None) if self.params is None else \
            self.params.per_column(self.weight.shape[1])
        return EngineCall(name, x, self.weight, self.bias, mult, shift)

    def output(self, acc: torch.Tensor) -> torch.Tensor:
        """The host's requantization of int32 accumulators (ZO-layer results): bias added,
        then the engine's requantizer (int8)."""
        return requantize(acc + self.bias.to(torch.int64), self.params)


@dataclass
class Adapter:
    """LoRA-FA on one map: its frozen map, A in float and int8, U's requantizer."""

    name: str
    linear: QuantLinear
    a_float: torch.Tensor                # float32 (K, r)
    a: torch.Tensor                      # int8 (K, r)
    u_scale: float
    u_params: RequantParams

    @property
    def column_scale(self) -> torch.Tensor:
        """B's float value per operand unit, per output column: ``s_x s_w[n] / s_u``."""
        return self.linear.acc_scale / self.u_scale

    @property
    def shape(self) -> tuple[int, int]:
        """The trained matrix ``(r, N)``."""
        return self.a.shape[1], self.linear.weight.shape[1]


def adapter_names(blocks: int, first: int = 0) -> list[str]:
    """The adapted maps in forward order (the generator's order) of blocks ``first`` to
    ``blocks - 1``: ``block0.query``, ..."""
    return [f"block{b}.{name}" for b in range(first, blocks) for name in ADAPTED]


def check_model_limits(cfg: FinetuneConfig, model) -> None:
    """``blocks`` and ``seq_len`` within the loaded model's (one-line errors); with
    ``attention`` ``engines`` also ``seq_len`` (P·V's K) at most the model's widest map's K,
    the depth the engine is sized for (its ``max_k``, ``zoforge.sim.finetune_cosim.
    engine_design``)."""
    layers = model.config.num_hidden_layers
    if cfg.blocks > layers:
        raise ConfigError("blocks", f"an integer with 1 <= value <= {layers} (the model's "
                          "encoder blocks)", cfg.blocks)
    positions = model.config.max_position_embeddings
    if cfg.seq_len > positions:
        raise ConfigError("seq_len", f"an integer with 2 <= value <= {positions} (the "
                          "model's positions)", cfg.seq_len)
    deepest = max(model.config.hidden_size, model.config.intermediate_size)
    if cfg.attention == "engines" and cfg.seq_len > deepest:
        raise ConfigError("seq_len", f"an integer with 2 <= value <= {deepest} with "
                          "attention engines (P.V's K is seq_len; the engine is as deep as "
                          "the model's widest map)", cfg.seq_len)


class QuantModel:
    """The first ``cfg.blocks`` blocks of ``model`` quantized on the calibration batch
    ``(ids, mask)``, with the adapters and the frozen head ``head`` (``nn.Linear``, on the
    float model's pooled features)."""

    def __init__(self, cfg: FinetuneConfig, model, ids, mask, head: torch.nn.Linear):
        check_model_limits(cfg, model)
        self.cfg, self.model = cfg, model
        self.blocks = list(model.encoder.layer[:cfg.blocks])
        self.head_float = head
        stats: dict[str, list[torch.Tensor]] = {}
        generator = torch.Generator().manual_seed(cfg.seed)
        self.a_float = {}
        for b, layer in enumerate(self.blocks):
            for name in ADAPTED:
                k = layer.get_submodule(LAYER_LINEARS[name]).in_features
                self.a_float[f"block{b}.{name}"] = ((torch.rand(cfg.rank, k, generator=generator)
                                                    * 2 - 1) * k ** -0.5).T.contiguous()
        with torch.no_grad():
            pooled = self._float_forward(ids, mask, stats)
            stats["head.in"] = [pooled]
        self.linears: dict[str, QuantLinear] = {}
        for b, layer in enumerate(self.blocks):
            for name, path in LAYER_LINEARS.items():
                key = f"block{b}.{name}"
                self.linears[key] = QuantLinear.of(layer.get_submodule(path),
                                                   stats[key + ".in"],
                                                   _column_scales(stats[key + ".out"]))
        self.head = QuantLinear.of(head, stats["head.in"], None)
        self.attention_scales = {
            f"block{b}": AttentionScales(*(_scale(stats[f"block{b}.{name}.out"])
                                           for name in ("query", "key", "value")))
            for b in range(cfg.blocks)} if cfg.attention == "engines" else {}
        self.nonlinear = self._nonlinear(stats) if cfg.nonlinear == "integer" else None
        self.adapters: dict[str, Adapter] = {}
        for key in adapter_names(cfg.blocks, cfg.first_adapted):
            linear = self.linears[key]
            a_smooth = self.a_float[key].double() * linear.smooth[:, None]
            peak = float(a_smooth.abs().max())
            a_scale = peak / 127 if peak > 0 else 1.0
            a = torch.round(a_smooth / a_scale).clamp(-127, 127).to(torch.int8)
            u_scale = _scale(stats[key + ".u"])
            self.adapters[key] = Adapter(key, linear, self.a_float[key], a, u_scale,
                                         quantize_multiplier(linear.in_scale * a_scale
                                                             / u_scale))

    def _nonlinear(self, stats) -> IntegerNonlinear:
        """The integer units' constants from the calibration ``stats`` (module docstring); a
        scale the units are not made for: one line naming ``nonlinear``."""
        blocks = {}
        for b, layer in enumerate(self.blocks):
            key, modules = f"block{b}", norm_modules(layer)
            heads = layer.attention.self.num_attention_heads
            host = self.cfg.attention != "engines"
            try:
                norms = tuple(LayerNormParams.of(_wide_scale(stats[f"{key}.{name}.in"]),
                                                 modules[name].weight, modules[name].bias,
                                                 modules[name].eps) for name in modules)
                softmax = SoftmaxParams.of(_wide_scale([
                    _head_scores(q, k, heads)
                    for q, k in zip(stats[key + ".query.out"], stats[key + ".key.out"])])
                    if host else self.attention_scales[key].scores(
                        layer.attention.self.attention_head_size))
                gelu = GeluParams.of(_wide_scale(stats[key + ".ffn_in.out"]))
            except ConfigError as error:
                raise ConfigError("nonlinear", f"float for this model ({key} has a calibrated "
                                  f"input scale of {error.got:g}, where an integer unit "
                                  f"takes {error.allowed})", "integer") from None
            ffn_in, ffn_out = (self.linears[f"{key}.{name}"] for name in ("ffn_in", "ffn_out"))
            try:
                job = gelu_job(gelu, ffn_in.acc_scale, ffn_out.smooth * ffn_out.in_scale)
            except ConfigError as error:
                raise ConfigError("nonlinear", f"float for this model ({key}'s GELU job "
                                  f"needs {error.parameter} {error.got}, where it takes "
                                  f"{error.allowed})", "integer") from None
            blocks[key] = BlockNonlinear(job, norms, softmax, host)
        return IntegerNonlinear(blocks)

    def _float_forward(self, ids, mask, stats) -> torch.Tensor:
        """The float model's pooled features, recording every map's input and output (and
        with ``nonlinear`` ``integer`` the LayerNorms' inputs)."""
        h = self.model.embeddings(input_ids=ids)
        for b, layer in enumerate(self.blocks):
            modules = {name: layer.get_submodule(path) for name, path in LAYER_LINEARS.items()}

            def linear(name, x, b=b, modules=modules):
                key = f"block{b}.{name}"
                y = F.linear(x, modules[name].weight, modules[name].bias)
                stats.setdefault(key + ".in", []).append(x)
                stats.setdefault(key + ".out", []).append(y)
                if key in self.a_float:
                    stats.setdefault(key + ".u", []).append(x @ self.a_float[key])
                return y

            def norm(name, x, b=b, modules=norm_modules(layer)):
                stats.setdefault(f"block{b}.{name}.in", []).append(x)
                return modules[name](x)
            view = layer if self.cfg.nonlinear == "float" else layer_view(layer, norm)
            h = bert_layer(view, h, mask, linear)
        return mean_pool(h, mask)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self.model.embeddings(input_ids=ids)

    def _blocks(self, h, mask, linears, start: int, stop: int) -> torch.Tensor:
        attention = getattr(linears, "attention", None)     # None: float attention
        nonlinear = getattr(linears, "nonlinear", None)     # None: float GELU, LayerNorm
        for b in range(start, stop):
            layer = self.blocks[b] if nonlinear is None else \
                nonlinear.layer(f"block{b}", self.blocks[b])
            h = bert_layer(layer, h, mask,
                           lambda name, x, b=b: linears(f"block{b}.{name}", x),
                           None if attention is None else
                           lambda q, k, v, m, b=b: attention(f"block{b}", q, k, v, m),
                           torch.nn.functional.gelu if nonlinear is None else _identity)
        return h

    def frozen_input(self, ids, mask, linears) -> torch.Tensor:
        """The input of the first adapted block (``cfg.first_adapted``): the embeddings and
        the frozen blocks below it, by ``linears``; it does not depend on the adapters, so
        a caller may compute it once per example (every value is row-local: an example's
        result is the same in any batch, ``tests/test_finetune_fast.py``)."""
        with torch.no_grad():
            return self._blocks(self.embed(ids), mask, linears, 0, self.cfg.first_adapted)

    def forward(self, ids, mask, linears, frozen: torch.Tensor | None = None) -> torch.Tensor:
        """float64 logits ``(B, classes)`` with every map computed by ``linears``
        (:class:`IntegerLinears` or :class:`FloatLinears`); autograd where enabled.
        ``frozen``: these examples' :meth:`frozen_input` (computed here if None)."""
        h = self.frozen_input(ids, mask, linears) if frozen is None else frozen
        h = self._blocks(h, mask, linears, self.cfg.first_adapted, len(self.blocks))
        return linears.head(mean_pool(h, mask))

    def logits(self, ids, mask, linears, frozen: torch.Tensor | None = None) -> torch.Tensor:
        """:meth:`forward` without autograd."""
        with torch.no_grad():
            return self.forward(ids, mask, linears, frozen)


class IntegerLinears:
    """The host's ``linear`` callback in the accelerator's arithmetic: every map one call to
    ``units`` (a :class:`~zoforge.golden.finetune.calls.GoldenUnits` or the RTL's), the
    adapters with ``masters`` (name -> int64 ``(r, N)``), perturbation ``sign`` and
    ``eps_shift``; the first adapter call of a perturbed pass saves (``+``) or restores
    (``-``) the generator. ``attention``: the :class:`~.attention.EngineAttention` on the
    same units (``cfg.attention`` ``engines``), the :class:`~.attention.HostIntegerAttention`
    (host, ``nonlinear`` ``integer``), or None (float attention). ``nonlinear``: the model's
    :class:`~.nonlinear.IntegerNonlinear` or None; with one, ``ffn_in``'s call is the
    block's GELU job (``EngineCall(..., None, None, gelu=...)``), its int8 result is kept
    and ``ffn_out``'s call takes it as its ``x`` (:mod:`.nonlinear`); ``ffn_in`` returns to
    ``bert_layer`` that int8 result itself (not dequantized: the fabric does not either),
    which comes back, through ``bert_layer``'s identity ``gelu``, as ``ffn_out``'s ``x``,
    unused but for its shape. (``ffn_in`` and ``ffn_out`` are
    engine maps: :data:`~.config.ADAPTED` has neither.)"""

    def __init__(self, model: QuantModel, units, masters: dict[str, torch.Tensor],
                 sign: int = 0, eps_shift: int = 0):
        self.model, self.units, self.masters = model, units, masters
        self.sign, self.eps_shift = sign, eps_shift
        self.first = True
        self.nonlinear = model.nonlinear
        integer = self.nonlinear is not None
        softmax = self.nonlinear.softmax if integer else None
        if model.cfg.attention == "engines":
            self.attention = EngineAttention(model.attention_scales, units, softmax)
        else:
            self.attention = HostIntegerAttention(softmax) if integer else None
        self._gelu: dict[str, torch.Tensor] = {}

    def __call__(self, key: str, x: torch.Tensor) -> torch.Tensor:
        block, name = key.split(".")
        linear = self.model.linears[key]
        shape = x.shape
        if self.nonlinear is not None and name == "ffn_out":
            xq = self._gelu.pop(block)                  # the GELU job's int8 result
        else:
            xq = linear.quantize_input(x.reshape(-1, shape[-1]))
        if self.nonlinear is not None and name == "ffn_in":
            job = self.nonlinear.blocks[block].gelu
            y = self.units(EngineCall(key, xq, linear.weight, linear.bias, None, None,
                                      gelu=job)).to(torch.int8)
            self._gelu[block] = y
            return y.reshape(*shape[:-1], -1)           # ffn_out's x: unused but its shape
        y = self._map(key, linear, xq)
        return (y.double() * linear.out_scale).float().reshape(*shape[:-1], -1)

    def _map(self, key: str, linear: QuantLinear, xq: torch.Tensor) -> torch.Tensor:
        """The int8 result of map ``key`` on the int8 input ``xq``: an engine job, or a
        ZO-layer call and the host's requantizer where ``key`` has an adapter."""
        adapter = self.model.adapters.get(key)
        if adapter is None:
            return self.units(linear.engine_call(key, xq))
        first, self.first = self.first, False
        return linear.output(self.units(AdapterCall(
            key, xq, linear.weight, adapter.a, self.masters[key],
            int(adapter.u_params.multiplier), int(adapter.u_params.shift), self.sign,
            self.eps_shift, save=first and self.sign > 0,
            restore=first and self.sign < 0)))

    def head(self, pooled: torch.Tensor) -> torch.Tensor:
        head = self.model.head
        xq = head.quantize_input(pooled)
        return self.units(head.engine_call("head", xq)).double() * head.acc_scale


class FloatLinears:
    """The float twin of :class:`IntegerLinears`: float32 maps; each adapter adds
    ``(x A)(Tp_f * column_scale)`` with ``Tp_f = T_f + sign * z * 2^-eps_shift``, ``z`` the
    next perturbation from ``draw(name, shape)`` (the same stream, in the same order);
    attention and the nonlinear functions in float32 (``attention``, ``nonlinear`` None)."""

    attention = nonlinear = None

    def __init__(self, model: QuantModel, masters: dict[str, torch.Tensor], draw=None,
                 sign: int = 0, eps_shift: int = 0):
        self.model, self.masters, self.draw = model, masters, draw
        self.sign, self.eps_shift = sign, eps_shift

    def __call__(self, key: str, x: torch.Tensor) -> torch.Tensor:
        linear = self.model.linears[key]
        y = F.linear(x, linear.float_weight, linear.float_bias)
        adapter = self.model.adapters.get(key)
        if adapter is None:
            return y
        operand = self.masters[key]
        if self.sign:
            operand = operand + self.sign * self.draw(adapter.shape).double() \
                * 2.0 ** -self.eps_shift
        b = (operand * adapter.column_scale[None, :]).float()
        return y + (x @ adapter.a_float) @ b

    def head(self, pooled: torch.Tensor) -> torch.Tensor:
        head = self.model.head_float
        return F.linear(pooled, head.weight, head.bias).double()
