// cp.async (sm_80+): 16-byte copies from global to shared memory that hold no registers while
// in flight, completed in commit groups per thread. The copy tasks use them to keep many
// loads in flight where registers are short (the GEMM's accumulators set the kernel's limit).
#pragma once

#include <cstdint>

#include "megakernel/ptx/common.cuh"

namespace detmoe::ptx {

// 16 bytes from `src` (16-byte aligned, global) to `smem_addr`, cached in L2 only.
DETMOE_DEVICE void cp_async_16(uint32_t smem_addr, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr), "l"(src) : "memory");
}

DETMOE_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

// Until at most N of this thread's groups are still pending.
template <int N>
DETMOE_DEVICE void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

}  // namespace detmoe::ptx
