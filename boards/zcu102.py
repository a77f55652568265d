"""Xilinx ZCU102 evaluation board (Zynq UltraScale+ XCZU9EG-2FFVB1156E), Vivado toolchain.

Capacities from the XCZU9EG data sheet (Xilinx DS891, Zynq UltraScale+ MPSoC product
overview): 274,080 CLB LUTs, 548,160 CLB flip-flops, 912 BRAM36 (= 1,824 BRAM18),
2,520 DSP48E2, no UltraRAM. (PeZO's Table 6 prints 150 BRAMs; the data sheet says 912.)

Pins from the ZCU102 user guide (UG1182): the programmable user clock USER_SI570 (AL8/AL7,
DIFF_SSTL12; 300 MHz at power-up, re-programmable, so the platform gives it the frequency the
report targets), the fixed 125 MHz CLK_125 (G21/F21, LVDS_25), the eight PL user LEDs
GPIO_LED_0..7 and DIP switches GPIO_DIP_SW0..7 (LVCMOS33). Check them against the board's
master XDC before programming a real board; the reports only need the clock.

Static power (:data:`STATIC_POWER_W`, with its source: a paper's bound, not a data-sheet
value, so the reports show it apart from the dynamic power) is the board's fact too; so is
the external memory bandwidth (:data:`DDR_BYTES_PER_S`, theoretical peak, with its source),
which the finetune cost model's roofline reads.
"""
from amaranth.build import Attrs, Clock, DiffPairs, Pins, Resource
from amaranth.vendor import XilinxPlatform

from zoforge.boards.registry import Board, register_board

__all__ = ["ZCU102Platform", "zcu102_platform", "BOARD", "STATIC_POWER_W",
           "STATIC_POWER_SOURCE", "DDR_BYTES_PER_S", "DDR_SOURCE"]

_LEDS = "AG14 AF13 AE13 AJ14 AJ15 AH13 AH14 AL12"
_SWITCHES = "AN14 AP14 AM14 AN13 AN12 AP12 AL13 AK13"


def _resources(frequency: float) -> list:
    return [
        Resource("clk_user", 0, DiffPairs("AL8", "AL7", dir="i"), Clock(frequency),
                 Attrs(IOSTANDARD="DIFF_SSTL12")),
        Resource("clk125", 0, DiffPairs("G21", "F21", dir="i"), Clock(125e6),
                 Attrs(IOSTANDARD="LVDS_25")),
        *[Resource("led", i, Pins(pin, dir="o"), Attrs(IOSTANDARD="LVCMOS33"))
          for i, pin in enumerate(_LEDS.split())],
        *[Resource("switch", i, Pins(pin, dir="i"), Attrs(IOSTANDARD="LVCMOS33"))
          for i, pin in enumerate(_SWITCHES.split())],
    ]


class ZCU102Platform(XilinxPlatform):
    """ZCU102; its default clock ``clk_user`` (the SI570) runs at 300 MHz here, and at
    any frequency in platforms from :func:`zcu102_platform`."""

    device = "xczu9eg"
    package = "ffvb1156"
    speed = "2-e"
    default_clk = "clk_user"
    resources = _resources(300e6)
    connectors = []


def zcu102_platform(frequency: float = 300e6) -> ZCU102Platform:
    """A ZCU102 platform whose SI570 user clock runs at ``frequency`` Hz."""
    cls = type(f"ZCU102Platform_{frequency / 1e6:g}MHz", (ZCU102Platform,),
               {"resources": _resources(frequency)})
    return cls()


# Static power of the device. No device source can be stated: Xilinx publishes UltraScale+
# static power only through XPE and Vivado's report_power, not in the data sheets. So this is
# the paper's bound, and every output shows it apart from the dynamic power, with this source.
STATIC_POWER_W = 0.59
STATIC_POWER_SOURCE = (
    "not a device data-sheet figure (Xilinx publishes XCZU9EG static power only through XPE "
    "and Vivado's report_power): an upper bound read off PeZO Table 6, whose smallest design "
    "(32 LUTs, 449 FFs at 700 MHz) totals 0.608 W in Vivado, so the PL's static power is "
    "<= ~0.6 W in that setup; zoforge build --vivado-reports shows Vivado's own value")

# The memory the fabric streams from: the PS-side DDR4 (64-bit, DDR4-2666), which the PL
# reaches through the PS's S_AXI_HP ports. Peak = 2666 MT/s x 8 bytes; sustained DMA is lower.
DDR_BYTES_PER_S = 2666e6 * 8
DDR_SOURCE = (
    "theoretical peak of the PS-side DDR4: 64-bit at 2666 MT/s x 8 B = 21.3 GB/s (ZCU102 "
    "user guide UG1182: PS DDR4 64-bit memory; Zynq UltraScale+ TRM UG1085: the PL reaches it "
    "through the four 128-bit S_AXI_HP ports); sustained DMA bandwidth is lower")

BOARD = register_board(Board(
    name="zcu102",
    description="Xilinx ZCU102 (XCZU9EG-2FFVB1156E), Vivado",
    make_platform=zcu102_platform,
    part="xczu9eg-ffvb1156-2-e",
    family="xcup",
    toolchain="vivado",
    capacities={"LUT": 274_080, "FF": 548_160, "BRAM18": 1_824, "DSP": 2_520, "URAM": 0},
    capacity_source="XCZU9EG data sheet (Xilinx DS891)",
    default_mhz=300.0,
    # the SI570 user clock is re-programmed to the report's target; reports accept 1..1000
    clock_range_mhz=(1.0, 1000.0),
    toolchain_args=(),          # Vivado takes the part above; nothing else is board-specific
    static_power_w=STATIC_POWER_W,
    static_power_source=STATIC_POWER_SOURCE,
    ddr_bytes_per_s=DDR_BYTES_PER_S,
    ddr_source=DDR_SOURCE,
))
