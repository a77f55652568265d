"""The GEMM engine's host program on the job server against the golden model.

One small engine build (3 x 2 array, pack 2, 32^3 buffers; the input beat is 6 bytes, not a
whole number of words), cached: random shapes that are not multiples of the tile, M < R,
N < C, K = 1, extreme operands, raw and requantized output, back-to-back jobs without
reset, output back-pressure, and ``zoforge cosim engine --backend jobserver``. The job server
is Verilator's, so the comparison with the cocotbext-axi backend runs on every simulator:
the same program must see the same outputs and counters on Icarus too.
"""
import json

import numpy as np
import pytest

from engine_checks import assert_jobs_bit_exact
from zoforge.sim.backends import stall_problems
from zoforge.sim.engine_cosim import EngineCosim, random_job

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
    cosim = EngineCosim(**CONFIG)
    jobs = _jobs(seed=21, count=10)
    results, info = cosim.run(jobs, backend="jobserver")
    assert info["simulator"] == "verilator (jobserver)"
    return cosim, jobs, results, info


def test_random_shapes_are_bit_exact_back_to_back(free_run):
    cosim, jobs, results, info = free_run
    assert_jobs_bit_exact(cosim, jobs, results)
    assert info["sim_cycles"] > sum(r.cycles for r in results)
    assert any(r.output.dtype == np.int8 and r.output.min() == -128 for r in results)


def test_backpressure_stalls_without_losing_data(free_run):
    cosim, jobs, results, _ = free_run
    picked = [1, 4, 5, 6]
    stalled, info = cosim.run([jobs[i] for i in picked], backpressure=0.8, seed=3,
                              backend="jobserver")
    assert stall_problems(info["stalls"], 0.0, 0.8) == []      # out, B and R held off
    assert [jobs[i].raw for i in picked] == [False, True, False, False]
    for index, result in zip(picked, stalled):
        assert result.bit_exact, (result.shape, result.mismatches)
        # the stalls did happen; an int8 job's output (four rows a beat) may absorb them
        assert result.cycles >= results[index].cycles
        if jobs[index].raw:
            assert result.cycles > results[index].cycles
    assert sum(r.cycles for r in stalled) > sum(results[i].cycles for i in picked)


def test_a_wrong_output_is_detected(free_run):
    # The comparison can fail: corrupt one output word of a finished job and re-check. The
    # right words built here by hand: the int8 rows (tiles nt-major, R rows each) four to a
    # beat of C little-endian 32-bit words, column j of a beat's row r at byte r*C + j.
    cosim, jobs, results, _ = free_run
    job, result = jobs[5], results[5]
    assert not job.raw
    m, k, n = job.shape
    rows, cols = cosim.rows, cosim.cols
    mt, nt = -(-m // rows), -(-n // cols)
    beats = -(-mt * nt * rows // 4)
    stats = [{"cycles": 1, "array_cycles": result.array_cycles, "irq": True}]
    words = np.zeros(beats * cols, np.uint32)
    assert not cosim.check_results([job], [words], stats)[0].bit_exact
    for t_n in range(nt):
        for t_m in range(mt):
            for r in range(rows):
                row = (t_n * mt + t_m) * rows + r        # in the stream
                for j in range(cols):
                    i, c = t_m * rows + r, t_n * cols + j
                    value = int(result.output[i, c]) & 0xFF if i < m and c < n else 0
                    byte = (row // 4) * 4 * cols + (row % 4) * cols + j
                    words[byte // 4] |= np.uint32(value << (8 * (byte % 4)))
    assert cosim.check_results([job], [words], stats)[0].bit_exact       # the right words
    words[0] ^= 1                                       # Y[0, 0]'s lowest bit
    assert not cosim.check_results([job], [words], stats)[0].bit_exact


def test_cli_job_server_backend(capsys):
    from zoforge.cli import main
    code = main(["cosim", "engine", "--backend", "jobserver", "--rows", "3", "--cols", "2",
                 "--max-m", "32", "--max-k", "32", "--max-n", "32", "--m", "11", "--k", "7",
                 "--n", "5", "--jobs", "3", "--per-channel", "--backpressure", "0.3"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["bit_exact"] and report["mismatches"] == 0
    assert report["backend"] == "jobserver" and report["jobs"] == 3 and report["cycles_per_s"] > 0


def test_job_server_needs_verilator(capsys):
    from zoforge.cli import main
    assert main(["cosim", "engine", "--backend", "jobserver", "--simulator", "icarus"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("zoforge: error: --backend") and "\n" not in error


def test_agrees_with_the_cocotbext_axi_bench_cycle_for_cycle(free_run, simulator):
    # The cocotb backend checks the AXI protocol; the job server must see the same engine:
    # the same outputs and the same CYCLES / ARRAY_CYCLES counters for every job, whichever
    # simulator runs the cocotb bench.
    cosim, jobs, results, _ = free_run
    picked = [0, 2, 3, 6, 9]
    other = EngineCosim(**CONFIG, simulator=simulator)
    reference, _ = other.run([jobs[i] for i in picked], backend="cocotb")
    for index, expected in zip(picked, reference):
        assert np.array_equal(results[index].output, expected.output)
        assert (results[index].cycles, results[index].array_cycles) == (
            expected.cycles, expected.array_cycles)


def test_a_hung_job_is_an_error_not_a_result(monkeypatch):
    # a bound of 50 cycles per operation: the first job's output frame never comes in time
    import zoforge.sim.engine_cosim as engine_cosim
    monkeypatch.setattr(engine_cosim, "job_limit_cycles", lambda spec: 50)
    with pytest.raises(RuntimeError, match="RECEIVE ran out of cycles"):
        EngineCosim(**CONFIG).run(_jobs(3, 0)[1:2], backend="jobserver")


def test_runs_leave_no_temporary_folder_behind(tmp_path, monkeypatch):
    """Both backends' scratch folders are removed after a passing run (issue 13)."""
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    cosim = EngineCosim(**CONFIG)
    jobs = _jobs(7, 2)
    server, _ = cosim.run(jobs, backend="jobserver")
    axi, _ = cosim.run(jobs, backend="cocotb")
    assert all(r.bit_exact for r in server + axi)
    assert list(tmp_path.iterdir()) == []
