"""The ZO layer's side of a fine-tuning step as a host program (:mod:`zoforge.sim.program`).

A fine-tuning step's ZO-layer calls (:mod:`zoforge.golden.finetune.calls`) as generators of
bus-operation batches over a :class:`~zoforge.sim.zolayer_host.LayerHost`, written once for
every backend (the job server through :class:`~zoforge.sim.finetune_cosim.RtlUnits`, the
cocotb bench through :func:`layer_calls_program`):

* :func:`adapter_call`: one branch. Registers M, K, N, RANK, MULT, SHIFT, EPS_SHIFT, then
  :class:`~zoforge.sim.zolayer_host.LayerSteps`' ``load`` (load_w, load_a, load_master),
  ``frozen`` (load_x, frozen_w, frozen_a) and ``branch`` with the call's flags; Y (M, N).
  A call whose W is all zeros (the split mapping's narrow call,
  :func:`zoforge.golden.finetune.split.narrow_call`) skips ``load_w`` and ``frozen_w`` and
  runs its branch with ``zero_w``: XW = X·0 = 0 for every X, so Y is the same.
* :func:`update_call`: one adapter's update. Registers N, RANK, ETA_MULT, ETA_SHIFT,
  load_master (clears D), GRAD, accumulate (``restore`` flag), apply, read_master; T'.

A call is given as a *spec* (JSON-able: shape, scalars, flags) and its numpy arrays
(``x`` with M a multiple of the layer's columns, ``w``, ``a``, ``master``):
:func:`zoforge.sim.finetune_cosim.layer_call_spec` makes them from a call record.
"""
from __future__ import annotations

import numpy as np

from zoforge.hw.zolayer.layouts import master_output, panel_words
from zoforge.hw.zolayer.registers import address
from zoforge.sim.program import Write
from zoforge.sim.zolayer_host import LayerHost, LayerSteps

__all__ = ["adapter_call", "update_call", "layer_call", "layer_calls_program", "BRANCH_FLAGS"]

#: The CTRL flags of a branch, in a spec's ``flags``.
BRANCH_FLAGS = ("save", "restore", "minus", "plain")


def _registers(host: LayerHost, values: dict):
    """Write registers in one batch."""
    replies = yield [Write(address(name), int(value)) for name, value in values.items()]
    host.irq = replies[-1].irq


def adapter_call(host: LayerHost, rows: int, cols: int, spec: dict, x: np.ndarray,
                 w: np.ndarray, a: np.ndarray, master: np.ndarray):
    """One branch (module docstring); returns Y (M, N) int32."""
    m, k, n, r = (spec[name] for name in ("m", "k", "n", "r"))
    yield from _registers(host, {"M": m, "K": k, "N": n, "RANK": r, "MULT": spec["mult"],
                                 "SHIFT": spec["shift"], "EPS_SHIFT": spec["eps_shift"]})
    steps = LayerSteps(host, rows, cols, True, m, k, n, r)
    zero_w = not w.any()
    yield from steps.load(master, None if zero_w else w, a)
    yield from steps.frozen(x, zero_w)
    return (yield from steps.branch(zero_w=zero_w, **{flag: bool(spec["flags"][flag])
                                                      for flag in BRANCH_FLAGS}))


def update_call(host: LayerHost, rows: int, spec: dict, master: np.ndarray):
    """One adapter's update (module docstring); returns the new master (r, N)."""
    n, r = spec["n"], spec["r"]
    yield from _registers(host, {"N": n, "RANK": r, "ETA_MULT": spec["eta_mult"],
                                 "ETA_SHIFT": spec["eta_shift"]})
    yield from host.job("load_master", panel_words(master, rows, host.lanes))
    yield from host.write("GRAD", spec["g"])
    yield from host.job("accumulate", restore=bool(spec["restore"]))
    yield from host.job("apply")
    out = yield from host.job("read_master", receive=True, beats=r * n // rows)   # r x N on R
    return master_output(out, n, rows)


def layer_call(host: LayerHost, rows: int, cols: int, spec: dict,
               arrays: dict[str, np.ndarray]):
    """One call of either kind (``spec["kind"]``: ``adapter`` or ``update``)."""
    if spec["kind"] == "adapter":
        return (yield from adapter_call(host, rows, cols, spec, arrays["x"], arrays["w"],
                                        arrays["a"], arrays["master"]))
    return (yield from update_call(host, rows, spec, arrays["master"]))


def layer_calls_program(args: dict, data: dict[str, np.ndarray]):
    """The ZO-layer calls ``args["calls"]`` (specs) in order, their arrays
    ``data["call<i>_<name>"]``, on a layer of ``args["rows"] x args["cols"]`` with
    ``args["lanes"]`` lanes. Returns the arrays ``out<i>`` and the results ``jobs`` (every
    job's counters and flags, with its call's index as ``call``)."""
    host = LayerHost(args["lanes"])
    arrays = {}
    for index, spec in enumerate(args["calls"]):
        start = len(host.jobs)
        call_arrays = {name: data[f"call{index}_{name}"] for name in ("x", "w", "a", "master")
                       if f"call{index}_{name}" in data}
        arrays[f"out{index}"] = yield from layer_call(host, args["rows"], args["cols"], spec,
                                                      call_arrays)
        for job in host.jobs[start:]:
            job["call"] = index
    return arrays, {"jobs": host.jobs}
