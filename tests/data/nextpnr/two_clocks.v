module tiny (input clk_a, input clk_b, input [7:0] x, output reg [15:0] acc, output reg [7:0] cnt);
  always @(posedge clk_a) acc <= acc + x * x;
  always @(posedge clk_b) cnt <= cnt + 8'd3;
endmodule
