"""Behavioural Verilog models of the vendor primitives zoforge's generated Verilog may
instantiate, so that any simulator can run it.

A design elaborated for a board's family (``zoforge build`` on a Xilinx board: see
:func:`zoforge.hw.export.to_verilog`) may hold hand-instantiated primitives, e.g. the
UltraScale+ form of :class:`zoforge.hw.pe.packed_multiply.PackedMultiplier` is one
``DSP48E2``. Vivado and Yosys know them; Verilator and Icarus do not, so whatever simulates
such Verilog appends the models (:func:`with_models`). Each model covers only the subset the
project instantiates and stops the simulation (``$fatal``) on anything else: see the files.

:data:`MODELS`: primitive name -> model file (beside this module).

Synthesis needs no model (Yosys' ``synth_xilinx`` reads its own cell library), but a script
that checks the hierarchy before ``synth_xilinx`` (:mod:`zoforge.reports.synth`'s
``hierarchy -check``) must know the primitive by then: :func:`with_blackbox_stubs` appends a
``(* blackbox *)`` declaration (the model's parameters and ports, no body), which
``synth_xilinx`` replaces with the library's own.
"""
from __future__ import annotations

import re
from pathlib import Path

__all__ = ["MODELS", "model_path", "models_for", "with_models", "blackbox_stubs",
           "with_blackbox_stubs"]

_HERE = Path(__file__).resolve().parent

#: Primitive -> its model's file name in this folder.
MODELS = {"DSP48E2": "dsp48e2.v"}


def model_path(primitive: str) -> Path:
    """The model file of ``primitive`` (one of :data:`MODELS`)."""
    return _HERE / MODELS[primitive]


def _instantiated(verilog: str, primitive: str) -> bool:
    """Whether ``verilog`` instantiates ``primitive`` (a line starting with its name then a
    parameter list or an instance name) without defining it."""
    uses = re.search(rf"^\s*{primitive}\s+(#|\\?[A-Za-z_$])", verilog, re.MULTILINE)
    defines = re.search(rf"^\s*module\s+{primitive}\b", verilog, re.MULTILINE)
    return uses is not None and defines is None


def models_for(verilog: str) -> list[str]:
    """The primitives of :data:`MODELS` that ``verilog`` instantiates and does not define."""
    return [name for name in MODELS if _instantiated(verilog, name)]


def with_models(verilog: str) -> str:
    """``verilog`` with the model of every primitive it instantiates appended (the text
    unchanged when it instantiates none)."""
    texts = [model_path(name).read_text() for name in models_for(verilog)]
    return verilog if not texts else "\n".join([verilog.rstrip("\n"), *texts])


def blackbox_stubs(verilog: str) -> str:
    """``(* blackbox *)`` declarations of the primitives ``verilog`` instantiates (the
    models' module headers, parameters and ports, without their bodies); empty if none."""
    stubs = []
    for name in models_for(verilog):
        lines = model_path(name).read_text().splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith(f"module {name}"))
        last_port = max(i for i, line in enumerate(lines)
                        if re.match(r"\s*(input|output)\b", line))
        body = [line for line in lines[start:last_port + 1] if not line.strip().startswith("//")]
        stubs.append("\n".join(["(* blackbox *)", *body, "endmodule", ""]))
    return "\n".join(stubs)


def with_blackbox_stubs(verilog: str) -> str:
    """``verilog`` with :func:`blackbox_stubs` appended (unchanged when it instantiates no
    modelled primitive): what to give a synthesis script that checks the hierarchy."""
    stubs = blackbox_stubs(verilog)
    return verilog if not stubs else verilog.rstrip("\n") + "\n" + stubs
