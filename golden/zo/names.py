"""The trainers' method and perturbation-source names, the one list of each.

Light on purpose (no torch): :class:`~zoforge.golden.zo.config.TrainConfig` and the
``zoforge train`` flags list the choices without importing the optimizers or the sources.
:mod:`~zoforge.golden.zo.optimizers` and :mod:`~zoforge.golden.zo.perturbation` implement
exactly these names (each checks it at import).
"""
__all__ = ["METHODS", "SOURCE_NAMES"]

#: The golden trainers' ZO methods (:func:`~zoforge.golden.zo.optimizers.make_optimizer`).
METHODS = ("mezo", "prge", "hizoo", "pefoo", "pefoo-l")
#: The perturbation sources (:data:`~zoforge.golden.zo.perturbation.SOURCES`).
SOURCE_NAMES = ("gaussian", "rademacher", "uniform-naive", "uniform-scaled", "pezo-onthefly",
                "pezo-pregen", "gaussian-hw", "masked-onthefly")
