"""The nonlinear functions of a transformer block as streaming integer units (issue 32): the
host's softmax, GELU and LayerNorm moved to the fabric, each bit for bit its integer golden
kernel in :mod:`zoforge.golden.finetune.integer_ops`.

* :mod:`.gelu`: :class:`~.gelu.GeluUnit`, i-GELU (``int_gelu``), ``lanes`` values a beat;
* :mod:`.softmax`: :class:`~.softmax.SoftmaxUnit`, the integer softmax (``int_softmax``) of
  one row a job, ``lanes`` values a beat.

Both take back-pressure with :mod:`zoforge.hw.pe.credits` (pipeline stages that never
stall; credits and an output buffer). The LayerNorm unit is still to come
(docs/nonlinear-units.md).
"""
from .gelu import GeluUnit
from .softmax import SoftmaxUnit

__all__ = ["GeluUnit", "SoftmaxUnit"]
