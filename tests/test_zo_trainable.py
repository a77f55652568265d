"""Model, data and trainable layers: the functional BERT layer against Hugging Face, LoRA-FA
batching, the frozen-prefix cache, the integer (hardware) arithmetic and the data splits."""
import numpy as np
import pytest
import torch

from zoforge.errors import ConfigError
from zoforge.golden import data as data_mod
from zoforge.golden.engine import gemm_int32
from zoforge.golden.models import (bert_layer, frozen_linear, hidden_states, mean_pool,
                                   tiny_encoder, tokenize)
from zoforge.golden.zo.hwarith import int8_linear, quantize_symmetric
from zoforge.golden.zo.trainable import HeadTrainable, LoraFATrainable, SplitData

TEXTS = ["a fine film", "dull and far too long", "the best of the year, by far",
         "not worth it", "funny", "an utter mess of a plot with no heart at all"]


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny():
    model, tokenizer = tiny_encoder(seed=1, hidden=32, layers=2)
    ids, mask = tokenize(tokenizer, TEXTS, 16)
    return model, ids, mask


def test_functional_layer_matches_hugging_face(tiny):
    model, ids, mask = tiny
    reference = model(input_ids=ids, attention_mask=mask).last_hidden_state
    ours = hidden_states(model, ids, mask, 2)
    valid = mask.bool()
    assert torch.allclose(ours[valid], reference[valid], atol=1e-5)


def lora(tiny, hw_arith=False, seed=0):
    model, ids, mask = tiny
    hidden = hidden_states(model, ids, mask, 1)
    labels = np.array([1, 0, 1, 0, 1, 0])
    split = SplitData(hidden, mask, labels)
    trainable = LoraFATrainable({"train": split, "val": split, "test": split}, 2,
                                model.encoder.layer[1:], rank=4, alpha=8, seed=seed,
                                hw_arith=hw_arith)
    return trainable, model, ids, mask, labels


def test_lora_fa_with_zero_b_is_the_frozen_model(tiny):
    trainable, model, ids, mask, labels = lora(tiny)
    head = torch.randn(trainable.layers[-1][1].stop - trainable.layers[-1][1].start)
    trainable.theta[trainable.layers[-1][1]] = head
    pooled = mean_pool(model(input_ids=ids, attention_mask=mask).last_hidden_state, mask)
    w, b = head[:64].view(2, 32), head[64:]
    logits = trainable.logits(trainable.theta[None], *trainable.splits["train"].batch(
        np.arange(6))[:2])[0]
    assert torch.allclose(logits, pooled @ w.T + b, atol=1e-4)


def test_lora_fa_copies_batch_like_single_copies(tiny):
    trainable, *_ = lora(tiny)
    thetas = torch.randn(5, trainable.d) * 0.3
    x, mask, _ = trainable.splits["train"].batch(np.arange(6))
    batched = trainable.logits(thetas, x, mask)
    single = torch.cat([trainable.logits(t[None], x, mask) for t in thetas])
    assert torch.allclose(batched, single, atol=1e-5)
    losses = trainable.losses(thetas, np.arange(6))
    assert losses.shape == (5,) and torch.isfinite(losses).all()


def test_lora_delta_is_scaled_b_times_a(tiny):
    trainable, model, ids, mask, _ = lora(tiny)
    theta = torch.randn(trainable.d) * 0.2
    x, m, _ = trainable.splits["train"].batch(np.arange(6))
    b = trainable._b_matrices(theta[None], 0)
    layer = model.encoder.layer[1]
    merged = {name: layer.get_submodule(path) for name, path in
              (("query", "attention.self.query"), ("value", "attention.self.value"))}
    plain = frozen_linear(layer)

    def linear(name, h):
        if name in merged:
            weight = merged[name].weight + 2.0 * b[name][0] @ trainable.lora_a[0][name]
            return torch.nn.functional.linear(h, weight, merged[name].bias)
        return plain(name, h)
    expected_hidden = bert_layer(layer, x, m, linear)
    head = theta[trainable.layers[-1][1]]
    expected = mean_pool(expected_hidden, m) @ head[:64].view(2, 32).T + head[64:]
    assert torch.allclose(trainable.logits(theta[None], x, m)[0], expected, atol=1e-4)


def test_int8_linear_is_the_engine_arithmetic():
    generator = torch.Generator().manual_seed(0)
    x, w, b = (torch.randn(*shape, generator=generator) for shape in ((7, 24), (5, 24), (5,)))
    xq, sx = quantize_symmetric(x)
    wq, sw = quantize_symmetric(w)
    assert xq.dtype == torch.int8 and int(xq.abs().max()) == 127
    acc = xq.numpy().astype(np.int64) @ wq.numpy().astype(np.int64).T \
        + np.round(b.double().numpy() / (sx * sw)).astype(np.int64)
    expected = torch.from_numpy(acc * (sx * sw)).float()
    assert torch.equal(int8_linear(x, w, b), expected)
    exact = xq.numpy().astype(np.int64) @ wq.numpy().astype(np.int64).T
    assert torch.equal(gemm_int32(xq, wq.T).long(), torch.from_numpy(exact))
    assert torch.allclose(int8_linear(x, w, b), x @ w.T + b, atol=0.15)


def test_hw_arith_trainables_stay_close_to_float(tiny):
    exact, *_ = lora(tiny)
    integer, *_ = lora(tiny, hw_arith=True)
    thetas = torch.randn(3, exact.d) * 0.2
    x, mask, _ = exact.splits["train"].batch(np.arange(6))
    a, b = exact.logits(thetas, x, mask), integer.logits(thetas, x, mask)
    assert not torch.equal(a, b)
    assert float((a - b).abs().max()) < 0.1 * float(a.abs().max()) + 0.05
    pooled = SplitData(torch.randn(6, 32), None, np.zeros(6))
    head = HeadTrainable({"train": pooled}, 2, hw_arith=True)
    head.theta.normal_()
    x, _, _ = pooled.batch(np.arange(6))
    w, bias = head.theta[:64].view(2, 32), head.theta[64:]
    assert torch.equal(head.logits(head.theta[None], x, None)[0], int8_linear(x, w, bias))


def test_splits_are_balanced_disjoint_and_fixed_by_seed():
    dataset = data_mod.load_dataset()
    assert dataset.label_names == ["negative", "positive"] and len(dataset.texts) > 12000
    first = data_mod.split(dataset, 3, 200, 50, 100)
    again = data_mod.split(dataset, 3, 200, 50, 100)
    other = data_mod.split(dataset, 4, 200, 50, 100)
    assert first.train.texts == again.train.texts and first.train.texts != other.train.texts
    for part, size in ((first.train, 200), (first.val, 50), (first.test, 100)):
        assert len(part.texts) == size and part.labels.mean() == 0.5
    sets = [set(p.texts) for p in (first.train, first.val, first.test)]
    assert not (sets[0] & sets[1] or sets[0] & sets[2] or sets[1] & sets[2])
    with pytest.raises(ConfigError, match="n_train"):
        data_mod.split(dataset, 0, 20000, 10, 10)


def test_custom_jsonl_data(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"text": "yes", "label": "b"}\n{"text": "no", "label": "a"}\n'
                    '{"text": "no", "label": "a"}\n')
    dataset = data_mod.load_dataset(path)
    assert dataset.texts == ["yes", "no"] and dataset.labels.tolist() == [1, 0]
    with pytest.raises(ConfigError, match="data"):
        data_mod.load_dataset(tmp_path / "missing.csv")
