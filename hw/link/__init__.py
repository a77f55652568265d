"""On-chip links between the accelerator's units (docs/link.md): so far the first block of
an attention link, the scores reorder buffer between a GEMM engine's raw output and a
softmax unit's input.

* :mod:`.config`: :class:`~.config.ReorderConfig` (the engine's R and C, the softmax unit's
  lanes, max_rows, max_len), torch- and Amaranth-free;
* :mod:`.reorder`: :class:`~.reorder.ScoresReorder`, the buffer (two banks in
  ``amaranth.lib.memory``) and its stream formats;
* :mod:`.cycles`: the cycle model of a job and of jobs back to back.

The golden model is :mod:`zoforge.golden.link`. The modules are imported where used (this
package imports none of them).
"""
