// The stage ring between the TMA producer and the consumer warpgroups.
//
// full[s]:  1 arrival (the producer's arrive.expect_tx) + the stage's TMA bytes.
// empty[s]: one arrival per consumer warp once its wgmmas stopped reading stage s.
// Both sides walk stages 0..S-1 and flip their phase bit on wrap. Consumers wait on full with
// `phase`; the producer waits on empty with `phase ^ 1`, so its first lap passes on the fresh
// barriers (no pre-arrival: mixing the two conventions deadlocks).
#pragma once

#include <cstdint>

#include "megakernel/ptx/mbarrier.cuh"

namespace detmoe::gemm {

template <int kStages>
struct PipelineState {
  int32_t stage = 0;
  uint32_t phase = 0;

  DETMOE_DEVICE void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1u;
    }
  }
};

template <class Cfg>
struct Pipeline {
  static constexpr uint32_t kEmptyArrivals = Cfg::kConsumerWarpgroups * 4;

  uint64_t* full;
  uint64_t* empty;

  // full_arrivals: 1 (the producer's arrive.expect_tx), or more when other threads also announce
  // a stage (the cp.async gather: each of its threads once its copies have landed).
  DETMOE_DEVICE void init(uint32_t full_arrivals = 1) const {
    for (int s = 0; s < Cfg::kStages; ++s) {
      ptx::mbarrier_init(full + s, full_arrivals);
      ptx::mbarrier_init(empty + s, kEmptyArrivals);
    }
    ptx::fence_mbarrier_init();
  }

  // Producer: wait until consumers released the stage, then announce the bytes to come.
  DETMOE_DEVICE void producer_acquire(const PipelineState<Cfg::kStages>& st, uint32_t bytes) const {
    ptx::mbarrier_wait_parity(empty + st.stage, st.phase ^ 1u);
    ptx::mbarrier_arrive_expect_tx(full + st.stage, bytes);
  }

  DETMOE_DEVICE void consumer_wait(const PipelineState<Cfg::kStages>& st) const {
    ptx::mbarrier_wait_parity(full + st.stage, st.phase);
  }

  // One arrival per warp; call after wgmma.wait_group guarantees the stage is no longer read.
  DETMOE_DEVICE void consumer_release(int32_t stage) const {
    if (ptx::lane_id() == 0) ptx::mbarrier_arrive(empty + stage);
  }
};

}  // namespace detmoe::gemm
