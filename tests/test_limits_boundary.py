"""Every documented limit at its boundary (issue 31, item 4): accepted exactly at the limit,
refused one step past it, the refusal one line naming the parameter.

A method, not a list: the limits are enumerated from their single definitions and each is
probed at both sides of its end.

* **Configuration fields** (every registered design's configuration types and co-simulation
  options, and the configurations of ``train``, ``finetune`` and ``sweep``): every declared
  range (:class:`~zoforge.config.IntRange`, :class:`~zoforge.config.Mersenne`,
  :class:`~zoforge.config.FloatRange`) at each of its ends: the end itself (or, for an
  open end, the next float inside) is accepted in some valid configuration, found from the
  defaults by changing other fields to their own limits (cross-field rules: ``max_m >=
  rows``); one unit, one float (``math.nextafter``) or, for ``2^k - 1`` fields, also the
  next such number past the end is refused with the declared check's text. The designs'
  fields and co-simulation options are probed again through ``zoforge generate`` and
  ``zoforge cosim`` (the flags generated from them).
  An end no valid configuration reaches is listed in :data:`UNREACHABLE` (a declaration
  wider than what the cross-field rules allow), and checked still to be unreachable.
* **Memories** (:func:`zoforge.cli._limits.check_design_size`): a probe design whose two
  memories are sized directly by its fields, exactly at and one past each of the two limits
  (words, bits) with the other one far inside, each total split over both memories.
* **Input files** (:mod:`zoforge.inputs`): a file of exactly the size limit, nesting exactly
  the depth limit; one byte, one level more.
* **Commands**: ``rng dump`` at exactly the most values and one row more (both terms of
  its cycle limit), ``finetune --threads``, a ``--budget`` equal to a design's LUTs.
* **The documentation** (README, docs/reliability.md): the numbers it states are the
  constants the checks read.

Nothing here generates Verilog or trains: the work steps are replaced by a sentinel raise.
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, NamedTuple

import pytest

from zoforge.cli import main
from zoforge.config import (Config, FloatRange, IntRange, Mersenne, OneOf, field_of,
                            flag_name, param)
from zoforge.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


class Reached(Exception):
    """Raised in place of a command's work: the request passed every check before it."""


def _reached(*args, **kwargs):
    raise Reached(args)


# -- the limits, enumerated from their definitions -----------------------------------------

def _config_types() -> list[type[Config]]:
    """Every configuration type a command reads: the registered designs' (and their
    co-simulation options), ``train``'s, ``finetune``'s and ``sweep``'s."""
    from zoforge.golden.finetune.config import FinetuneConfig
    from zoforge.golden.zo.config import TrainConfig
    from zoforge.hw.designs import designs
    from zoforge.sim.runners import designs as cosim_designs
    from zoforge.sweep.spec import ReportOptions, SearchOptions

    types = [t for design in designs().values() for t in design.configs]
    types += [d.cosim_options for d in cosim_designs().values() if d.cosim_options]
    return types + [TrainConfig, FinetuneConfig, ReportOptions, SearchOptions]


class End(NamedTuple):
    """One end of a field's declared range: the value just inside and those just past."""

    config: type[Config]
    field: str
    side: str                   # "low" or "high"
    inside: object
    past: tuple

    @property
    def name(self) -> str:
        variant = f"-{self.config.variant}" if self.config.variant else ""
        return f"{self.config.kind}{variant}.{self.field}.{self.side}"


def _int_ends(check) -> dict[str, tuple]:
    ends = {"low": (check.low, (check.low - 1,))}
    if check.high is not None:
        ends["high"] = (check.high, (check.high + 1,))
    return ends


def _mersenne_ends(check: Mersenne) -> dict[str, tuple]:
    """One unit past each end, and the next ``2^k - 1`` past it (the form alone passes)."""
    below = (check.low + 1) // 2 - 1               # 2^(k-1) - 1 under 2^k - 1
    return {"low": (check.low, (check.low - 1,) + ((below,) if below >= 1 else ())),
            "high": (check.high, (check.high + 1, 2 * check.high + 1))}


def _float_ends(check: FloatRange) -> dict[str, tuple]:
    def end(bound, is_open, outward):
        inward = -outward
        if is_open:
            return math.nextafter(bound, inward), (bound,)
        return bound, (math.nextafter(bound, outward),)
    ends = {"low": end(check.low, check.low_open, -math.inf)}
    if math.isfinite(check.high):
        ends["high"] = end(check.high, check.high_open, math.inf)
    else:
        ends["high"] = (None, (math.inf, math.nan))     # only finite numbers
    return ends


def range_ends(config: type[Config]) -> list[End]:
    """Both ends of every declared range of ``config``'s fields."""
    out = []
    for field in dataclasses.fields(config):
        check = field.metadata.get("check")
        if isinstance(check, Mersenne):
            ends = _mersenne_ends(check)
        elif isinstance(check, IntRange):
            ends = _int_ends(check)
        elif isinstance(check, FloatRange):
            ends = _float_ends(check)
        else:
            continue
        out += [End(config, field.name, side, inside, past)
                for side, (inside, past) in ends.items()]
    return out


ENDS = [end for config in _config_types() for end in range_ends(config)]

#: Declared ends no valid configuration reaches: a cross-field rule is narrower than the
#: declaration (so the flag's help states a range it does not take). Each is checked to be
#: unreachable still: declare the real range and drop the line.
UNREACHABLE = {
    "engine.max_n.high": "per-column parameter tables: max_n <= (1024 >> ceil(log2 C)) * C "
                         "<= 1024, declared 1024 * 64",
    "zo-layer-pregen.bits.high": "the layer takes generator values of at most 24 bits",
    "finetune.lr.low": "eta_mult * 2^-eta_shift (16 bits) cannot hold a learning rate near 0",
    "finetune.eps.low": "eps at least the generator's scale allows (1.46e-11 at 20 bits)",
    "finetune.eps.high": "eps at most 1/32 at 20 bits (the README's 1e6 is train's)",
    "sweep-report.clock_mhz.low": "the report's clock is 1 to 1000 MHz",
    "accelerator.engine_max_n.high": "the engine's own limit (engine.max_n.high above)",
}

#: Values of other fields that put a field at its limit in a valid configuration, where
#: changing one or two other fields to their own limits is not enough.
COMPANIONS = {
    "zo-layer-onthefly.rows.high": {"max_r": 32, "n_rng": 63},
    "zo-layer-masked.rows.high": {"max_r": 32, "n_rng": 63},
    "zo-layer-gaussian.rows.high": {"max_r": 32, "n_rng": 32},
    "finetune.lr.high": {"bits": 20},      # bits' range is the generator's (not declared)
    "accelerator.engine_rows.low": {"paired": False},     # paired rows come in twos
    "accelerator.engine_max_m.low": {"engine_rows": 1, "paired": False},
}


def _build(config: type[Config], values: dict) -> tuple[Config | None, ConfigError | None]:
    try:
        return config(**values), None
    except ConfigError as error:
        return None, error


def _other_values(config: type[Config], field: str) -> list[dict]:
    """One change of another field each: to an end of its range, a choice, a flag."""
    out = []
    for other in dataclasses.fields(config):
        check = other.metadata.get("check")
        if other.name == field or check is None and other.default is not False:
            continue
        values = ([e.inside for e in range_ends(config) if e.field == other.name
                   and e.inside is not None] if not isinstance(check, OneOf)
                  else list(check.choices)) if check is not None else [True]
        out += [{other.name: value} for value in values]
    return out


_BASES: dict = {}


def accepting_base(end: End) -> dict | None:
    """Values of other fields with which ``end.inside`` is accepted (None: none found among
    the defaults, :data:`COMPANIONS` and one or two other fields at their own limits)."""
    if end.name in _BASES:
        return _BASES[end.name]
    found = None
    if end.inside is not None:
        first = [COMPANIONS.get(end.name, {}), {}]
        changes = _other_values(end.config, end.field)
        pairs = ({**a, **b} for a, b in itertools.combinations(changes, 2) if a.keys() != b.keys())
        for base in itertools.chain(first, changes, pairs):
            if _build(end.config, {**base, end.field: end.inside})[0] is not None:
                found = base
                break
    _BASES[end.name] = found
    return found


def expected_allowed(check) -> str:
    """The refusal's text for a declared range, written out from its bounds."""
    if isinstance(check, Mersenne):
        return f"of the form 2^k - 1 with {check.low} <= value <= {check.high}"
    if isinstance(check, IntRange):
        if check.high is None:
            return f"an integer >= {check.low}"
        return f"an integer with {check.low} <= value <= {check.high}"
    low = f"{check.low:g} {'<' if check.low_open else '<='} value"
    high = f" {'<' if check.high_open else '<='} {check.high:g}" if math.isfinite(check.high) else ""
    return f"a finite number with {low}{high}"


def _check_of(end: End):
    return next(f for f in dataclasses.fields(end.config) if f.name == end.field
                ).metadata["check"]


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a)
                      and math.isnan(b))


def test_the_enumeration_covers_every_command_and_both_kinds_of_end():
    """The limits come from every configuration a command reads (the three designs, their
    co-simulation options, train, finetune, sweep), low and high ends, integer, 2^k - 1 and
    float ranges; the tables of exceptions name only real ends."""
    kinds = {end.config.kind for end in ENDS}
    assert {"engine", "rng", "zo-layer", "cosim-engine", "cosim-rng", "cosim-zo-layer",
            "train", "finetune", "sweep-report", "sweep-search"} <= kinds
    checks = {type(_check_of(end)) for end in ENDS}
    assert checks == {IntRange, Mersenne, FloatRange}
    assert {end.side for end in ENDS} == {"low", "high"}
    names = {end.name for end in ENDS}
    assert set(UNREACHABLE) <= names and set(COMPANIONS) <= names
    assert len(ENDS) > 200


@pytest.mark.parametrize("end", [e for e in ENDS if e.inside is not None
                                 and e.name not in UNREACHABLE], ids=lambda e: e.name)
def test_a_field_is_accepted_exactly_at_its_limit(end):
    """The end itself (the next float inside an open end) is a valid value of the field,
    in a configuration with the defaults or other fields at their own limits."""
    base = accepting_base(end)
    assert base is not None, (f"{end.name}: no valid configuration takes {end.inside!r}; "
                              "declare the real range, or list it in COMPANIONS/UNREACHABLE")
    config = end.config(**base, **{end.field: end.inside})
    assert getattr(config, end.field) == end.inside
    again = end.config.from_dict(config.field_values())        # as a file gives it
    assert getattr(again, end.field) == end.inside


@pytest.mark.parametrize("name", sorted(UNREACHABLE))
def test_an_unreachable_declared_end_is_still_unreachable(name):
    """The ends listed as wider than the cross-field rules allow are still refused in every
    configuration tried (once the declaration is fixed, its line goes)."""
    end = next(e for e in ENDS if e.name == name)
    assert accepting_base(end) is None


@pytest.mark.parametrize("end", ENDS, ids=lambda e: e.name)
def test_a_field_is_refused_one_step_past_its_limit(end):
    """One unit (integers), one float (``math.nextafter``), the bound of an open end, the
    next 2^k - 1 (Mersenne fields) or a non-finite number past the end is refused: one line,
    naming the field, the declared range's text, the value given."""
    base = accepting_base(end) or {}
    check = _check_of(end)
    for value in end.past:
        config, error = _build(end.config, {**base, end.field: value})
        assert error is not None, f"{end.name}: {value!r} was accepted"
        assert field_of(error) == end.field
        assert error.allowed == expected_allowed(check)
        assert _same(error.got, value)
        assert "\n" not in str(error)


# -- limits set by other fields (cross-field rules) -----------------------------------------

def _refused_field(config: type[Config], **values) -> str:
    with pytest.raises(ConfigError) as refused:
        config(**values)
    assert "\n" not in str(refused.value)
    return field_of(refused.value)


def _next_power_of_two(value: int) -> int:
    power = 1
    while power < value:
        power *= 2
    return power


@pytest.mark.parametrize("cols", [1, 5, 8, 33, 64])
def test_engine_max_n_between_cols_and_its_parameter_tables(cols):
    """``max_n`` from C to the parameter tables' capacity, 1024 words of which a row of C
    columns takes the next power of two: (1024 // 2^ceil(log2 C)) * C; one less or one more
    is refused naming max_n."""
    from zoforge.hw.engine.config import EngineConfig
    most = (1024 // _next_power_of_two(cols)) * cols
    for max_n in (cols, most):
        assert EngineConfig(cols=cols, max_n=max_n).max_n == max_n
    assert _refused_field(EngineConfig, cols=cols, max_n=most + 1) == "max_n"
    if cols > 1:
        assert _refused_field(EngineConfig, cols=cols, max_n=cols - 1) == "max_n"


@pytest.mark.parametrize("rows", [1, 6, 64])
def test_engine_max_m_at_least_rows(rows):
    """``max_m`` from R (one full row tile) to 2^15; R - 1 is refused naming max_m."""
    from zoforge.hw.engine.config import EngineConfig
    for max_m in (rows, 1 << 15):
        assert EngineConfig(rows=rows, max_m=max_m).max_m == max_m
    if rows > 1:
        assert _refused_field(EngineConfig, rows=rows, max_m=rows - 1) == "max_m"


@pytest.mark.parametrize("seq_len", [48, 64, 512])
def test_finetune_batch_times_seq_len_at_most_4096_tokens(seq_len):
    """``batch x seq_len <= 4096``: the largest batch for the length is taken, one more is
    refused naming batch."""
    from zoforge.golden.finetune.config import FinetuneConfig
    most = 4096 // seq_len
    assert FinetuneConfig(seq_len=seq_len, batch=most).batch == most
    assert _refused_field(FinetuneConfig, seq_len=seq_len, batch=most + 1) == "batch"


def test_train_batch_at_most_n_train_and_d_min_at_most_d_max():
    """``batch <= n_train`` and ``d_min <= d_max``: equal is taken, one (float) past is
    refused naming batch, d_min."""
    from zoforge.golden.zo.config import TrainConfig
    assert TrainConfig(n_train=40, batch=40).batch == 40
    assert _refused_field(TrainConfig, n_train=40, batch=41) == "batch"
    assert TrainConfig(d_min=3.0, d_max=3.0).d_min == 3.0
    assert _refused_field(TrainConfig, d_min=math.nextafter(3.0, 4.0), d_max=3.0) == "d_min"


@pytest.mark.parametrize("variant, n_rng", [("gaussian", 8), ("onthefly", 15)])
def test_zo_layer_n_rng_at_least_rows(variant, n_rng):
    """A ZO layer's generator gives one value per array row and cycle: ``n_rng == rows`` is
    taken, rows one more than n_rng is refused naming n_rng."""
    from zoforge.golden.zolayer import LAYER_CONFIGS
    config = LAYER_CONFIGS[variant]
    def sized(rows: int) -> dict:      # buffers a whole number of rows deep
        return dict(rows=rows, max_r=rows, max_n=rows, n_rng=n_rng)
    assert config(**sized(n_rng)).rows == n_rng
    assert _refused_field(config, **sized(n_rng + 1)) == "n_rng"


# -- the same limits through the command line ----------------------------------------------

def _flag_argv(config: type[Config], values: dict) -> list[str]:
    argv = [flag_name(config.tag), config.variant] if config.tag else []
    for name, value in values.items():
        if isinstance(value, bool):
            argv.append(flag_name(name) if value else "--no-" + name.replace("_", "-"))
        else:
            text = repr(value) if isinstance(value, float) else str(value)
            argv.append(f"{flag_name(name)}={text}")      # "=": a negative value too
    return argv


def _command_ends(command: str, design: str) -> list[End]:
    """The ends of the fields ``zoforge COMMAND DESIGN`` takes as flags: the design's
    configuration (generate) or its co-simulation options (cosim)."""
    from zoforge.sim.runners import designs
    found = designs()[design]
    types = set(found.configs) if command == "generate" else {found.cosim_options}
    return [end for end in ENDS if end.config in types and end.inside is not None]


@pytest.mark.parametrize("command, design", [(command, design) for command in
                                             ("generate", "cosim")
                                             for design in ("engine", "rng", "zo-layer")])
def test_flags_at_their_limits_through_the_command_line(command, design, tmp_path,
                                                        monkeypatch, capsys):
    """``zoforge generate DESIGN --FIELD LIMIT`` (a design's field) and ``zoforge cosim
    DESIGN --OPTION LIMIT`` (a run option) pass every check (they reach the work); one past
    the limit they exit 2 with one line beginning with the flag, nothing written."""
    import zoforge.cli._limits as limits
    monkeypatch.setattr(limits, "check_design_size", _reached)
    out = ["--out", str(tmp_path / "out")] if command == "generate" else []
    ends = _command_ends(command, design)
    assert ends
    for end in ends:
        base = accepting_base(end)
        if base is None:
            continue                        # UNREACHABLE: the refusals still run below
        with pytest.raises(Reached) as reached:
            main([command, design, *_flag_argv(end.config, {**base, end.field: end.inside}),
                  *out])
        if command == "generate":           # the design's configuration reached the work
            assert getattr(reached.value.args[0][0], end.field) == end.inside, end.name
    for end in ends:
        argv = [command, design, *_flag_argv(end.config, accepting_base(end) or {})]
        for value in end.past:
            capsys.readouterr()
            code = main(argv + _flag_argv(end.config, {end.field: value}) + out)
            err = capsys.readouterr().err
            assert code == 2, f"{end.name}: {value!r}"
            assert err.count("\n") == 1
            assert err.startswith(f"zoforge: error: {flag_name(end.field)} must be "), err
    assert not (tmp_path / "out").exists()


# -- memories: exactly at and one past each of the two limits --------------------------------

@dataclass(frozen=True)
class ProbeMemoryConfig(Config):
    """A design with two memories whose sizes are its fields."""

    kind: ClassVar[str] = "probe-memory"

    a_words: int = param(1, "words of memory a", IntRange(0))
    a_bits: int = param(8, "bits of memory a", IntRange(0))
    b_words: int = param(1, "words of memory b", IntRange(0))
    b_bits: int = param(8, "bits of memory b", IntRange(0))


def _probe_memories(config: ProbeMemoryConfig) -> dict:
    from zoforge.hw.designs import MemorySize
    return {"a": MemorySize(config.a_words, config.a_bits, ("a_words", "a_bits")),
            "b": MemorySize(config.b_words, config.b_bits, ("b_words",))}


@pytest.fixture
def probe_design():
    from zoforge.hw.designs import Design, registered_designs
    design = Design("probe-memory", "two memories sized by their fields",
                    configs=ProbeMemoryConfig, elaborate=_reached, memories=_probe_memories)
    with registered_designs(design):
        yield design


WORDS, BITS = 131_072, 32 * 1024 * 1024       # README: "131,072 words and 32 Mbit"

#: (a_words, b_words, a_bits, b_bits) -> accepted; each total split over both memories.
MEMORY_CASES = {
    "words-at-limit": ((WORDS - 40_000, 40_000, 1_000, 2_000), True),
    "words-one-past": ((WORDS - 40_000 + 1, 40_000, 1_000, 2_000), False),
    "bits-at-limit": ((10, 20, 20_000_000, BITS - 20_000_000), True),
    "bits-one-past": ((10, 20, 20_000_000, BITS - 20_000_000 + 1), False),
    "bits-past-in-b": ((30, 20, 10_000_000, BITS - 10_000_000 + 1), False),
    "both-at-limit": ((WORDS - 1, 1, BITS - 7, 7), True),
    "both-one-past": ((WORDS, 1, BITS - 7, 8), False),
    "words-past-in-b": ((40_000, WORDS - 40_000 + 1, 8, 8), False),
    "words-at-limit-bits-past": ((WORDS - 40_000, 40_000, 1_000, BITS), False),
}


@pytest.mark.parametrize("case", MEMORY_CASES, ids=str)
def test_the_memory_limits_at_their_boundaries(case, probe_design):
    """Total words at most 131,072 and total bits at most 32 Mbit, each checked on its own:
    exactly at one limit with the other far inside is accepted, one word or one bit past
    either is refused, naming the flags of the memory with the most of what exceeds its
    limit (words before bits) and the totals."""
    from zoforge.cli._limits import check_design_size
    (a_words, b_words, a_bits, b_bits), accepted = MEMORY_CASES[case]
    config = ProbeMemoryConfig(a_words, a_bits, b_words, b_bits)
    if accepted:
        check_design_size(config)
        return
    with pytest.raises(ConfigError) as refused:
        check_design_size(config)
    words, bits = a_words + b_words, a_bits + b_bits
    a, b = (a_words, b_words) if words > WORDS else (a_bits, b_bits)   # the limit exceeded
    largest = "a" if a >= b else "b"
    assert refused.value.parameter == {"a": "--a-words/--a-bits", "b": "--b-words"}[largest]
    assert refused.value.got == f"{words} words, {bits / 2 ** 20:.1f} Mbit, most in {largest}"
    assert f"at most {WORDS} words and 32 Mbit" in refused.value.allowed


@pytest.mark.parametrize("case", ["words-at-limit", "words-one-past", "bits-at-limit",
                                  "bits-one-past"])
def test_the_memory_limits_through_generate(case, probe_design, tmp_path, capsys):
    """Through ``zoforge generate``: at a limit the design is elaborated (the work starts),
    one past it the command exits 2 with one line naming the sizing flags."""
    (a_words, b_words, a_bits, b_bits), accepted = MEMORY_CASES[case]
    argv = ["generate", "probe-memory", "--a-words", str(a_words), "--b-words", str(b_words),
            "--a-bits", str(a_bits), "--b-bits", str(b_bits), "--out", str(tmp_path / "o")]
    if accepted:
        with pytest.raises(Reached):
            main(argv)
        return
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("zoforge: error: --a-words/--a-bits must be small enough")
    assert err.count("\n") == 1


def test_a_design_without_sized_memories_has_no_memory_limit(probe_design):
    """A design that declares no memories is never refused for size."""
    from zoforge.cli._limits import check_design_size
    from zoforge.hw.designs import Design, registered_designs
    bare = Design("probe-bare", "no memories", configs=type(
        "ProbeBareConfig", (ProbeMemoryConfig,), {"kind": "probe-bare"}), elaborate=_reached)
    with registered_designs(bare):
        check_design_size(bare.configs[0](WORDS * 2, BITS * 2, 1, 1))


# -- input files: exactly the size and the nesting limits -----------------------------------

def _json_of_size(path: Path, size: int) -> Path:
    """A JSON table padded with spaces to exactly ``size`` bytes."""
    text = '{"a": 1}'
    path.write_bytes((text + " " * (size - len(text))).encode())
    assert path.stat().st_size == size
    return path


def test_a_configuration_file_of_exactly_the_size_limit_is_read(tmp_path):
    """1 MiB (1,048,576 bytes) is read; one byte more is refused unread, one line naming the
    parameter, the size and the limit."""
    from zoforge.inputs import read_table
    limit = 1024 * 1024
    assert read_table(_json_of_size(tmp_path / "at.json", limit)) == {"a": 1}
    with pytest.raises(ConfigError) as refused:
        read_table(_json_of_size(tmp_path / "past.json", limit + 1), "--config")
    assert refused.value.parameter == "--config"
    assert refused.value.allowed == "a readable JSON file of at most 1 MiB"
    assert f"{limit + 1} bytes, more than 1 MiB" in str(refused.value.got)


@pytest.mark.parametrize("limit", [1, 7, 4096])
def test_read_bytes_takes_exactly_its_limit(limit, tmp_path):
    """``read_bytes(path, parameter, limit)`` returns a file of exactly ``limit`` bytes and
    refuses ``limit + 1`` naming the parameter (``open_regular`` with the same limit too)."""
    from zoforge.inputs import open_regular, read_bytes
    at, past = tmp_path / "at", tmp_path / "past"
    at.write_bytes(b"x" * limit)
    past.write_bytes(b"x" * (limit + 1))
    assert read_bytes(at, "--data", limit) == b"x" * limit
    with open_regular(at, "--data", limit=limit) as handle:
        assert handle.read() == b"x" * limit
    for refuse in (lambda: read_bytes(past, "--data", limit),
                   lambda: open_regular(past, "--data", limit=limit)):
        with pytest.raises(ConfigError) as refused:
            refuse()
        assert refused.value.parameter == "--data"
        assert f"{limit + 1} bytes, more than" in str(refused.value.got)


def test_a_data_file_of_exactly_one_gib_is_opened(tmp_path):
    """A data file of exactly 1 GiB is opened (sparse: no disk used, nothing read); one byte
    more is refused."""
    from zoforge.inputs import MAX_DATA_BYTES, open_regular
    at, past = tmp_path / "at.jsonl", tmp_path / "past.jsonl"
    for path, size in ((at, 1 << 30), (past, (1 << 30) + 1)):
        with open(path, "wb") as handle:
            handle.truncate(size)
    with open_regular(at, "--data", limit=MAX_DATA_BYTES):
        pass
    with pytest.raises(ConfigError, match=r"1073741825 bytes, more than 1 GiB"):
        open_regular(past, "--data", limit=MAX_DATA_BYTES)


def _nested(levels: int, kind: str):
    """A value with ``levels`` tables (``dict``) or lists (``list``), one in the other, the
    outermost a table (the file's top level counts as one)."""
    value: object = 1
    for level in range(levels - 1):
        value = {"k": value} if kind == "dict" else [value]
    return {"top": value}


@pytest.mark.parametrize("kind", ["dict", "list"])
@pytest.mark.parametrize("syntax", ["JSON", "TOML"])
def test_nesting_of_exactly_the_depth_limit_is_read(kind, syntax, tmp_path):
    """16 levels of tables or lists (the top level one of them) are read; 17 are refused,
    one line naming the parameter and the limit."""
    import tomli_w

    from zoforge.inputs import read_table

    def write(levels: int) -> Path:
        path = tmp_path / f"n{levels}.{syntax.lower()}"
        value = _nested(levels, kind)
        path.write_text(tomli_w.dumps(value) if syntax == "TOML" else json.dumps(value))
        return path
    assert read_table(write(16), "--config") == _nested(16, kind)
    with pytest.raises(ConfigError) as refused:
        read_table(write(17), "--config")
    assert refused.value.parameter == "--config"
    assert str(refused.value.got).endswith("nested more than 16 levels deep")


def test_check_values_names_the_path_one_level_past_the_limit():
    """Without a file, the refusal names the path of the first container too deep."""
    from zoforge.inputs import check_values
    check_values(_nested(16, "dict"))
    with pytest.raises(ConfigError) as refused:
        check_values(_nested(17, "dict"), " in x.toml")
    assert refused.value.parameter == "top" + ".k" * 15 + " in x.toml"
    assert refused.value.allowed == "nested at most 16 levels deep"
    with pytest.raises(ConfigError) as refused:
        check_values(_nested(17, "list"))
    assert refused.value.parameter == "top" + "[0]" * 15


# -- commands' own limits -------------------------------------------------------------------

MOST_VALUES = 50_000_000            # README: "`rng dump` at most 50,000,000 values"

#: (argv, flag, most): the largest count accepted; one more is refused. Columns per row:
#: onthefly n + 3 (cycle, LUT index, scale), gaussian n + 1 (cycle); at most 10,000,000
#: cycles; pregen: the pool's 2 x pool_size values, then 4 per element.
DUMP_CASES = {
    "onthefly-exact": (["--n-rng", "7"], "--cycles", MOST_VALUES // 10),
    "onthefly-floor": (["--n-rng", "31"], "--cycles", 1_470_588),
    "gaussian-cap": (["--strategy", "gaussian", "--n-rng", "1"], "--cycles", 10_000_000),
    "gaussian-values": (["--strategy", "gaussian", "--n-rng", "9"], "--cycles", 5_000_000),
    "masked-values": (["--strategy", "masked", "--n-rng", "63"], "--cycles", 781_250),
    "pregen-length": (["--strategy", "pregen", "--pool-size", "4095", "--count", "1"],
                      "--length", (MOST_VALUES - 2 * 4095) // 4),
}


@pytest.mark.parametrize("case", DUMP_CASES)
def test_rng_dump_at_exactly_its_most_values(case, monkeypatch, capsys):
    """The largest dump is accepted (the dump starts), one row more is refused: one line
    naming the flag, exit 2."""
    import zoforge.cli.rng as rng_cli
    for dump in ("dump_onthefly", "dump_gaussian", "dump_pregen"):
        monkeypatch.setattr(rng_cli, dump, _reached)
    argv, flag, most = DUMP_CASES[case]
    with pytest.raises(Reached) as reached:
        main(["rng", "dump", *argv, flag, str(most)])
    assert most in reached.value.args[0]
    assert main(["rng", "dump", *argv, flag, str(most + 1)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"zoforge: error: {flag}") and err.count("\n") == 1


def test_finetune_threads_at_its_limits(tmp_path, monkeypatch, capsys):
    """``finetune --threads``: 1 and 256 pass (the run goes on to its output folder), 0 and
    257 are one line naming ``--threads``."""
    import zoforge.sim.finetune_run
    monkeypatch.setattr(zoforge.sim.finetune_run, "check_out_dir", _reached)
    argv = ["finetune", "--out", str(tmp_path / "run")]
    for threads in (1, 256):
        with pytest.raises(Reached):
            main(argv + ["--threads", str(threads)])
    for threads in (0, 257):
        assert main(argv + ["--threads", str(threads)]) == 2
        err = capsys.readouterr().err
        assert err == ("zoforge: error: --threads must be an integer with 1 <= value <= 256 "
                       f"(got {threads})\n")


def test_a_budget_of_zero_is_a_budget_and_below_zero_is_refused():
    """``--budget lut=0`` is the smallest limit taken; the next float below is refused."""
    from zoforge.sweep.recommend import parse_budget
    assert parse_budget("lut=0,power=0.0") == {"LUT": 0.0, "power_w": 0.0}
    with pytest.raises(ConfigError) as refused:
        parse_budget(f"lut={math.nextafter(0.0, -1.0)!r}")
    assert refused.value.parameter == "--budget lut"


def _group(label: str, accuracy: float, lut: float, power: float):
    from zoforge.sweep.results import Group, Measure, Run
    run = Run(index=0, swept={"name": label}, config={}, train_key=label, hw_key=label,
              train_status="done", train={"accuracy_after": accuracy}, train_error=None,
              report_status="done", hardware={"LUT": Measure(lut, "model", "test"),
                                              "power_w": Measure(power, "model", "test")})
    return Group(label={"name": label}, runs=[run])


@pytest.mark.parametrize("column, key", [("LUT", "lut"), ("power_w", "power")])
def test_a_design_exactly_at_the_budget_is_within_it(column, key):
    """The best design within ``--budget`` is the most accurate whose cost is at most the
    limit: one costing exactly the limit is picked; one float more and it is not."""
    from zoforge.sweep.recommend import parse_budget, recommend
    limit = {"LUT": 500.0, "power_w": 0.7}[column]
    costs = {"LUT": 100.0, "power_w": 0.1}
    cheap = _group("cheap", 0.6, **{"lut": costs["LUT"], "power": costs["power_w"]})
    for cost, picked in ((limit, "exact"), (math.nextafter(limit, math.inf), "cheap")):
        figures = dict(lut=costs["LUT"], power=costs["power_w"])
        figures["lut" if column == "LUT" else "power"] = cost
        exact = _group("exact", 0.9, **figures)
        best = recommend([cheap, exact], parse_budget(f"{key}={limit!r}")).best
        assert best.group.label["name"] == picked, (column, cost)


# -- the documentation states the limits the checks read ------------------------------------

def _doc(name: str) -> str:
    return " ".join((ROOT / name).read_text().split())


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def test_the_readme_states_the_limits_the_checks_read():
    """README: rng dump values, memory words and Mbit, train --threads, --lr/--eps, and the
    example error's n-rng range are the constants and ranges the checks use."""
    from zoforge.cli.rng import MAX_DUMP_VALUES
    from zoforge.golden.finetune.config import FinetuneConfig
    from zoforge.golden.rng import GENERATOR_CONFIGS
    from zoforge.golden.zo.config import MAX_STEP_SIZE, MAX_THREADS, TrainConfig
    from zoforge.hw.designs import MAX_BITS, MAX_WORDS
    readme = _doc("README.md")
    dump = re.search(r"`rng dump` at most ([\d,]+) values", readme)
    memory = re.search(r"at most ([\d,]+) words and (\d+) Mbit", readme)
    threads = re.search(r"`train --threads` at most (\d+)", readme)
    step = re.search(r"`--lr`/`--eps` at most (1e\d+)", readme)
    n_rng = re.search(r"--n-rng must be of the form 2\^k - 1 with (\d+) <= value <= (\d+)",
                      readme)
    assert _number(dump.group(1)) == MAX_DUMP_VALUES == MOST_VALUES
    assert _number(memory.group(1)) == MAX_WORDS == WORDS
    assert int(memory.group(2)) * 1024 * 1024 == MAX_BITS == BITS
    assert int(threads.group(1)) == MAX_THREADS
    assert float(step.group(1)) == MAX_STEP_SIZE
    fields = {f.name: f.metadata["check"] for f in dataclasses.fields(TrainConfig)}
    assert fields["threads"].high == MAX_THREADS and fields["threads"].low == 1
    for config in (TrainConfig, FinetuneConfig):
        checks = {f.name: f.metadata["check"] for f in dataclasses.fields(config)}
        for name in ("lr", "eps"):
            assert checks[name].high == float(step.group(1)) and not checks[name].high_open
    onthefly = {f.name: f.metadata["check"]
                for f in dataclasses.fields(GENERATOR_CONFIGS["onthefly"])}["n_rng"]
    assert (onthefly.low, onthefly.high) == (int(n_rng.group(1)), int(n_rng.group(2)))


def test_the_reliability_doc_states_the_input_limits():
    """docs/reliability.md: configuration files at most 1 MiB, data files 1 GiB, nesting 16."""
    from zoforge.inputs import MAX_DATA_BYTES, MAX_DEPTH, MAX_FILE_BYTES
    doc = _doc("docs/reliability.md")
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    for name, value in (("MAX_FILE_BYTES", MAX_FILE_BYTES), ("MAX_DATA_BYTES", MAX_DATA_BYTES)):
        stated = re.search(rf"`{name}` \((\d+) (KiB|MiB|GiB)\)", doc)
        assert int(stated.group(1)) * units[stated.group(2)] == value, name
    assert int(re.search(r"`MAX_DEPTH` \((\d+)\)", doc).group(1)) == MAX_DEPTH


#: The design documents and the design whose flags they describe.
DESIGN_DOCS = {"docs/engine.md": "engine", "docs/rng.md": "rng", "docs/zo-layer.md": "zo-layer"}

#: `--flag` or `--a`, `--b`, then a parenthesis holding LOW..HIGH (e.g. "`--n-rng` (2^k − 1,
#: 3..255)", "`--rows`, `--cols` (1..64)").
DOC_RANGE = re.compile(r"((?:`--[a-z-]+`(?:, )?)+)(?: = \w+)? \(([^()]*?)(\d+)\.\.(\d+)")


def test_the_design_docs_state_the_declared_ranges():
    """Every range a design document gives a flag (``--rows`` 1..64, ``--n-rng`` 3..255,
    ...) is the declared range of that field in one of the design's configuration types."""
    from zoforge.hw.designs import designs
    stated = 0
    for doc, design in DESIGN_DOCS.items():
        declared: dict[str, set] = {}
        for config in designs()[design].configs:
            for end in range_ends(config):
                check = _check_of(end)
                declared.setdefault(flag_name(end.field), set()).add((check.low, check.high))
        for flags, _, low, high in DOC_RANGE.findall(_doc(doc)):
            for flag in re.findall(r"--[a-z-]+", flags):
                assert (int(low), int(high)) in declared.get(flag, set()), (doc, flag, low, high)
                stated += 1
    assert stated >= 6
