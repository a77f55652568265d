"""Read and rewrite SAIF (Switching Activity Interchange Format) files.

SAIF is an S-expression: ``(SAIFILE ... (DURATION d) (INSTANCE name (NET (sig (T0 a) (T1 b)
(TC n) ...)) (INSTANCE child ...)))``. We need, per net bit, its toggle count TC over the
run's DURATION (in TIMESCALE units), and the instance hierarchy to split activity by block.
Verilator (``--trace-saif``) writes one ``$rootio`` instance for the top's ports and one
instance named after the top module holding everything, with submodules nested inside.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SaifInstance", "SaifFile", "parse_saif", "read_saif", "rewrite_root"]

_TOKEN = re.compile(r"\(|\)|\"[^\"]*\"|(?:\\.|[^\s()\\])+")


@dataclass
class SaifInstance:
    name: str
    nets: dict[str, int] = field(default_factory=dict)        # net bit -> toggle count
    children: dict[str, "SaifInstance"] = field(default_factory=dict)

    def walk(self, prefix: str = ""):
        """Yield (hierarchical net name, toggle count) for this instance and below."""
        for net, count in self.nets.items():
            yield prefix + net, count
        for name, child in self.children.items():
            yield from child.walk(f"{prefix}{name}/")


@dataclass
class SaifFile:
    duration: float            # in timescale units
    timescale_s: float         # seconds per unit
    instances: dict[str, SaifInstance]

    @property
    def duration_s(self) -> float:
        return self.duration * self.timescale_s


def read_saif(path: Path | str) -> SaifFile:
    return parse_saif(Path(path).read_text())


def parse_saif(text: str) -> SaifFile:
    """Parse SAIF ``text`` (comments ``//`` allowed)."""
    text = re.sub(r"//[^\n]*", "", text)
    tree = _parse_tokens(_TOKEN.findall(text))
    if not tree or tree[0] != "SAIFILE":
        raise ValueError("not a SAIF file (no SAIFILE)")
    duration, timescale, instances = 0.0, 1e-12, {}
    for item in tree[1:]:
        if not isinstance(item, list) or not item:
            continue
        if item[0] == "DURATION":
            duration = float(item[1])
        elif item[0] == "TIMESCALE":
            timescale = _timescale(" ".join(item[1:]))
        elif item[0] == "INSTANCE":
            instance = _instance(item)
            instances[instance.name] = instance
    return SaifFile(duration=duration, timescale_s=timescale, instances=instances)


def rewrite_root(text: str, instance: str, new_path: list[str]) -> str:
    """SAIF ``text`` reduced to the top-level ``instance``, re-rooted at ``new_path``.

    E.g. ``rewrite_root(text, "rng", ["zoforge_tb", "dut"])`` lets Vivado match the
    simulated design to the instance ``dut`` of a board wrapper, with
    ``read_saif -strip_path zoforge_tb``.
    """
    tree = _parse_tokens(_TOKEN.findall(re.sub(r"//[^\n]*", "", text)))
    header = [item for item in tree[1:] if not (isinstance(item, list) and item[:1] == ["INSTANCE"])]
    body = next((item for item in tree[1:] if isinstance(item, list)
                 and item[:2] == ["INSTANCE", instance]), None)
    if body is None:
        raise ValueError(f"SAIF has no top-level instance {instance!r}")
    node = ["INSTANCE", new_path[-1], *body[2:]]
    for name in reversed(new_path[:-1]):
        node = ["INSTANCE", name, node]
    return "(SAIFILE\n" + "".join(_emit(item, 1) for item in header + [node]) + ")\n"


# -- internals -----------------------------------------------------------------------------

def _parse_tokens(tokens: list[str]):
    stack: list[list] = [[]]
    for token in tokens:
        if token == "(":
            stack.append([])
        elif token == ")":
            if len(stack) < 2:
                raise ValueError("unbalanced parentheses in SAIF")
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(token)
    if len(stack) != 1:
        raise ValueError("unbalanced parentheses in SAIF")
    return stack[0][0] if stack[0] else []


def _instance(item: list) -> SaifInstance:
    instance = SaifInstance(name=_unescape(item[1]))
    for sub in item[2:]:
        if not isinstance(sub, list) or not sub:
            continue
        if sub[0] == "NET":
            for net in sub[1:]:
                counts = {entry[0]: entry[1] for entry in net[1:] if isinstance(entry, list)}
                instance.nets[_unescape(net[0])] = int(float(counts.get("TC", 0)))
        elif sub[0] == "INSTANCE":
            child = _instance(sub)
            instance.children[child.name] = child
    return instance


def _unescape(name: str) -> str:
    return re.sub(r"\\(.)", r"\1", name)


_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9, "ps": 1e-12, "fs": 1e-15}


def _timescale(text: str) -> float:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([munpf]?s)\s*", text)
    if not match:
        raise ValueError(f"bad SAIF TIMESCALE {text!r}")
    return float(match.group(1)) * _UNITS[match.group(2)]


def _emit(item, depth: int) -> str:
    """One S-expression as text: INSTANCE and NET blocks one child per line."""
    pad = " " * depth
    if item[0] in ("INSTANCE", "NET"):
        head = " ".join(part for part in item if not isinstance(part, list))
        inner = "".join(_emit(part, depth + 1) for part in item if isinstance(part, list))
        return f"{pad}({head}\n{inner}{pad})\n"
    return pad + _inline(item) + "\n"


def _inline(item) -> str:
    if not isinstance(item, list):
        return item
    return "(" + " ".join(_inline(part) for part in item) + ")"
