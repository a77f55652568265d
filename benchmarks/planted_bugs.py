"""Plant known bugs one at a time, run the tests meant to catch each, revert (issue 12).

Each :class:`Bug` is a small source edit (exact text replacements; the script refuses to run
when a replacement's text is not found exactly once, so a refactor cannot silently turn a
bug into a no-op) and the tests expected to fail with it. For each bug the script edits the
file in place, runs those tests with pytest (the default run's tests, Verilator only, to
keep it short: the Icarus variants run the same assertions), restores the file byte for
byte (also on Ctrl-C or SIGTERM), and prints whether the tests caught it and how long they
took. A clean run of the same tests
comes first: a test that fails without a bug proves nothing.

The bugs are the ones issue 12 lists as uncaught at the time, plus two golden-model errors
that an RTL-vs-golden co-simulation cannot see (the RTL's constants come from the golden
model), which only the independent reference tests catch, and issue 23's: the sweep store,
Pareto front, page and table, the job server's stalls, the resource parser and the training
paths (batches, key, bit-exactness, the demo's accuracy).

    python benchmarks/planted_bugs.py            # every bug
    python benchmarks/planted_bugs.py --list
    python benchmarks/planted_bugs.py irq-en-ignored power-1000x

Exit status 1 if any bug is not caught (or a clean run fails). The edited files must be
unmodified in git before it starts (it will not overwrite work in progress).
"""
from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Bug:
    name: str
    what: str
    path: str                                   # relative to the repository root
    edits: tuple[tuple[str, str], ...]          # (exact old text, new text)
    tests: tuple[str, ...]                      # pytest node ids / files


BUGS = (
    Bug("requant-33-bit-sum", "requantizer keeps acc + bias at 33 bits instead of wrapping",
        "hw/pe/requant.py",
        (('total = reg(signed(ACC_BITS), 1, "sum")',
          'total = reg(signed(ACC_BITS + 1), 1, "sum")'),),
        ("tests/test_engine_corners.py",
         "tests/test_engine_accumulator.py::test_acc_plus_bias_wraps_through_the_axi_bench")),
    Bug("gelu-q-int8", "the GELU job's first requantizer saturates q to int8, not int16 "
        "(the engine's GELU path never selects the wide window)",
        "hw/engine/gelu_path.py",
        (("into.sat16.eq(active)", "into.sat16.eq(0)"),),
        ("tests/test_engine_gelu.py::"
         "test_gelu_jobs_between_plain_jobs_are_bit_exact_and_timed",)),
    Bug("zolayer-walk-reset", "the panel walk's registers take a reset again: the fetch's "
        "ResetInserter on launch undoes restart's end tests (a one-word panel walks two words)",
        "hw/zolayer/walk.py",
        (('name=f"{name}_reg", reset_less=True)', 'name=f"{name}_reg", reset_less=False)'),),
        ("tests/test_zolayer_one_word_panels.py",)),
    Bug("axil-hit-partial", "the decoded write flag ignores the strobes (a partial write "
        "lands as a whole word)",
        "hw/pe/axil.py",
        (("regs.wr_hit[i].eq(take_write & full_word & (bus.awaddr == address))",
          "regs.wr_hit[i].eq(take_write & (bus.awaddr == address))"),),
        ("tests/test_axil_write_decode.py",)),
    Bug("register-moved", "ARRAY_CYCLES moved from 0x24 to 0x38 (RTL and benches share the map)",
        "hw/engine/regmap.py",
        (('Register(0x24, "counter"', 'Register(0x38, "counter"'),),
        ("tests/test_engine_registers.py::test_the_documented_table_is_the_register_map",)),
    Bug("irq-en-ignored", "irq = done, IRQ_EN ignored",
        "hw/engine/registers.py",
        (('self.irq.eq(done & stored["IRQ_EN"])', 'self.irq.eq(done)'),),
        ("tests/test_engine_registers.py::"
         "test_irq_stays_low_with_irq_en_0_and_follows_done_with_irq_en_1",)),
    Bug("partial-wstrb-applied", "a write with strobes low writes the whole word, answered OKAY",
        "hw/pe/axil.py",
        (("regs.wr_en.eq(take_write & full_word)", "regs.wr_en.eq(take_write)"),
         ("bus.bresp.eq(Mux(full_word, OKAY, SLVERR))", "bus.bresp.eq(OKAY)")),
        ("tests/test_engine_registers.py::test_partial_writes_change_nothing_and_answer_slverr",)),
    Bug("pefoo-uses-new-D", "PeFoo updates theta with the new D_t instead of D_{t-1}",
        "golden/zo/optimizers.py",
        (("            theta.sub_(self.lr * projected * v)\n"
          "            self.E.mul_(1 - self.smooth).add_(self.smooth * hessian)\n"
          "            self.D = self.E.abs().clamp(self.d_min, self.d_max)\n",
          "            self.E.mul_(1 - self.smooth).add_(self.smooth * hessian)\n"
          "            self.D = self.E.abs().clamp(self.d_min, self.d_max)\n"
          "            theta.sub_(self.lr * projected * p / self.D.sqrt())\n"),),
        ("tests/test_zo_optimizers_pinned.py",)),
    Bug("pefoo-l-no-reinit", "PeFoo-L keeps D and E when it moves to the next layer",
        "golden/zo/optimizers.py",
        (("        if self._active_layer() != self.active:\n            self._reset(block)\n",
          "        if self._active_layer() != self.active:\n"
          "            self.active = self._active_layer()\n"),),
        ("tests/test_zo_optimizers_pinned.py::"
         "test_pefoo_l_layers_last_to_first_with_fresh_preconditioner",)),
    Bug("power-1000x", "E_dsp 1000x too large (10 nJ instead of 10 pJ)",
        "reports/power.py",
        (('Coefficient("E_dsp", 10.0, "pJ"', 'Coefficient("E_dsp", 10.0e3, "pJ"'),),
        ("tests/test_reports_pinned.py",)),
    Bug("golden-taps-b20", "golden LFSR taps for b = 20 replaced by another maximal pair "
        "(20, 3): the RTL follows the golden model, so co-simulation still agrees",
        "golden/rng/lfsr.py",
        (("20: (20, 17),", "20: (20, 3),"),),
        ("tests/test_rng_reference.py",)),
    Bug("golden-lane-phase", "golden lane phases one state apart too many (phi_i = i*(P//n + 1)): "
        "lane start states and LUT move with it, co-simulation still agrees",
        "golden/rng/onthefly.py",
        (("np.arange(n_rng, dtype=np.int64) * (period(bits) // n_rng)",
          "np.arange(n_rng, dtype=np.int64) * (period(bits) // n_rng + 1)"),),
        ("tests/test_rng_reference.py",)),
    # issue 23: bugs in the sweep, the reports, the job server and the training paths
    Bug("store-finish-two-transactions", "the sweep store finishes a task in two "
        "transactions (status first, result after): a crash between leaves a done task "
        "without its result",
        "sweep/store.py",
        (('        with self._write():\n'
          '            cursor = self._db.execute(\n'
          '                f"UPDATE tasks SET status = :status, {sets}{bump}, owner = NULL, "',
          '        with self._write():\n'
          '            cursor = self._db.execute(\n'
          '                f"UPDATE tasks SET status = :status{bump}, owner = NULL, "'),
         ('                 "owner": owner.token, "by": f"{owner.host}:{owner.pid}"})\n'
          '        return cursor.rowcount == 1\n',
          '                 "owner": owner.token, "by": f"{owner.host}:{owner.pid}"})\n'
          '        if cursor.rowcount == 1:\n'
          '            with self._write():\n'
          '                self._db.execute(f"UPDATE tasks SET {sets} WHERE key = :key",\n'
          '                                 {**values, "key": key})\n'
          '        return cursor.rowcount == 1\n')),
        ("tests/test_sweep_store.py::test_no_reader_sees_a_done_task_without_its_result",
         "tests/test_faults.py::"
         "test_a_crash_while_a_task_finishes_leaves_it_running_without_a_result")),
    Bug("pareto-dominated-tie", "the Pareto front keeps a point that ties another in one "
        "objective and is worse in the rest (strict dominance only)",
        "sweep/pareto.py",
        (("return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))",
          "return all(x < y for x, y in zip(a, b))"),),
        ("tests/test_sweep_store.py::test_pareto_helpers",)),
    Bug("sweep-page-unescaped", "the sweep page writes table cells without HTML escaping",
        "sweep/html.py",
        (("def _e(text) -> str:\n    return html_text(text)",
          "def _e(text) -> str:\n    return str(text)"),),
        ("tests/test_sweep_outputs.py::test_hostile_text_is_escaped_in_every_output",)),
    Bug("jobserver-stalls-off", "the job server ignores source_idle / sink_backpressure "
        "(no stalls on any channel)",
        "sim/jobserver.py",
        (("thresholds = stall_threshold(source_idle), stall_threshold(sink_backpressure)",
          "thresholds = stall_threshold(0.0), stall_threshold(0.0)"),),
        ("tests/test_engine_jobserver.py::test_backpressure_stalls_without_losing_data",
         "tests/test_zolayer_jobserver.py")),
    Bug("carry8-as-lut", "the Yosys resource parser counts a CARRY8 block as a LUT",
        "reports/synth.py",
        (('if re.fullmatch(r"LUT[1-6]", name) or name == "INV":',
          'if re.fullmatch(r"LUT[1-6]", name) or name in ("INV", "CARRY8"):'),),
        ("tests/test_reports_synth_cells.py",)),
    Bug("demo-accuracy-train-split", "the demo's accuracies (golden and RTL) are counted on "
        "the training split instead of the test split",
        "sim/zo_training.py",
        (('return self.trainable.evaluate(self.trainable.theta, "test")[0]',
          'return self.trainable.evaluate(self.trainable.theta, "train")[0]'),
         ('test = self.trainable.splits["test"]', 'test = self.trainable.splits["train"]')),
        ("tests/test_demo.py", "tests/test_zo_hwtrain.py")),
    Bug("same-minibatch", "every training step draws the same minibatch (the step left out "
        "of the batch's seed)",
        "golden/zo/train.py",
        (("np.random.default_rng([seed, step]).choice(n_train, batch, replace=False)",
          "np.random.default_rng([seed, 0]).choice(n_train, batch, replace=False)"),),
        ("tests/test_training_semantics.py",)),
    Bug("eps-not-in-key", "eps left out of the training's key (and of the resume check): "
        "a sweep over eps reuses one result",
        "golden/zo/config.py",
        (('NOT_RESULT = ("out", "eval_every", "checkpoint_every", "cache_dir", "progress", '
          '"threads")',
          'NOT_RESULT = ("out", "eval_every", "checkpoint_every", "cache_dir", "progress", '
          '"threads", "eps")'),),
        ("tests/test_config_loader.py::test_the_lists_cover_every_field",
         "tests/test_config_loader.py::test_every_result_field_changes_the_training_key")),
    Bug("bit-exact-no-master", "a lock-step training step counts as bit-exact without "
        "comparing the master weights (only their shape)",
        "sim/zo_training.py",
        (('"master": (rtl.master, golden.master)}',
          '"master": (rtl.master.shape, golden.master.shape)}'),),
        ("tests/test_zo_hwtrain.py", "tests/test_demo.py")),
    Bug("table-mean-first-seed", "the sweep table's accuracy mean (and sd) over seeds uses "
        "only the first seed's run",
        "sweep/results.py",
        (("        return [r.accuracy for r in self.runs if r.accuracy is not None]",
          "        return [r.accuracy for r in self.runs[:1] if r.accuracy is not None]"),),
        ("tests/test_sweep.py",)),
    # issue 31: the families the held-out set found, one or two plants each
    Bug("update-no-restore", "the fine-tuning's update walk no longer restores the generator "
        "(the update's z was in neither forward pass)", "golden/finetune/train.py",
        (("work[name] = self.update(name, work[name], g, restore=j == 0)",
          "work[name] = self.update(name, work[name], g, restore=False)"),),
        ("tests/test_finetune_step_pinned.py", "tests/test_zo_step_derivations.py")),
    Bug("float-eps-sign", "the float twin's perturbation 2^+e instead of 2^-e",
        "golden/finetune/model.py",
        (("* 2.0 ** -self.eps_shift", "* 2.0 ** self.eps_shift"),),
        ("tests/test_finetune_step_pinned.py",)),
    Bug("float-step-256x", "the float twin's step without the master's 2^-8",
        "golden/finetune/train.py",
        (("eta = s.eta_mult * 2.0 ** -s.eta_shift / 2 ** Formats.MASTER_FRAC",
          "eta = s.eta_mult * 2.0 ** -s.eta_shift"),),
        ("tests/test_finetune_step_pinned.py",)),
    Bug("smoothquant-formula", "SmoothQuant's factor with a wrong exponent (a 5 % bound "
        "accepted it)", "golden/finetune/model.py",
        (("s = x_peak ** SMOOTH_ALPHA / w_peak.clamp_min(1e-12) ** (1 - SMOOTH_ALPHA)",
          "s = (x_peak / w_peak.clamp_min(1e-12)) ** 0.45"),),
        ("tests/test_finetune_golden.py",)),
    Bug("head-once-per-block", "the fine-tuning cost counts the head once per block",
        "reports/unit_calls.py",
        (("per_forward * len(frozen_maps)", "per_forward"),),
        ("tests/test_finetune_cost.py",)),
    Bug("zolayer-spread-extra", "the ZO layer's cycle model: side-by-side branches' extra "
        "only from 4 lanes", "hw/zolayer/cycles.py",
        (("extra += SPREAD_EXTRA if config.branch_lanes > 1 else 0",
          "extra += SPREAD_EXTRA if config.branch_lanes > 2 else 0"),),
        ("tests/test_cycle_models.py",)),
    Bug("panel-walk-one-k-step", "a panel walk with one k-step ends a step late",
        "hw/zolayer/walk.py",
        (("first_end = 1 >= self.inner", "first_end = 1 > self.inner"),),
        ("tests/test_walks.py",)),
    Bug("layer-settings-while-busy", "the ZO layer takes settings written while a job runs",
        "hw/zolayer/control.py",
        (("with m.If(~busy):", "with m.If(~busy | port.wr_en):"),),
        ("tests/test_zolayer_registers.py",)),
    Bug("file-limit-off-by-one", "a configuration file of exactly the size limit refused",
        "zoforge/inputs.py",
        (("if limit is not None and before.st_size > limit:",
          "if limit is not None and before.st_size >= limit:"),),
        ("tests/test_limits_boundary.py",)),
    Bug("memory-limits-or", "a design past exactly one of the two memory limits accepted",
        "zoforge/cli/_limits.py",
        (("if words <= MAX_WORDS and bits <= MAX_BITS:",
          "if words <= MAX_WORDS or bits <= MAX_BITS:"),),
        ("tests/test_limits_boundary.py",)),
    Bug("budget-exclusive", "a design costing exactly the --budget is outside it",
        "sweep/recommend.py",
        (("and g.hardware[column].value <= limit", "and g.hardware[column].value < limit"),),
        ("tests/test_readback_sweep.py",)),
    Bug("csv-fronts-swapped", "the sweep CSV's front and front_noise columns swapped",
        "sweep/table.py",
        (("group.final_loss_sd, group.front, group.front_noise]",
          "group.final_loss_sd, group.front_noise, group.front]"),),
        ("tests/test_readback_sweep.py",)),
    Bug("noise-one-sigma", "the noise test at 1 standard error instead of 2",
        "sweep/results.py",
        (("return 2.0 * math.sqrt(variance)", "return 1.0 * math.sqrt(variance)"),),
        ("tests/test_readback_sweep.py",)),
    Bug("demo-cycles-wrong-steps", "the demo's cycles per step averaged without its first step",
        "sim/zo_training.py",
        (("return sum(s.cycles for s in self.steps) / len(self.steps) if self.steps else 0.0",
          "return sum(s.cycles for s in self.steps[1:]) / len(self.steps) if self.steps "
          "else 0.0"),),
        ("tests/test_readback_demo.py",)),
    Bug("repair-marks-failed", "--repair marks a repaired task failed (never run again)",
        "sweep/store.py",
        (("db.execute(\"UPDATE tasks SET status = 'pending', result = NULL, owner = NULL, \"",
          "db.execute(\"UPDATE tasks SET status = 'failed', result = NULL, owner = NULL, \""),),
        ("tests/test_sweep_store.py",)),
    Bug("nextpnr-constraint", "nextpnr's Fmax read from the constraint, not the achieved field",
        "reports/nextpnr.py",
        (('"fmax": {clock: values.get("achieved")', '"fmax": {clock: values.get("constraint")'),),
        ("tests/test_parsers_fragments.py",)),
    Bug("packed-no-correction", "the packed multiplier's high product without the low sign's "
        "correction", "hw/pe/packed_multiply.py",
        (("p_hi.eq((full >> SHIFT) + low_sign)", "p_hi.eq(full >> SHIFT)"),),
        ("tests/test_packed_multiply.py",)),
    Bug("pair-no-borrow", "the paired PE's high row without the low product's borrow as its "
        "accumulator's carry-in (the array's uncorrected packed product)", "hw/pe/pe_pair.py",
        (("carry_in=multiply.p_lo[-1])", "carry_in=None)"),),
        ("tests/test_pair_carry_in.py",)),
    Bug("pair-edge-no-borrow", "the paired array's left edge forwards a_hi as the packed "
        "operand's high field, without subtracting the low operand's borrow",
        "hw/pe/pe_pair.py",
        (("operands.high.eq(a_hi - a_lo[-1])", "operands.high.eq(a_hi)"),),
        ("tests/test_pe_array.py",)),
    Bug("token-word-field-empty", "the token reader's word address field taken from k // P "
        "alone (no bits at all where max_k <= P: every token tile read at the first's words)",
        "hw/zolayer/token_buffer.py",
        (("self.packed_rd.addr.eq(Cat(word_field, tile))",
          "self.packed_rd.addr.eq(Cat(word[:word_bits], tile))"),),
        ("tests/test_zolayer_tokens.py",)),
    Bug("lock-kind-unchecked", "a lock of another kind than a regular file used once opened",
        "zoforge/files.py",
        (("    if not stat.S_ISREG(os.fstat(fd).st_mode):\n        os.close(fd)\n",
          "    if False:\n        os.close(fd)\n"),),
        ("tests/test_cache_faults.py",)),
    Bug("budget-exclusive-plan", "the planner refuses a design at exactly its budget",
        "hw/accel/plan.py",
        (("if total[key] > limit:", "if total[key] >= limit:"),),
        ("tests/test_accel_plan.py::"
         "test_a_design_at_exactly_the_budget_fits_and_one_over_does_not",)),
    Bug("softmax-at-engine-clock", "the price runs the softmax units' phases at the engines' "
        "clock, not their own",
        "reports/accel_cost.py",
        (("phases = tuple(price_phase(schedule.accel, p, softmax_mhz if all(",
          "phases = tuple(price_phase(schedule.accel, p, mhz if all("),),
        ("tests/test_accel_cost.py::test_softmax_phases_run_at_the_softmax_units_own_clock",)),
    Bug("accel-cosim-skips-softmax", "zoforge cosim accelerator reports a design with softmax "
        "units without co-simulating them",
        "sim/accel_cosim.py",
        (("    if config.softmax_units:\n        reports[\"softmax\"]",
          "    if False:\n        reports[\"softmax\"]"),),
        ("tests/test_cosim_new_units.py::"
         "test_accelerator_cosim_runs_the_gelu_engine_and_the_softmax_unit",)),
    Bug("softmax-work-bound-exclusive", "zoforge cosim softmax refuses random jobs of exactly "
        "its bound of scores",
        "sim/softmax_cosim.py",
        (("    if jobs * max_rows * max_len > MAX_RANDOM_SCORES:",
          "    if jobs * max_rows * max_len >= MAX_RANDOM_SCORES:"),),
        ("tests/test_cosim_new_units.py::test_softmax_cosim_work_bounded_at_the_product",)),
    Bug("softmax-config-while-busy", "the softmax unit takes LENGTH, ROWS and its constants "
        "written while a job runs",
        "hw/softmax/registers.py",
        (("""                        elif register.kind == "config" and name in stored:
                            with m.If(~busy):""",
          """                        elif register.kind == "config" and name in stored:
                            with m.If(1):"""),),
        ("tests/test_softmax_bus.py::test_parameters_written_while_busy_are_ignored",)),
    Bug("softmax-start-while-busy", "the softmax unit takes a CTRL start while a job runs "
        "(its cycle counter cleared mid-job)",
        "hw/softmax/registers.py",
        (("""                        if register.kind == "ctrl":
                            with m.If(~busy):""",
          """                        if register.kind == "ctrl":
                            with m.If(1):"""),),
        ("tests/test_softmax_bus.py::test_parameters_written_while_busy_are_ignored",)),
    Bug("skew-linear-in-rows", "the planner counts the array's input skew linearly in the "
        "unit rows, not U (U - 1) / 2 stages (a 64-row engine's FF 8 k low)",
        "hw/pe/array.py",
        (("    return (units * (units - 1) // 2 * operand",
          "    return (max(units - 1, 0) * operand"),),
        ("tests/test_skew_bits.py", "tests/test_accel_plan.py")),
    Bug("engine-clock-ignores-size", "the price clocks a board-sized engine at the 8x8's "
        "Fmax (the size-aware engine clock not taken)",
        "reports/accel_cost.py",
        (("min(engine_fmax(board, accel.engine_rows * accel.engine_cols),",
          "min(engine_fmax(board, 64),"),),
        ("tests/test_engine_fmax.py",)),
    Bug("layer-clock-ignores-size", "the price clocks a board-sized ZO layer at the 4x4's "
        "Fmax (the size-aware layer clock not taken)",
        "reports/accel_cost.py",
        (("layer_fmax(board, accel.layer_rows * accel.layer_cols),",
          "layer_fmax(board, 16),"),),
        ("tests/test_engine_fmax.py",)),
    Bug("clock-rises-with-size", "a unit larger than a build is priced at a faster clock "
        "than that build's (the 64x8's faster estimate taken for bigger engines)",
        "reports/step_price.py",
        (("    return min(1 / period, *(mhz for size, mhz in points if size <= pes)), source",
          "    return 1 / period, source"),),
        ("tests/test_engine_fmax.py",)),
    Bug("drain-shift-a-cycle-late", "the drain's shift register takes the window's state of "
        "this cycle, not the next (every shift a cycle late)",
        "hw/pe/drain.py",
        (("        m.d.sync += shift.eq((tap_next | running_next) & ~last_next)",
          "        m.d.sync += shift.eq(opened & ~last)"),),
        ("tests/test_walks.py",)),
    Bug("source-valid-ignores-restore-contract", "the perturbation source offers the "
        "generator's out.valid (restore on the layer's walk path again)",
        "hw/rng/source.py",
        (("self.out.valid.eq(core.offered)", "self.out.valid.eq(core.out.valid)"),),
        ("tests/test_rng_offered.py",)),
    Bug("fit-ignores-generator-limit", "the planner's fit test lets through a design whose "
        "memories zoforge refuses to generate",
        "hw/accel/plan.py",
        (("        if used > limit:\n            return f\"{what}",
          "        if False:\n            return f\"{what}"),),
        ("tests/test_accel_plan.py",)),
)


def run_tests(tests: tuple[str, ...]) -> tuple[bool, float, str, str]:
    """(passed, seconds, last line, first failing test's node id or "") of pytest over
    ``tests``: the default run's tests (not those marked slow), Verilator variants only."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
         "-k", "not icarus", *tests], cwd=ROOT, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    failed = next((line.split()[1] for line in lines
                   if line.startswith(("FAILED ", "ERROR ")) and len(line.split()) > 1), "")
    return (done.returncode == 0, time.perf_counter() - started, lines[-1] if lines else "",
            failed)


def plant(bug: Bug) -> str:
    """Apply ``bug``'s edits; returns the original text."""
    path = ROOT / bug.path
    original = path.read_text()
    text = original
    for old, new in bug.edits:
        if text.count(old) != 1:
            raise SystemExit(f"error: {bug.name}: the text to replace is in {bug.path} "
                             f"{text.count(old)} times, expected once: {old!r}")
        text = text.replace(old, new)
    path.write_text(text)
    return original


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bugs", nargs="*", help="names of the bugs to plant (default: all)")
    parser.add_argument("--list", action="store_true", help="list the bugs and exit")
    args = parser.parse_args(argv)
    by_name = {bug.name: bug for bug in BUGS}
    if args.list:
        for bug in BUGS:
            print(f"{bug.name:30} {bug.path:26} {bug.what}")
        return 0
    unknown = [name for name in args.bugs if name not in by_name]
    if unknown:
        print(f"error: bugs: unknown {', '.join(unknown)} (one of {', '.join(by_name)})",
              file=sys.stderr)
        return 2
    chosen = [by_name[name] for name in args.bugs] or list(BUGS)
    paths = sorted({bug.path for bug in chosen})
    dirty = subprocess.run(["git", "status", "--porcelain", "--", *paths], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    if dirty:
        print(f"error: files to plant bugs in have uncommitted changes:\n{dirty}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))     # still restore the file
    failures = 0
    print(f"{'bug':30} {'clean':>6} {'planted':>8} {'time':>7}  tests")
    for bug in chosen:
        clean_ok, _, clean_line, _ = run_tests(bug.tests)
        original = plant(bug)
        try:
            planted_ok, seconds, line, failed = run_tests(bug.tests)
        finally:
            (ROOT / bug.path).write_text(original)
        caught = clean_ok and not planted_ok
        failures += not caught
        print(f"{bug.name:30} {'pass' if clean_ok else 'FAIL':>6} "
              f"{'caught' if not planted_ok else 'MISSED':>8} {seconds:6.1f}s  "
              f"{' '.join(bug.tests)}\n{'':30} planted: {line}"
              + (f"\n{'':30} caught by: {failed}" if failed else "")
              + ("" if clean_ok else f"\n{'':30} clean run failed: {clean_line}"), flush=True)
    print(f"{len(chosen) - failures} of {len(chosen)} planted bugs caught")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
