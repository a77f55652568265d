"""The systolic building blocks, shared by the designs on the array (the GEMM engine
:mod:`zoforge.hw.engine`, the ZO layer :mod:`zoforge.hw.zolayer`); this package imports no design.

* :mod:`.pe`, :mod:`.array`: the processing element and the R x C output-stationary array;
  :mod:`.multiply`: the register-multiplier-register block they and the requantizer use
  (an ECP5 MULT18X18D with its registers on that platform);
* :mod:`.tiles`: :class:`~.tiles.Tiling` (a design's geometry: sides, widths, dimensions),
  :class:`~.tiles.Buffer` (an on-chip memory's shape and ports), the result rows' order;
* :mod:`.feeder` (buffers -> array), :mod:`.drain` (array -> result banks),
  :mod:`.output` (result banks -> requantizer -> stream), :mod:`.requant` (bias add,
  requantization);
* :mod:`.signatures`: the job, loaded panels and output mode that join them to a design;
* :mod:`.bus`: the AXI4-Lite / AXI4-Stream signatures; :mod:`.axil`: the AXI4-Lite target
  and the register-file port; :mod:`.regmap`: the register-map type.
"""
