// The port connections of a zoforge AXI design (clk, rst, irq, s_axil, s_axis, m_axis) to
// the signals of the same names without the bus prefix; wstrb is always a whole word.
// Included inside the instance's port list by the job server's wrapper (jobserver.sv).
      .clk(clk), .rst(rst), .irq(irq),
      .s_axil__awaddr(awaddr), .s_axil__awvalid(awvalid), .s_axil__awready(awready),
      .s_axil__wdata(wdata), .s_axil__wstrb(4'hF), .s_axil__wvalid(wvalid),
      .s_axil__wready(wready), .s_axil__bresp(bresp), .s_axil__bvalid(bvalid),
      .s_axil__bready(bready), .s_axil__araddr(araddr), .s_axil__arvalid(arvalid),
      .s_axil__arready(arready), .s_axil__rdata(rdata), .s_axil__rresp(rresp),
      .s_axil__rvalid(rvalid), .s_axil__rready(rready),
      .s_axis__tdata(s_tdata), .s_axis__tvalid(s_tvalid), .s_axis__tready(s_tready),
      .s_axis__tlast(s_tlast),
      .m_axis__tdata(m_tdata), .m_axis__tvalid(m_tvalid), .m_axis__tready(m_tready),
      .m_axis__tlast(m_tlast)
