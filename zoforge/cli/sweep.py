"""``zoforge sweep``: accuracy x area x power over a design space (see docs/sweeps.md)."""
from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path

from zoforge.errors import ConfigError, check_int_range
from zoforge.sweep.presets import PRESETS

_DESCRIPTION = """\
Run a sweep: for every point a golden ZO training (accuracy before/after, final loss,
steps/s) and the board report of the generator its perturbation source is bit-exact with
(LUT, FF, BRAM, DSP, power, Fmax, each with its source label), joined on the
configurations' stable hashes; a generator's report is made once for all its seeds. Results
go into a durable store (--store DIR, SQLite): a sweep killed at any moment resumes where
it stopped, several sweep processes can share a store, failed points are recorded and run
again only with --retry-failed. Then it writes DIR/<name>.md, .csv, .html (self-contained,
plots embedded) and <name>-plots/, each opening with what to build (the front under noise,
the best design within --budget, the knee of the front, with the commands that generate
them); the same goes to the terminal. The points come from --config SWEEP.toml, --preset,
or the quick flags (--set, --grid) on top of either."""

_EPILOG = """\
examples:
  zoforge sweep --preset tiny --store runs/tiny
  zoforge sweep --config SWEEP.toml --store runs/s --jobs 2
  zoforge sweep --store runs/q --set model=tiny --set steps=50 \\
      --set perturbation=pezo-onthefly --grid bits=6,8,10 --grid seed=0,1
  zoforge sweep --preset pezo-fig4 --store runs/fig4 --search --trials 12
  zoforge sweep --preset tiny --store runs/tiny --executor dask --jobs 2   # a local cluster
  zoforge sweep --preset pezo-fig4 --store runs/fig4 --executor dask --scheduler tcp://h:8786
  zoforge sweep --preset pezo-fig4 --store runs/fig4 --outputs-only --budget lut=300,power=0.61
  zoforge sweep --preset pezo-fig3 --print-config > SWEEP.toml"""


def register(tree) -> None:
    parser = tree.command("sweep", "design-space sweep: accuracy x area x power over "
                          "generators, bit-widths, pool sizes and training options",
                          formatter_class=argparse.RawDescriptionHelpFormatter,
                          epilog=_EPILOG)
    parser.description = _DESCRIPTION
    source = parser.add_argument_group("what to sweep")
    source.add_argument("--config", type=Path, metavar="SWEEP.toml",
                        help="the sweep (schema in docs/sweeps.md)")
    source.add_argument("--preset", metavar="NAME",
                        help="a built-in sweep: " + ", ".join(PRESETS)
                             + " (docs/sweeps.md, Presets)")
    source.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a fixed value: a training option (steps=200), or report.KEY, "
                             "hardware.KEY, search.KEY; repeatable")
    source.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...",
                        help="a training option to sweep over these values; repeatable")
    source.add_argument("--name", help="the sweep's name in the store (default: the "
                                       "config's name, the file's stem or the preset's)")
    source.add_argument("--print-config", action="store_true",
                        help="print the sweep as SWEEP.toml (after validation) and exit")
    run = parser.add_argument_group("how to run it")
    run.add_argument("--store", metavar="DIR",
                     help="the sweep store folder (created if missing; required to run)")
    run.add_argument("--out", metavar="DIR",
                     help="where the tables, plots and HTML page go (default: the store)")
    run.add_argument("--executor", default="local", metavar="{local,dask}",
                     help="local worker processes (default) or a Dask cluster")
    run.add_argument("--scheduler", metavar="ADDRESS",
                     help="the Dask scheduler (tcp://HOST:PORT) for --executor dask "
                          "(default: a local cluster of --jobs worker processes)")
    run.add_argument("--connect-timeout-s", type=float, default=None, metavar="S",
                     help="seconds for connecting to --scheduler and its first answer, "
                          "together (default 30)")
    run.add_argument("--jobs", type=int, default=None,
                     help="local worker processes, one task each (default: the CPU count); "
                          "with --executor dask and no --scheduler, the local cluster's")
    run.add_argument("--lease-s", type=float, default=None, metavar="S",
                     help="a claimed task whose process sends no heartbeat for this long "
                          "may be taken over by another sweep process (default 120)")
    run.add_argument("--retry-failed", action="store_true",
                     help="run the failed tasks again")
    run.add_argument("--search", action="store_true",
                     help="multi-objective search (NSGA-II) over the sweep's space instead "
                          "of the whole grid")
    run.add_argument("--trials", type=int, default=None,
                     help="configurations the search evaluates (default: [search] trials)")
    run.add_argument("--outputs-only", action="store_true",
                     help="only write the tables, plots and page from the store")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument("--repair", action="store_true", help="set the store's damaged rows "
                     "aside (table damaged) and run their tasks again")
    run.add_argument("--budget", metavar="KEY=LIMIT,...",
                     help="hardware budget of the recommended design: lut, ff, bram18, dsp, "
                          "power (W), e.g. lut=500,power=0.7")
    parser.set_defaults(func=run_sweep)


def run_sweep(args: argparse.Namespace) -> int:
    from zoforge.outputs import check_out_dir
    from zoforge.sweep.executors import make_executor
    from zoforge.sweep.outputs import write_outputs
    from zoforge.sweep.recommend import parse_budget, summary_lines
    from zoforge.sweep.safe import plain
    from zoforge.sweep.runner import DEFAULT_LEASE_S, register_scope, run_scope
    from zoforge.sweep.search import run_search, search_scope
    from zoforge.sweep.store import Store

    sweep = _sweep(args)
    budget = parse_budget(args.budget)
    if args.print_config:
        import tomli_w
        sys.stdout.write(tomli_w.dumps(sweep.data))
        return 0
    if args.store is None:
        raise ConfigError("--store", "a folder for the sweep store (or give --print-config)")
    # every check before the store is opened or a worker started
    store_dir = check_out_dir("--store", args.store)
    out_dir = store_dir if args.out is None else check_out_dir("--out", args.out)
    lease_s = DEFAULT_LEASE_S if args.lease_s is None else args.lease_s
    if not lease_s >= 5:
        raise ConfigError("--lease-s", "a number of seconds >= 5", args.lease_s)
    if args.jobs is not None:
        check_int_range("--jobs", args.jobs, 1, 1024)
    timeout_s = args.connect_timeout_s
    if timeout_s is not None and not 0 < timeout_s <= 3600:
        raise ConfigError("--connect-timeout-s", "a number of seconds with 0 < S <= 3600",
                          timeout_s)
    scope = search_scope(sweep) if args.search else sweep.name
    executor = (None if args.outputs_only
                else make_executor(args.executor, args.jobs, args.scheduler, timeout_s))
    try:
        store = Store(store_dir, repair=args.repair)
        if args.outputs_only and scope not in store.scopes():
            raise ConfigError("--outputs-only", "used with a sweep the store holds (" + (
                ", ".join(store.scopes()) or "it holds none") + ")", scope)
        if args.search and executor is not None:
            found = run_search(sweep, store, executor, lease_s=lease_s,
                               retry_failed=args.retry_failed, progress=not args.no_progress)
            print(f"search: {found.trials} trials, {found.configurations} configurations, "
                  f"{found.trainings} trainings; {len(found.front)} on the front")
        elif executor is not None:
            register_scope(store, scope, sweep, sweep.points)
            run_scope(store, scope, executor, lease_s=lease_s,
                      retry_failed=args.retry_failed, progress=not args.no_progress)
    except BaseException:       # interrupted (or failed): stop the workers now, don't wait
        if executor is not None:
            executor.close(abandon=True)
            executor = None
        raise
    finally:
        if executor is not None:
            executor.close()
    paths = write_outputs(store, scope, out_dir, budget=budget)
    counts = store.counts(scope)
    print("What to build:")
    print("\n".join("  " + line for line in summary_lines(paths.recommendation)))
    print(f"{plain(scope)}: " + ", ".join(f"{n} {status}" for status, n in counts.items()
                                          if n) + " tasks")
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    if counts["failed"]:
        print(f"zoforge: {counts['failed']} tasks failed (errors in {paths['markdown']}); "
              "run again with --retry-failed", file=sys.stderr)
        return 1
    return 0


def _sweep(args: argparse.Namespace):
    """The sweep from --config / --preset and the quick flags, validated."""
    from zoforge.sweep.presets import preset
    from zoforge.sweep.spec import MAX_POINTS, read_toml, sweep_from_dict

    if args.config is not None and args.preset is not None:
        raise ConfigError("--preset", "left out when --config is given", args.preset)
    if args.trials is not None and args.trials < 1:
        raise ConfigError("--trials", "an integer >= 1", args.trials)
    if args.config is None and args.preset is None and not (args.set or args.grid):
        raise ConfigError("--config", "a SWEEP.toml file (or give --preset NAME, or --set "
                          "and --grid)")
    if args.config is not None:
        data, source, name = read_toml(args.config), str(args.config), args.config.stem
    elif args.preset is not None:
        data, source, name = preset(args.preset), f"preset {args.preset}", args.preset
    else:
        data, source, name = {}, "the command line", "sweep"
    origins: dict[str, str] = {}        # key -> the flag that set it (errors blame it)
    _once("--set", args.set)
    _once("--grid", args.grid)
    for text in args.set:
        key, value = _pair("--set", text)
        table, _, field = key.rpartition(".")
        if table not in ("", "train", "report", "hardware", "search"):
            raise ConfigError("--set", "KEY=VALUE with KEY a training option or report.KEY, "
                              "hardware.KEY, search.KEY", text)
        data.setdefault(table or "train", {})[field] = _value(value)
        origins[f"{table or 'train'}.{field}"] = f"--set {key}"
        if table in ("", "train"):      # a fixed value replaces the sweep's values of it
            _drop(data, field, keep="train")
    for text in args.grid:
        key, values = _pair("--grid", text)
        parts = values.split(",")
        if len(parts) > MAX_POINTS:     # counted before any value is parsed
            raise ConfigError(f"--grid {key}", f"at most {MAX_POINTS:,} values (a sweep has "
                              f"at most {MAX_POINTS:,} points)", f"{len(parts):,} values")
        _drop(data, key, keep="grid")   # a swept key replaces the sweep's values of it
        data.setdefault("grid", {})[key] = [_value(v) for v in parts]
        origins[f"grid.{key}"] = f"--grid {key}"
    if args.trials is not None:
        data.setdefault("search", {})["trials"] = args.trials
        origins["search.trials"] = "--trials"
    if args.name:
        data["name"] = args.name
        origins["name"] = "--name"
    return sweep_from_dict(data, source=source, default_name=name, origins=origins)


def _drop(data: dict, key: str, keep: str) -> None:
    """Remove ``key`` from the sweep's tables but ``keep`` (a flag sets it there): from
    [train], [grid] and every point table."""
    for table in ("train", "grid"):
        if table != keep and isinstance(data.get(table), dict):
            data[table].pop(key, None)
    for entry in data.get("points", []) if isinstance(data.get("points"), list) else []:
        if isinstance(entry, dict):
            entry.pop(key, None)


def _pair(flag: str, text: str) -> tuple[str, str]:
    """``KEY=VALUE`` of ``flag`` as (key with ``_`` for ``-``, value), both stripped; a
    control character anywhere (a newline would end the value early) is refused."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip() or not value.strip():
        raise ConfigError(flag, "KEY=VALUE", text)
    if not text.isprintable():
        raise ConfigError(flag, "KEY=VALUE without control characters (newlines, tabs, "
                          "escapes)", text)
    return key.strip().replace("-", "_"), value.strip()


def _once(flag: str, texts: list[str]) -> None:
    """A key given twice to ``flag`` is an error (as a key written twice in a file is), not
    the last one silently winning."""
    seen: set[str] = set()
    for text in texts:
        key = _pair(flag, text)[0]
        if key in seen:
            raise ConfigError(f"{flag} {key}", "given once (a key may be set only once)",
                              "given twice")
        seen.add(key)


def _value(text: str):
    """A TOML literal (6, 1e-3, true, "x") or, failing that, the text itself."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except (tomllib.TOMLDecodeError, RecursionError):
        return text
