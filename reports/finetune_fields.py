"""The cost figures of a ``zoforge finetune`` run's JSON: the cost models that
:class:`zoforge.sim.finetune_run.FinetuneRun` is given (``RunOptions.cost_models``).

* :func:`unit_cost_fields`: the step on today's two units, the designs the RTL runs
  (:mod:`zoforge.reports.unit_calls`), at their estimated clock on :data:`BOARD`;
* :func:`accelerator_cost_fields`: the step on the board-sized accelerator planned for a
  board (:func:`zoforge.reports.accel_cost.board_step_fields`: the P-RGE schedule of
  :mod:`zoforge.hw.accel.schedule`, the host's work on the board's ARM cores included and
  shown apart), with the model's peak-memory figures, which no design changes.

:func:`cost_models_for` is what ``zoforge finetune --design --board`` passes to the run.
Every figure says its source (``cycle-model``, ``yosys-estimate``, ``arm-estimate``,
``activity-model``).
"""
from __future__ import annotations

from zoforge.boards.registry import get_board
from zoforge.errors import ConfigError, check_choice
from zoforge.golden.finetune.config import ADAPTED
from zoforge.reports.accel_cost import BOARD_STEP_KEYS, board_step_fields
from zoforge.reports.fmax import measured_error
from zoforge.reports.model_shape import ModelShape
from zoforge.reports.step_memory import backprop_peak_memory, memory_bits, zo_peak_memory
from zoforge.reports.step_price import UNIT_FIGURES, step_time_energy
from zoforge.reports.unit_calls import predicted_step_cycles
from zoforge.sim.finetune_cosim import engine_design
from zoforge.sim.finetune_run import COST_KEYS, DESIGNS, CostContext
from zoforge.sim.softmax_cosim import cosim_design

__all__ = ["BOARD", "DESIGNS", "unit_cost_fields", "accelerator_cost_fields",
           "cost_models_for"]

#: Keys of :func:`unit_cost_fields` that describe the model, not the design.
MODEL_KEYS = ("zo_peak_bytes", "backprop_peak_bytes")

#: The board of the time and energy figures of :func:`unit_cost_fields` (its DDR, and the
#: units' clock and power from :data:`zoforge.reports.step_price.UNIT_FIGURES`, each
#: with its source label).
BOARD = "zcu102"


def unit_cost_fields(ctx: CostContext) -> dict:
    """The step's modelled cost (:mod:`zoforge.reports.unit_calls`) on the designs the
    RTL runs: every key of :data:`COST_KEYS` (None where not modelled: a model beyond the
    cost model's shapes), and the board, clock and power used with their sources. Time
    and energy are the cycle model's step at the estimated Fmax (each call the roofline's
    max of compute and DDR time) times the board's static power and, apart, the units'
    dynamic power taken to that Fmax (``joules_per_step`` is their sum)."""
    fields = dict.fromkeys(COST_KEYS)
    cfg = ctx.cfg
    try:
        shape = ModelShape(blocks=cfg.blocks, seq_len=cfg.seq_len, batch=cfg.batch,
                           rank=cfg.rank, adapted=len(ADAPTED), queries=cfg.queries,
                           hidden=ctx.hidden, ffn=ctx.ffn, heads=ctx.heads,
                           classes=ctx.classes)
    except ConfigError as error:
        print(f"    cost: not modelled ({error})")
        return fields
    # the designs the RTL runs on, and every job it runs: the step's model is the
    # co-simulation's to the cycle (reports/unit_calls.py)
    engine = engine_design(cfg, ctx.hidden, ctx.ffn)
    layer = cfg.layer_design(ctx.hidden, ctx.ffn)
    step = predicted_step_cycles(shape, engine, layer, cfg.attention, cfg.nonlinear,
                                 cosim_design(cfg.seq_len))
    figures = UNIT_FIGURES[BOARD]
    board = get_board(BOARD)
    timing = step_time_energy(step, figures["fmax_mhz"], figures["static_w"],
                              figures["dynamic_w"], figures["power_at_mhz"],
                              board.ddr_bytes_per_s)
    fields.update(design="units", predicted_cycles_per_step=step.cycles, ddr_bytes_per_step=step.stream_bytes,
                  onchip_bits=memory_bits(engine, layer)["total"],
                  zo_peak_bytes=zo_peak_memory(shape, layer)["total"],
                  backprop_peak_bytes=backprop_peak_memory(shape)["total"],
                  seconds_per_step_at_fmax=timing["roofline_s"],
                  joules_per_step=timing["roofline_j"],
                  static_joules_per_step=timing["roofline_static_j"],
                  dynamic_joules_per_step=timing["roofline_dynamic_j"], board=BOARD,
                  static_source=board.static_power_source, fmax_error=_fmax_error(),
                  **figures)
    return fields


def _fmax_error() -> str:
    """The Fmax model's measured error, quoted beside the Fmax estimate."""
    error = measured_error()
    return error.summary() if error else "not measured"


def accelerator_cost_fields(ctx: CostContext, board: str = BOARD) -> dict:
    """The step on the board-sized accelerator planned for ``board``
    (:func:`~zoforge.reports.accel_cost.board_step_fields`) in the run's JSON: its keys
    (``cycles_per_step`` the cycle model's, ``seconds_per_step_at_fmax`` with the host's
    work, ``board_host_seconds_per_step``, ``dsp``, ``gops_per_dsp``,
    ``ddr_bytes_per_step``, ...), ``predicted_cycles_per_step`` the same cycles, and the
    model's peak memory (:data:`MODEL_KEYS`); the other :data:`COST_KEYS` None. A shape
    the planner or the schedule cannot take: every key (:data:`COST_KEYS`,
    :data:`~zoforge.reports.accel_cost.BOARD_STEP_KEYS`) None and the reason printed."""
    fields = dict.fromkeys(COST_KEYS + BOARD_STEP_KEYS)
    fields.update(design="accelerator", board=board)
    cfg = ctx.cfg
    try:
        step = board_step_fields(cfg, ctx.hidden, ctx.ffn, ctx.heads, ctx.classes, board)
    except ConfigError as error:
        print(f"    cost: not modelled ({error})")
        return fields
    units = unit_cost_fields(ctx)
    fields.update({key: units[key] for key in MODEL_KEYS}, **step,
                  predicted_cycles_per_step=step["cycles_per_step"])
    return fields


def cost_models_for(design: str, board: str = BOARD) -> tuple:
    """The run's cost models for ``design`` (:data:`DESIGNS`) on ``board`` (one-line
    errors for an unknown design or board, or a board without the units' estimated
    figures, which price both designs)."""
    check_choice("--design", design, DESIGNS)
    try:
        get_board(board)
    except ConfigError as error:
        raise error.renamed("--board") from None
    # both designs are priced at the units' estimated clocks on the board
    # (accel_cost.design_clocks): a board without them fails here, not after the run
    if board not in UNIT_FIGURES:
        raise ConfigError("--board", "one of " + ", ".join(UNIT_FIGURES) +
                          f" with --design {design} (the units' estimated figures)", board)
    if design == "units":
        return (unit_cost_fields,)
    return (lambda ctx: accelerator_cost_fields(ctx, board),)
