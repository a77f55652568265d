"""Start-up time of the command line (issue 19): the wall time of ``zoforge --help`` and of
each ``zoforge COMMAND --help``, the median of several runs, each in a fresh process.

``--python`` may be given several times to compare checkouts side by side in one run (each
venv's interpreter runs its own checkout's zoforge), e.g. before and after a change:

    .venv/bin/python benchmarks/bench_cli_startup.py [--runs 5] \\
        [--python /work/main/.venv/bin/python --python .venv/bin/python]

Also timed: one design's help (``zoforge generate rng --help``, ``zoforge cosim rng --help``).
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time

COMMANDS = ("demo", "generate", "cosim", "rng", "train", "build", "sweep", "toolchain")
EXTRA = (("generate", "rng"), ("cosim", "rng"), ("rng", "dump"))


def wall_time(python: str, argv: list[str], runs: int, folder: str) -> float:
    """Median wall time (s) of ``python -m zoforge ARGV`` over ``runs`` fresh processes, run
    in an empty ``folder`` (so that no checkout in the working folder shadows the
    interpreter's own)."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([python, "-m", "zoforge", *argv], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True, cwd=folder)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per command (median)")
    parser.add_argument("--python", action="append", metavar="PATH",
                        help="interpreter(s) to time (default: this one)")
    args = parser.parse_args()
    pythons = args.python or [sys.executable]
    with open("/proc/loadavg") as load:
        print(f"load average: {' '.join(load.read().split()[:3])}; median of {args.runs} "
              "fresh processes, seconds")
    rows = [[], *([command] for command in COMMANDS), *map(list, EXTRA)]
    width = max(len(" ".join(["zoforge", *row, "--help"])) for row in rows)
    print(f"{'command':<{width}}" + "".join(f"  {python:>{max(10, len(python))}}"
                                             for python in pythons))
    with tempfile.TemporaryDirectory() as folder:
        for row in rows:
            argv = [*row, "--help"]
            cells = "".join(
                f"  {wall_time(python, argv, args.runs, folder):>{max(10, len(python))}.3f}"
                for python in pythons)
            print(f"{' '.join(['zoforge', *argv]):<{width}}{cells}", flush=True)


if __name__ == "__main__":
    main()
