// Job server: a Verilator model of jobserver.sv driven from C++, taking commands on stdin.
//
// zoforge.sim.jobserver builds it once per design (cached) and keeps it running as a child
// process across many jobs. Every cycle is simulated here: the AXI4-Lite manager, the
// input stream (words queued by SEND), the output stream (beats collected until RECEIVE),
// and optional stalls; Python only sends commands and reads replies in bulk.
//
// Protocol (little-endian uint32 words). A command is `op a b c n` and n payload words; a
// reply is `status cycle_lo cycle_hi irq n` and n words (cycle: clock cycles simulated
// since start; irq: the pin after the command). Status 0 ok, 1 the command ran out of
// cycles (the CONFIGURE limit), 2 a malformed command. Ops:
//   0 QUIT                        reply, then exit 0
//   1 CONFIGURE a b c [limit]     stalls: a (b) = round(p * 65536) for the input stream and
//                                 AW/W/AR valid (the output stream and B/R ready); c: seed;
//                                 limit: most cycles of one command (0: none) -> [LANES]
//   2 RESET a b                   rst high for a cycles, then low for b cycles
//   3 WRITE a b                   AXI4-Lite write of b to address a -> [bresp]
//   4 READ a                      AXI4-Lite read of address a -> [rdata, rresp]
//   5 SEND [words]                queue one frame for the input stream (IN_WORDS words a
//                                 beat, tlast on its last beat); streamed while later
//                                 commands run
//   6 RECEIVE                     run until an output frame (tlast) is complete -> its words
//   7 POLL a b c                  read a until (value & b) != 0, c idle cycles between
//                                 reads -> [value]
//   8 IDLE a                      run a cycles
//   9 STALLS                      -> per channel (IN AW W AR OUT B R) the cycles a stall held
//                                 back a pending transfer since CONFIGURE, as lo, hi words
// Stalls draw one xorshift32 value per channel per cycle (the top 16 bits below the
// threshold: stalled), as cocotbext-axi's pause generators draw one value per cycle. STALLS
// counts them where they show at the ports: a source (IN, AW, W, AR) with a transfer to
// offer holds valid low, a sink (OUT, B, R) holds ready low while the DUT holds valid.
//
// LANES (a macro) is the output stream's width in 32-bit lanes, IN_WORDS the 32-bit words of
// one input beat (the input stream's width rounded up; the unused bits are zero), both from
// jobserver_widths.h, which the build writes beside this file (not -D flags: those would
// reach Verilator's runtime objects too, and ccache would compile them again for every
// width); the model's prefix is Vtop.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <unistd.h>
#include <vector>

#include "Vtop.h"
#include "jobserver_widths.h"
#include "verilated.h"

namespace {

enum Op : uint32_t { QUIT, CONFIGURE, RESET, WRITE, READ, SEND, RECEIVE, POLL, IDLE, STALLS };
enum Status : uint32_t { OK, TIMEOUT, BAD };
enum Channel { IN, AW, W, AR, OUT, B, R, CHANNELS };

// tdata: CData/SData/IData (up to 32 bits), QData (up to 64) or VlWide (more).
inline void put(CData& port, const uint32_t* words) { port = static_cast<CData>(words[0]); }
inline void put(SData& port, const uint32_t* words) { port = static_cast<SData>(words[0]); }
inline void put(IData& port, const uint32_t* words) { port = words[0]; }
inline void put(QData& port, const uint32_t* words) {
    port = words[0] | static_cast<QData>(words[1]) << 32;
}
template <std::size_t N> void put(VlWide<N>& port, const uint32_t* words) {
    for (std::size_t i = 0; i < N; ++i) port[i] = words[i];
}
inline void get(const IData& port, uint32_t* words) { words[0] = port; }
inline void get(const QData& port, uint32_t* words) {
    words[0] = static_cast<uint32_t>(port);
    words[1] = static_cast<uint32_t>(port >> 32);
}
template <std::size_t N> void get(const VlWide<N>& port, uint32_t* words) {
    for (std::size_t i = 0; i < N; ++i) words[i] = port[i];
}

struct Xorshift {
    uint32_t state = 1;
    bool stalled(uint32_t threshold) {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        return (state >> 16) < threshold;
    }
};

class Server {
  public:
    Server(VerilatedContext* context) : top_{new Vtop{context}} {
        top_->clk = 0;
        top_->rst = 0;
        top_->eval();
    }
    ~Server() { top_->final(); }

    uint64_t cycle = 0;
    uint64_t limit = 0;          // most cycles of one command, 0: none
    uint64_t started = 0;        // cycle at which the current command started
    uint32_t thresholds[CHANNELS] = {};
    Xorshift stalls[CHANNELS];
    uint64_t stalled[CHANNELS] = {};   // cycles a stall held back a pending transfer

    void configure(uint32_t idle, uint32_t pressure, uint32_t seed, uint64_t max_cycles) {
        for (int ch = 0; ch < CHANNELS; ++ch) {
            thresholds[ch] = ch < OUT ? idle : pressure;
            // splitmix32 of (seed, channel): independent, non-zero streams
            uint32_t z = seed * 0x9E3779B9u + static_cast<uint32_t>(ch + 1) * 0x85EBCA6Bu;
            z = (z ^ (z >> 16)) * 0x7FEB352Du;
            z = (z ^ (z >> 15)) * 0x846CA68Bu;
            stalls[ch].state = (z ^ (z >> 16)) | 1u;
            stalled[ch] = 0;
        }
        limit = max_cycles;
    }

    bool out_of_cycles() const { return limit && cycle - started >= limit; }

    // One clock cycle: drive the inputs, settle, sample the handshakes, rising edge.
    void tick() {
        bool stall[CHANNELS];
        for (int ch = 0; ch < CHANNELS; ++ch)
            stall[ch] = thresholds[ch] && stalls[ch].stalled(thresholds[ch]);
        const bool in_pending = in_head_ < in_words_.size();
        const bool in_valid = in_pending && !stall[IN];
        top_->s_tvalid = in_valid;
        top_->s_tlast = in_valid && in_head_ + IN_WORDS == in_ends_.front();
        if (in_valid) put(top_->s_tdata, &in_words_[in_head_]);
        top_->awvalid = aw_ && !stall[AW];
        top_->awaddr = awaddr_;
        top_->wvalid = w_ && !stall[W];
        top_->wdata = wdata_;
        top_->bready = !stall[B];
        top_->arvalid = ar_ && !stall[AR];
        top_->araddr = araddr_;
        top_->rready = !stall[R];
        top_->m_tready = !top_->rst && !stall[OUT];
        top_->clk = 0;
        top_->eval();
        // held back, as the ports show it: a source's valid low with a transfer pending, a
        // sink's ready low against the DUT's valid
        const bool held[CHANNELS] = {
            in_pending && !top_->s_tvalid, aw_ && !top_->awvalid, w_ && !top_->wvalid,
            ar_ && !top_->arvalid, !top_->rst && top_->m_tvalid && !top_->m_tready,
            top_->bvalid && !top_->bready, top_->rvalid && !top_->rready};
        for (int ch = 0; ch < CHANNELS; ++ch) stalled[ch] += held[ch];
        const bool in_fire = top_->s_tvalid && top_->s_tready;
        const bool aw_fire = top_->awvalid && top_->awready;
        const bool w_fire = top_->wvalid && top_->wready;
        const bool b_fire = top_->bvalid && top_->bready;
        const bool ar_fire = top_->arvalid && top_->arready;
        const bool r_fire = top_->rvalid && top_->rready;
        if (top_->m_tvalid && top_->m_tready) {
            const std::size_t at = out_words_.size();
            out_words_.resize(at + LANES);
            get(top_->m_tdata, &out_words_[at]);
            if (top_->m_tlast) out_ends_.push_back(out_words_.size());
        }
        if (b_fire) {
            b_ = true;
            bresp_ = top_->bresp;
        }
        if (r_fire) {
            r_ = true;
            rdata_ = top_->rdata;
            rresp_ = top_->rresp;
        }
        top_->clk = 1;
        top_->eval();
        ++cycle;
        if (in_fire) {
            in_head_ += IN_WORDS;
            if (in_head_ == in_ends_.front()) in_ends_.pop_front();
            if (in_head_ == in_words_.size()) {
                in_words_.clear();
                in_head_ = 0;
            }
        }
        if (aw_fire) aw_ = false;
        if (w_fire) w_ = false;
        if (ar_fire) ar_ = false;
    }

    bool idle(uint64_t cycles) {
        for (uint64_t i = 0; i < cycles; ++i) {
            if (out_of_cycles()) return false;
            tick();
        }
        return true;
    }

    bool reset(uint32_t high, uint32_t low) {
        top_->rst = 1;
        const bool done = idle(high);
        top_->rst = 0;
        return done && idle(low);
    }

    bool write(uint32_t address, uint32_t data, uint32_t& bresp) {
        awaddr_ = address;
        wdata_ = data;
        aw_ = w_ = true;
        b_ = false;
        while (!b_) {
            if (out_of_cycles()) return false;
            tick();
        }
        bresp = bresp_;
        return true;
    }

    bool read(uint32_t address, uint32_t& data, uint32_t& rresp) {
        araddr_ = address;
        ar_ = true;
        r_ = false;
        while (!r_) {
            if (out_of_cycles()) return false;
            tick();
        }
        data = rdata_;
        rresp = rresp_;
        return true;
    }

    void send(const uint32_t* words, std::size_t count) {
        in_words_.insert(in_words_.end(), words, words + count);
        in_ends_.push_back(in_words_.size());
    }

    // Runs until an output frame is complete; moves its words to `frame`.
    bool receive(std::vector<uint32_t>& frame) {
        while (out_ends_.empty()) {
            if (out_of_cycles()) return false;
            tick();
        }
        const std::size_t end = out_ends_.front();
        out_ends_.pop_front();
        frame.assign(out_words_.begin() + out_head_, out_words_.begin() + end);
        out_head_ = end;
        if (out_head_ == out_words_.size()) {   // every frame taken: start over
            out_words_.clear();
            out_head_ = 0;
        }
        return true;
    }

    bool irq() const { return top_->irq; }

  private:
    std::unique_ptr<Vtop> top_;
    std::vector<uint32_t> in_words_;
    std::size_t in_head_ = 0;
    std::deque<std::size_t> in_ends_;     // end offsets of the queued frames
    std::vector<uint32_t> out_words_;
    std::size_t out_head_ = 0;
    std::deque<std::size_t> out_ends_;    // end offsets of the complete frames
    uint32_t awaddr_ = 0, wdata_ = 0, araddr_ = 0;
    bool aw_ = false, w_ = false, ar_ = false, b_ = false, r_ = false;
    uint32_t bresp_ = 0, rdata_ = 0, rresp_ = 0;
};

FILE* replies = nullptr;

bool read_words(uint32_t* words, std::size_t count) {
    return std::fread(words, sizeof(uint32_t), count, stdin) == count;
}

void reply(const Server& server, uint32_t status, const uint32_t* words, std::size_t count) {
    const uint32_t head[5] = {status, static_cast<uint32_t>(server.cycle),
                              static_cast<uint32_t>(server.cycle >> 32), server.irq(),
                              static_cast<uint32_t>(count)};
    std::fwrite(head, sizeof(uint32_t), 5, replies);
    if (count) std::fwrite(words, sizeof(uint32_t), count, replies);
    std::fflush(replies);
}

}  // namespace

int main(int argc, char** argv) {
    // Replies go to the original stdout; the model's own output ($display) to stderr.
    replies = fdopen(dup(STDOUT_FILENO), "wb");
    if (!replies || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) return 3;
    const std::unique_ptr<VerilatedContext> context{new VerilatedContext};
    context->commandArgs(argc, argv);
    Server server{context.get()};
    std::vector<uint32_t> payload, out;
    uint32_t head[5];
    while (read_words(head, 5)) {
        const uint32_t op = head[0], a = head[1], b = head[2], c = head[3], n = head[4];
        payload.resize(n);
        if (n && !read_words(payload.data(), n)) break;
        server.started = server.cycle;
        out.clear();
        bool done = true;
        uint32_t status = OK;
        switch (op) {
            case QUIT:
                reply(server, OK, nullptr, 0);
                return 0;
            case CONFIGURE:
                server.configure(a, b, c, n ? payload[0] : 0);
                out.push_back(LANES);
                break;
            case RESET:
                done = server.reset(a, b);
                break;
            case WRITE:
                out.resize(1);
                done = server.write(a, b, out[0]);
                break;
            case READ:
                out.resize(2);
                done = server.read(a, out[0], out[1]);
                break;
            case SEND:
                if (n == 0 || n % IN_WORDS) status = BAD;
                else server.send(payload.data(), n);
                break;
            case RECEIVE:
                done = server.receive(out);
                break;
            case POLL: {
                uint32_t value = 0, rresp = 0;
                while ((done = server.read(a, value, rresp)) && !(value & b))
                    if (!(done = server.idle(c))) break;
                out.push_back(value);
                break;
            }
            case IDLE:
                done = server.idle(a);
                break;
            case STALLS:
                for (int ch = 0; ch < CHANNELS; ++ch) {
                    out.push_back(static_cast<uint32_t>(server.stalled[ch]));
                    out.push_back(static_cast<uint32_t>(server.stalled[ch] >> 32));
                }
                break;
            default:
                status = BAD;
        }
        if (!done) {
            status = TIMEOUT;
            out.clear();
        }
        reply(server, status, out.data(), out.size());
    }
    return 0;   // stdin closed: the driver is gone
}
