"""The nonlinear functions of a transformer block as streaming integer units (issue 32): the
host's softmax, GELU and LayerNorm moved to the fabric, each bit for bit its integer golden
kernel in :mod:`zoforge.golden.finetune.integer_ops`.

* :mod:`.gelu`: :class:`~.gelu.GeluUnit`, i-GELU (``int_gelu``), ``lanes`` values a beat;
* :mod:`.credits`: the output side every unit here shares (pipeline stages that never
  stall; back-pressure taken by credits and an output buffer).

The softmax and LayerNorm units are still to come (docs/nonlinear-units.md).
"""
