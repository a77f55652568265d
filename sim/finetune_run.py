"""The fine-tuning run of ``zoforge finetune`` as a library object: :class:`FinetuneRun`.

``FinetuneRun(cfg, RunOptions(...))`` checks, before any work, what needs no model: the
options (``threads``, ``rtl``), the output folder ``out`` and its files (:data:`OUT_FILES`),
and ``json`` (:func:`check_json`). :meth:`FinetuneRun.load` loads the model and checks its
limits (``--blocks``, ``--seq-len``; with ``cfg.attention`` ``engines`` the engine's depth
for P·V, :func:`~zoforge.golden.finetune.model.check_model_limits`) and, with ``rtl``, the
co-simulation's
(:func:`zoforge.sim.finetune_cosim.check_rtl_limits`). :meth:`FinetuneRun.run` (loading
first if needed) then: prepares (:func:`~zoforge.golden.finetune.train.prepare`: data, the
head, the int8 calibration), takes the accuracies before (int8, float), runs ``cfg.steps``
ZO steps of the int8 run (golden units, or :class:`~zoforge.sim.finetune_cosim.RtlUnits`
with ``rtl``) and of the float twin beside, with a progress bar, the few-shot training-loss
curve at :func:`~zoforge.golden.finetune.train.curve_steps` (``cfg.k_shot``), the
accuracies after, the backprop ceiling (``backprop``), and writes ``finetune.json``,
``config.toml`` and ``finetune.png`` into ``out`` (and the JSON to ``json``), and, priced on
a board-sized accelerator, that design as ``accelerator.toml`` (``zoforge generate
accelerator --config out/accelerator.toml`` writes its Verilog). It returns
the result (:attr:`FinetuneRun.result`): the keys of ``docs/finetune.md``, among them
:data:`COST_KEYS` (:func:`cost_fields`) and :data:`TRAIN_LOSS_KEYS`.

A call that differs on the RTL ends the steps: the result has ``bit_exact`` False and
``error`` the mismatch's first line, and is written as it stands.

**Checkpoint and resumption** (:mod:`zoforge.sim.finetune_checkpoint`): a golden run writes
``out/checkpoint.json`` atomically after the accuracies before (step 0), every
``checkpoint_every`` steps, after the last step and when interrupted (``KeyboardInterrupt``:
SIGINT, or SIGTERM through :func:`zoforge.cli.main`; the state after the last whole step,
then the interrupt goes on); it is removed once the run's files are written. A run started
on an ``out`` holding one of the same configuration (and float twin) continues from it: the
losses, the masters and the result equal an uninterrupted run's, bit for bit (with the same
``threads``); the backprop ceiling runs after the steps and is not checkpointed. Another
configuration's checkpoint is a one-line error before any work, a damaged one is set aside
(``checkpoint.json.damaged``) and the run starts from step 0. With ``rtl`` no checkpoint is
written (the RTL's generator state cannot be read or set), and a checkpoint in ``out`` is a
one-line error naming ``--rtl``.

**Cost models:** ``RunOptions.cost_models``, functions ``(CostContext) -> dict`` applied in
order, fill :data:`COST_KEYS` and add keys of their own (a later one's key replaces an
earlier one's); they live above this layer (``zoforge finetune`` passes
:func:`zoforge.reports.finetune_fields.unit_cost_fields`, and with ``--board`` the board-sized
accelerator's, :func:`zoforge.reports.finetune_fields.board_cost_fields`). Without any, the
cost keys are None.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path

from zoforge.config import config_from_dict, config_text
from zoforge.errors import ConfigError, check_choice, check_int_range
from zoforge.golden.zo.config import MAX_THREADS
from zoforge.outputs import (check_out_dir, check_out_file, check_targets, make_out_dir,
                             write_text)
from zoforge.sim import finetune_checkpoint as ckpt
from zoforge.sim.finetune_checkpoint import CHECKPOINT

__all__ = ["FinetuneRun", "RunOptions", "CostContext", "check_json",
           "RTL_CHOICES", "DESIGNS", "ADAPTER_MAPPINGS", "COST_KEYS", "TRAIN_LOSS_KEYS", "OUT_FILES",
           "CHECKPOINT_EVERY", "MAX_CHECKPOINT_EVERY"]

RTL_CHOICES = ("none", "adapters", "all")
#: The cost figures of the JSON (the cost models of ``RunOptions.cost_models``, e.g.
#: :func:`zoforge.reports.finetune_fields.unit_cost_fields`), None where not modelled.
COST_KEYS = ("predicted_cycles_per_step", "seconds_per_step_at_fmax", "joules_per_step",
             "static_joules_per_step", "dynamic_joules_per_step", "ddr_bytes_per_step",
             "onchip_bits", "zo_peak_bytes", "backprop_peak_bytes")
#: The designs a run's cost figures can be for (``zoforge finetune --design``): the
#: board-sized accelerator, or today's two units that ``rtl`` runs.
DESIGNS = ("accelerator", "units")
#: How the int8 run's adapter calls go to the units: ``direct`` (one ZO-layer call each,
#: today's units' mapping) or ``split`` (the accelerator's:
#: :class:`zoforge.golden.finetune.split.SplitUnits`, X·W and U on the engine, the ZO
#: layer's call narrowed to K = r; the same values by construction).
ADAPTER_MAPPINGS = ("direct", "split")   # (a golden run's values are the same either way)
#: The few-shot training-loss figures of the JSON (None and [] when ``k_shot`` is 0).
TRAIN_LOSS_KEYS = ("train_loss_before", "train_loss_after", "float_train_loss_before",
                   "float_train_loss_after", "curve_steps", "train_loss_curve",
                   "float_train_loss_curve")
#: The accelerator the run was priced on (the result's ``accelerator``), as the
#: configuration ``zoforge generate accelerator --config`` reads: the design a user builds.
ACCELERATOR_FILE = "accelerator.toml"
#: What ``out`` gets (and ``checkpoint.json`` while the run is unfinished); the last only
#: from a run priced on a board-sized accelerator.
OUT_FILES = ("finetune.json", "finetune.png", "config.toml", ACCELERATOR_FILE)
#: Steps between checkpoints, by default, and at most.
CHECKPOINT_EVERY = 10
MAX_CHECKPOINT_EVERY = 1_000_000


@dataclasses.dataclass(frozen=True)
class CostContext:
    """What a cost model is given: the configuration and the loaded model's shape."""

    cfg: object            # the FinetuneConfig
    hidden: int
    ffn: int
    heads: int
    classes: int


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """How a run is done (what the configuration does not say): ``rtl`` (:data:`RTL_CHOICES`:
    which calls go to the RTL), ``float_twin``, ``backprop``, the output folder ``out``,
    ``json`` (another file for the JSON, or None), torch's CPU ``threads``, ``quiet`` (no
    progress bar), ``checkpoint_every`` (steps between checkpoints), ``adapter_mapping``
    (:data:`ADAPTER_MAPPINGS`: the calls the units, golden or RTL, see) and ``cost_models``
    (the extension point of the module docstring)."""

    out: str | Path = "runs/finetune"
    json: str | Path | None = None
    rtl: str = "none"
    float_twin: bool = True
    backprop: bool = False
    threads: int = 1
    quiet: bool = False
    checkpoint_every: int = CHECKPOINT_EVERY
    adapter_mapping: str = "direct"
    cost_models: tuple[Callable[[CostContext], dict], ...] = ()


def check_json(value, out: Path) -> Path | None:
    """``json``: a regular file or a new one in a writable folder, not one of ``out``'s
    files (:func:`zoforge.outputs.check_out_file`); None stays None."""
    if value is None:
        return None
    return check_out_file("--json", value, taken=[out, *(out / name for name in
                                                       (*OUT_FILES, CHECKPOINT))])


def _say(text: str) -> None:
    print(f"==> {text}", flush=True)


def _curve_steps(steps: int) -> list[int]:
    """:func:`zoforge.golden.finetune.train.curve_steps` (torch: imported only here)."""
    from zoforge.golden.finetune.train import curve_steps as steps_of   # torch: when used
    return steps_of(steps)


class FinetuneRun:
    """One run of ``cfg`` (a :class:`~zoforge.golden.finetune.config.FinetuneConfig`) as
    ``options`` say (module docstring). Construction checks what needs no model;
    :meth:`load` the model's limits; :meth:`run` does the work and returns
    :attr:`result`."""

    def __init__(self, cfg, options: RunOptions = RunOptions()):
        self.cfg, self.options = cfg, options
        check_choice("--rtl", options.rtl, RTL_CHOICES)
        check_choice("adapter_mapping", options.adapter_mapping, ADAPTER_MAPPINGS)
        check_int_range("--threads", options.threads, 1, MAX_THREADS)
        check_int_range("--checkpoint-every", options.checkpoint_every, 1,
                        MAX_CHECKPOINT_EVERY)
        self.out = check_out_dir("--out", options.out)
        check_targets(self.out, [self.out / name for name in (*OUT_FILES, CHECKPOINT)])
        self.json_path = check_json(options.json, self.out)
        self.result: dict | None = None
        self._model = self._widths = self._rtl_module = None
        self._seconds, self._snapshot = 0.0, None
        self._key = ckpt.run_key(cfg, options.float_twin)
        self._curve = _curve_steps(cfg.steps) if cfg.k_shot else []
        self.resumed_from = self._resume_point()

    def _resume_point(self) -> dict | None:
        """The checkpoint in ``out`` to continue from (read and checked, before any work),
        or None."""
        state = ckpt.read_checkpoint(self.out, self._key, self.cfg.steps, self._curve)
        if state is not None and self.rtl != "none":
            raise ConfigError("--rtl", f"none to resume the run checkpointed in {self.out} "
                              f"at step {state['step']} (the RTL's generator state cannot be "
                              "set), or a new --out", self.rtl)
        return state

    @property
    def rtl(self) -> str:
        return self.options.rtl

    def load(self) -> None:
        """Load the model (torch, transformers only now) and check its limits and, with
        ``rtl``, the co-simulation's."""
        # torch, transformers and the model only now: `zoforge finetune --help` stays fast
        import torch
        from transformers.utils import logging as transformers_logging
        from zoforge.golden.finetune.model import check_model_limits
        from zoforge.golden.finetune.train import load_model
        cfg = self.cfg
        torch.set_num_threads(self.options.threads)
        transformers_logging.disable_progress_bar()  # stderr: the error's one line, or ours
        model, tokenizer = load_model(cfg)
        check_model_limits(cfg, model)
        widths = model.config.hidden_size, model.config.intermediate_size
        if self.rtl != "none":
            from zoforge.sim import finetune_cosim as rtl_module    # Verilator's set-up
            rtl_module.check_rtl_limits(cfg, self.rtl, *widths)
            self._rtl_module = rtl_module
        self._model, self._widths = (model, tokenizer), widths

    def run(self) -> dict:
        """The checked run (module docstring); returns :attr:`result`."""
        from tqdm import tqdm   # tqdm and torch (the golden run) only when running
        from zoforge.golden.finetune.train import backprop_finetune, prepare
        if self._model is None:
            self.load()
        cfg, options, rtl_module = self.cfg, self.options, self._rtl_module
        model = self._model[0]
        hidden, ffn = self._widths
        _say(f"prepare: {cfg.model or 'all-MiniLM-L6-v2'}, {cfg.blocks} blocks, seq_len "
             f"{cfg.seq_len}; head fit on {cfg.n_train} examples, int8 calibration on "
             f"{cfg.calibration}" + (f"; few-shot: {cfg.k_shot} examples per class outside "
                                     f"them" if cfg.k_shot else ""))
        prepared = prepare(cfg, self._model)
        context = CostContext(cfg, hidden, ffn, model.config.num_attention_heads,
                              len(prepared.label_names))
        costs = dict.fromkeys(COST_KEYS)
        for cost_model in options.cost_models:
            costs.update(cost_model(context))
        result = self.result = {
            "rtl": self.rtl, "bit_exact": None, "error": None, "rtl_calls": None,
            "steps": 0, "accuracy_before": None, "float_accuracy_before": None,
            "accuracy_after": None, "float_accuracy_after": None,
            "backprop_accuracy_after": None, "cycles_per_step": None, **costs,
            "host_seconds_per_step": None, "loss": [], "float_loss": [],
            "backprop_loss": [], **dict.fromkeys(TRAIN_LOSS_KEYS[:4]),
            "curve_steps": list(self._curve), "train_loss_curve": [],
            "float_train_loss_curve": [], "config": cfg.to_dict()}
        make_out_dir("--out", self.out)
        mismatch = getattr(rtl_module, "CallMismatch", ())     # (): nothing to catch
        with contextlib.ExitStack() as stack:
            units = None
            if rtl_module is not None:
                units = rtl_module.RtlUnits(cfg, hidden, ffn, self.rtl)
                if options.adapter_mapping == "split":
                    from zoforge.golden.finetune.split import SplitUnits   # torch: when used
                    units = SplitUnits(units)
                units = stack.enter_context(units)
            zo, twin = self._start(prepared, units)
            _say(f"train {cfg.steps} ZO steps (q={cfg.queries}, batch {cfg.batch}; int8 "
                 f"calls {'on the RTL: ' + self.rtl if units is not None else 'golden'}"
                 f"{', float twin beside' if twin is not None else ''})"
                 + (f"; resumed at step {result['steps']}" if result["steps"] else ""))
            try:
                self._steps(zo, twin, units, tqdm)
            except mismatch as error:
                result.update(bit_exact=False, error=str(error).splitlines()[0],
                              rtl_calls=units.rtl_calls)
                self._write()
                return result
            if units is not None:
                result.update(bit_exact=True, rtl_calls=units.rtl_calls)
        for key, curve in (("train_loss", "train_loss_curve"),
                           ("float_train_loss", "float_train_loss_curve")):
            if result[curve]:
                result[key + "_before"], result[key + "_after"] = (result[curve][0],
                                                                   result[curve][-1])
        _say("accuracy after")
        result["accuracy_after"] = zo.evaluate()
        if twin is not None:
            result["float_accuracy_after"] = twin.evaluate()
        if options.backprop:
            _say(f"backprop ceiling: {cfg.steps} Adam steps on the float adapters")
            trained = backprop_finetune(prepared, cfg.steps, on_step=lambda step, loss:
                                        result["backprop_loss"].append(loss))
            result["backprop_accuracy_after"] = trained.evaluate()
        self._write()
        (self.out / CHECKPOINT).unlink(missing_ok=True)      # finished: nothing to resume
        return result

    def _start(self, prepared, units):
        """The int8 run and the float twin (or None) at their start: loaded from the
        checkpoint (:attr:`resumed_from`) if it fits them, else new, with the accuracies
        before taken and checkpointed (step 0)."""
        from zoforge.golden.finetune.train import ZoFinetune, float_accuracy   # torch

        def new():
            return (ZoFinetune(prepared, "int8", units=units),
                    ZoFinetune(prepared, "float") if self.options.float_twin else None)
        zo, twin = new()
        state, result = self.resumed_from, self.result
        if state is not None:
            try:
                zo.load_state(state["int8"])
                if twin is not None:
                    twin.load_state(state["float"])
            except ConfigError as error:
                ckpt.set_aside(self.out / CHECKPOINT, str(error))
                state, (zo, twin) = None, new()
        if state is not None:
            result.update(state["result"], steps=state["step"])
            self._seconds = state["seconds"]
            self._snapshot = state
            return zo, twin
        _say(f"accuracy before: int8 and float on {self.cfg.n_test} test examples")
        result["accuracy_before"] = zo.evaluate()
        result["float_accuracy_before"] = float_accuracy(prepared)
        self._curve_point(0, zo, twin)
        self._save(zo, twin, units)
        return zo, twin

    def _save(self, zo, twin, units, write: bool = True) -> None:
        """Take the state after the steps done (a golden run only) and, if ``write``,
        write it to ``out/checkpoint.json``."""
        if units is not None:
            return
        result = self.result
        self._snapshot = ckpt.checkpoint(
            self._key, result["steps"], zo.state(), twin.state() if twin else None,
            result, self._curve, self._seconds)
        if write:
            ckpt.write_checkpoint(self.out, self._snapshot)

    def _steps(self, zo, twin, units, tqdm) -> None:
        """The steps left of ``zo`` (and ``twin``), recorded in the result as they go and
        checkpointed (module docstring)."""
        result, cycles, every = self.result, [], self.options.checkpoint_every
        if units is not None:
            units.take_cycles()                   # from here: the steps' cycles only
        bar = tqdm(total=self.cfg.steps, initial=result["steps"], unit="step",
                   dynamic_ncols=True, disable=self.options.quiet)
        try:
            while result["steps"] < self.cfg.steps:
                start = time.perf_counter()
                record = zo.step()
                seconds = time.perf_counter() - start
                result["loss"].append(record.loss)
                if units is not None:
                    cycles.append(units.take_cycles())
                shown = {"loss": f"{record.loss:.4f}"}
                if twin is not None:
                    result["float_loss"].append(twin.step().loss)
                    shown["float"] = f"{result['float_loss'][-1]:.4f}"
                result["steps"] += 1
                self._seconds += seconds
                self._curve_point(result["steps"], zo, twin)
                done = result["steps"]
                self._save(zo, twin, units, write=done % every == 0 or done == self.cfg.steps)
                bar.update(1)
                bar.set_postfix(shown)
        except KeyboardInterrupt:       # SIGINT, SIGTERM: the last whole step's state kept
            if self._snapshot is not None:
                ckpt.write_checkpoint(self.out, self._snapshot)
            raise
        finally:
            bar.close()
            if result["steps"]:
                result["host_seconds_per_step"] = self._seconds / result["steps"]
            if cycles:
                result.update(cycles_per_step=sum(cycles) / len(cycles),
                              cycles_source="co-simulation (today's units)")

    def _curve_point(self, done: int, zo, twin) -> None:
        """After ``done`` steps: at a checkpoint of the few-shot curve, the training loss
        of ``zo`` (and ``twin``) appended to theirs."""
        result = self.result
        if done in result["curve_steps"]:
            result["train_loss_curve"].append(zo.train_loss())
            if twin is not None:
                result["float_train_loss_curve"].append(twin.train_loss())

    def _write(self) -> None:
        """``finetune.json``, ``config.toml``, ``finetune.png`` and (priced on a board-sized
        accelerator) ``accelerator.toml`` into ``out``; the JSON to ``json`` too."""
        from zoforge.sim.finetune_plot import plot_run    # matplotlib: only when written
        out = self.out
        text = json.dumps(self.result, indent=1) + "\n"
        write_text(out / "finetune.json", text, root=out)
        write_text(out / "config.toml", config_text(self.cfg), root=out)
        design = self.result.get("accelerator")
        if isinstance(design, dict) and design.get("kind") == "accelerator":
            from zoforge.hw.accel.config import AcceleratorConfig     # only when priced on one
            accelerator = config_from_dict(design, [AcceleratorConfig])
            write_text(out / ACCELERATOR_FILE, config_text(accelerator), root=out)
        elif (out / ACCELERATOR_FILE).is_file():    # an earlier run's, not this one's design
            (out / ACCELERATOR_FILE).unlink()
        plot_run(out / "finetune.png", self.result)
        if self.json_path is not None:
            write_text(self.json_path, text, flag="--json")
