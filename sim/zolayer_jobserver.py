"""The ZO layer on the job server, step by step: :class:`LayerServer`, :class:`LayerSession`.

The host program is :mod:`zoforge.sim.zolayer_host`'s (the one every backend runs); this module
runs its pieces synchronously on a persistent :class:`~zoforge.sim.jobserver.JobServer`, so
a caller can compare each step with the golden model as it goes (the demo).
:class:`LayerServer` is the layer's server with ``write(name, value)``, ``read(name)`` and
``job(name, words, receive, **flags)`` (each job one batch: its cycles run in C++, the pipe
is crossed once); :class:`LayerSession` is the program one step at a time (``load``,
``frozen``, ``branch``, ``step`` -> :class:`~zoforge.sim.zolayer_host.StepRecord`, ``outputs``);
:func:`run_steps` is the whole co-simulation program on a server. Verilator only.
"""
from __future__ import annotations

import numpy as np

from zoforge.golden.zolayer import ZoLayerConfig
from zoforge.hw.export import design_verilog
from zoforge.hw.zolayer.designs import elaborate_layer
from zoforge.hw.zolayer.registers import ADDR_BITS
from zoforge.sim.backends import BusTarget
from zoforge.sim.jobserver import JobServer
from zoforge.sim.program import drive
from zoforge.sim.zolayer_host import LayerHost, LayerSteps, StepRecord, layer_program

__all__ = ["LayerServer", "LayerSession", "StepRecord", "run_steps", "layer_target"]


def layer_target(config: ZoLayerConfig) -> BusTarget:
    """The generated layer of ``config`` as a bus target (both streams ``max(R, C)``
    lanes)."""
    elaborated = elaborate_layer(config)
    return BusTarget(design_verilog(elaborated), elaborated.name,
                     lanes=max(config.rows, config.cols), addr_bits=ADDR_BITS,
                     memory_files=elaborated.memory_files)


class LayerServer:
    """The ZO layer of ``config`` on a job server (a context manager).
    ``server_options``: :class:`~zoforge.sim.jobserver.JobServer`'s (``source_idle``,
    ``sink_backpressure``, ``seed``, ``max_cycles``, ``timeout_s``)."""

    def __init__(self, config: ZoLayerConfig, **server_options):
        target = layer_target(config)
        self.config = config
        self.lanes = target.lanes
        self.server = JobServer(target.verilog, target.top, lanes=target.lanes,
                                addr_bits=target.addr_bits,
                                memory_files=target.memory_files, **server_options)
        self.host = LayerHost(self.lanes)

    @property
    def jobs(self) -> list[dict]:
        return self.host.jobs

    @property
    def pid(self) -> int | None:
        return self.server.pid

    @property
    def cycle(self) -> int:
        """Clock cycles simulated since the server started."""
        return self.server.cycle

    def run(self, program):
        """Run a host-program generator to its end on the server; its value."""
        return drive(program, self.server.exchange)

    def write(self, name: str, value: int) -> None:
        self.run(self.host.write(name, value))

    def read(self, name: str) -> int:
        return self.run(self.host.read(name))

    def job(self, name: str, words=None, receive: bool = False, **flags) -> np.ndarray | None:
        """Run one job (see :meth:`zoforge.sim.zolayer_host.LayerHost.job`)."""
        return self.run(self.host.job(name, words, receive, **flags))

    def stalls(self) -> dict[str, int]:
        """The stalls the server inserted per channel (:meth:`JobServer.stalls`)."""
        return self.server.stalls()

    def close(self, kill: bool = False) -> None:
        self.server.close(kill)

    def __enter__(self) -> "LayerServer":
        return self

    def __exit__(self, kind, value, traceback) -> None:
        self.close(kill=kind is not None)


class LayerSession:
    """The host's side of a training run on ``layer`` (full or lora-fa, shape ``m, k, n``
    (and ``r``)): :class:`~zoforge.sim.zolayer_host.LayerSteps` run step by step."""

    def __init__(self, layer: LayerServer, m: int, k: int, n: int, r: int = 0, *,
                 eps_shift: int, eta_mult: int, eta_shift: int, mult: int = 1 << 15,
                 shift: int = 24):
        config = layer.config
        self.layer, self.m, self.k, self.n, self.r = layer, m, k, n, r
        self.rows, self.cols, self.lanes = config.rows, config.cols, layer.lanes
        self.lora = config.mode == "lora-fa"
        self.steps = LayerSteps(layer.host, self.rows, self.cols, self.lora, m, k, n, r,
                                layer.config.branch_lanes)
        layer.run(self.steps.configure(eps_shift=eps_shift, eta_mult=eta_mult,
                                       eta_shift=eta_shift, mult=mult, shift=shift))

    def load(self, master: np.ndarray, w: np.ndarray | None = None,
             a: np.ndarray | None = None) -> None:
        """The frozen weights (lora-fa) and the master copy."""
        self.layer.run(self.steps.load(master, w, a))

    def frozen(self, x: np.ndarray, zero_w: bool = False) -> None:
        """Load a batch and compute its frozen products (``zero_w``: U only)."""
        self.layer.run(self.steps.frozen(x, zero_w))

    def branch(self, **flags) -> np.ndarray:
        return self.layer.run(self.steps.branch(**flags))

    def step(self, x: np.ndarray, target, queries: int, loss, gradient,
             sequential: bool = False) -> StepRecord:
        """One ZO step (see :meth:`zoforge.sim.zolayer_host.LayerSteps.step`)."""
        return self.layer.run(self.steps.step(x, target, queries, loss, gradient,
                                              sequential))

    def outputs(self, x: np.ndarray) -> np.ndarray:
        """Unperturbed outputs for ``x`` (see :meth:`~zoforge.sim.zolayer_host.LayerSteps.outputs`)."""
        return self.layer.run(self.steps.outputs(x))


def run_steps(layer: LayerServer, args: dict, data: dict[str, np.ndarray]
              ) -> tuple[dict[str, np.ndarray], dict]:
    """:func:`~zoforge.sim.zolayer_host.layer_program` on ``layer``'s server (``args``, ``data``:
    the program's); its arrays and results, plus ``sim_cycles`` and ``stalls``."""
    rtl, results = layer.run(layer_program(args, data, layer.host))
    return rtl, {**results, "sim_cycles": layer.cycle, "stalls": layer.stalls()}
