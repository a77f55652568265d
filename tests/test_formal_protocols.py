"""Formal proofs of the bus protocols (zoforge.sim.formal, docs/verification.md): the AXI4-Lite
and AXI4-Stream handshake rules on two small engines (1 x 1, 2 x 2), two small ZO layers
(lora-fa, full) and a small softmax bus unit (1 lane), proved with SymbiYosys (yowasp-sby,
yices) from the generated Verilog.

Per design: a bounded model check of every rule (the environment's side assumed, the
design's asserted), k-induction on the AXI4-Lite rules (they close; the streams' do not, the
datapath's state is too large), the covers that show the bounded depth reaches a handshake on
every channel (so the check is not vacuous), and the planted bug — a stage that drops VALID
after one cycle without READY — caught with the rule it breaks. The harness itself is checked
without the tools (fast)."""
from __future__ import annotations

import pytest

from zoforge.errors import ConfigError
from zoforge.golden.zolayer import layer_config
from zoforge.hw.designs import get_design
from zoforge.hw.engine.config import EngineConfig
from zoforge.hw.softmax.config import SoftmaxConfig
from zoforge.sim.formal import (Bus, buses, check_protocols, cover_depths, harness_verilog,
                                parse_log)

#: name -> (design, configuration, bounded depth). The engine's first output beat can leave
#: in cycle 30 (1 x 1) / 33 (2 x 2): register writes, the input beats, one tile; the layer's
#: in cycle 6. Each depth covers that beat stalled and the cycle after it (the engine's solver
#: time grows steeply past its first output beat: a 40-cycle check of the 1 x 1 ran for over
#: six minutes).
CONFIGS = {
    "engine": ("engine", EngineConfig(rows=1, cols=1, pack=1, max_m=2, max_k=2, max_n=2), 33),
    "engine-2x2": ("engine", EngineConfig(rows=2, cols=2, pack=1, max_m=2, max_k=2, max_n=2),
                   36),
    "zo-layer": ("zo-layer", layer_config(rows=1, cols=1, max_m=1, max_k=1, max_n=1,
                                          max_r=1), 30),
    "zo-layer-full": ("zo-layer", layer_config(mode="full", rows=1, cols=1, max_m=1, max_k=1,
                                               max_n=1, max_r=1), 30),
    # the softmax bus unit (1 lane, rows of up to 2 keys): its first P beat can leave in
    # cycle 51 (register writes, the row in, the exp pass, the sum, the reciprocal's
    # division, the out pass)
    "softmax": ("softmax", SoftmaxConfig(lanes=1, max_len=2), 53),
}
proof = (pytest.mark.slow, pytest.mark.ci)
#: The configurations whose every proof CI runs (-m ci); of the other two CI runs the bounded
#: check of the 2 x 2 engine and the induction proofs, the rest runs with -m slow.
IN_CI = ("engine", "zo-layer", "softmax")
# the harness tests elaborate a design only to read its signature
pytestmark = pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")


def _elaborate(name: str):
    design, config, _ = CONFIGS[name]
    return get_design(design).elaborate(config)


def _params(names):
    return [pytest.param(n, marks=proof if n in IN_CI else pytest.mark.slow) for n in names]


# -- the harness (no tools needed) ---------------------------------------------------------

@pytest.mark.parametrize("design", ["engine", "zo-layer", "softmax"])
def test_the_buses_come_from_the_signature(design):
    found = buses(_elaborate(design).top)
    assert [(b.name, b.kind, b.receiver) for b in found] == [
        ("s_axil", "axil", True), ("s_axis", "axis", True), ("m_axis", "axis", False)]
    assert isinstance(found[0], Bus) and found[0].widths["wdata"] == 32


def test_the_environment_is_assumed_and_the_design_asserted():
    elaborated = _elaborate("engine")
    text = harness_verilog(elaborated.top, elaborated.name)
    for line in ("s_axil_awvalid_held: assume", "s_axil_wdata_stable: assume",
                 "s_axis_tdata_stable: assume", "s_axil_bvalid_held: assert",
                 "s_axil_rdata_stable: assert", "m_axis_tvalid_held: assert",
                 "m_axis_tlast_stable: assert", "s_axil_b_needs_aw: assert",
                 "s_axil_r_needs_ar: assert"):
        assert line in text, line
    assert "s_axis_tvalid_held: assert" not in text and "_waited" not in text
    only_lite = harness_verilog(elaborated.top, elaborated.name, checked=["s_axil"])
    assert "m_axis_tvalid_held: assert" not in only_lite
    assert "s_axis_tvalid_held: assume" in only_lite         # the environment still obeys
    planted = harness_verilog(elaborated.top, elaborated.name, drop_valid="m_axis")
    assert "assign m_axis__tvalid = m_axis__tvalid_dut && !m_axis__tvalid_waited;" in planted


@pytest.mark.parametrize("arguments, parameter", [
    (dict(drop_valid="x_axis"), "drop_valid"), (dict(checked=["m_axi"]), "checked"),
    (dict(mode="sim"), "mode"), (dict(depth=0), "depth")])
def test_bad_arguments_are_one_line_errors(arguments, parameter):
    elaborated = _elaborate("engine")
    with pytest.raises(ConfigError) as error:
        check_protocols(elaborated.top, elaborated.name, **arguments)
    assert str(error.value).startswith(parameter) and "\n" not in str(error.value)


def test_the_log_gives_status_failures_and_covers():
    log = ("SBY 1 [check] engine_0: ##   0:00:01  Reached cover statement in step 6 at "
           "formal_top: m_axis_t_handshake\n"
           "SBY 1 [check] summary:   failed assertion formal_top.m_axis_tvalid_held at "
           "harness.sv:129.7-129.50 step 31\nSBY 1 [check] DONE (FAIL, rc=2)\n")
    result = parse_log(log)
    assert (result.status, result.failed, result.reached) == (
        "FAIL", ["m_axis_tvalid_held"], {"m_axis_t_handshake": 6})
    assert not result.passed and parse_log("no summary").status == "ERROR"


# -- the proofs ----------------------------------------------------------------------------

@pytest.mark.parametrize("design", _params(["engine", "zo-layer", "zo-layer-full",
                                             "softmax"])
                         + [pytest.param("engine-2x2", marks=proof)])
def test_every_rule_holds_to_the_bounded_depth(design):
    elaborated = _elaborate(design)
    result = check_protocols(elaborated.top, elaborated.name, "bmc", CONFIGS[design][2])
    assert result.passed, (result.status, result.failed, result.log)


@pytest.mark.parametrize("design", [pytest.param(d, marks=proof) for d in CONFIGS])
def test_the_axi_lite_rules_are_proved_by_induction(design):
    elaborated = _elaborate(design)
    result = check_protocols(elaborated.top, elaborated.name, "prove", 10, checked=["s_axil"])
    assert result.passed, (result.status, result.failed, result.log)


@pytest.mark.parametrize("design", _params(CONFIGS))
def test_the_bounded_depth_reaches_every_channel(design):
    elaborated = _elaborate(design)
    depth = CONFIGS[design][2]
    reached = cover_depths(elaborated.top, elaborated.name, depth)
    channels = ["s_axil_aw", "s_axil_w", "s_axil_b", "s_axil_ar", "s_axil_r", "s_axis_t",
                "m_axis_t"]
    assert sorted(reached) == sorted(f"{c}_handshake" for c in channels)
    assert reached["m_axis_t_handshake"] <= depth - 2     # a stall, and the cycle after


@pytest.mark.parametrize("design, bus, caught", [
    pytest.param("engine", "m_axis", {"m_axis_tvalid_held"}, marks=proof),
    pytest.param("engine", "s_axil", {"s_axil_bvalid_held", "s_axil_rvalid_held",
                                      "s_axil_b_while_open"}, marks=proof),
    pytest.param("zo-layer", "m_axis", {"m_axis_tvalid_held"}, marks=proof),
    pytest.param("softmax", "m_axis", {"m_axis_tvalid_held"}, marks=proof)])
def test_a_stage_dropping_valid_is_caught(design, bus, caught):
    elaborated = _elaborate(design)
    result = check_protocols(elaborated.top, elaborated.name, "bmc", CONFIGS[design][2],
                             drop_valid=bus)
    assert result.status == "FAIL", (result.status, result.log)
    assert result.failed and set(result.failed) <= caught, result.failed


def test_a_run_past_its_time_limit_is_stopped_and_says_so():
    elaborated = _elaborate("engine")
    result = check_protocols(elaborated.top, elaborated.name, "bmc", 32, timeout_s=1)
    assert result.status == "TIMEOUT" and not result.passed
    assert result.log.endswith("stopped after 1 s")
