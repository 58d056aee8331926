// Tensor-memory-accelerator (cp.async.bulk.tensor) loads and stores, and the proxy fences
// that order them against ordinary shared-memory accesses.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "megakernel/ptx/common.cuh"

namespace detmoe::ptx {

DETMOE_DEVICE void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// 3-D tile load into shared memory, completing `bytes` on `bar` (out-of-bounds elements are
// zero-filled and still counted). Coordinates are innermost first.
DETMOE_DEVICE void tma_load_3d(void* dst, const CUtensorMap* map, uint64_t* bar, int32_t c0, int32_t c1, int32_t c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];" ::
          "r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// 3-D tile store from shared memory; out-of-bounds elements are not written.
DETMOE_DEVICE void tma_store_3d(const CUtensorMap* map, uint32_t src_smem_addr, int32_t c0, int32_t c1, int32_t c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(src_smem_addr), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}

// An L2 eviction priority (createpolicy over the whole access, fraction 1.0), or none: `hinted`
// false issues the plain instruction. A hint moves no bits, only what L2 keeps.
struct L2Policy {
  uint64_t bits;
  bool hinted;
};
DETMOE_DEVICE L2Policy l2_policy_evict_first() {
  uint64_t bits;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(bits));
  return {bits, true};
}

// tma_store_3d under an L2 eviction policy (evict-first: the output streams through L2 without
// displacing operands that later tiles read again).
DETMOE_DEVICE void tma_store_3d(const CUtensorMap* map, uint32_t src_smem_addr, int32_t c0, int32_t c1, int32_t c2,
                                L2Policy policy) {
  if (!policy.hinted) {
    tma_store_3d(map, src_smem_addr, c0, c1, c2);
    return;
  }
  asm volatile(
      "cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group.L2::cache_hint [%0, {%2, %3, %4}], [%1], %5;" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(src_smem_addr), "r"(c0), "r"(c1), "r"(c2), "l"(policy.bits)
      : "memory");
}

// Plain (non-tensor) bulk copy of `bytes` from global to shared memory, completing on `bar`.
// Both addresses 16-byte aligned, `bytes` a multiple of 16.
DETMOE_DEVICE void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_u32(dst)),
               "l"(reinterpret_cast<uint64_t>(src)), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
}

// Plain (non-tensor) bulk copy of `bytes` from shared to global memory, in this thread's current
// bulk group (commit, then wait with bulk_wait_group_*). Both addresses 16-byte aligned, `bytes`
// a multiple of 16.
DETMOE_DEVICE void bulk_store(void* dst, uint32_t src_smem_addr, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(reinterpret_cast<uint64_t>(dst)),
               "r"(src_smem_addr), "r"(bytes)
               : "memory");
}

// Bulk groups belong to the issuing thread: only it may wait on them.
DETMOE_DEVICE void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

// Waits until at most N of this thread's bulk groups still read their shared-memory source.
template <int N>
DETMOE_DEVICE void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

// Waits until all of this thread's bulk stores are complete (written to global memory).
DETMOE_DEVICE void bulk_wait_group_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

// Orders this thread's generic-proxy shared-memory writes before later async-proxy accesses
// (a TMA store or a wgmma reading what st.shared / stmatrix wrote).
DETMOE_DEVICE void fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

}  // namespace detmoe::ptx
