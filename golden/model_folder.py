"""A model folder is untrusted input: the one guarded loader of a Hugging Face BERT folder.

:func:`load_folder` (through :func:`zoforge.golden.models.load_encoder`, the one way zoforge
loads a ``--model``) reads a folder as data and builds the model itself; nothing in the
folder is executed, unpickled or handed to Hugging Face's loaders unchecked. Every failure
is one :class:`~zoforge.errors.ConfigError` naming ``model`` (the command line shows
``--model``) and what is wrong, with every path escaped (:func:`zoforge.errors.printable`):

* **the folder**: a path of printable characters that is a folder (a hub name is refused:
  download it first, ``hf download NAME --local-dir DIR``).
* **config.json**, read through :func:`zoforge.inputs.read_table` (a regular file of at
  most 1 MiB: a FIFO or a device is refused unopened) and validated **before anything is
  built** (:func:`check_config`): ``model_type`` ``"bert"`` (``architectures``, if given,
  ``Bert...`` names); the sizes :data:`SIZE_KEYS` given, integers >= 1;
  ``num_attention_heads`` dividing ``hidden_size``; ``num_hidden_layers`` at most
  :data:`MAX_LAYERS`; ``hidden_size x vocab_size`` at most :data:`MAX_EMBEDDING`; the
  parameters at most :data:`MAX_PARAMETERS`; ``hidden_act`` ``"gelu"`` (what
  :func:`~zoforge.golden.models.bert_layer` computes); ``layer_norm_eps`` a positive
  finite number; ``pad_token_id`` absent, null or a token id; ``torch_dtype``/``dtype``
  absent, null or ``"float32"``; ``position_embedding_type`` absent or ``"absolute"``;
  ``is_decoder`` and ``add_cross_attention`` absent or false. Other keys are not read: the
  model is built from the validated values alone.
* **weights**: ``model.safetensors`` only (pickled ``pytorch_model.bin`` is never read;
  sharded or TensorFlow/Flax weights are refused), its header parsed here (at most
  :data:`MAX_HEADER_BYTES`, strict JSON); every tensor float32 (fp16/bf16 refused: convert
  the folder), of the shape the configuration gives, within the file (a truncated file is
  refused) and not overlapping another; the tensor names exactly the encoder's (an
  optional ``bert.`` prefix on all of them, the pooler both or neither, the
  ``embeddings.position_ids`` buffer tolerated): **a missing tensor is refused, never
  initialised at random**, and an unexpected one (a pretraining head) is refused too;
  the kept blocks' values finite.
* **tokenizer**: ``tokenizer.json`` or ``vocab.txt`` present (without them Hugging Face
  tokenizes every word to ``[UNK]``); the tokenizer files (:data:`TOKENIZER_FILES`) read
  through the guarded reader (at most :data:`MAX_TOKENIZER_BYTES` each) into a private
  folder, and the tokenizer built from there, so what Hugging Face opens is exactly what was
  checked; ``tokenizer_class``, if given, a BERT tokenizer; a padding token; every id it
  makes (``len(tokenizer)``) below the model's ``vocab_size``.

Hugging Face's load reports and warnings are silenced while the tokenizer loads (the model
itself is built with :class:`transformers.BertModel` and ``load_state_dict``, strict).
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from zoforge.errors import ConfigError, printable
from zoforge.files import atomic_write_bytes
from zoforge.inputs import MAX_FILE_BYTES, open_regular, read_bytes, read_table

__all__ = ["load_folder", "read_config", "check_config", "read_weights_header",
           "ModelShape", "encoder_tensors", "PARAMETER", "SIZE_KEYS", "MAX_LAYERS",
           "MAX_EMBEDDING", "MAX_PARAMETERS", "MAX_HEADER_BYTES", "MAX_TOKENIZER_BYTES",
           "TOKENIZER_FILES", "WEIGHTS_FILE"]

#: The configuration field every error names (the command line shows ``--model``).
PARAMETER = "model"
#: The sizes config.json must give, each an integer >= 1.
SIZE_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
             "intermediate_size", "max_position_embeddings", "type_vocab_size")
#: Most encoder layers (BERT-large has 24): a folder cannot make zoforge build layers
#: without end.
MAX_LAYERS = 48
#: Most entries of the word embedding, ``hidden_size x vocab_size`` (2^28: 1 GiB of float32).
MAX_EMBEDDING = 1 << 28
#: Most parameters of the encoder (2^29: 2 GiB of float32; BERT-large has 3.3e8).
MAX_PARAMETERS = 1 << 29
#: Largest safetensors header read (the tensor table; MiniLM's is 11 KB).
MAX_HEADER_BYTES = 16 << 20
#: Largest tokenizer file read.
MAX_TOKENIZER_BYTES = 64 << 20
#: The weights file: safetensors only.
WEIGHTS_FILE = "model.safetensors"
#: Weight files zoforge refuses to read, with why.
REFUSED_WEIGHTS = {
    "pytorch_model.bin": "pickled weights (pytorch_model.bin) are never unpickled: convert "
                         "them to model.safetensors",
    "model.safetensors.index.json": "sharded weights are not supported: one "
                                    "model.safetensors",
    "tf_model.h5": "TensorFlow weights are not read: convert them to model.safetensors",
    "flax_model.msgpack": "Flax weights are not read: convert them to model.safetensors",
}
#: The files of a BERT tokenizer that are read (one of the first two is required).
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer_config.json",
                   "special_tokens_map.json", "added_tokens.json")
TOKENIZER_CLASSES = ("BertTokenizer", "BertTokenizerFast")
POSITION_IDS = "embeddings.position_ids"


class _Refusal:
    """Makes the one-line errors about one folder: ``model must be ALLOWED (got FOLDER:
    DETAIL)``."""

    def __init__(self, folder: object):
        self.folder = folder

    def __call__(self, allowed: str, detail: str) -> ConfigError:
        return ConfigError(PARAMETER, allowed, f"{self.folder}: {detail}")


@dataclass(frozen=True)
class ModelShape:
    """The validated values of a BERT config.json: all the model is built from."""
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int
    layer_norm_eps: float = 1e-12
    pad_token_id: int | None = 0

    def parameters(self) -> int:
        """The encoder's parameters (without the pooler)."""
        return sum(math.prod(shape) for shape in encoder_tensors(self).values())


def encoder_tensors(shape: ModelShape, layers: int | None = None) -> dict[str, tuple]:
    """``{name: shape}`` of every tensor of a ``BertModel`` without pooler for ``shape``
    (its first ``layers`` blocks; None: all)."""
    h, f = shape.hidden_size, shape.intermediate_size
    out = {"embeddings.word_embeddings.weight": (shape.vocab_size, h),
           "embeddings.position_embeddings.weight": (shape.max_position_embeddings, h),
           "embeddings.token_type_embeddings.weight": (shape.type_vocab_size, h),
           "embeddings.LayerNorm.weight": (h,), "embeddings.LayerNorm.bias": (h,)}
    per_block = {"attention.self.query": (h, h), "attention.self.key": (h, h),
                 "attention.self.value": (h, h), "attention.output.dense": (h, h),
                 "intermediate.dense": (f, h), "output.dense": (h, f)}
    for block in range(shape.num_hidden_layers if layers is None else layers):
        prefix = f"encoder.layer.{block}."
        for name, (rows, cols) in per_block.items():
            out[f"{prefix}{name}.weight"] = (rows, cols)
            out[f"{prefix}{name}.bias"] = (rows,)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            out[f"{prefix}{norm}.weight"] = (h,)
            out[f"{prefix}{norm}.bias"] = (h,)
    return out


def _pooler_tensors(shape: ModelShape) -> dict[str, tuple]:
    h = shape.hidden_size
    return {"pooler.dense.weight": (h, h), "pooler.dense.bias": (h,)}


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_config(config: dict, folder: object = "") -> ModelShape:
    """The :class:`ModelShape` of a config.json's table, validated (module docstring); a
    one-line :class:`ConfigError` naming ``model`` and the key otherwise."""
    refused = _Refusal(folder)
    kind = config.get("model_type")
    if kind != "bert":
        raise refused("a BERT model folder (config.json model_type \"bert\")",
                      f"model_type {kind!r}")
    names = config.get("architectures")
    if names is not None and not (isinstance(names, list) and names and all(
            isinstance(n, str) and n.startswith("Bert") for n in names)):
        raise refused("a BERT model folder (config.json architectures a list of Bert... "
                      "names)", f"architectures {names!r}")
    sizes = {}
    for key in SIZE_KEYS:
        value = config.get(key)
        if not _is_int(value) or value < 1:
            raise refused(f"a model folder whose config.json {key} is an integer >= 1",
                          f"{key} {value!r}")
        sizes[key] = value
    if sizes["num_hidden_layers"] > MAX_LAYERS:
        raise refused(f"a model of at most {MAX_LAYERS} layers (MAX_LAYERS)",
                      f"num_hidden_layers {sizes['num_hidden_layers']}")
    if sizes["hidden_size"] % sizes["num_attention_heads"]:
        raise refused("a model folder whose num_attention_heads divides hidden_size",
                      f"hidden_size {sizes['hidden_size']}, num_attention_heads "
                      f"{sizes['num_attention_heads']}")
    embedding = sizes["hidden_size"] * sizes["vocab_size"]
    if embedding > MAX_EMBEDDING:
        raise refused(f"a model with hidden_size x vocab_size at most {MAX_EMBEDDING} "
                      "(MAX_EMBEDDING)", f"{sizes['hidden_size']} x {sizes['vocab_size']}"
                      f" = {embedding}")
    act = config.get("hidden_act", "gelu")
    if act != "gelu":
        raise refused("a model folder whose config.json hidden_act is \"gelu\"",
                      f"hidden_act {act!r}")
    eps = config.get("layer_norm_eps", 1e-12)
    if not (isinstance(eps, (int, float)) and not isinstance(eps, bool)
            and math.isfinite(eps) and eps > 0):
        raise refused("a model folder whose config.json layer_norm_eps is a positive "
                      "finite number", f"layer_norm_eps {eps!r}")
    pad = config.get("pad_token_id", 0)
    if pad is not None and not (_is_int(pad) and 0 <= pad < sizes["vocab_size"]):
        raise refused("a model folder whose config.json pad_token_id is null or a token "
                      f"id from 0 to vocab_size - 1 = {sizes['vocab_size'] - 1}",
                      f"pad_token_id {pad!r}")
    for key in ("torch_dtype", "dtype"):
        dtype = config.get(key)
        if dtype is not None and dtype != "float32":
            raise refused("a model folder of float32 weights (fp16 and bf16 are refused: "
                          "convert the folder to float32)", f"{key} {dtype!r}")
    position = config.get("position_embedding_type", "absolute")
    if position != "absolute":
        raise refused("a model folder whose config.json position_embedding_type is "
                      "\"absolute\"", f"position_embedding_type {position!r}")
    for key in ("is_decoder", "add_cross_attention"):
        if config.get(key, False) is not False:
            raise refused(f"an encoder model folder (config.json {key} false)",
                          f"{key} {config.get(key)!r}")
    shape = ModelShape(**sizes, layer_norm_eps=float(eps), pad_token_id=pad)
    if shape.parameters() > MAX_PARAMETERS:
        raise refused(f"a model of at most {MAX_PARAMETERS} parameters (MAX_PARAMETERS)",
                      f"{shape.parameters()} parameters")
    return shape


def _folder(path: str | Path) -> Path:
    """``path`` if it is a folder with a printable path; one line otherwise."""
    text = str(path)
    refused = _Refusal(text)
    if printable(text) != text:
        raise refused("a model folder whose path has printable characters only (no "
                      "control characters: newlines, tabs, terminal escapes)",
                      "a path with control characters")
    try:
        mode = os.stat(text).st_mode
    except (OSError, ValueError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise refused("a Hugging Face BERT model folder (a hub model: download it first, "
                      "hf download NAME --local-dir DIR)", reason) from None
    if not stat.S_ISDIR(mode):
        raise refused("a Hugging Face BERT model folder", "not a folder")
    return Path(text)


def read_config(folder: str | Path) -> ModelShape:
    """The validated shape of ``folder``'s config.json (guarded read, then
    :func:`check_config`)."""
    folder = _folder(folder)
    try:
        config = read_table(folder / "config.json", PARAMETER, syntax="JSON")
    except ConfigError as error:    # the file's path, and why (as read_table says it)
        raise ConfigError(PARAMETER, f"a model folder with a readable config.json (a JSON "
                          f"table of at most {MAX_FILE_BYTES >> 20} MiB)",
                          error.got if error.parameter == PARAMETER else str(error)
                          ) from None
    return check_config(config, folder)


def _strict_json(data: bytes):
    def pairs(items):
        out = {}
        for key, value in items:
            if key in out:
                raise ValueError(f"the key {key!r} twice")
            out[key] = value
        return out

    def constant(name):
        raise ValueError(f"{name} is not a JSON number")
    return json.loads(data.decode("utf-8"), object_pairs_hook=pairs, parse_constant=constant)


def _expected_names(shape: ModelShape, names: set[str]) -> tuple[dict, str]:
    """The tensors a weights file with tensor ``names`` must hold, and their common prefix
    (``""`` or ``"bert."``)."""
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in names else ""
    expected = {prefix + name: size for name, size in encoder_tensors(shape).items()}
    pooler = {prefix + name: size for name, size in _pooler_tensors(shape).items()}
    if any(name in names for name in pooler):
        expected.update(pooler)
    return expected, prefix


def read_weights_header(handle, size: int, shape: ModelShape, refused) -> tuple[dict, str, int]:
    """``({name: (begin, end)}, prefix, data_start)`` of a safetensors file open as
    ``handle`` (``size`` bytes), every tensor checked against ``shape``: float32, its shape,
    within the file, not overlapping, exactly the expected names."""
    allowed = f"a model folder whose {WEIGHTS_FILE} holds the model's float32 tensors"
    head = handle.read(8)
    if len(head) < 8:
        raise refused(allowed, f"{WEIGHTS_FILE}: truncated ({size} bytes, no header)")
    length = int.from_bytes(head, "little")
    if length > MAX_HEADER_BYTES:
        raise refused(allowed, f"{WEIGHTS_FILE}: a header of {length} bytes, more than "
                      f"{MAX_HEADER_BYTES} (MAX_HEADER_BYTES)")
    data = handle.read(length)
    if len(data) < length:
        raise refused(allowed, f"{WEIGHTS_FILE}: truncated (a header of {length} bytes, "
                      f"{len(data)} present)")
    try:
        table = _strict_json(data)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise refused(allowed, f"{WEIGHTS_FILE}: not a safetensors header "
                      f"({str(error).splitlines()[0] if str(error) else 'malformed'})"
                      ) from None
    if not isinstance(table, dict):
        raise refused(allowed, f"{WEIGHTS_FILE}: not a safetensors header (a "
                      f"{type(table).__name__})")
    table.pop("__metadata__", None)
    expected, prefix = _expected_names(shape, set(table))
    expected[prefix + POSITION_IDS] = (1, shape.max_position_embeddings)
    start, room = 8 + length, size - 8 - length
    spans = {}
    for name in sorted(table):
        entry = table[name]
        if name not in expected:
            raise refused("a model folder whose weights are exactly the BERT encoder's "
                          "(no unexpected tensor)", f"{WEIGHTS_FILE}: unexpected tensor "
                          f"{name!r}")
        if not isinstance(entry, dict):
            raise refused(allowed, f"{WEIGHTS_FILE}: tensor {name!r} is not described")
        dtype, dims, offsets = (entry.get(k) for k in ("dtype", "shape", "data_offsets"))
        is_position = name == prefix + POSITION_IDS
        if dtype != ("I64" if is_position else "F32"):
            raise refused("a model folder of float32 weights (fp16 and bf16 are refused: "
                          "convert the folder to float32)",
                          f"{WEIGHTS_FILE}: tensor {name!r} has dtype {dtype!r}")
        if not (isinstance(dims, list) and all(_is_int(d) for d in dims)
                and tuple(dims) == expected[name]):
            raise refused("a model folder whose weights have the shapes its config.json "
                          "gives", f"{WEIGHTS_FILE}: tensor {name!r} has shape {dims!r}, "
                          f"config.json gives {list(expected[name])}")
        width = 8 if is_position else 4
        if not (isinstance(offsets, list) and len(offsets) == 2
                and all(_is_int(o) for o in offsets) and 0 <= offsets[0] <= offsets[1]
                and offsets[1] - offsets[0] == width * math.prod(dims)):
            raise refused(allowed, f"{WEIGHTS_FILE}: tensor {name!r} has data_offsets "
                          f"{offsets!r} for {math.prod(dims)} values")
        if offsets[1] > room:
            raise refused(allowed, f"{WEIGHTS_FILE}: truncated (tensor {name!r} ends at "
                          f"byte {offsets[1]} of the data, the file holds {max(room, 0)})")
        spans[name] = tuple(offsets)
    ordered = sorted(spans.items(), key=lambda item: item[1])
    for (first, (_, end)), (second, (begin, _)) in zip(ordered, ordered[1:]):
        if begin < end:
            raise refused(allowed, f"{WEIGHTS_FILE}: tensors {first!r} and {second!r} "
                          "overlap")
    missing = sorted(set(expected) - set(spans) - {prefix + POSITION_IDS})
    if missing:
        raise refused("a model folder with weights for every tensor of the model (none "
                      "is initialised at random)", f"{WEIGHTS_FILE}: {len(missing)} "
                      f"missing, first {missing[0]!r}")
    spans.pop(prefix + POSITION_IDS, None)
    return spans, prefix, start


def _open_weights(folder: Path, shape: ModelShape):
    """``(handle, spans, prefix, data_start)``: ``folder``'s safetensors file open, its
    header checked (:func:`read_weights_header`); one line if it is missing, pickled or
    not a regular file."""
    refused = _Refusal(folder)
    path = folder / WEIGHTS_FILE
    if not os.path.lexists(path):
        for name, why in REFUSED_WEIGHTS.items():
            if os.path.lexists(folder / name):
                raise refused(f"a model folder with its weights in {WEIGHTS_FILE}", why)
        raise refused(f"a model folder with its weights in {WEIGHTS_FILE} (a model is "
                      "never initialised at random)", f"no {WEIGHTS_FILE}")
    handle = open_regular(path, PARAMETER, f"a model folder whose {WEIGHTS_FILE} is a "
                          "readable regular file")
    try:
        size = os.fstat(handle.fileno()).st_size
        return (handle, *read_weights_header(handle, size, shape, refused))
    except BaseException:
        handle.close()
        raise


def _fill(model, handle, spans: dict, prefix: str, start: int, refused) -> None:
    """Every parameter of ``model`` read from the file straight into its storage, checked
    finite; the file must hold each one (``spans``: name -> (begin, end) of the data)."""
    import numpy as np   # numpy and transformers: slow to import, only when a folder is loaded

    for key, parameter in model.state_dict(keep_vars=True).items():
        begin, end = spans[prefix + key]
        values = parameter.detach().numpy()
        handle.seek(start + begin)
        if handle.readinto(memoryview(values).cast("B")) != end - begin:
            raise refused(f"a model folder whose {WEIGHTS_FILE} holds the model's float32 "
                          f"tensors", f"{WEIGHTS_FILE}: truncated while reading "
                          f"{prefix + key!r}")
        if not np.isfinite(values).all():
            raise refused("a model folder of finite weights", f"{WEIGHTS_FILE}: tensor "
                          f"{prefix + key!r} has NaN or infinite values")


@contextlib.contextmanager
def _quiet():
    """Hugging Face's logging at error level, its progress bars off and Python warnings
    ignored, for the duration (restored after)."""
    import warnings   # only while loading a model

    from transformers.utils import logging as hf_logging   # slow to import: only while loading

    level = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


def _load_tokenizer(folder: Path, shape: ModelShape):
    """The tokenizer of ``folder``, built from guarded copies of its files, checked to fit
    ``shape``."""
    refused = _Refusal(folder)
    present = [name for name in TOKENIZER_FILES if os.path.lexists(folder / name)]
    if not {"tokenizer.json", "vocab.txt"} & set(present):
        raise refused("a model folder with its tokenizer (tokenizer.json or vocab.txt)",
                      "no tokenizer.json or vocab.txt")
    allowed = (f"a model folder whose tokenizer files are readable regular files of at "
               f"most {MAX_TOKENIZER_BYTES >> 20} MiB")
    files = {name: read_bytes(folder / name, PARAMETER, MAX_TOKENIZER_BYTES, allowed)
             for name in present}
    if "tokenizer_config.json" in files:
        try:
            settings = _strict_json(files["tokenizer_config.json"])
        except (UnicodeDecodeError, ValueError, RecursionError) as error:
            raise refused("a model folder whose tokenizer_config.json is valid JSON",
                          f"tokenizer_config.json: {str(error).splitlines()[0]}") from None
        name = settings.get("tokenizer_class") if isinstance(settings, dict) else None
        if not isinstance(settings, dict) or name not in (None, *TOKENIZER_CLASSES):
            raise refused("a model folder with a BERT tokenizer (tokenizer_config.json "
                          "tokenizer_class BertTokenizer)", f"tokenizer_class {name!r}")
    # a private folder (mode 0700) holding only the checked bytes: Hugging Face opens
    # nothing of the user's folder
    with tempfile.TemporaryDirectory(prefix="zoforge-tokenizer-") as private:
        files["config.json"] = b'{"model_type": "bert"}'
        for name, data in files.items():
            atomic_write_bytes(Path(private, name), data, PARAMETER)
        try:
            with _quiet():
                from transformers import AutoTokenizer   # slow to import: only while loading
                tokenizer = AutoTokenizer.from_pretrained(private)
        except Exception as error:      # anything the third-party loader raises: one line
            raise refused("a model folder with a loadable BERT tokenizer",
                          f"{type(error).__name__}: {_first_line(error)}") from None
    if tokenizer.pad_token_id is None:
        raise refused("a model folder whose tokenizer has a padding token", "none")
    if len(tokenizer) > shape.vocab_size:
        raise refused("a model folder whose tokenizer's ids fit the model's vocabulary",
                      f"the tokenizer has {len(tokenizer)} ids, config.json vocab_size "
                      f"{shape.vocab_size}")
    return tokenizer


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else "no detail"


def load_folder(path: str | Path, num_layers: int | None = None):
    """``(model, tokenizer)`` of the BERT folder ``path`` (its first ``num_layers`` blocks;
    None: all), every check of the module docstring passed before the model is built; the
    model a ``transformers.BertModel`` in eval mode (gradients left to the caller)."""
    folder = _folder(path)
    shape = read_config(folder)
    layers = shape.num_hidden_layers if num_layers is None else num_layers
    if not (_is_int(layers) and 1 <= layers <= shape.num_hidden_layers):
        raise ConfigError("num_layers", f"an integer with 1 <= value <= "
                          f"{shape.num_hidden_layers} (the layers of the model)", layers)
    tokenizer = _load_tokenizer(folder, shape)
    refused = _Refusal(folder)
    handle, spans, prefix, start = _open_weights(folder, shape)
    with handle, _quiet():
        from transformers import BertConfig, BertModel   # slow to import: only while loading

        config = BertConfig(vocab_size=shape.vocab_size, hidden_size=shape.hidden_size,
                            num_hidden_layers=layers,
                            num_attention_heads=shape.num_attention_heads,
                            intermediate_size=shape.intermediate_size, hidden_act="gelu",
                            max_position_embeddings=shape.max_position_embeddings,
                            type_vocab_size=shape.type_vocab_size,
                            layer_norm_eps=shape.layer_norm_eps,
                            pad_token_id=shape.pad_token_id)
        try:
            model = BertModel(config, add_pooling_layer=prefix + "pooler.dense.weight"
                              in spans)
        except (RuntimeError, MemoryError) as error:
            raise refused("a model folder zoforge can build",
                          f"{type(error).__name__}: {_first_line(error)}") from None
        _fill(model, handle, spans, prefix, start, refused)
    model.eval()
    return model, tokenizer
