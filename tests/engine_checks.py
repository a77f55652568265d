"""What every engine job's result must show (shared by the engine's co-simulation tests)."""


def assert_jobs_bit_exact(engine, jobs, results) -> None:
    """Each job of ``jobs`` bit-exact with its golden result, done with irq raised, no faster
    than the ideal, and busy for exactly its tiles' k-steps (``engine``: anything with the
    engine's ``rows``, ``cols`` and ``pack``)."""
    assert len(results) == len(jobs)
    for job, result in zip(jobs, results):
        assert result.bit_exact, (result.shape, result.mismatches)
        assert result.irq
        assert result.cycles >= result.ideal_cycles
        m, k, n = job.shape
        tiles = -(-m // engine.rows) * -(-n // engine.cols)
        assert result.array_cycles == tiles * -(-k // engine.pack) * engine.pack
