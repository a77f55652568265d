"""The ZO training layer in hardware (design ``zo-layer``); golden: :mod:`zoforge.golden.zolayer`.

* :mod:`.layer` the top: holds the blocks and the memories of :mod:`.buffers`, connects them;
  its tile sequencing (feeder, drain, output stage) is the GEMM engine's
  (:mod:`zoforge.hw.pe.tiles`);
* :mod:`.control` the register file and the job in flight; :mod:`.registers` the register
  map (data);
* :mod:`.loader` the input stream into the memories; :mod:`.reader` the master copy out;
* :mod:`.fetch` the weight panels through :mod:`.perturb` (master word -> perturbed operand)
  into the staging banks;
* :mod:`.sink` the requantized rows to the output stream, the init or the U buffer;
* :mod:`.update` the update unit: ``D += g * z`` and ``T <- T - round(eta * D)``;
* :mod:`.walk` the one word order; :mod:`.designs` the registered design.
"""
