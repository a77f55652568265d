"""The ZO training layer in hardware (design ``zo-layer``); golden: :mod:`zoforge.golden.zolayer`.

* :mod:`.layer` the top: holds the blocks and the memories of :mod:`.buffers` (named by
  :class:`~.buffers.Memory`), joins their signatures; the array and its tile sequencing
  (feeder, drain, output stage, requantizer) come from :mod:`zoforge.hw.pe`, as the
  GEMM engine's do;
* :mod:`.control` the register file and the job in flight (:class:`~.control.
  LayerJobSignature`); :mod:`.registers` the register map (data);
* :mod:`.share` what the units share: the generator's stream, the master copy's ports;
* :mod:`.loader` the input stream into the memories; :mod:`.reader` the master copy out;
* :mod:`.token_buffer` the packed token buffer X (``load_x``'s walk, the feeder's reads);
* :mod:`.fetch` the weight panels through :mod:`.perturb` (master word -> perturbed operand)
  into the staging banks; :mod:`.spread` a word's k-steps to the rows' branches
  (``branch_lanes`` > 1);
* :mod:`.sink` the requantized rows to the output stream, the init or the U buffer;
* :mod:`.update` the update unit: ``D += g * z`` and ``T <- T - round(eta * D)``;
* :mod:`.walk` the one word order; :mod:`.designs` the registered design;
* :mod:`.cycles` the cycle model (every job's CYCLES, a step's STEP_CYCLES);
* the generator: :class:`zoforge.hw.rng.source.PerturbationSource`.
"""
