module \hier.lane.mac (input clk, input [7:0] a, input [7:0] b, output reg [15:0] p);
  always @(posedge clk) p <= a * b;
endmodule
module \hier.lane (input clk, input [7:0] a, input [7:0] b, output reg [19:0] acc);
  wire [15:0] p;
  \hier.lane.mac mac (.clk(clk), .a(a), .b(b), .p(p));
  always @(posedge clk) acc <= acc + p;
endmodule
module \hier.ctrl (input clk, input rst, output reg [5:0] count);
  always @(posedge clk) if (rst) count <= 6'd63; else count <= count + 6'd1;
endmodule
module hier (input clk, input rst, input [7:0] a, input [7:0] b, input [7:0] c,
             output [19:0] y0, output [19:0] y1, output [5:0] count, output reg [7:0] top_q);
  \hier.lane lane0 (.clk(clk), .a(a), .b(b), .acc(y0));
  \hier.lane lane1 (.clk(clk), .a(b), .b(c), .acc(y1));
  \hier.ctrl ctrl (.clk(clk), .rst(rst), .count(count));
  always @(posedge clk) top_q <= a ^ c;
endmodule
