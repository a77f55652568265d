# amaranth: UnusedElaboratable=no
"""The linked attention co-simulation (sim/link_cosim.py, bench sim/benches/linked_attention
.py): a scaled-down accelerator top with attention links on Verilator (and Icarus: marked
``icarus``), two engines into one
softmax unit and into two; every P value against the golden engine's raw S through the
golden softmax, the route-0 job's every word, the DDR softmax job's P; each job's CYCLES
against its unit's cycle model within 3 % at the clocks 1:1 and 3:2 (softmax slower); two
planted bugs (the selector's sources swapped in the RTL, the golden's S transposed) fail it;
``zoforge cosim accelerator --link`` runs it as the unit ``linked_attention``."""
import numpy as np
import pytest

from zoforge.hw.accel import AcceleratorConfig

#: Two paired 4x4 engines, one 4x4 ZO layer, softmax units of 4 lanes and rows of up to 8
#: keys, links of jobs up to 8 x 8: both engines' links into softmax unit 0 (sources 1, 2).
ONE_UNIT = AcceleratorConfig(engines=2, engine_rows=4, engine_cols=4, engine_max_m=16,
                             engine_max_k=16, engine_max_n=16, layers=1, layer_max_m=16,
                             layer_max_k=16, layer_max_n=16, layer_max_r=4, softmax_units=1,
                             softmax_lanes=4, softmax_max_len=8, link=True, link_max_rows=8,
                             link_max_len=8)
#: The same with two softmax units: engine e's link into unit e (source 1 each).
TWO_UNITS = ONE_UNIT.replace(softmax_units=2)


def _check_summary(result, config, jobs):
    from zoforge.sim.link_cosim import JOB_KINDS
    assert result["bit_exact"] is True, result["runs"]
    assert all(result["checks"].values()) and result["mismatches"] == 0
    assert result["job_kinds"] == {"scores": config.engines * jobs,
                                   "softmax_link": config.engines * jobs, "engine": 1,
                                   "softmax_ddr": config.softmax_units}
    # every job kind, both clock ratios: within 3 % of its unit's model (measured: exact)
    assert set(result["cycles"]) == {"1:1", "3:2"}
    for ratio, kinds in result["cycles"].items():
        assert set(kinds) == set(JOB_KINDS), ratio
        for kind, entry in kinds.items():
            assert entry["max_abs_pct"] is not None and entry["max_abs_pct"] <= 3.0, \
                (ratio, kind, entry)
    assert result["cycles_within"] is True
    # the stalled run's stalls bite: some job took longer than its model, values unchanged
    stalled = result["runs"]["3:2 stalled"]
    assert not stalled["cycles_checked"] and stalled["bit_exact"]
    assert any(row["cycles"] > row["model"] for row in stalled["jobs"])
    # the linked jobs name each engine's source on its unit
    linked = [row for row in result["runs"]["1:1"]["jobs"] if row["kind"] == "softmax_link"]
    from zoforge.hw.link.links import linked_engines
    for row in linked:
        unit = config.link_unit(row["engine"])
        assert row["lane"] == f"softmax{unit}"
        assert row["source"] == 1 + linked_engines(config, unit).index(row["engine"])


@pytest.mark.slow        # builds the top (Verilator, ~30-60 s once) and runs it three times
@pytest.mark.ci
@pytest.mark.parametrize("config", [ONE_UNIT, TWO_UNITS], ids=["one_unit", "two_units"])
def test_linked_attention_bit_exact_and_cycles(config, simulator):
    from zoforge.sim.link_cosim import LinkCosimOptions, cosim_linked_attention
    result = cosim_linked_attention(config, LinkCosimOptions(jobs=3, seed=1,
                                                             simulator=simulator))
    _check_summary(result, config, 3)
    assert result["simulator"] == simulator


def _planted_verilog(monkeypatch):
    """``link_cosim._verilog`` converting the (patched) top itself: the Verilog cache keys
    the code on disk, not a patch in memory."""
    import zoforge.sim.link_cosim as link_cosim
    from zoforge.hw.accel.top import elaborate_accelerator
    from zoforge.hw.export import to_verilog

    def convert(config):
        design = elaborate_accelerator(config)
        return to_verilog(design.top, design.name), design.name
    monkeypatch.setattr(link_cosim, "_verilog", convert)


@pytest.mark.slow        # builds the planted top (Verilator, ~30-60 s)
def test_planted_selector_sources_swapped_fails(monkeypatch):
    """The RTL's selector of unit 0 takes engine 1's link as source 1 and engine 0's as
    source 2: every linked P is another job's (its rows, keys and scale differ)."""
    from zoforge.hw.link.links import AttentionLinks
    from zoforge.sim.link_cosim import LinkCosimOptions, cosim_linked_attention
    original = AttentionLinks.__init__

    def swapped(self, config):
        original(self, config)
        self.sources = [list(reversed(sources)) for sources in self.sources]
    monkeypatch.setattr(AttentionLinks, "__init__", swapped)
    _planted_verilog(monkeypatch)
    result = cosim_linked_attention(ONE_UNIT, LinkCosimOptions(
        jobs=1, ratios=((1, 1),), stalls=0))
    assert result["bit_exact"] is False
    assert result["checks"]["values"] is False and result["mismatches"] > 0


@pytest.mark.slow        # the top's build is shared with the test above it (cached)
def test_planted_transposed_golden_fails(monkeypatch):
    """The golden softmax of S^T (each engine's first job is 8 x 8): its P differs."""
    import zoforge.sim.link_cosim as link_cosim
    original = link_cosim._softmax_job

    def transposed(scores, keep, params, config):
        if scores.shape[0] == scores.shape[1]:
            job, _ = original(scores, keep, params, config)
            return job, original(np.ascontiguousarray(scores.T), keep, params, config)[1]
        return original(scores, keep, params, config)
    monkeypatch.setattr(link_cosim, "_softmax_job", transposed)
    result = link_cosim.cosim_linked_attention(ONE_UNIT, link_cosim.LinkCosimOptions(
        jobs=1, ratios=((1, 1),), stalls=0))
    assert result["bit_exact"] is False and result["checks"]["values"] is False
    assert result["runs"]["1:1"]["passed"] is True      # the bench itself ran to its end


def test_options_refused():
    from zoforge.errors import ConfigError
    from zoforge.sim.link_cosim import LinkCosimOptions, cosim_linked_attention
    with pytest.raises(ConfigError, match="ratios"):
        LinkCosimOptions(ratios=((1, 7),), sync_ns=1)
    with pytest.raises(ConfigError, match="jobs"):
        LinkCosimOptions(jobs=0)
    with pytest.raises(ConfigError, match="link"):
        cosim_linked_attention(ONE_UNIT.replace(link=False))


def test_jobs_and_lanes():
    """The lanes' operations: each engine's link entries in its frames' order (route 1 for
    its scores jobs, route 0 for engine 0's plain job), each unit's select entries in its
    jobs' order (source 0 for the DDR job), every linked softmax job started only after its
    scores job's signal; unstalled, a scores job waits for the one two before to leave."""
    from zoforge.sim.link_cosim import LinkCosimOptions, linked_jobs
    link = ONE_UNIT.link_config()
    lanes, files, jobs = linked_jobs(ONE_UNIT, LinkCosimOptions(jobs=3), pipelined=False)
    assert set(lanes) == {"engine0", "engine1", "softmax0"}
    for e in range(2):
        entries = [op[1] for op in lanes[f"engine{e}"] if op[0] == "link"]
        routes = [entry & 1 for entry in entries]
        assert routes == ([1, 0, 1, 1] if e == 0 else [1, 1, 1])
        first = entries[0]
        assert (first >> 1 & (1 << link.m_bits) - 1, first >> 1 + link.m_bits) == (8, 8)
        waits = [op[1] for op in lanes[f"engine{e}"] if op[0] == "wait"]
        assert waits == [f"softmax{e}.0"]
    selects = [op[1] for op in lanes["softmax0"] if op[0] == "select"]
    assert selects == [1, 2, 0, 1, 2, 1, 2]
    ops = lanes["softmax0"]
    for e in range(2):
        for r in range(3):
            wait = ops.index(["wait", f"scores{e}.{r}"])
            start = next(i for i in range(wait, len(ops)) if ops[i][0] == "write"
                         and ops[i][1] == 0)           # CTRL
            assert wait < start
    assert {job.kind for job in jobs} == {"scores", "softmax_link", "engine", "softmax_ddr"}
    assert all(name in files for name in ("scores0.0", "engine0.pass", "softmax0.ddr"))
    pipelined, _, _ = linked_jobs(ONE_UNIT, LinkCosimOptions(jobs=3), pipelined=True)
    assert not any(op[0] == "wait" for op in pipelined["engine0"])


def test_accelerator_cosim_runs_linked_attention(monkeypatch):
    """``cosim_accelerator`` on a linked config runs ``linked_attention`` last, its verdict
    in ``bit_exact`` and its cycle bar in ``cycles_within``; ``zoforge cosim accelerator``
    passes ``--link`` and its fields into the config."""
    import zoforge.sim.engine_cosim as engine_cosim
    import zoforge.sim.link_cosim as link_cosim
    import zoforge.sim.softmax_cosim as softmax_cosim
    import zoforge.sim.zolayer_cosim as zolayer_cosim
    from zoforge.cli import main
    from zoforge.sim.accel_cosim import UNITS, AccelCosimOptions, cosim_accelerator
    calls, verdict = [], {"bit_exact": True, "cycles_within": True}
    monkeypatch.setattr(engine_cosim, "cosim_engine",
                        lambda config, options: {"bit_exact": True})
    monkeypatch.setattr(zolayer_cosim, "cosim_layer", lambda config, options: {"bit_exact": True})
    monkeypatch.setattr(softmax_cosim, "cosim_random",
                        lambda config, options, simulator: {"bit_exact": True, "jobs": 1})

    def linked(config, options):
        calls.append((config, options))
        return {**verdict, "jobs": 9}
    monkeypatch.setattr(link_cosim, "cosim_linked_attention", linked)
    assert UNITS[-1] == "linked_attention"
    result = cosim_accelerator(ONE_UNIT, AccelCosimOptions(jobs=3, seed=5))
    assert result["bit_exact"] is True and result["cycles_within"] is True
    assert result["units"]["linked_attention"] == {"bit_exact": True, "jobs": 9,
                                                   "cycles_within": True}
    (config, options), = calls
    assert config == ONE_UNIT and (options.jobs, options.seed) == (3, 5)
    verdict.update(bit_exact=False, cycles_within=False)
    result = cosim_accelerator(ONE_UNIT, AccelCosimOptions(jobs=1))
    assert result["bit_exact"] is False and result["cycles_within"] is False
    calls.clear()
    assert "linked_attention" not in cosim_accelerator(ONE_UNIT.replace(link=False))["units"]
    assert calls == []
    # the command line: --link and the link's fields reach the config
    verdict.update(bit_exact=True, cycles_within=True)
    flags = ["--engines", "2", "--engine-rows", "4", "--engine-cols", "4",
             "--engine-max-m", "16", "--engine-max-k", "16", "--engine-max-n", "16",
             "--layer-max-m", "16", "--layer-max-k", "16", "--layer-max-n", "16",
             "--layer-max-r", "4", "--softmax-units", "1", "--softmax-lanes", "4",
             "--softmax-max-len", "8", "--link", "--link-max-rows", "8",
             "--link-max-len", "8", "--jobs", "2"]
    assert main(["cosim", "accelerator", *flags]) == 0
    (config, options), = calls
    assert config.link and (config.link_max_rows, config.link_max_len) == (8, 8)
    assert config == ONE_UNIT.replace(board=config.board) and options.jobs == 2
