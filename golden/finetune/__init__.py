"""Fine-tuning a transformer on the accelerator: MiniLM's linear maps in the GEMM engine's and
the ZO layer's integer arithmetic, LoRA-FA adapters trained with P-RGE (``zoforge finetune``).

:mod:`.config` the run's configuration; :mod:`.calls` the units' calls and their golden
models; :mod:`.model` calibration, quantized maps and the host's forward; :mod:`.train` the
ZO step (int8 and its float twin) and the first-order ceiling. ``docs/finetune.md`` has the
mapping, the schedule and the results.
"""
