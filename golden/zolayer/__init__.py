"""Golden model of the ZO training layer (LoRA-FA or full-weight), bit-exact with ``hw/zolayer``.

* :mod:`.config` the layer's configuration (``zo-layer``, one variant per generator) and its
  number formats (torch-free, shared with the hardware);
* :mod:`.model` the layer's integer arithmetic: frozen products, the perturbed branches,
  the update from the host's projected gradients, and the host's side of a step.
"""
from zoforge.golden.zolayer.config import (LAYER_CONFIGS, MODES, ZoLayerConfig, Formats,
                                           layer_config)

__all__ = ["LAYER_CONFIGS", "MODES", "ZoLayerConfig", "Formats", "layer_config"]
