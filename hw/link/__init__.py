"""On-chip links between the accelerator's units (docs/link.md): so far the blocks of an
attention link, the scores reorder buffer between a GEMM engine's raw output and a softmax
unit's input, the link on an engine's output around it, and the softmax unit's input
selector.

* :mod:`.config`: :class:`~.config.ReorderConfig` (the engine's R and C, the softmax unit's
  lanes, max_rows, max_len) and :class:`~.config.LinkConfig` (those, the job queue's and
  the asynchronous FIFO's depths), torch- and Amaranth-free;
* :mod:`.reorder`: :class:`~.reorder.ScoresReorder`, the buffer (two banks in
  ``amaranth.lib.memory``) and its stream formats;
* :mod:`.path`: :class:`~.path.ScoresLink`, on one engine's output: each frame, as the
  host queues, passed through or through the buffer and an asynchronous FIFO into the
  softmax units' clock domain;
* :mod:`.select`: :class:`~.select.FrameSelect`, whole frames from several sources to a
  softmax unit's input;
* :mod:`.cycles`: the cycle model of a job and of jobs back to back.

The golden models are :mod:`zoforge.golden.link` (the buffer's and the link's) and
:mod:`zoforge.golden.link_select`. The modules are imported where used (this
package imports none of them).
"""
