"""Testbenches: cocotb modules (imported in the simulator process) and the Verilog/C++
sources of the job server, read with :func:`bench_text`."""
from importlib import resources

__all__ = ["DUT_PORTS", "bench_text"]

#: The include file with a design's AXI port connections, used by the job server's wrapper.
DUT_PORTS = "axi_dut_ports.svh"


def bench_text(name: str) -> str:
    """The text of the bench source file ``name`` shipped in this package."""
    return resources.files(__name__).joinpath(name).read_text()
