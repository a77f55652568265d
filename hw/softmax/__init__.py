"""The integer softmax as an accelerator unit (design ``softmax``; issue 32, item 4): the
streaming :class:`~zoforge.hw.nonlinear.softmax.SoftmaxUnit` behind the accelerator's bus
interfaces (AXI4-Lite registers, AXI4-Stream in and out), as the GEMM engine and the ZO
layer have them.

* :mod:`.config`: :class:`~.config.SoftmaxConfig` (lanes, max_len, min_scale), torch- and
  Amaranth-free (the command line reads it);
* :mod:`.regmap`: the register map, as data (register file, host, docs);
* :mod:`.registers`: the register file;
* :mod:`.top`: :class:`~.top.SoftmaxBusUnit`, the top (the stream formats);
* :mod:`.cycles`: the CYCLES register of one job, and its streams' bytes;
* :mod:`.designs`: the design entry (``zoforge generate softmax``).

The modules are imported where used (this package imports none of them).
"""
