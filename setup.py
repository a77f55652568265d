"""Maps the top-level folders into the single ``zoforge`` import namespace.

``hw/`` installs as ``zoforge.hw``, ``sim/`` as ``zoforge.sim`` and so on, so installing
zoforge never shadows an unrelated package called ``hw`` or ``sim``. A new sub-package
(a folder with ``__init__.py``) under one of these folders is picked up automatically.
"""
from setuptools import find_packages, setup

FOLDERS = {"zoforge": "zoforge", "hw": "zoforge.hw", "sim": "zoforge.sim",
           "golden": "zoforge.golden", "boards": "zoforge.boards",
           "reports": "zoforge.reports",
           "sweep": "zoforge.sweep"}

package_dir, packages = {}, []
for folder, package in FOLDERS.items():
    package_dir[package] = folder
    packages.append(package)
    packages += [f"{package}.{sub}" for sub in find_packages(where=folder)]

setup(package_dir=package_dir, packages=packages,
      package_data={"zoforge.boards": ["*.json"], "zoforge.hw": ["*.vlt"],
                    "zoforge.sim.benches": ["*.sv", "*.svh", "*.cpp"],
                    "zoforge.sim.models": ["*.v"]})
