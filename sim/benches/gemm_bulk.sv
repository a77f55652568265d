// Bulk co-simulation testbench of the GEMM engine: no Python (and no cocotb) in the loop.
//
// Built with Verilator by zoforge.sim.gemm_bulk (which also writes the files it reads) with
// the C++ harness gemm_bulk_main.cpp, which toggles `clk` until $finish. Everything here is
// synchronous logic on that clock: no delays, no testbench/DUT races, no Python.
//
// Plusargs:
//   +prog=FILE   program, one operation per line, "op addr data" in hex:
//                  1 a d  AXI4-Lite write of d to a
//                  2 b j  stream b input beats from FILE_DIR/in<j>.hex ($readmemh)
//                  3 0 0  wait for the output beat with tlast, 2 more cycles, log "I <irq>"
//                  4 a 0  AXI4-Lite read of a, log "R <a> <data>"
//                  0 0 0  log "E <cycles since reset>" and finish
//   +dir=DIR     folder of in<j>.hex, out.hex (every output beat, "%h") and stats.txt (log)
//   +bp=T        output back-pressure: tready is low when the top 16 bits of a xorshift32
//                generator are below T (T = round(p * 65536), 0 = never stalled)
//   +seed=S      the generator's seed (non-zero)
//   +max_cycles=C  log "T <cycles>" and finish after C cycles (a hung job)
//
// ENGINE (a macro) names the engine module; IN_W/OUT_W/ADDR_W are its stream and address
// widths, MAX_BEATS the most input beats of one job.
`ifndef ENGINE
`define ENGINE gemm_engine
`endif

module gemm_bulk_tb #(
    parameter int IN_W = 8,
    parameter int OUT_W = 32,
    parameter int ADDR_W = 16,
    parameter int MAX_BEATS = 16
) (
    input logic clk
);

  // -- reset: 3 cycles high, the program starts 2 cycles later -------------------------
  logic rst = 1'b1;
  logic [2:0] reset_count = 3'd0;
  logic [31:0] cycle = 32'd0;
  always @(posedge clk) begin
    if (reset_count != 3'd5) reset_count <= reset_count + 3'd1;
    if (reset_count == 3'd2) rst <= 1'b0;
    if (!rst) cycle <= cycle + 32'd1;
  end
  wire running = reset_count == 3'd5;

  // -- DUT ------------------------------------------------------------------------------
  logic [ADDR_W-1:0] awaddr = '0, araddr = '0;
  logic [31:0] wdata = '0;
  logic awvalid = 1'b0, wvalid = 1'b0, bready = 1'b0, arvalid = 1'b0, rready = 1'b0;
  wire awready, wready, bvalid, arready, rvalid, irq;
  wire [1:0] bresp, rresp;
  wire [31:0] rdata;
  wire [IN_W-1:0] s_tdata;
  wire s_tvalid, s_tready, s_tlast;
  wire [OUT_W-1:0] m_tdata;
  wire m_tvalid, m_tlast, m_tready;

  `ENGINE dut (
`include "axi_dut_ports.svh"
  );

  // -- files ------------------------------------------------------------------------------
  string dir, prog_path;
  integer prog_fd, out_fd, stats_fd;
  logic [31:0] bp_threshold = 32'd0, lfsr_seed = 32'd1, max_cycles = 32'hFFFF_FFFF;
  initial begin
    if (!$value$plusargs("prog=%s", prog_path)) $fatal(1, "+prog= missing");
    if (!$value$plusargs("dir=%s", dir)) dir = ".";
    void'($value$plusargs("bp=%d", bp_threshold));
    void'($value$plusargs("seed=%d", lfsr_seed));
    void'($value$plusargs("max_cycles=%d", max_cycles));
    if (lfsr_seed == 32'd0) lfsr_seed = 32'd1;
    prog_fd = $fopen(prog_path, "r");
    out_fd = $fopen({dir, "/out.hex"}, "w");
    stats_fd = $fopen({dir, "/stats.txt"}, "w");
    if (prog_fd == 0 || out_fd == 0 || stats_fd == 0) $fatal(1, "cannot open the bench files");
  end

  // -- input stream: beats in_offset..in_target-1 of the running count come from in_mem --
  logic [IN_W-1:0] in_mem[MAX_BEATS];
  logic [31:0] in_sent = 32'd0, in_target = 32'd0, in_offset = 32'd0;
  assign s_tvalid = in_sent != in_target;
  assign s_tdata = s_tvalid ? in_mem[in_sent-in_offset] : '0;
  assign s_tlast = s_tvalid && in_sent + 32'd1 == in_target;   // the job's last beat
  always @(posedge clk) if (s_tvalid && s_tready) in_sent <= in_sent + 32'd1;

  // -- output stream: pseudo-random back-pressure, every beat to out.hex -------------------
  logic [31:0] lfsr = 32'd1;
  logic [31:0] lasts = 32'd0;   // output beats with tlast so far (completed jobs)
  wire [31:0] xs1 = lfsr ^ (lfsr << 13);
  wire [31:0] xs2 = xs1 ^ (xs1 >> 17);
  assign m_tready = !rst && ({16'd0, lfsr[31:16]} >= bp_threshold);
  always @(posedge clk) begin
    lfsr <= rst ? lfsr_seed : xs2 ^ (xs2 << 5);
    if (m_tvalid && m_tready) begin
      $fwrite(out_fd, "%h\n", m_tdata);
      if (m_tlast) lasts <= lasts + 32'd1;
    end
  end

  // -- the program ------------------------------------------------------------------------
  typedef enum logic [2:0] {FETCH, WRITE, READ, WAIT_LAST, SETTLE, STOP} state_t;
  state_t state = FETCH;
  logic [31:0] op, addr, data, waited = 32'd0;
  logic [1:0] settle = 2'd0;
  integer scanned;

  always @(posedge clk) begin
    if (running && cycle >= max_cycles) begin
      $fwrite(stats_fd, "T %0d\n", cycle);
      $fclose(out_fd);
      $fclose(stats_fd);
      $finish;
    end
    if (running) begin
      case (state)
        FETCH: begin
          scanned = $fscanf(prog_fd, "%h %h %h\n", op, addr, data);
          if (scanned != 3) op = 32'd0;
          case (op)
            32'd1: begin
              awaddr <= addr[ADDR_W-1:0];
              wdata <= data;
              awvalid <= 1'b1;
              wvalid <= 1'b1;
              bready <= 1'b1;
              state <= WRITE;
            end
            32'd2: begin
              $readmemh($sformatf("%s/in%0d.hex", dir, data), in_mem, 0, addr - 1);
              in_offset <= in_sent;
              in_target <= in_sent + addr;
            end
            32'd3: state <= WAIT_LAST;
            32'd4: begin
              araddr <= addr[ADDR_W-1:0];
              arvalid <= 1'b1;
              rready <= 1'b1;
              state <= READ;
            end
            default: begin
              $fwrite(stats_fd, "E %0d\n", cycle);
              state <= STOP;
            end
          endcase
        end
        WRITE: begin
          if (awready) awvalid <= 1'b0;
          if (wready) wvalid <= 1'b0;
          if (bvalid && !awvalid && !wvalid) begin
            bready <= 1'b0;
            state <= FETCH;
          end
        end
        READ: begin
          if (arready) arvalid <= 1'b0;
          if (rvalid && !arvalid) begin
            rready <= 1'b0;
            $fwrite(stats_fd, "R %0h %0h\n", addr, rdata);
            state <= FETCH;
          end
        end
        WAIT_LAST:
        if (lasts != waited) begin
          waited <= waited + 32'd1;
          settle <= 2'd0;
          state <= SETTLE;
        end
        SETTLE: begin    // done and irq follow the last beat
          settle <= settle + 2'd1;
          if (settle == 2'd1) begin
            $fwrite(stats_fd, "I %0d\n", irq);
            state <= FETCH;
          end
        end
        STOP: begin
          $fclose(out_fd);
          $fclose(stats_fd);
          $finish;
        end
        default: state <= STOP;
      endcase
    end
  end
endmodule
