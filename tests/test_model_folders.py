"""A model folder is untrusted input (issue 34): ``--model DIR`` goes through one guarded
loader (:mod:`zoforge.golden.model_folder`, via :func:`zoforge.golden.models.load_encoder`).

Every crafted folder below is refused through the command line with exit 2 and exactly one
line ``zoforge: error: --model must be ...`` naming what is wrong (no traceback, nothing on
stdout, ``--out`` not created), within a bounded time (``SIGALRM``: a FIFO must not hang).
The folders are made from a tiny BERT written here with the ``safetensors`` library (hidden
8, 2 blocks, the shipped MiniLM's tokenizer files) or from the shipped MiniLM itself; the
good ones must load to exactly the tensors written (read back by a second route). A
generated family replaces each config.json key by a wrong value and checks the outcome
against an oracle written here (a small budget by default, a larger one under ``-m slow``).
"""
from __future__ import annotations

import json
import math
import os
import pickle
import random
import re
import shutil
import signal
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from zoforge.cli import main
from zoforge.errors import ConfigError
from zoforge.golden import model_folder
from zoforge.golden.models import default_model_path, load_encoder, tokenize

#: The tiny BERT's config.json, written by hand (every key the guard reads, and a few it
#: ignores).
TINY = {"model_type": "bert", "architectures": ["BertModel"], "vocab_size": 30522,
        "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 12, "max_position_embeddings": 16, "type_vocab_size": 2,
        "hidden_act": "gelu", "layer_norm_eps": 1e-12, "pad_token_id": 0,
        "torch_dtype": "float32", "position_embedding_type": "absolute",
        "is_decoder": False, "initializer_range": 0.02, "use_cache": True,
        "transformers_version": "4.8.2", "_name_or_path": "tiny"}
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json",
                   "special_tokens_map.json")
#: Seconds any one refusal may take (the whole test is interrupted after it).
BOUND_S = 60


def tiny_tensors(cfg: dict, seed: int = 0, dtype=torch.float32, pooler: bool = False
                 ) -> dict[str, torch.Tensor]:
    """A BERT's tensors by name, written out by hand from ``cfg`` (independently of the
    module's table), random values."""
    g = torch.Generator().manual_seed(seed)
    h, f = cfg["hidden_size"], cfg["intermediate_size"]
    shapes = {"embeddings.word_embeddings.weight": (cfg["vocab_size"], h),
              "embeddings.position_embeddings.weight": (cfg["max_position_embeddings"], h),
              "embeddings.token_type_embeddings.weight": (cfg["type_vocab_size"], h),
              "embeddings.LayerNorm.weight": (h,), "embeddings.LayerNorm.bias": (h,)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        for name in ("attention.self.query", "attention.self.key", "attention.self.value",
                     "attention.output.dense"):
            shapes[p + name + ".weight"], shapes[p + name + ".bias"] = (h, h), (h,)
        shapes[p + "intermediate.dense.weight"] = (f, h)
        shapes[p + "intermediate.dense.bias"] = (f,)
        shapes[p + "output.dense.weight"], shapes[p + "output.dense.bias"] = (h, f), (h,)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[p + norm + ".weight"], shapes[p + norm + ".bias"] = (h,), (h,)
    if pooler:
        shapes["pooler.dense.weight"], shapes["pooler.dense.bias"] = (h, h), (h,)
    return {name: torch.randn(shape, generator=g).to(dtype) for name, shape in shapes.items()}


def write_folder(folder: Path, cfg: dict, tensors: dict | None = None,
                 tokenizer: bool = True) -> Path:
    """A model folder: config.json, model.safetensors (the ``safetensors`` library) and
    the shipped model's tokenizer files."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    save_file(tiny_tensors(cfg) if tensors is None else tensors,
              str(folder / "model.safetensors"))
    if tokenizer:
        for name in TOKENIZER_FILES:
            shutil.copyfile(default_model_path() / name, folder / name)
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return write_folder(tmp_path_factory.mktemp("tiny") / "model", TINY)


@pytest.fixture
def copy(tiny, tmp_path):
    """A fresh copy of the tiny folder to damage."""
    def make(name: str = "model") -> Path:
        return Path(shutil.copytree(tiny, tmp_path / name))
    return make


@pytest.fixture(autouse=True)
def bounded():
    """Every test here ends within BOUND_S seconds (a hang fails instead of blocking)."""
    def expire(signum, frame):
        raise TimeoutError(f"more than {BOUND_S} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(BOUND_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def read_header(path: Path) -> tuple[dict, bytes]:
    """A safetensors file's header table and its data bytes, parsed by hand."""
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def write_header(path: Path, header: dict, data: bytes) -> None:
    text = json.dumps(header).encode()
    path.write_bytes(len(text).to_bytes(8, "little") + text + data)


def set_config(folder: Path, **changes) -> None:
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(changes)
    (folder / "config.json").write_text(json.dumps(cfg))


def refused_by_cli(folder, tmp_path, capsys) -> str:
    """``zoforge finetune --model FOLDER``'s one error line (after checking exit 2, one
    line, nothing on stdout, no traceback, ``--out`` not created)."""
    out = tmp_path / "out"
    code = main(["finetune", "--model", str(folder), "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 2, captured
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and captured.err.endswith("\n"), captured.err
    assert lines[0].startswith("zoforge: error: --model must be "), lines[0]
    assert "Traceback" not in captured.err and "\x1b" not in captured.err
    assert not out.exists()
    return lines[0]


# -- good folders load to exactly what they hold ------------------------------------------

def test_the_shipped_model_loads_every_tensor_of_its_file():
    """MiniLM through the guard: every parameter equals the file's tensor read by the
    ``safetensors`` library, the config values equal config.json's, the pooler is kept
    (the file has one), the position_ids buffer is arange (not read from the file), and
    the tokenizer gives vocab.txt's line numbers for known words."""
    folder = default_model_path()
    model, tokenizer = load_encoder()
    written = load_file(str(folder / "model.safetensors"))
    state = model.state_dict()
    assert set(state) == set(written) - {"embeddings.position_ids"}
    for name, tensor in state.items():
        assert torch.equal(tensor, written[name]), name
    config = json.loads((folder / "config.json").read_text())
    for key in model_folder.SIZE_KEYS + ("layer_norm_eps", "pad_token_id"):
        assert getattr(model.config, key) == config[key], key
    assert torch.equal(model.embeddings.position_ids[0], torch.arange(512))
    assert not model.training and not any(p.requires_grad for p in model.parameters())
    vocab = (folder / "vocab.txt").read_text().splitlines()
    ids, mask = tokenize(tokenizer, ["a good movie"], 6)
    assert ids.tolist() == [[vocab.index(w) for w in ("[CLS]", "a", "good", "movie",
                                                      "[SEP]", "[PAD]")]]
    assert mask.tolist() == [[1, 1, 1, 1, 1, 0]]


def test_a_tiny_folder_loads_exactly_its_tensors(tiny, capfd):
    """The tiny folder: each parameter equals what was written, the config's sizes and
    eps, no pooler (none written), and nothing printed while loading at Hugging Face's
    most verbose level (its load report and warnings silenced; the level restored after)."""
    from transformers.utils import logging as hf_logging
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity(hf_logging.DEBUG)
    try:
        model, tokenizer = load_encoder(tiny)
        assert hf_logging.get_verbosity() == hf_logging.DEBUG
    finally:
        hf_logging.set_verbosity(level)
    assert capfd.readouterr() == ("", "")
    written = tiny_tensors(TINY)
    state = model.state_dict()
    assert set(state) == set(written)
    for name in written:
        assert torch.equal(state[name], written[name]), name
    for key in model_folder.SIZE_KEYS:
        assert getattr(model.config, key) == TINY[key], key
    assert model.pooler is None and len(tokenizer) == 30522


def test_num_layers_keeps_the_first_blocks(tiny):
    """``num_layers`` 1: one block, block 0's tensors, the embeddings; 0 and 3 refused
    naming num_layers."""
    model, _ = load_encoder(tiny, num_layers=1)
    written = tiny_tensors(TINY)
    assert len(model.encoder.layer) == 1 and model.config.num_hidden_layers == 1
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, written[name]), name
    for bad in (0, 3):
        with pytest.raises(ConfigError) as caught:
            load_encoder(tiny, num_layers=bad)
        assert caught.value.parameter == "num_layers"


def test_a_bert_prefix_and_a_pooler_load(tmp_path):
    """A checkpoint whose names all carry ``bert.`` and that has a pooler: loaded, the
    pooler's tensors included."""
    tensors = tiny_tensors(TINY, seed=3, pooler=True)
    folder = write_folder(tmp_path / "m", TINY, {"bert." + k: v for k, v in tensors.items()})
    model, _ = load_encoder(folder)
    state = model.state_dict()
    assert set(state) == set(tensors)
    for name in tensors:
        assert torch.equal(state[name], tensors[name]), name


def test_the_models_eps_and_padding_are_the_files(tmp_path):
    """layer_norm_eps 1e-5 and pad_token_id 1 in config.json: every LayerNorm of the built
    model uses eps 1e-5 and the word embedding pads with id 1."""
    folder = write_folder(tmp_path / "m", dict(TINY, layer_norm_eps=1e-5, pad_token_id=1))
    model, _ = load_encoder(folder)
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert len(norms) == 1 + 2 * TINY["num_hidden_layers"]
    assert all(norm.eps == 1e-5 for norm in norms)
    assert model.embeddings.word_embeddings.padding_idx == 1


# -- bad folders: one line, exit 2 -------------------------------------------------------

def _truncate(folder: Path) -> None:
    path = folder / "model.safetensors"
    path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])


def _header_only(folder: Path) -> None:
    path = folder / "model.safetensors"
    path.write_bytes(path.read_bytes()[:20])


def _fifo_config(folder: Path) -> None:
    (folder / "config.json").unlink()
    os.mkfifo(folder / "config.json")


def _drop_tensor(folder: Path) -> None:
    tensors = tiny_tensors(TINY)
    del tensors["encoder.layer.1.output.dense.weight"]
    save_file(tensors, str(folder / "model.safetensors"))


def _extra_tensor(folder: Path) -> None:
    tensors = tiny_tensors(TINY)
    tensors["cls.predictions.bias"] = torch.zeros(30522)
    save_file(tensors, str(folder / "model.safetensors"))


def _fp16_weights(folder: Path) -> None:
    save_file(tiny_tensors(TINY, dtype=torch.float16), str(folder / "model.safetensors"))


def _nan_weight(folder: Path) -> None:
    tensors = tiny_tensors(TINY)
    tensors["encoder.layer.1.attention.self.key.bias"][3] = float("nan")
    save_file(tensors, str(folder / "model.safetensors"))


def _transposed_ffn(folder: Path) -> None:
    tensors = tiny_tensors(TINY)
    tensors["encoder.layer.0.intermediate.dense.weight"] = (
        tensors["encoder.layer.0.intermediate.dense.weight"].T.contiguous())
    save_file(tensors, str(folder / "model.safetensors"))


def _edit_header(edit):
    def damage(folder: Path) -> None:
        path = folder / "model.safetensors"
        header, data = read_header(path)
        edit(header)
        write_header(path, header, data)
    return damage


def _overlap(header: dict) -> None:
    a, b = header["embeddings.LayerNorm.bias"], header["embeddings.LayerNorm.weight"]
    b["data_offsets"] = list(a["data_offsets"])


def _offsets_beyond(header: dict) -> None:
    entry = header["encoder.layer.0.output.LayerNorm.bias"]
    entry["data_offsets"] = [10 ** 9, 10 ** 9 + 32]


def _widen_the_last(folder: Path) -> None:
    """The last tensor's data_offsets 4 bytes wider than its values, the file 4 bytes
    longer: every span within the file, none overlapping, one of the wrong size."""
    path = folder / "model.safetensors"
    header, data = read_header(path)
    entry = max((e for k, e in header.items() if k != "__metadata__"),
                key=lambda e: e["data_offsets"][1])
    entry["data_offsets"][1] += 4
    write_header(path, header, data + bytes(4))


def _pickled_only(folder: Path) -> None:
    """Weights only as a pickle that would create ``unpickled`` when unpickled."""
    class Payload:
        def __reduce__(self):
            return os.mkdir, (str(folder / "unpickled"),)
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(Payload()))


def _no_tokenizer(folder: Path) -> None:
    for name in TOKENIZER_FILES:
        (folder / name).unlink()


def _remove(name: str):
    return lambda folder: (folder / name).unlink()


def _config(**changes):
    return lambda folder: set_config(folder, **changes)


def _config_text(text: str):
    return lambda folder: (folder / "config.json").write_text(text)


def _small_vocab(folder: Path) -> None:
    """vocab_size 1000 with weights to match: only the tokenizer's 30522 ids exceed it."""
    cfg = dict(TINY, vocab_size=1000)
    (folder / "config.json").write_text(json.dumps(cfg))
    save_file(tiny_tensors(cfg), str(folder / "model.safetensors"))


def _gpt2_tokenizer(folder: Path) -> None:
    settings = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(
        json.dumps(dict(settings, tokenizer_class="GPT2Tokenizer")))


def _fifo_vocab(folder: Path) -> None:
    (folder / "vocab.txt").unlink()
    os.mkfifo(folder / "vocab.txt")


def _fifo_weights(folder: Path) -> None:
    (folder / "model.safetensors").unlink()
    os.mkfifo(folder / "model.safetensors")


#: (case, damage, what the line must say).
CASES = [
    ("truncated-safetensors", _truncate, "truncated"),
    ("safetensors-cut-in-its-header", _header_only, "truncated"),
    ("safetensors-not-a-header", lambda f: (f / "model.safetensors").write_bytes(
        (5).to_bytes(8, "little") + b"[1,2]" + bytes(8)), "not a safetensors header"),
    ("safetensors-huge-header", lambda f: (f / "model.safetensors").write_bytes(
        (1 << 40).to_bytes(8, "little")), "MAX_HEADER_BYTES"),
    ("pickled-weights-only", _pickled_only, "never unpickled"),
    ("no-weights", _remove("model.safetensors"), "never initialised at random"),
    ("weights-a-fifo", _fifo_weights, "not a regular file"),
    ("a-tensor-missing", _drop_tensor, "'encoder.layer.1.output.dense.weight'"),
    ("an-unexpected-tensor", _extra_tensor, "unexpected tensor 'cls.predictions.bias'"),
    ("fp16-weights", _fp16_weights, "dtype 'F16'"),
    ("fp16-config", _config(torch_dtype="float16"), "torch_dtype 'float16'"),
    ("bf16-dtype", _config(dtype="bfloat16"), "dtype 'bfloat16'"),
    ("nan-weight", _nan_weight, "'encoder.layer.1.attention.self.key.bias' has NaN"),
    ("transposed-ffn", _transposed_ffn, "shape [8, 12], config.json gives [12, 8]"),
    ("overlapping-tensors", _edit_header(_overlap), "overlap"),
    ("offsets-beyond-the-file", _edit_header(_offsets_beyond), "truncated (tensor "
     "'encoder.layer.0.output.LayerNorm.bias' ends at byte 1000000032 of the data"),
    ("offsets-wider-than-the-tensor", _widen_the_last, "values"),
    ("offsets-of-another-size", _edit_header(
        lambda h: h["embeddings.LayerNorm.bias"].update(data_offsets=[0, 4])),
        "data_offsets [0, 4] for 8 values"),
    ("config-a-fifo", _fifo_config, "not a regular file"),
    ("config-missing", _remove("config.json"), "config.json"),
    ("config-not-json", _config_text("{\"model_type\": "), "config.json"),
    ("config-a-list", _config_text("[1]"), "config.json"),
    ("config-key-twice", _config_text('{"model_type": "bert", "model_type": "bert"}'),
     "config.json"),
    ("heads-do-not-divide", _config(num_attention_heads=3), "hidden_size 8, "
     "num_attention_heads 3"),
    ("zero-ffn", _config(intermediate_size=0), "intermediate_size 0"),
    ("hidden-a-string", _config(hidden_size="8"), "hidden_size '8'"),
    ("layers-a-million", _config(num_hidden_layers=10 ** 6), "num_hidden_layers 1000000"),
    ("embedding-too-large", _config(hidden_size=1 << 15), f"= {30522 << 15}"),
    ("not-bert", _config(model_type="roberta"), "model_type 'roberta'"),
    ("another-architecture", _config(architectures=["GPT2Model"]), "architectures"),
    ("relu", _config(hidden_act="relu"), "hidden_act 'relu'"),
    ("relative-positions", _config(position_embedding_type="relative_key"),
     "position_embedding_type 'relative_key'"),
    ("a-decoder", _config(is_decoder=True), "is_decoder True"),
    ("decoder-as-one", _config(is_decoder=1), "is_decoder 1"),
    ("cross-attention", _config(add_cross_attention=True), "add_cross_attention True"),
    ("no-architectures", _config(architectures=[]), "architectures []"),
    ("eps-infinite", lambda f: (f / "config.json").write_text(
        json.dumps(TINY).replace('"layer_norm_eps": 1e-12', '"layer_norm_eps": 1e999')),
     "layer_norm_eps inf"),
    ("pad-beyond-vocab", _config(pad_token_id=30522), "pad_token_id 30522"),
    ("eps-zero", _config(layer_norm_eps=0), "layer_norm_eps 0"),
    ("vocab-below-the-tokenizer", _small_vocab, "the tokenizer has 30522 ids, config.json "
     "vocab_size 1000"),
    ("no-tokenizer", _no_tokenizer, "no tokenizer.json or vocab.txt"),
    ("tokenizer-a-fifo", _fifo_vocab, "vocab.txt"),
    ("another-tokenizer-class", _gpt2_tokenizer, "tokenizer_class 'GPT2Tokenizer'"),
]


@pytest.mark.parametrize("damage, says", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_damaged_folder_is_one_line_naming_model(damage, says, copy, tmp_path, capsys):
    """Each damaged copy of the tiny folder: exit 2, one line naming --model that says
    what is wrong (the fragment), nothing written, bounded time; nothing unpickled."""
    folder = copy()
    damage(folder)
    line = refused_by_cli(folder, tmp_path, capsys)
    assert says in line, line
    assert not (folder / "unpickled").exists()


@pytest.mark.parametrize("path, says", [
    ("{tmp}/no-such-folder", "No such file or directory"),
    ("sentence-transformers/all-MiniLM-L6-v2", "download it first"),
    ("{tiny}/config.json", "not a folder"),
], ids=["missing", "hub-name", "a-file"])
def test_a_path_that_is_no_folder_is_one_line(path, says, tiny, tmp_path, capsys):
    """A missing path, a hub name (never fetched), a file: one line naming --model."""
    line = refused_by_cli(path.format(tmp=tmp_path, tiny=tiny), tmp_path, capsys)
    assert says in line, line


def test_a_folder_name_with_an_escape_is_refused_escaped(tiny, tmp_path, capsys):
    """A good folder whose name holds a terminal escape and a newline: refused (never
    echoed raw), the name shown escaped on the one line."""
    folder = Path(shutil.copytree(tiny, tmp_path / "m\x1b[31mred\nline"))
    line = refused_by_cli(folder, tmp_path, capsys)
    assert "m\\x1b[31mred\\nline" in line and "printable characters only" in line


# -- config.json values at their limits ---------------------------------------------------

def minimal(**changes) -> dict:
    return dict({"model_type": "bert", "vocab_size": 2, "hidden_size": 1,
                 "num_hidden_layers": 1, "num_attention_heads": 1, "intermediate_size": 1,
                 "max_position_embeddings": 1, "type_vocab_size": 1}, **changes)


def parameters_by_hand(c: dict) -> int:
    """A BERT encoder's parameters from the formula: embeddings (V + P + T) H + 2H, per
    block 4H^2 + 4H (q, k, v, out) + 2HF + F + H (the FFN) + 4H (two LayerNorms)."""
    h, f = c["hidden_size"], c["intermediate_size"]
    embed = (c["vocab_size"] + c["max_position_embeddings"] + c["type_vocab_size"]) * h + 2 * h
    return embed + c["num_hidden_layers"] * (4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h)


def refusal(config: dict) -> str | None:
    try:
        model_folder.check_config(config, "F")
    except ConfigError as error:
        assert error.parameter == "model" and "\n" not in str(error)
        return str(error)
    return None


def test_the_documented_limits():
    """The named limits are 48 layers, 2^28 and 2^29, and docs/reliability.md states each
    (``MAX_LAYERS`` (48), ``MAX_EMBEDDING`` (2^28), ...) as the module defines it."""
    limits = {"MAX_LAYERS": 48, "MAX_EMBEDDING": 2 ** 28, "MAX_PARAMETERS": 2 ** 29}
    doc = (Path(__file__).parents[1] / "docs" / "reliability.md").read_text()
    for name, value in limits.items():
        assert getattr(model_folder, name) == value, name
        stated = re.search(rf"`{name}` \((\d+)(?:\^(\d+))?\)", doc)
        assert stated, name
        base, power = int(stated.group(1)), stated.group(2)
        assert (base ** int(power) if power else base) == value, name


def test_layers_at_their_limit():
    """48 layers accepted, 49 refused naming MAX_LAYERS."""
    assert refusal(minimal(num_hidden_layers=48)) is None
    assert "MAX_LAYERS" in refusal(minimal(num_hidden_layers=49))


def test_hidden_times_vocabulary_at_its_limit():
    """hidden 256 x vocabulary 2^20 = 2^28 accepted; one more word refused naming
    MAX_EMBEDDING and the product."""
    assert refusal(minimal(hidden_size=256, vocab_size=1 << 20)) is None
    line = refusal(minimal(hidden_size=256, vocab_size=(1 << 20) + 1))
    assert "MAX_EMBEDDING" in line and f"= {256 * ((1 << 20) + 1)}" in line


def test_parameters_at_their_limit():
    """A config whose hand-counted parameters are exactly 2^29 (the positions make them)
    accepted, one position more refused naming MAX_PARAMETERS and the count."""
    base = minimal(max_position_embeddings=1)
    positions = (1 << 29) - parameters_by_hand(base) + 1
    exact = minimal(max_position_embeddings=positions)
    assert parameters_by_hand(exact) == 1 << 29
    assert refusal(exact) is None
    line = refusal(minimal(max_position_embeddings=positions + 1))
    assert "MAX_PARAMETERS" in line and f"{(1 << 29) + 1} parameters" in line


def test_shape_parameters_match_the_hand_count():
    """The module's parameter count equals the formula on an asymmetric shape (all sizes
    different, 3 blocks)."""
    c = minimal(vocab_size=11, hidden_size=6, num_hidden_layers=3, num_attention_heads=2,
                intermediate_size=10, max_position_embeddings=7, type_vocab_size=3)
    assert model_folder.check_config(c).parameters() == parameters_by_hand(c)


@pytest.mark.parametrize("key", model_folder.SIZE_KEYS)
def test_each_size_must_be_a_positive_integer(key):
    """Each size: 1 accepted (heads then dividing), 0, -1, 1.0, True, "1", null and absent
    refused naming the key."""
    assert refusal(minimal(**{key: 1})) is None
    for bad in (0, -1, 1.0, True, "1", None):
        assert f"{key} {bad!r}" in refusal(minimal(**{key: bad})), bad
    absent = minimal()
    del absent[key]
    assert f"{key} None" in refusal(absent)


def test_the_validated_values_are_the_files():
    """check_config returns the file's values, eps and pad included."""
    shape = model_folder.check_config(minimal(layer_norm_eps=0.5, pad_token_id=1,
                                              vocab_size=3, hidden_size=4,
                                              num_attention_heads=2))
    assert (shape.vocab_size, shape.hidden_size, shape.num_attention_heads,
            shape.layer_norm_eps, shape.pad_token_id) == (3, 4, 2, 0.5, 1)


# -- a generated family: every key of config.json given a wrong value ---------------------

WRONG = [None, True, False, 0, 1, -1, 7, 2 ** 31, 10 ** 6, 0.5, -0.0, 1e300, "", "bert",
         "gelu", "float16", "float32", "absolute", [], ["BertModel"], ["T5Model"], {},
         {"a": 1}, "DELETE"]


def accepted(key: str, value) -> bool:
    """The oracle, written from the rules (not from the module): would the tiny folder
    with ``key`` set to ``value`` ("DELETE": removed) still load?"""
    gone = value == "DELETE"
    if key == "num_attention_heads":        # no tensor's shape depends on it
        return (not gone and type(value) is int and value >= 1
                and TINY["hidden_size"] % value == 0)
    if key in model_folder.SIZE_KEYS:       # the weights and tokenizer fit only the original
        return not gone and type(value) is int and value == TINY[key]
    if key == "model_type":
        return value == "bert"
    if gone:
        return True
    real = isinstance(value, (int, float)) and not isinstance(value, bool)
    return {
        "architectures": value is None or (isinstance(value, list) and value != [] and all(
            isinstance(v, str) and v.startswith("Bert") for v in value)),
        "hidden_act": value == "gelu",
        "layer_norm_eps": real and math.isfinite(value) and value > 0,
        "pad_token_id": value is None or (type(value) is int and 0 <= value < 30522),
        "torch_dtype": value in (None, "float32"),
        "dtype": value in (None, "float32"),
        "add_cross_attention": value is False,
        "position_embedding_type": value == "absolute",
        "is_decoder": value is False,
    }.get(key, True)


def fuzz(tiny: Path, tmp_path: Path, cases: int, seed: int) -> None:
    rng = random.Random(seed)
    keys = sorted(TINY) + ["dtype", "add_cross_attention"]
    for i in range(cases):
        key, value = rng.choice(keys), rng.choice(WRONG)
        folder = Path(shutil.copytree(tiny, tmp_path / f"f{i}"))
        cfg = dict(TINY)
        if value == "DELETE":
            cfg.pop(key, None)
        else:
            cfg[key] = value
        (folder / "config.json").write_text(json.dumps(cfg))
        try:
            model, _ = load_encoder(folder)
        except ConfigError as error:
            assert error.parameter == "model" and "\n" not in str(error), (key, value)
            assert not accepted(key, value), (key, value, str(error))
        else:
            assert accepted(key, value), (key, value)
            if key in ("layer_norm_eps", "pad_token_id", "num_attention_heads") and (
                    value != "DELETE"):
                assert getattr(model.config, key) == value
        shutil.rmtree(folder)


def test_generated_config_values_small_budget(tiny, tmp_path):
    """40 generated (key, wrong value) folders: each refused with one line naming model
    exactly when the oracle says so, loaded otherwise (eps, pad and heads as given)."""
    fuzz(tiny, tmp_path, 40, seed=34)


@pytest.mark.slow
def test_generated_config_values_large_budget(tiny, tmp_path):
    """The same, 300 generated folders."""
    signal.alarm(20 * BOUND_S)
    fuzz(tiny, tmp_path, 300, seed=3434)
