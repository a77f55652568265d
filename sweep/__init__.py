"""Design-space sweeps: accuracy x area x power over generators and training options.

One module per job (docs/sweeps.md has the whole story):

* :mod:`.spec`      SWEEP.toml: points, report and search options, stable keys; strict
* :mod:`.presets`   the built-in sweeps (PeZO Figures 3 and 4, ``small-d``, the tests' ``tiny``)
* :mod:`.store`     the durable SQLite store: tasks, points, claims and leases
* :mod:`.tasks`     one training or generator report, as a worker runs it
* :mod:`.executors` local worker processes or a Dask cluster
* :mod:`.runner`    the coordinator: claim, submit, record, heartbeat, progress bar
* :mod:`.search`    NSGA-II over the sweep's space, through the same store
* :mod:`.results`   runs and configurations read back from the store, the Pareto front
* :mod:`.pareto`    dominance, hypervolume, IGD
* :mod:`.table`, :mod:`.plots`, :mod:`.html`, :mod:`.outputs`  what a sweep writes
"""
