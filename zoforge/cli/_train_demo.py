"""The main job (``zoforge demo``): fine-tune a sentiment classifier on the simulated FPGA.

The model is ``--trainable hw-mlp --hidden 0``: a linear classifier over the frozen MiniLM
sentence embeddings of the Rotten Tomatoes snippets (the encoder runs on the host, as on the
ZCU102's ARM cores; its pooled embeddings are quantized to int8 and streamed in), trained by
the generated ZO layer: perturbation generator, systolic array, update unit and AXI host
interface in one design. Every step runs twice, side by side: in the golden trainer
(PyTorch, :mod:`zoforge.golden.zo.hwmlp`) and on the Verilated RTL (one persistent job server,
:class:`~zoforge.sim.zo_jobserver.LayerSession`); the host computes the losses and g from the
RTL's own outputs. The step's g values and the master after the update must be equal.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from zoforge.outputs import output_path, write_text

__all__ = ["run_training_demo", "demo_train_config"]


#: The training source that is bit-exact with each generator strategy.
SOURCE_OF_STRATEGY = {"onthefly": "pezo-onthefly", "pregen": "pezo-pregen",
                      "gaussian": "gaussian-hw"}


def demo_train_config(args, generator):
    """The golden run's :class:`~zoforge.golden.zo.config.TrainConfig`: ``hw-mlp`` with no
    hidden layer, the ``generator`` configuration's source and fields, the demo's flags."""
    import dataclasses

    from zoforge.golden.zo.config import TrainConfig
    fields = {f.name: getattr(generator, f.name) for f in dataclasses.fields(generator)
              if f.name in ("n_rng", "bits", "pool_size", "banks", "pool_seed", "terms")}
    return TrainConfig(method="hw-prge", trainable="hw-mlp", hidden=0,
                       perturbation=SOURCE_OF_STRATEGY[generator.variant], **fields,
                       queries=args.queries, batch=args.batch, lr=args.lr, eps=args.eps,
                       steps=args.steps, seed=0, rows=args.rows, cols=args.cols,
                       n_train=args.n_train, n_test=args.n_test, model=args.model,
                       out=str(args.out / "golden"), progress=False)


def _say(text: str) -> None:
    print(f"==> {text}", flush=True)


def run_training_demo(args, generator) -> int:
    import torch
    from tqdm import tqdm

    from zoforge.boards.registry import get_board
    from zoforge.golden.zo.features import build_trainable
    from zoforge.golden.zo.train import batch_index, build_optimizer
    from zoforge.hw.export import write_design
    from zoforge.hw.zo.designs import elaborate_layer
    from zoforge.sim.lint import lint_verilog
    from zoforge.sim.zo_jobserver import LayerServer, LayerSession

    from zoforge.errors import ConfigError
    if not 0 <= args.stalls < 1:
        raise ConfigError("--stalls", "a probability with 0 <= p < 1", args.stalls)
    cfg = demo_train_config(args, generator)
    board = get_board(args.board)
    args.out.mkdir(parents=True, exist_ok=True)
    _say(f"golden model: {cfg.model or 'MiniLM'} embeddings of Rotten Tomatoes (cached "
         "after the first run), int8 inputs, the ZO layer's integer step")
    trainable, info = build_trainable(cfg)
    optimizer = build_optimizer(cfg, trainable)
    settings, host = optimizer.settings, optimizer.host
    (master,) = trainable.masters(trainable.theta)
    config = cfg.layer_design(features=master.shape[0], classes=info["num_classes"])
    _say(f"generate: zo-layer {config.rows}x{config.cols}, {config.variant} generator, "
         f"{master.shape[0]} features -> {info['num_classes']} classes "
         f"(padded to {master.shape[1]})")
    design = elaborate_layer(config)
    paths = write_design(design, args.out / "design")
    lint = lint_verilog(paths["verilog"].read_text(), design.name)
    print(f"    {paths['verilog']}; lint: {lint}")
    accuracy_before = trainable.evaluate(trainable.theta, "test")[0]

    _say(f"co-simulate {cfg.steps} training steps on Verilator beside the golden model "
         f"(q={cfg.queries}, batch {cfg.batch}; first build ~1 min, cached after)")
    loss_rtl, loss_golden, cycles, golden_s, rtl_s = [], [], [], 0.0, 0.0
    mismatches, train_x = [], trainable.splits["train"]
    torch.set_num_threads(1)          # the golden step's time on one core, as documented
    with LayerServer(config, source_idle=args.stalls, sink_backpressure=args.stalls,
                     seed=1) as layer:
        first_cycle = layer.cycle
        session = LayerSession(layer, cfg.batch, master.shape[0], master.shape[1],
                               eps_shift=settings.eps_shift, eta_mult=settings.eta_mult,
                               eta_shift=settings.eta_shift)
        session.load(master.numpy())
        bar = tqdm(range(cfg.steps), unit="step", dynamic_ncols=True, disable=args.quiet)
        for step in bar:
            index = batch_index(cfg.seed, step, cfg.n_train, cfg.batch)
            x, _, labels = train_x.batch(index)
            tick = time.perf_counter()
            loss_golden.append(optimizer.step(index))
            golden_s += time.perf_counter() - tick
            tick = time.perf_counter()
            record = session.step(x.numpy(), labels.numpy(), cfg.queries, host.loss,
                                  host.gradient)
            rtl_s += time.perf_counter() - tick
            loss_rtl.append(sum(record.losses) / len(record.losses))
            cycles.append(record.cycles)
            golden_master = trainable.masters(trainable.theta)[0].numpy()
            if record.grads != optimizer.last_grads or not np.array_equal(record.master,
                                                                           golden_master):
                mismatches.append(step)
            bar.set_postfix(loss=f"{loss_rtl[-1]:.4f}",
                            exact="yes" if not mismatches else f"NO ({len(mismatches)})")
        bar.close()
        sim_cycles = layer.cycle - first_cycle
        test = trainable.splits["test"]
        rtl_logits = session.outputs(test.x.numpy())[:, :info["num_classes"]]
        accuracy_rtl = float((rtl_logits.argmax(1) == test.labels.numpy()).mean())
    accuracy_after = trainable.evaluate(trainable.theta, "test")[0]

    report = None
    if not args.no_report:
        _say(f"board report: {board.name} (yosys estimate + activity model; a minute or two)")
        report = _board_report(board, design, args.out / "report")
    run = {"report": report, "cycles": cycles, "golden_s": golden_s,
           "mismatches": mismatches, "accuracy_rtl": accuracy_rtl,
           "accuracy_before": accuracy_before, "accuracy_after": accuracy_after,
           "loss_rtl": loss_rtl, "loss_golden": loss_golden,
           "sim_cycles": sim_cycles, "settings": settings, "rtl_s": rtl_s}
    return _summarise(args, cfg, config, design.name, lint, run)


def _board_report(board, design, out: Path):
    from zoforge.reports.pipeline import Progress, build_report
    from zoforge.reports.render import summary_lines, write_report
    report = build_report(board, design, out, board.default_mhz, activity_cycles=2000,
                          run_pnr=False, progress=Progress(quiet=True))
    write_report(report, out)
    for line in summary_lines(report):
        print("    " + line)
    return report


def _summarise(args, cfg, config, name, lint, run: dict) -> int:
    report, cycles = run["report"], run["cycles"]
    steps = len(cycles)
    cycles_per_step = sum(cycles) / steps if steps else 0.0
    fmax = report.fmax.fmax_mhz if report is not None and report.fmax else None
    power = report.power.total_w if report is not None and report.power else None
    at_fmax = cycles_per_step / (fmax * 1e6) if fmax else None
    golden_step_s = run["golden_s"] / steps if steps else None
    bit_exact = not run["mismatches"] and run["accuracy_rtl"] == run["accuracy_after"]
    summary = {
        "bit_exact": bit_exact, "steps": steps, "loss_rtl": run["loss_rtl"],
        "loss_golden": run["loss_golden"], "mismatched_steps": run["mismatches"],
        "accuracy_before": run["accuracy_before"], "accuracy_after": run["accuracy_after"],
        "accuracy_after_rtl": run["accuracy_rtl"], "cycles_per_step": cycles_per_step,
        "fmax_mhz": fmax, "fmax_source": report.fmax.source if fmax else None,
        "power_w": power, "power_source": report.power.source if power else None,
        "seconds_per_step_at_fmax": at_fmax,
        "joules_per_step_at_fmax": power * at_fmax if power and at_fmax else None,
        "pytorch_seconds_per_step": golden_step_s,
        "cosim_steps_per_s": steps / run["rtl_s"] if run["rtl_s"] else None,
        "cosim_cycles_per_s": run["sim_cycles"] / run["rtl_s"] if run["rtl_s"] else None,
        "lint_clean": lint.clean, "design": name, "config": config.to_dict(),
        "settings": vars(run["settings"]), "train_config": cfg.to_dict(),
    }
    _plot(args.out / "training.png", run["loss_rtl"], run["loss_golden"])
    text = json.dumps(summary, indent=1)
    write_text(args.out / "summary.json", text + "\n")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        write_text(args.json, text + "\n", flag="--json")
    _print(summary, args.out)
    return 0 if bit_exact and lint.clean else 1


def _scaled(value, factor: float, spec: str) -> str:
    return "n/a" if value is None else format(value * factor, spec)


def _print(s: dict, out: Path) -> None:
    print()
    print(f"bit-exact          {s['bit_exact']}: g values and master equal at every one of "
          f"{s['steps']} steps; test accuracy from the RTL's own outputs "
          f"{s['accuracy_after_rtl']:.3f}")
    if s["steps"]:
        print(f"loss (RTL/golden)  first {s['loss_rtl'][0]:.4f}/{s['loss_golden'][0]:.4f}, "
              f"last {s['loss_rtl'][-1]:.4f}/{s['loss_golden'][-1]:.4f}")
    print(f"test accuracy      {s['accuracy_before']:.3f} -> {s['accuracy_after']:.3f}")
    print(f"cycles per step    {s['cycles_per_step']:,.0f} (simulated)")
    print(f"at Fmax            {_scaled(s['fmax_mhz'], 1, '.0f')} MHz ({s['fmax_source']}): "
          f"{_scaled(s['seconds_per_step_at_fmax'], 1e6, '.1f')} us/step, "
          f"{_scaled(s['joules_per_step_at_fmax'], 1e6, '.2f')} uJ/step at "
          f"{_scaled(s['power_w'], 1, '.3f')} W ({s['power_source']})")
    print(f"PyTorch, this CPU  {_scaled(s['pytorch_seconds_per_step'], 1e6, '.0f')} us/step "
          "(the golden step, one thread)")
    print(f"co-simulation      {_scaled(s['cosim_steps_per_s'], 1, '.1f')} steps/s, "
          f"{_scaled(s['cosim_cycles_per_s'], 1, ',.0f')} cycles/s (RTL steps and their "
          "host work, one persistent Verilator process)")
    print(f"files              {out}/ (summary.json, training.png, design/, report/)")


def _plot(path: Path, loss_rtl: list[float], loss_golden: list[float]) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, axis = plt.subplots(figsize=(7, 3.6))
    steps = np.arange(1, len(loss_rtl) + 1)
    axis.plot(steps, loss_golden, lw=2.5, alpha=0.5, label="golden (PyTorch)")
    axis.plot(steps, loss_rtl, lw=0.8, ls="--", color="k", label="RTL (Verilator)")
    axis.set(xlabel="step", ylabel="training loss (mean of the branches)",
             title="ZO fine-tuning on the simulated FPGA")
    axis.legend()
    figure.tight_layout()
    with output_path(path) as tmp:
        figure.savefig(tmp, dpi=110, format="png")
    plt.close(figure)
