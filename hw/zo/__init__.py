"""The ZO training layer in hardware (design ``zo-layer``); golden: :mod:`zoforge.golden.zolayer`.

* :mod:`.perturb` the weight-operand stream's transform: master word -> perturbed operand;
* :mod:`.update` the update unit: ``D += g * z`` and ``T <- T - round(eta * D)``;
* :mod:`.registers` the register map (data);
* :mod:`.layer` the top: buffers, panel staging, the systolic array, drain and output;
* :mod:`.designs` the registered design.
"""
