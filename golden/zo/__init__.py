"""Golden zeroth-order fine-tuning in PyTorch (issue 4).

* :mod:`.perturbation` perturbation sources (Gaussian ... PeZO generators), one interface;
* :mod:`.trainable` head / LoRA-FA / full parameters as one flat vector, batched losses;
* :mod:`.hwarith` the GEMM engine's integer arithmetic for the trainable layers;
* :mod:`.optimizers` MeZO, P-RGE, HiZOO, PeFoo, PeFoo-L; :mod:`.dual` P-RGE dual forwarding;
* :mod:`.config`, :mod:`.features`, :mod:`.train` configuration, cached inputs, the loop.
"""
