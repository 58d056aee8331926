// The stage ring between the TMA producer and the consumer warpgroups.
//
// full[s]:  1 arrival (the producer's arrive.expect_tx) + the stage's TMA bytes.
// empty[s]: one arrival per consumer warp once its wgmmas stopped reading stage s.
// Both sides walk stages 0..S-1 and flip their phase bit on wrap. Consumers wait on full with
// `phase`; the producer waits on empty with `phase ^ 1`, so its first lap passes on the fresh
// barriers (no pre-arrival: mixing the two conventions deadlocks).
//
// kCtas = 2 (a CTA pair of one cluster): each producer multicasts half of every stage's B into
// both CTAs, so a stage may be refilled only once the consumers of *both* CTAs released it:
// empty[s] then counts the consumer warps of the pair, each warp arriving on its own CTA's and
// its peer's barrier.
#pragma once

#include <cstdint>

#include "megakernel/ptx/cluster.cuh"
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

template <class Cfg, int kCtas = 1>
struct Pipeline {
  static_assert(kCtas == 1 || kCtas == 2, "a stage is shared by one CTA or a pair");
  static constexpr uint32_t kEmptyArrivals = Cfg::kConsumerWarpgroups * 4 * kCtas;

  uint64_t* full;
  uint64_t* empty;

  DETMOE_DEVICE void init() const {
    for (int s = 0; s < Cfg::kStages; ++s) {
      ptx::mbarrier_init(full + s, 1);
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
    if constexpr (kCtas == 1) {
      if (ptx::lane_id() == 0) ptx::mbarrier_arrive(empty + stage);
    } else if (ptx::lane_id() == 0) {
      ptx::mbarrier_arrive_cluster(empty + stage, 0);
      ptx::mbarrier_arrive_cluster(empty + stage, 1);
    }
  }
};

}  // namespace detmoe::gemm
