// Long-K GEMM tiles of one phase in step, wave by wave.
//
// A tile of a long K (mixtral-8x7b's backward dx: 448 k-blocks, ≈ 300 µs) reads
// operand panels that its neighbours in ticket order share; they meet in L2 only while they run
// the same k-blocks at about the same time. Tickets start them in order, but once the CTAs' tiles
// end at uneven times the sharers drift apart by up to a tile and the launch reads its operands
// several times from HBM (the GEMM core's static deal read mixtral-8x7b's dx 1.8× over; a gate at
// every wave took it to the lockstep figure: docs/PERF.md session 37). So before a tile of wave
// w ≥ 1 of the phase (its ticket less the phase's first, over the role's CTAs), the producer waits
// until every CTA of the role has taken its wave-w ticket: the counter holds all of wave w's
// tickets plus the `ahead` tickets per CTA that producers take before their tile's loads (the
// backward takes its next ticket as a tile starts: 1; a producer that takes it only at its next
// tile: 0). Only while the awaited tickets are the phase's own (its tiles wait on earlier phases only,
// never on each other, so the awaited tickets come), and a wait longer than kGiveUpNs stops the
// gate for this CTA: it orders nothing bits depend on.
//
// Used by the backward's dx tiles (backward_kernel.cuh). The forward's GEMM1 tiles of deepseek-v3
// (112 k-blocks) were gated the same way and ran 2.3 % slower (docs/PERF.md session 39): not used.
#pragma once

#include <cstdint>

#include "megakernel/layer/sync.cuh"
#include "megakernel/ptx/common.cuh"

namespace detmoe::mk {

// The phase's tickets: [first, first + count) of the role's counter, taken by `ctas` CTAs.
struct PhaseTickets {
  int32_t first, count, ctas;
};

// kAhead: the tickets a producer holds beyond its tile when it reaches the gate. The gate keeps
// one flag: the phase's bounds are computed from the kernel parameters (constant memory) only at a
// tile the gate may hold, as the producers have few registers to spare (backward_kernel.cuh: 72).
template <int32_t kAhead>
class WaveGate {
 public:
  static constexpr unsigned long long kGiveUpNs = 200'000;

  // `on`: whether the phase's tiles are long enough to gate (short tiles lose more to the wait
  // than drift costs them).
  DETMOE_DEVICE explicit WaveGate(bool on) : on_(on) {}

  // Before the loads of list task i, a task of the phase; `phase()` gives the phase's
  // PhaseTickets, called only while the gate is on. Returns whether the gate checked the tile against
  // its wave's tickets (waiting or not: they may all be taken), so a trace can count it (trace.cuh
  // tile_gated).
  template <class PhaseBounds>
  DETMOE_DEVICE bool before(const unsigned int* tickets, int32_t i, PhaseBounds&& phase) {
    if (!on_) return false;
    const PhaseTickets b = phase();
    const int32_t first = b.first, count = b.count, ctas = b.ctas;
    if (ctas < 2) return false;
    const int32_t wave = (i - first) / ctas;
    if (wave == 0) return false;
    const int64_t target = first + static_cast<int64_t>(wave + 1 + kAhead) * ctas;
    if (target > first + count) {  // the awaited tickets run past the phase: no more gates
      on_ = false;
      return false;
    }
    const unsigned long long start = globaltimer_ns();
    while (static_cast<int64_t>(ld_relaxed_u32(tickets)) < target) {
      if (globaltimer_ns() - start > kGiveUpNs) {
        on_ = false;
        break;
      }
      __nanosleep(32);
    }
    return true;
  }

 private:
  bool on_;
};

}  // namespace detmoe::mk
