// Thread-block clusters (sm_90): rank, cluster-wide barrier, arrivals on a peer CTA's mbarrier
// and TMA loads multicast into several CTAs of the cluster.
//
// A multicast load writes the same box at the same shared-memory offset in every CTA of the
// mask and completes its bytes on the mbarrier at the same offset in each of them. A CTA must
// therefore not exit while a peer may still write into its shared memory or arrive on its
// barriers: kernels end with cluster_sync().
#pragma once

#include <cuda.h>

#include <cstdint>

#include "megakernel/ptx/common.cuh"

namespace detmoe::ptx {

DETMOE_DEVICE uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// Every thread of every CTA in the cluster (not .aligned: the roles of a warp may have diverged).
// Release / acquire: barrier inits and shared-memory writes before it are visible to the peers
// after it.
DETMOE_DEVICE void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
}

// One arrival on the mbarrier at the same shared-memory offset as `bar` in CTA `rank` of this
// cluster (this CTA's own rank is allowed), with the instruction's default semantics (release,
// CTA scope), as CUTLASS's cluster pipelines release a multicast stage: the wgmmas reading the
// stage have completed (wgmma.wait_group) before the arrival, and the peer's producer only
// overwrites the stage through the async proxy after observing the phase. (The first build used
// release at cluster scope here and acquire at cluster scope in the producer's wait: pairs ran
// 2.1–2.4x slower than lone CTAs on an H100.)
DETMOE_DEVICE void mbarrier_arrive_cluster(uint64_t* bar, uint32_t rank) {
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(smem_u32(bar)),
      "r"(rank)
      : "memory");
}

// 3-D tile load written into every CTA of `cta_mask` at dst's offset, completing its bytes on the
// mbarrier at bar's offset in each of them. Out-of-bounds elements are zero-filled and counted.
DETMOE_DEVICE void tma_load_3d_multicast(void* dst, const CUtensorMap* map, uint64_t* bar, int32_t c0, int32_t c1,
                                         int32_t c2, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4, %5}], [%2], %6;" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "r"(c2), "h"(cta_mask)
      : "memory");
}

}  // namespace detmoe::ptx
