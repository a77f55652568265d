"""zoforge: zeroth-order fine-tuning turned into FPGA hardware you can trust.

Sub-packages (each a top-level folder of the repository, mapped by ``setup.py``):

``zoforge.hw``       Amaranth hardware generators (``hw.rng``: PeZO generators, ``hw.engine``: engine)
``zoforge.golden``   bit-exact NumPy/PyTorch models of the hardware, and the ZO trainers
``zoforge.sim``      cocotb co-simulation harness, testbenches and Verilator lint
``zoforge.boards``   FPGA boards (ZCU102, ECP5) and their capacities
``zoforge.reports``  synthesis, timing and power estimates and their reports
``zoforge.cli``      the ``zoforge`` command line
"""

__version__ = "0.1.0"
