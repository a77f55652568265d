"""SWEEP.toml: a sweep's points, read strictly and validated before anything runs.

Schema (every table is optional; a sweep has at least one point)::

    name = "bits"              # the sweep's name in the store (default: the file's stem)
    description = "..."        # one paragraph shown on the page
    paper = "..."              # what the paper found for this sweep (shown apart, as "paper")
    task = "train"             # what a point trains (TASKS): "train", the head-level golden
                               #  training (TrainConfig), or "finetune", the transformer's
                               #  adapters in the accelerator's arithmetic (FinetuneConfig)

    [train]                    # training options every point shares (the task's config
    model = "tiny"             #  fields, except out, progress and threads: the sweep's)
    [grid]                     # config field -> non-empty list: the Cartesian product
    bits = [6, 8, 12]
    [[points]]                 # the list form: each table one point's fields, crossed with
    perturbation = "pezo-pregen"   # the grid (a key may not be in both)
    [hardware]                 # generator-only fields (layout, length_bits, snapshot), applied
    layout = "striped"         #  to every generator that has them
    [report]                   # how generator reports are made (ReportOptions)
    [search]                   # the multi-objective search (SearchOptions)

Points are the list entries (or one empty entry) times the grid, each merged over
``[train]``; a sweep has at most :data:`MAX_POINTS` of them, counted before any is built
(a larger one is refused at once, naming the grid and the limit). The file is read by
:func:`zoforge.config.read_table` (the one strict reader). An unknown key or a value of the
wrong type or out of range anywhere is one :class:`ConfigError` naming the key where it was
written (``grid.bits in SWEEP.toml must be ...``, or the flag that set it: ``train.bits
(set by --set bits)``) and its allowed values: :func:`read_sweep` constructs every point's
:class:`TrainConfig` and generator configuration, whose errors name the field, and says
where that field was written, so nothing invalid reaches the store.

Keys (:func:`stable_key`, the one hash recipe :func:`zoforge.config.data_hash`): a training
is keyed by everything that determines its result (:meth:`TrainConfig.result_fields`; a
fine-tuning: all its fields and the task's name), a generator report by the generator's
configuration and the report options; points sharing a key share the work.

A ``finetune`` point is a ``train`` task of the store (its spec,
:func:`zoforge.sweep.tasks.finetune_spec`, carries ``task = "finetune"`` and its
generator's head-level ``perturbation`` name, the outputs' label), so the store, resume, the
executors and the results read it unchanged; its generator is :meth:`FinetuneConfig.generator` (the ZO
layer's, with save/restore), reported like any other.
"""
from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from zoforge.boards.registry import boards
from zoforge.config import (Config, FloatRange, IntRange, OneOf, data_hash, field_of, param,
                            read_table, unknown_key)
from zoforge.errors import ConfigError
from zoforge.golden.finetune.config import FinetuneConfig
from zoforge.golden.rng import GENERATOR_CONFIGS, GeneratorConfig
from zoforge.golden.zo.config import TrainConfig
from zoforge.reports.synth import RAM_STYLES
from zoforge.sweep.tasks import TASK_KEY, TASKS, finetune_spec

__all__ = ["ReportOptions", "SearchOptions", "Point", "Sweep", "read_sweep", "read_toml",
           "sweep_from_dict", "stable_key", "train_key", "TOP_KEYS", "SET_BY_SWEEP",
           "TRAIN_KEYS", "HARDWARE_KEYS", "MAX_POINTS", "task_keys"]

#: TrainConfig fields every point gets from the sweep, not from the file.
SET_BY_SWEEP = ("out", "progress", "threads")


def task_keys(task: str) -> tuple[str, ...]:
    """The keys of ``[train]``, ``[grid]`` and ``[[points]]`` for ``task``: its config's
    fields but the ones the sweep sets."""
    return tuple(f.name for f in dataclasses.fields(TASKS[task]) if f.name not in SET_BY_SWEEP)


TRAIN_KEYS = task_keys("train")
#: Generator fields that no training option sets (hardware-only choices).
HARDWARE_KEYS = tuple(sorted({f.name for t in GENERATOR_CONFIGS.values()
                              for f in dataclasses.fields(t)} - set(TRAIN_KEYS)))
TOP_KEYS = ("name", "description", "paper", "train", "grid", "points", "hardware", "report",
            "search", "task")
_KEY_VERSION = 2       # 2: keys are zoforge.config.data_hash (20 hex digits)
#: The most points one sweep may have (point tables x grid values; checked before expansion).
MAX_POINTS = 10_000


def stable_key(kind: str, data: dict) -> str:
    """``kind-`` and :func:`~zoforge.config.data_hash` of ``data`` (with a key version)."""
    return f"{kind}-{data_hash({'zoforge_sweep_key': _KEY_VERSION, **data})}"


def train_key(cfg: TrainConfig | FinetuneConfig) -> str:
    """The key of a training: the hash of the fields its result is a function of (a
    fine-tuning's: :meth:`FinetuneConfig.result_fields`, and the task)."""
    if isinstance(cfg, FinetuneConfig):
        return stable_key("train", {TASK_KEY: "finetune", **cfg.result_fields()})
    return stable_key("train", cfg.result_fields())


@dataclass(frozen=True)
class ReportOptions(Config):
    """How the sweep reports a generator (``[report]``); part of the report's key."""

    kind: ClassVar[str] = "sweep-report"

    board: str = param("zcu102", "board of the generator reports",
                       OneOf(tuple(boards())))
    clock_mhz: float = param(300.0, "target clock for Fmax and power (within the board's "
                             "range)", FloatRange(0.0, low_open=True))
    activity_cycles: int = param(500, "co-simulated cycles for the switching activity",
                                 IntRange(10, 10_000_000))
    power: bool = param(True, "measure switching activity and estimate power (false: no "
                        "power figures)")
    pnr: bool = param(True, "place and route on an open-toolchain board (nextpnr)")
    ram_style: str = param("auto", "memory mapping in synthesis", OneOf(RAM_STYLES))
    activity_lanes: int = param(32, "Gaussian generators with more lanes measure toggle "
                                "rates on this many identical lanes (0: all)",
                                IntRange(0, 1 << 16))

    def check(self) -> None:
        boards()[self.board].check_clock(self.clock_mhz, "clock_mhz")


@dataclass(frozen=True)
class SearchOptions(Config):
    """The NSGA-II search over the sweep's space (``[search]``)."""

    kind: ClassVar[str] = "sweep-search"

    trials: int = param(24, "configurations the search evaluates (each over every seed)",
                        IntRange(1, 100_000))
    population: int = param(8, "NSGA-II population (trials run in parallel per generation)",
                            IntRange(2, 10_000))
    seed: int = param(0, "seed of the sampler", IntRange(0, 2**32 - 1))


@dataclass(frozen=True)
class Point:
    """One point: its training, the generator it is bit-exact with, and their keys.

    swept: the values of the keys the sweep varies (grid and point-table keys);
    entry / combo: the point table it came from and its grid values (the search's space)
    """

    index: int
    train: TrainConfig | FinetuneConfig
    generator: GeneratorConfig | None
    swept: dict
    entry: int
    combo: tuple
    train_key: str
    hw_key: str | None

    def train_spec(self) -> dict:
        """The training's fields (without the ones the sweep sets); a fine-tuning's
        :func:`~zoforge.sweep.tasks.finetune_spec` (``task = "finetune"``, the label)."""
        if isinstance(self.train, FinetuneConfig):
            return finetune_spec(self.train)
        return {k: v for k, v in self.train.field_values().items() if k not in SET_BY_SWEEP}


@dataclass(frozen=True)
class Sweep:
    """A validated sweep: its points, report and search options, and its data."""

    name: str
    description: str
    paper: str
    points: tuple[Point, ...]
    report: ReportOptions
    search: SearchOptions
    grid: dict                 # key -> values (the order of ``combo``)
    entries: tuple[dict, ...]  # the point tables
    data: dict                 # the sweep as TOML data (what --print-config writes)
    where: dict                # (entry, combo) -> index of its point (duplicates share one)

    def report_spec(self, point: Point) -> dict | None:
        """What the point's report task is a function of (None: no generator)."""
        if point.generator is None:
            return None
        return _report_spec(point.generator, self.report)

    def tasks(self) -> list[tuple[str, str, dict]]:
        """``(key, kind, spec)`` of every distinct training and report, in point order."""
        seen, out = set(), []
        for point in self.points:
            if point.hw_key is not None and point.hw_key not in seen:
                seen.add(point.hw_key)
                out.append((point.hw_key, "report", self.report_spec(point)))
            if point.train_key not in seen:
                seen.add(point.train_key)
                out.append((point.train_key, "train", point.train_spec()))
        return out


def read_toml(path: Path | str) -> dict:
    """The TOML data of ``path`` (:func:`zoforge.config.read_table`: a one-line ConfigError
    naming ``config`` and the file if it cannot be read)."""
    return read_table(path, "config", syntax="TOML")


def read_sweep(path: Path | str, name: str | None = None) -> Sweep:
    """The sweep a SWEEP.toml describes (see the module docstring)."""
    return sweep_from_dict(read_toml(path), source=str(path),
                           default_name=name or Path(path).stem)


def sweep_from_dict(data: dict, source: str = "the sweep", default_name: str = "sweep",
                    origins: dict[str, str] | None = None) -> Sweep:
    """Validate ``data`` (TOML data) into a :class:`Sweep`; errors name the key and ``source``
    or, for a key in ``origins`` (``train.bits``, ``grid.seed``, ``report.clock_mhz``), the
    flag that set it (``--set bits``)."""
    where = f" in {source}"
    origins = dict(origins or {})

    def place(path: str) -> str:
        """Where the key ``path`` was written, for an error message: ``train.steps in
        SWEEP.toml``, or ``train.steps (set by --set steps)``."""
        return f"{path} (set by {origins[path]})" if path in origins else f"{path}{where}"

    _known_keys(data, TOP_KEYS, "", where)
    name = _string(data, "name", default_name, where)
    description = _string(data, "description", "", where)
    paper = _string(data, "paper", "", where)
    task = data.get("task", "train")
    if not isinstance(task, str) or task not in TASKS:
        raise ConfigError(f"task{where}", "one of " + ", ".join(TASKS), task)
    keys = task_keys(task)
    fixed = _table(data, "train", where)
    _known_keys(fixed, keys, "train.", where, origins)
    grid = _table(data, "grid", where)
    _known_keys(grid, keys, "grid.", where, origins)
    for key, values in grid.items():
        if not isinstance(values, list) or not values or any(
                isinstance(v, (list, dict)) for v in values):
            raise ConfigError(place(f"grid.{key}"), "a non-empty list of values", values)
    entries = data.get("points", [{}])
    if not isinstance(entries, list) or not entries or not all(
            isinstance(e, dict) for e in entries):
        raise ConfigError(f"points{where}", "a non-empty list of tables ([[points]])",
                          type(entries).__name__)
    for number, entry in enumerate(entries):
        _known_keys(entry, keys, f"points[{number}].", where)
        both = sorted(set(entry) & set(grid))
        if both:
            raise ConfigError(f"points[{number}].{both[0]}{where}", "a key that is not also "
                              "in [grid]", entry[both[0]])
    _check_size(grid, entries, where)
    hardware = _table(data, "hardware", where)
    _known_keys(hardware, HARDWARE_KEYS, "hardware.", where, origins)
    for key, value in hardware.items():   # each value valid for the generators that have it
        for config_type in GENERATOR_CONFIGS.values():
            if key in {f.name for f in dataclasses.fields(config_type)}:
                _located(lambda: config_type(**{key: value}), {key: f"hardware.{key}"}, place)
    report = _options(ReportOptions, data, "report", where, origins)
    search = _options(SearchOptions, data, "search", where, origins)
    points, located = _expand(task, fixed, grid, entries, hardware, report, place)
    normalised = {"name": name, "description": description, "paper": paper,
                  "task": "" if task == "train" else task, "train": fixed,
                  "grid": grid, "points": entries, "hardware": hardware,
                  "report": _fields(report), "search": _fields(search)}
    return Sweep(name=name, description=description, paper=paper, points=tuple(points),
                 report=report, search=search, grid=dict(grid), entries=tuple(entries),
                 where=located,
                 data={k: v for k, v in normalised.items() if v not in ({}, "", [{}])})


def _check_size(grid: dict, entries: list, where: str) -> None:
    """Refuse a sweep of more than :data:`MAX_POINTS` points before building any."""
    count = len(entries)
    for values in grid.values():
        count *= len(values)
    if count > MAX_POINTS:
        factors = ([f"{len(entries)} point tables"] if len(entries) > 1 else []) + [
            f"{len(v)} {k}" for k, v in grid.items()]
        raise ConfigError(f"grid{where}", f"a sweep of at most {MAX_POINTS:,} points",
                          f"{' x '.join(factors)} = {count:,}")


def _expand(task: str, fixed: dict, grid: dict, entries: list[dict], hardware: dict,
            report: ReportOptions, place) -> tuple[list[Point], dict]:
    points: list[Point] = []
    seen: dict[str, int] = {}
    located: dict[tuple, int] = {}
    for number, entry in enumerate(entries):
        for combo in itertools.product(*grid.values()):
            chosen = dict(zip(grid, combo))
            values = {**fixed, **entry, **chosen}
            origin = {**{k: f"train.{k}" for k in fixed},
                      **{k: f"points[{number}].{k}" for k in entry},
                      **{k: f"grid.{k}" for k in grid}}
            if task == "train":
                cfg = _located(lambda: TrainConfig(**values, progress=False, threads=1),
                               origin, place)
                generator = cfg.hardware_generator()
            else:
                cfg = _located(lambda: TASKS[task](**values), origin, place)
                generator = cfg.generator()
            if generator is not None:
                own = {f.name for f in dataclasses.fields(generator)}
                generator = generator.replace(**{k: v for k, v in hardware.items() if k in own})
            key = train_key(cfg)
            if key in seen:             # the same training as an earlier point
                located[number, combo] = seen[key]
                continue
            seen[key] = located[number, combo] = len(points)
            hw_key = (None if generator is None
                      else stable_key("report", _report_spec(generator, report)))
            points.append(Point(index=len(points), train=cfg, generator=generator,
                                swept={**entry, **chosen}, entry=number, combo=combo,
                                train_key=key, hw_key=hw_key))
    return points, located


def _report_spec(generator: GeneratorConfig, report: ReportOptions) -> dict:
    return {"generator": generator.to_dict(), "report": report.to_dict()}


# -- strict reading helpers ---------------------------------------------------------------

def _known_keys(table: dict, allowed, prefix: str, where: str, origins: dict | None = None
                ) -> None:
    for key in table:
        if key not in allowed:
            note = (f" ({', '.join(SET_BY_SWEEP)} are set by the sweep)"
                    if key in SET_BY_SWEEP else "")
            flag = (origins or {}).get(f"{prefix}{key}")
            if flag is not None:
                raise unknown_key(f"{prefix}{key}", allowed, f" (set by {flag})", note)
            raise unknown_key(f"{prefix}{key}", allowed, where, note)


def _table(data: dict, key: str, where: str) -> dict:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{key}{where}", f"a table ([{key}])", type(value).__name__)
    return value


def _string(data: dict, key: str, default: str, where: str) -> str:
    value = data.get(key, default)
    if not isinstance(value, str) or (key == "name" and not value.strip()):
        raise ConfigError(f"{key}{where}", "a non-empty string" if key == "name"
                          else "a string", value)
    return value


def _options(config_type: type[Config], data: dict, key: str, where: str, origins: dict):
    values = _table(data, key, where)
    fields = [f.name for f in dataclasses.fields(config_type)]
    _known_keys({k: v for k, v in values.items() if f"{key}.{k}" in origins}, fields,
                f"{key}.", where, origins)
    source = f"[{key}]{where.replace(' in ', ' of ')}"
    try:
        return config_type.from_dict(values, source=source)
    except ConfigError as error:
        field = error.parameter.split(" in ", 1)[0]
        if f"{key}.{field}" in origins:
            raise error.renamed(f"{key}.{field} (set by {origins[f'{key}.{field}']})"
                                ) from None
        raise


def _fields(config: Config) -> dict:
    return config.field_values()


def _located(build, origin: dict, place):
    """``build()``, with a ConfigError naming a field (``n_rng``) renamed to where the key
    was written (``grid.n_rng in FILE``, or the flag: ``--grid n_rng``)."""
    try:
        return build()
    except ConfigError as error:
        field = field_of(error)
        raise error.renamed(place(origin.get(field, field))) from None
