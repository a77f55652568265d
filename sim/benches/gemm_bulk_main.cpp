// C++ harness of the bulk GEMM testbench (gemm_bulk.sv): toggles the clock and evaluates
// the model until $finish. No Python, no timing scheduler; one eval per clock edge.
#include <memory>

#include "Vtb.h"
#include "verilated.h"

int main(int argc, char** argv) {
    const std::unique_ptr<VerilatedContext> context{new VerilatedContext};
    context->commandArgs(argc, argv);
    const std::unique_ptr<Vtb> top{new Vtb{context.get()}};
    top->clk = 0;
    top->eval();
    while (!context->gotFinish()) {
        context->timeInc(5);
        top->clk = !top->clk;
        top->eval();
    }
    top->final();
    return 0;
}
