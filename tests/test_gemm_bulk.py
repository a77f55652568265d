"""The bulk (Verilog-only) GEMM co-simulation against the golden model.

One small engine build (3 x 2 array, pack 2, 32^3 buffers), cached: random shapes that are
not multiples of the tile, M < R, N < C, K = 1, extreme operands, raw and requantized
output, back-to-back jobs without reset, output back-pressure from the bench's generator,
and the ``zoforge cosim gemm --bench bulk`` command. The bulk bench is Verilator's (a C++
harness around a Verilog bench), so only the comparison with the cocotbext-axi bench runs on
every simulator: the same engine must give the same outputs and counters on Icarus too.
"""
import json

import numpy as np
import pytest

from zoforge.sim.gemm_bulk import read_output_words
from zoforge.sim.gemm_cosim import GemmCosim, random_job

CONFIG = dict(rows=3, cols=2, pack=2, max_m=32, max_k=32, max_n=32)


def _jobs(seed: int, count: int):
    rng = np.random.default_rng(seed)
    jobs = [random_job(rng, 1, 1, 1, raw=True),
            random_job(rng, 32, 32, 32, extreme=True),
            random_job(rng, 2, 5, 1, raw=True, extreme=True),
            random_job(rng, 7, 1, 5, per_channel=True, relu=True)]
    flavours = [dict(raw=True), dict(), dict(per_channel=True), dict(relu=True),
                dict(bias=False)]
    for index in range(count):
        m, k, n = (int(v) for v in rng.integers(1, 33, size=3))
        jobs.append(random_job(rng, m, k, n, **flavours[index % len(flavours)]))
    return jobs


@pytest.fixture(scope="module")
def free_run():
    cosim = GemmCosim(**CONFIG)
    jobs = _jobs(seed=21, count=10)
    results, info = cosim.run_bulk(jobs)
    return cosim, jobs, results, info


def test_random_shapes_are_bit_exact_back_to_back(free_run):
    cosim, jobs, results, info = free_run
    assert len(results) == len(jobs)
    for job, result in zip(jobs, results):
        assert result.bit_exact, (result.shape, result.mismatches)
        assert result.irq
        m, k, n = job.shape
        tiles = -(-m // cosim.rows) * -(-n // cosim.cols)
        assert result.array_cycles == tiles * -(-k // cosim.pack) * cosim.pack
        assert result.cycles >= result.ideal_cycles
    assert info["sim_cycles"] > sum(r.cycles for r in results)
    assert any(r.output.dtype == np.int8 and r.output.min() == -128 for r in results)


def test_backpressure_stalls_without_losing_data(free_run):
    cosim, jobs, results, _ = free_run
    picked = [1, 5, 6]
    stalled, _ = cosim.run_bulk([jobs[i] for i in picked], backpressure=0.8, seed=3)
    for index, result in zip(picked, stalled):
        assert result.bit_exact, (result.shape, result.mismatches)
        assert result.cycles > results[index].cycles      # the stalls did happen


def test_a_wrong_output_is_detected(free_run, tmp_path):
    # The comparison can fail: corrupt one output word of a finished run and re-check.
    cosim, jobs, _, _ = free_run
    job = jobs[5]
    cosim.run_bulk([job], data_dir=tmp_path)
    words = read_output_words(tmp_path / "out.hex", cosim.cols)
    words[0] ^= 1
    stats = [{"cycles": 1, "array_cycles": 1, "irq": True}]
    assert not cosim.check_results([job], [words], stats)[0].bit_exact


def test_cli_bulk_bench(capsys):
    from zoforge.cli import main
    code = main(["cosim", "gemm", "--bench", "bulk", "--rows", "3", "--cols", "2",
                 "--max-m", "32", "--max-k", "32", "--max-n", "32", "--m", "11", "--k", "7",
                 "--n", "5", "--jobs", "3", "--per-channel", "--backpressure", "0.3"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["bit_exact"] and report["mismatches"] == 0
    assert report["bench"] == "bulk" and report["jobs"] == 3 and report["cycles_per_s"] > 0


def test_bulk_bench_needs_verilator(capsys):
    from zoforge.cli import main
    assert main(["cosim", "gemm", "--bench", "bulk", "--simulator", "icarus"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("zoforge: error: --simulator") and "\n" not in error


def test_agrees_with_the_cocotbext_axi_bench_cycle_for_cycle(free_run, simulator):
    # The cocotb bench checks the AXI protocol; the bulk bench must see the same engine:
    # the same outputs and the same CYCLES / ARRAY_CYCLES counters for every job, whichever
    # simulator runs the cocotb bench.
    cosim, jobs, results, _ = free_run
    picked = [0, 2, 3, 6, 9]
    other = GemmCosim(**CONFIG, simulator=simulator)
    reference, _ = other.run([jobs[i] for i in picked])
    for index, expected in zip(picked, reference):
        assert np.array_equal(results[index].output, expected.output)
        assert (results[index].cycles, results[index].array_cycles) == (
            expected.cycles, expected.array_cycles)


def test_hung_or_short_runs_are_errors_not_results(tmp_path):
    from zoforge.sim.gemm_bulk import _parse_stats
    specs = [{"m": 1}]
    (tmp_path / "stats.txt").write_text("T 5000\n")
    with pytest.raises(RuntimeError, match="timed out"):
        _parse_stats(tmp_path / "stats.txt", specs)
    (tmp_path / "stats.txt").write_text("R 4 2\nR 20 9\nI 1\nE 40\n")   # reads missing
    with pytest.raises(RuntimeError, match="ended early"):
        _parse_stats(tmp_path / "stats.txt", specs)
    (tmp_path / "stats.txt").write_text("R 4 1\nR 20 9\nR 24 2\nR 4 0\nI 1\nE 40\n")
    with pytest.raises(RuntimeError, match="STATUS"):                 # still busy
        _parse_stats(tmp_path / "stats.txt", specs)
    (tmp_path / "stats.txt").write_text("R 4 2\nR 20 9\nR 24 2\nR 4 0\nI 1\nE 40\n")
    stats, total = _parse_stats(tmp_path / "stats.txt", specs)
    assert total == 40 and stats[0]["cycles"] == 0x9 and stats[0]["irq"]


def test_runs_leave_no_temporary_folder_behind(tmp_path, monkeypatch):
    """Both benches' scratch folders are removed after a passing run (issue 13)."""
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    cosim = GemmCosim(**CONFIG)
    jobs = _jobs(7, 2)
    bulk, _ = cosim.run_bulk(jobs)
    axi, _ = cosim.run(jobs)
    assert all(r.bit_exact for r in bulk + axi)
    assert list(tmp_path.iterdir()) == []


def test_a_damaged_bulk_build_is_rebuilt(tmp_path, monkeypatch):
    """A truncated bench binary (a build killed while linking) is rebuilt (issue 13). In a
    cache of its own: other tests may be running the shared one."""
    from zoforge.sim.gemm_bulk import build_bulk
    monkeypatch.setenv("ZOFORGE_CACHE", str(tmp_path / "cache"))
    cosim = GemmCosim(**CONFIG)
    exe, _ = build_bulk(cosim)
    size = exe.stat().st_size
    exe.write_bytes(exe.read_bytes()[:size // 3])
    again, _ = build_bulk(cosim)
    assert again == exe and exe.stat().st_size == size
    results, _ = cosim.run_bulk(_jobs(11, 2))
    assert all(r.bit_exact for r in results)
