"""What to build: the sweep's answer, ahead of its tables and plots.

From the configurations with a generator (:func:`zoforge.sweep.results.group_runs`):

* the **front under noise** (:attr:`Group.front_noise`): a configuration is dominated only
  when another is no worse in every objective and it is worse beyond the seeds' spread in
  one (:func:`zoforge.sweep.results.noise_test`);
* the **best within the budget** (``--budget lut=500,power=0.7``; no budget: the whole
  space): of the configurations whose figures are within every limit, the best by the
  task kind's metric (:attr:`Group.metric`: the accuracy, or a fine-tuning's final
  training loss); among those whose metric is within noise of it, the cheapest (LUTs,
  then power);
* the **knee** of the front under noise: the configuration closest to the ideal point
  (best metric, fewest LUTs, least power) with each objective scaled to [0, 1] over the
  front.

Each comes with its configuration and the commands that generate the design
(``zoforge generate``) and its report (``zoforge build``). A configuration whose target
clock exceeds its estimated Fmax is flagged wherever it is named.
"""
from __future__ import annotations

import difflib
import math
import shlex
from dataclasses import dataclass

from zoforge.config import flag_name
from zoforge.errors import ConfigError
from zoforge.sweep.pareto import normaliser
from zoforge.sweep.results import (NOISE_TEST, Group, column_title, metric_tolerance,
                                   noise_test, objectives)
from zoforge.sweep.safe import plain

__all__ = ["BUDGET_KEYS", "Pick", "Recommendation", "parse_budget", "recommend",
           "describe", "commands", "summary_lines", "SAME"]

#: What a pick that repeats the one before it says instead of its figures and commands.
SAME = "the same design as above"

#: --budget key -> hardware column
BUDGET_KEYS = {"lut": "LUT", "ff": "FF", "bram18": "BRAM18", "dsp": "DSP", "power": "power_w"}


@dataclass(frozen=True)
class Pick:
    role: str           # "best within the budget", "most accurate", "knee of the front"
    group: Group
    why: str


@dataclass(frozen=True)
class Recommendation:
    front: list[Group]          # the front under noise, by LUTs
    best: Pick | None           # the best within the budget (or overall)
    knee: Pick | None
    budget: dict[str, float]    # column -> limit
    unmet: str                  # why there is no best pick ("" when there is one)

    @property
    def noise_test(self) -> str:
        """How the front under noise compared the front's metric (stated on the page)."""
        return noise_test(self.front[0].metric) if self.front else NOISE_TEST

    def picks(self) -> list[tuple[Pick, bool]]:
        """The picks in order, each with whether it repeats the design before it."""
        out, seen = [], set()
        for pick in (self.best, self.knee):
            if pick is not None:
                out.append((pick, id(pick.group) in seen))
                seen.add(id(pick.group))
        return out


def parse_budget(text: str | None) -> dict[str, float]:
    """``lut=500,power=0.7`` -> ``{"LUT": 500.0, "power_w": 0.7}`` (one-line ConfigError
    naming ``--budget`` otherwise)."""
    if text is None:
        return {}
    out: dict[str, float] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        if not sep or not key:
            raise ConfigError("--budget", "KEY=LIMIT,... with KEY one of "
                              + ", ".join(BUDGET_KEYS), text)
        if key not in BUDGET_KEYS:
            guess = difflib.get_close_matches(key, BUDGET_KEYS, n=1)
            raise ConfigError(f"--budget key {key!r}", "one of " + ", ".join(BUDGET_KEYS)
                              + (f"; did you mean {guess[0]}?" if guess else ""))
        try:
            limit = float(value)
        except ValueError:
            limit = math.nan
        if not (math.isfinite(limit) and limit >= 0):
            raise ConfigError(f"--budget {key}", "a number >= 0", value.strip())
        if BUDGET_KEYS[key] in out:
            raise ConfigError(f"--budget {key}", "given once (a key may be set only once)",
                              "given twice")
        out[BUDGET_KEYS[key]] = limit
    return out


def recommend(groups: list[Group], budget: dict[str, float] | None = None) -> Recommendation:
    """The recommendation over ``groups`` (fronts already marked by ``group_runs``)."""
    budget = dict(budget or {})
    costed = [g for g in groups if objectives(g) is not None]
    front = sorted((g for g in costed if g.front_noise), key=_cost)
    fits = [g for g in costed if all(column in g.hardware
                                     and g.hardware[column].value <= limit
                                     for column, limit in budget.items())]
    best, unmet = None, ""
    if fits:
        metric = fits[0].metric
        top = max(fits, key=lambda g: metric.direction * g.quality)
        near = [g for g in fits if metric.direction * (top.quality - g.quality)
                <= metric_tolerance(top, g)]
        choice = min(near, key=_cost)
        best_text = _best_text(metric)
        why = (f"the {best_text} within {_budget_text(budget)}" if budget
               else f"the {best_text} (no --budget given)")
        if choice is not top:
            why += (f"; {_name(top)} has a {metric.better} mean ({top.quality:.3f}) but "
                    f"within noise of this cheaper one")
        best = Pick("best within the budget" if budget else best_text, choice, why)
    elif costed:
        unmet = f"no configuration fits {_budget_text(budget)}"
        missing = [column_title(c) for c in budget if not any(c in g.hardware for g in costed)]
        if missing:
            unmet += f" ({', '.join(missing)} not measured in this sweep)"
    knee = None
    if front:
        width = min(len(objectives(g)) for g in front)

        def distance(group: Group) -> float:   # to the ideal point, scaled over the front
            return math.hypot(*scale(objectives(group)[:width]))
        scale = normaliser([objectives(g)[:width] for g in front])
        choice = min(front, key=lambda g: (distance(g), _cost(g)))
        knee = Pick("knee of the front", choice, "closest to the ideal point (best "
                    f"{choice.metric.title}, least cost) with each objective scaled over the "
                    "front under noise")
    return Recommendation(front=front, best=best, knee=knee, budget=budget, unmet=unmet)


def _best_text(metric) -> str:
    """``most accurate`` for the accuracy, else ``lowest final training loss``."""
    if metric.field == "accuracy_after":
        return "most accurate"
    return f"{'highest' if metric.direction > 0 else 'lowest'} {metric.title}"


def _cost(group: Group) -> tuple:
    hardware = group.hardware
    return tuple(hardware[c].value if c in hardware else math.inf for c in ("LUT", "power_w"))


def _budget_text(budget: dict[str, float]) -> str:
    return "the budget " + ", ".join(f"{column_title(c)} ≤ {limit:g}"
                                     for c, limit in budget.items())


def _name(group: Group) -> str:
    return ", ".join(f"{k}={v}" for k, v in group.label.items()) or str(
        group.config.get("perturbation"))


def describe(group: Group) -> str:
    """``n_rng=7, bits=6: accuracy 0.508 ± 0.011 (2 seeds), 60 LUT, 0.5975 W (0.59 W
    static + 0.0075 W dynamic)`` (the group's metric first, by its title), with a warning
    when the clock exceeds the Fmax."""
    value = "-" if group.quality is None else f"{group.quality:.3f}"
    if group.quality_sd is not None:
        value += f" ± {group.quality_sd:.3f}"
    parts = [f"{group.metric.title} {value} ({len(group.qualities)} seeds)"]
    hardware = group.hardware
    if "LUT" in hardware:
        parts.append(f"{hardware['LUT'].value:.0f} LUT")
    if "power_w" in hardware:
        power = f"{hardware['power_w'].value:.4g} W"
        if "static_w" in hardware and "dynamic_w" in hardware:
            power += (f" ({hardware['static_w'].value:.3g} W static + "
                      f"{hardware['dynamic_w'].value:.3g} W dynamic)")
        parts.append(power)
    text = f"{_name(group)}: " + ", ".join(parts)
    if group.over_clock():
        fmax = group.hardware["fmax_mhz"].value
        text += (f" [WARNING: target clock {group.report_options['clock_mhz']:g} MHz exceeds "
                 f"the estimated Fmax {fmax:.0f} MHz")
        at_fmax = group.power_at_fmax()
        text += f"; power at {fmax:.0f} MHz {at_fmax:.4g} W]" if at_fmax is not None else "]"
    return text


def commands(group: Group) -> list[str]:
    """``zoforge generate`` for the design and ``zoforge build`` for its report."""
    generator = group.generator
    if generator is None:
        return []
    design = generator["kind"]
    flags = []
    for key, value in generator.items():
        if key == "kind":
            continue
        if isinstance(value, bool):     # --snapshot / --no-snapshot
            flags.append(flag_name(key) if value else "--no-" + flag_name(key)[2:])
        else:
            flags += [flag_name(key), str(value)]
    slug = "-".join(str(v) for k, v in generator.items() if k != "kind"
                    and not isinstance(v, bool))
    out = "build/" + "".join(c if c.isalnum() or c in "-_." else "-" for c in
                             f"{design}-{slug}")
    report = group.report_options or {}
    build = ["--board", str(report.get("board", "zcu102"))]
    if "clock_mhz" in report:
        build += ["--clock-mhz", f"{report['clock_mhz']:g}"]
    if "activity_cycles" in report:
        build += ["--activity-cycles", str(report["activity_cycles"])]
    if report.get("ram_style", "auto") != "auto":
        build += ["--ram-style", report["ram_style"]]
    build += [] if report.get("power", True) else ["--no-power"]
    build += [] if report.get("pnr", True) else ["--no-pnr"]
    return [shlex.join(["zoforge", "generate", design, *flags, "--out", out]),
            shlex.join(["zoforge", "build", "--design", design, *flags, *build,
                        "--out", out + "-report"])]


def summary_lines(recommendation: Recommendation) -> list[str]:
    """The recommendation as plain text lines (the terminal summary; the Markdown and the
    page show the same), each one printable line (no terminal escape from a data path)."""
    return [plain(line) for line in _summary(recommendation)]


def _summary(recommendation: Recommendation) -> list[str]:
    lines = []
    picks = recommendation.picks()
    if not picks:
        return [recommendation.unmet or "no configuration with a generator has finished yet"]
    for pick, repeated in picks:
        lines.append(f"{pick.role}: {SAME if repeated else describe(pick.group)}")
        lines.append(f"  why: {pick.why}")
        if not repeated:
            lines += [f"  $ {command}" for command in commands(pick.group)[:1]]
    if recommendation.unmet:
        lines.append(recommendation.unmet)
    lines.append("front under noise: " + "; ".join(_name(g) for g in recommendation.front))
    return lines
