// Job server wrapper: the DUT's AXI4-Lite target and AXI4-Stream ports under plain names.
//
// Built with Verilator by zoforge.sim.jobserver together with jobserver_main.cpp, which
// drives every port from C++ (no Python per cycle). The DUT is any top with zoforge's bus
// ports (hw/pe/bus.py): clk, rst, s_axil__*, s_axis__*, m_axis__*, irq. Amaranth joins a
// port's path with "__", which Verilator would escape in C++ names; here they are plain.
//
// DUT (a macro) names the top module; LANES is the output stream's width in 32-bit lanes,
// IN_BITS the input stream's width, ADDR_W the AXI4-Lite address width.
`ifndef DUT
`define DUT zo_layer
`endif

module jobserver_top #(
    parameter int LANES = 4,
    parameter int IN_BITS = 32 * LANES,
    parameter int ADDR_W = 8
) (
    input logic clk,
    input logic rst,
    output logic irq,
    input logic [ADDR_W-1:0] awaddr,
    input logic awvalid,
    output logic awready,
    input logic [31:0] wdata,
    input logic wvalid,
    output logic wready,
    output logic [1:0] bresp,
    output logic bvalid,
    input logic bready,
    input logic [ADDR_W-1:0] araddr,
    input logic arvalid,
    output logic arready,
    output logic [31:0] rdata,
    output logic [1:0] rresp,
    output logic rvalid,
    input logic rready,
    input logic [IN_BITS-1:0] s_tdata,
    input logic s_tvalid,
    input logic s_tlast,
    output logic s_tready,
    output logic [32*LANES-1:0] m_tdata,
    output logic m_tvalid,
    output logic m_tlast,
    input logic m_tready
);

  `DUT dut (
`include "axi_dut_ports.svh"
  );
endmodule
