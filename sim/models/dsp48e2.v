// Behavioural model of the Xilinx UltraScale/UltraScale+ DSP48E2, ONLY the subset that
// zoforge.hw.pe.packed_multiply.PackedMultiplier instantiates (a registered 27 x 18 signed
// multiply whose product is P):
//
//   A (30 bits) --AREG=1 (A2, CEA2)--> A2[26:0] --\
//                                                  * --MREG=1 (CEM)--> M --PREG=1 (CEP)--> P
//   B (18 bits) --BREG=1 (B2, CEB2)--> B2 --------/
//
//   USE_MULT "MULTIPLY", AMULTSEL "A", BMULTSEL "B" (no pre-adder), INMODE 5'b00000 (A2, B2),
//   OPMODE 9'b00_000_01_01 (W = 0, Z = 0, X and Y = the multiplier's partial products, so the
//   ALU adds M), ALUMODE 4'b0000 (Z + W + X + Y + CIN), CARRYINSEL 3'b000 with CARRYIN = 0:
//   P = M, the 45-bit signed product sign-extended to 48 bits.
//
// Sources (UG579, UltraScale Architecture DSP Slice User Guide: OPMODE's W/X/Y/Z fields,
// ALUMODE 0000 = Z + W + X + Y + CIN, AREG/BREG = 1 uses the A2/B2 register with CEA2/CEB2,
// ACASCREG/BCASCREG must equal AREG/BREG when those are 0 or 1; UG974, the DSP48E2
// primitive's ports and attribute defaults). Every register starts at 0 (GSR).
//
// Anything outside that subset is an error, not a guess: a parameter with another value
// stops the simulation at time 0 ($fatal), and at every clock edge a control input with
// another value, a reset that is not 0, a clock enable of an unused register that is not 0
// or a cascade / C / D input that is not tied to 0 is a $fatal. The parameters' defaults are
// the primitive's own (UG974), so an instance that leaves one out gets the device's value
// here too. Outputs the subset does not produce (carry, pattern detect, XOR, overflow) are x.
//
// zoforge.sim.models.with_models appends this file to Verilog that instantiates DSP48E2 (the
// activity co-simulation); tests/test_packed_multiply_dsp48e2.py checks it against Python
// integer products.
module DSP48E2 (ACOUT, BCOUT, CARRYCASCOUT, CARRYOUT, MULTSIGNOUT, OVERFLOW, P,
                PATTERNBDETECT, PATTERNDETECT, PCOUT, UNDERFLOW, XOROUT, A, ACIN, ALUMODE, B,
                BCIN, C, CARRYCASCIN, CARRYIN, CARRYINSEL, CEA1, CEA2, CEAD, CEALUMODE, CEB1,
                CEB2, CEC, CECARRYIN, CECTRL, CED, CEINMODE, CEM, CEP, CLK, D, INMODE,
                MULTSIGNIN, OPMODE, PCIN, RSTA, RSTALLCARRYIN, RSTALUMODE, RSTB, RSTC, RSTCTRL,
                RSTD, RSTINMODE, RSTM, RSTP);
  // The pattern detector's, the RND constant's and the wide XOR's attributes act only with
  // USE_PATTERN_DETECT "PATDET", OPMODE's W = RND and USE_WIDEXOR "TRUE", which the subset
  // excludes: declared (an instance may set them) and unread.
  parameter integer ACASCREG = 1;
  parameter integer ADREG = 1;
  parameter integer ALUMODEREG = 1;
  parameter AMULTSEL = "A";
  parameter integer AREG = 1;
  parameter AUTORESET_PATDET = "NO_RESET";
  /* verilator lint_off UNUSEDPARAM */
  parameter AUTORESET_PRIORITY = "RESET";
  /* verilator lint_on UNUSEDPARAM */
  parameter A_INPUT = "DIRECT";
  parameter integer BCASCREG = 1;
  parameter BMULTSEL = "B";
  parameter integer BREG = 1;
  parameter B_INPUT = "DIRECT";
  parameter integer CARRYINREG = 1;
  parameter integer CARRYINSELREG = 1;
  parameter integer CREG = 1;
  parameter integer DREG = 1;
  parameter integer INMODEREG = 1;
  parameter [3:0] IS_ALUMODE_INVERTED = 4'b0000;
  parameter [0:0] IS_CARRYIN_INVERTED = 1'b0;
  parameter [0:0] IS_CLK_INVERTED = 1'b0;
  parameter [4:0] IS_INMODE_INVERTED = 5'b00000;
  parameter [8:0] IS_OPMODE_INVERTED = 9'b000000000;
  parameter [0:0] IS_RSTALLCARRYIN_INVERTED = 1'b0;
  parameter [0:0] IS_RSTALUMODE_INVERTED = 1'b0;
  parameter [0:0] IS_RSTA_INVERTED = 1'b0;
  parameter [0:0] IS_RSTB_INVERTED = 1'b0;
  parameter [0:0] IS_RSTCTRL_INVERTED = 1'b0;
  parameter [0:0] IS_RSTC_INVERTED = 1'b0;
  parameter [0:0] IS_RSTD_INVERTED = 1'b0;
  parameter [0:0] IS_RSTINMODE_INVERTED = 1'b0;
  parameter [0:0] IS_RSTM_INVERTED = 1'b0;
  parameter [0:0] IS_RSTP_INVERTED = 1'b0;
  /* verilator lint_off UNUSEDPARAM */
  parameter [47:0] MASK = 48'h3FFFFFFFFFFF;
  /* verilator lint_on UNUSEDPARAM */
  parameter integer MREG = 1;
  parameter integer OPMODEREG = 1;
  /* verilator lint_off UNUSEDPARAM */
  parameter [47:0] PATTERN = 48'h000000000000;
  /* verilator lint_on UNUSEDPARAM */
  parameter PREADDINSEL = "A";
  parameter integer PREG = 1;
  /* verilator lint_off UNUSEDPARAM */
  parameter [47:0] RND = 48'h000000000000;
  /* verilator lint_on UNUSEDPARAM */
  /* verilator lint_off UNUSEDPARAM */
  parameter SEL_MASK = "MASK";
  /* verilator lint_on UNUSEDPARAM */
  /* verilator lint_off UNUSEDPARAM */
  parameter SEL_PATTERN = "PATTERN";
  /* verilator lint_on UNUSEDPARAM */
  parameter USE_MULT = "MULTIPLY";
  parameter USE_PATTERN_DETECT = "NO_PATDET";
  parameter USE_SIMD = "ONE48";
  parameter USE_WIDEXOR = "FALSE";
  /* verilator lint_off UNUSEDPARAM */
  parameter XORSIMD = "XOR24_48_96";
  /* verilator lint_on UNUSEDPARAM */

  output [29:0] ACOUT;
  output [17:0] BCOUT;
  output CARRYCASCOUT;
  output [3:0] CARRYOUT;
  output MULTSIGNOUT;
  output OVERFLOW;
  output [47:0] P;
  output PATTERNBDETECT;
  output PATTERNDETECT;
  output [47:0] PCOUT;
  output UNDERFLOW;
  output [7:0] XOROUT;
  input [29:0] A;
  input [29:0] ACIN;
  input [3:0] ALUMODE;
  input [17:0] B;
  input [17:0] BCIN;
  input [47:0] C;
  input CARRYCASCIN;
  input CARRYIN;
  input [2:0] CARRYINSEL;
  input CEA1;
  input CEA2;
  input CEAD;
  input CEALUMODE;
  input CEB1;
  input CEB2;
  input CEC;
  input CECARRYIN;
  input CECTRL;
  input CED;
  input CEINMODE;
  input CEM;
  input CEP;
  input CLK;
  input [26:0] D;
  input [4:0] INMODE;
  input MULTSIGNIN;
  input [8:0] OPMODE;
  input [47:0] PCIN;
  input RSTA;
  input RSTALLCARRYIN;
  input RSTALUMODE;
  input RSTB;
  input RSTC;
  input RSTCTRL;
  input RSTD;
  input RSTINMODE;
  input RSTM;
  input RSTP;

  // -- the subset (checked once, at time 0) ------------------------------------------------
  localparam REGISTERS_OK = AREG == 1 && ACASCREG == 1 && BREG == 1 && BCASCREG == 1
      && MREG == 1 && PREG == 1 && ADREG == 0 && DREG == 0 && CREG == 0 && INMODEREG == 0
      && OPMODEREG == 0 && ALUMODEREG == 0 && CARRYINREG == 0 && CARRYINSELREG == 0;
  localparam DATAPATH_OK = A_INPUT == "DIRECT" && B_INPUT == "DIRECT" && AMULTSEL == "A"
      && BMULTSEL == "B" && PREADDINSEL == "A" && USE_MULT == "MULTIPLY" && USE_SIMD == "ONE48"
      && USE_WIDEXOR == "FALSE" && USE_PATTERN_DETECT == "NO_PATDET"
      && AUTORESET_PATDET == "NO_RESET";
  localparam INVERSION_OK = IS_ALUMODE_INVERTED == 4'b0 && IS_CARRYIN_INVERTED == 1'b0
      && IS_CLK_INVERTED == 1'b0 && IS_INMODE_INVERTED == 5'b0 && IS_OPMODE_INVERTED == 9'b0
      && IS_RSTALLCARRYIN_INVERTED == 1'b0 && IS_RSTALUMODE_INVERTED == 1'b0
      && IS_RSTA_INVERTED == 1'b0 && IS_RSTB_INVERTED == 1'b0 && IS_RSTCTRL_INVERTED == 1'b0
      && IS_RSTC_INVERTED == 1'b0 && IS_RSTD_INVERTED == 1'b0
      && IS_RSTINMODE_INVERTED == 1'b0 && IS_RSTM_INVERTED == 1'b0
      && IS_RSTP_INVERTED == 1'b0;

  initial begin
    if (!REGISTERS_OK)
      $fatal(1, "DSP48E2 model: register attributes outside the modelled subset (%m)");
    if (!DATAPATH_OK)
      $fatal(1, "DSP48E2 model: datapath attributes outside the modelled subset (%m)");
    if (!INVERSION_OK)
      $fatal(1, "DSP48E2 model: IS_*_INVERTED pin inversion is not modelled (%m)");
  end

  // -- inputs outside the subset (checked at every clock edge) -----------------------------
  wire control_ok = OPMODE == 9'b00_000_01_01 && ALUMODE == 4'b0000 && INMODE == 5'b00000
      && CARRYINSEL == 3'b000 && CARRYIN == 1'b0;
  wire resets_ok = {RSTA, RSTALLCARRYIN, RSTALUMODE, RSTB, RSTC, RSTCTRL, RSTD, RSTINMODE,
                    RSTM, RSTP} == 10'b0;
  wire unused_enables_ok = {CEA1, CEB1, CEAD, CEALUMODE, CEC, CECARRYIN, CECTRL, CED,
                            CEINMODE} == 9'b0;
  wire tied_off_ok = ACIN == 30'b0 && BCIN == 18'b0 && C == 48'b0 && D == 27'b0
      && PCIN == 48'b0 && CARRYCASCIN == 1'b0 && MULTSIGNIN == 1'b0;

  always @(posedge CLK) begin
    if (!control_ok)
      $fatal(1, "DSP48E2 model: OPMODE %b ALUMODE %b INMODE %b CARRYINSEL %b CARRYIN %b outside the modelled subset (%m)",
             OPMODE, ALUMODE, INMODE, CARRYINSEL, CARRYIN);
    if (!resets_ok)
      $fatal(1, "DSP48E2 model: a reset that is not tied to 0 (%m)");
    if (!unused_enables_ok)
      $fatal(1, "DSP48E2 model: a clock enable of an unused register that is not tied to 0 (%m)");
    if (!tied_off_ok)
      $fatal(1, "DSP48E2 model: ACIN, BCIN, C, D, PCIN, CARRYCASCIN or MULTSIGNIN not tied to 0 (%m)");
  end

  // -- the registered multiply -------------------------------------------------------------
  reg [29:0] a2 = 30'b0;
  reg [17:0] b2 = 18'b0;
  reg [44:0] m = 45'b0;
  reg [47:0] p = 48'b0;
  // The multiplier's operands: A2's low 27 bits and B2, both two's complement (AMULTSEL "A",
  // BMULTSEL "B", INMODE 0); A2's bits 29:27 reach only ACOUT.
  wire signed [26:0] a_mult = a2[26:0];
  wire signed [17:0] b_mult = b2;
  wire signed [44:0] product = a_mult * b_mult;

  always @(posedge CLK) begin
    if (CEA2) a2 <= A;
    if (CEB2) b2 <= B;
    if (CEM) m <= product;
    if (CEP) p <= {{3{m[44]}}, m};          // Z + W + X + Y + CIN = 0 + 0 + M + 0
  end

  assign P = p;
  assign PCOUT = p;
  assign ACOUT = a2;                          // ACASCREG = AREG = 1
  assign BCOUT = b2;                          // BCASCREG = BREG = 1
  assign CARRYOUT = 4'bxxxx;
  assign CARRYCASCOUT = 1'bx;
  assign MULTSIGNOUT = 1'bx;
  assign OVERFLOW = 1'bx;
  assign UNDERFLOW = 1'bx;
  assign PATTERNDETECT = 1'bx;
  assign PATTERNBDETECT = 1'bx;
  assign XOROUT = 8'bxxxxxxxx;
endmodule
