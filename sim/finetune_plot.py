"""The plot of a fine-tuning run (``finetune.png`` of ``zoforge finetune``): the int8, float
and backprop training loss per step, the few-shot set's training-loss curves and the test
accuracies before and after as markers, from the run's result
(:class:`zoforge.sim.finetune_run.FinetuneRun`)."""
from __future__ import annotations

from pathlib import Path

from zoforge.outputs import output_path

__all__ = ["plot_run"]


def plot_run(path: Path, result: dict) -> None:
    """Write the plot of ``result`` (a run's JSON) to ``path`` (atomically, as PNG)."""
    import matplotlib   # slow to import: only when a plot is written
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt    # after choosing the back-end

    figure, loss_axis = plt.subplots(figsize=(7, 3.6))
    for key, label, style, color in (("loss", "int8 (accelerator)", "-", "C0"),
                                     ("float_loss", "float twin", "--", "C1"),
                                     ("backprop_loss", "backprop (Adam)", ":", "C2")):
        if result[key]:
            steps = range(1, len(result[key]) + 1)
            loss_axis.plot(steps, result[key], style, lw=1.2, label=label, color=color)
    for key, label, color in (("train_loss_curve", "int8 few-shot set", "C0"),
                              ("float_train_loss_curve", "float few-shot set", "C1")):
        if result[key]:
            loss_axis.plot(result["curve_steps"][:len(result[key])], result[key], "o-", ms=3,
                           lw=1.6, label=label + " (unperturbed)", color=color)
    loss_axis.set(xlabel="step", ylabel="training loss (mean of the branches)",
                  title="ZO fine-tuning of MiniLM's adapters")
    accuracy_axis = loss_axis.twinx()
    end = max(result["steps"], 1)
    for key, x, label, marker, color in (
            ("accuracy_before", 0, "int8 accuracy before", "o", "C0"),
            ("accuracy_after", end, "int8 accuracy after", "D", "C0"),
            ("float_accuracy_before", 0, "float accuracy before", "o", "C1"),
            ("float_accuracy_after", end, "float accuracy after", "D", "C1"),
            ("backprop_accuracy_after", end, "backprop accuracy after", "D", "C2")):
        if result[key] is not None:
            accuracy_axis.plot([x], [result[key]], marker, label=label, ms=8, alpha=0.6,
                               color=color, markeredgecolor="k")
    accuracy_axis.set_ylabel("test accuracy")
    lines = [axis.get_legend_handles_labels() for axis in (loss_axis, accuracy_axis)]
    if lines[0][0] or lines[1][0]:
        loss_axis.legend(lines[0][0] + lines[1][0], lines[0][1] + lines[1][1], fontsize=8,
                         loc="best")
    figure.tight_layout()
    with output_path(path, path.parent) as tmp:
        figure.savefig(tmp, dpi=110, format="png")
    plt.close(figure)
