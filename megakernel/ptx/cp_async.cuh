// Non-bulk asynchronous copies (cp.async, 16 bytes per thread) into shared memory: the gathered
// operand loads, where each row comes from its own source address and TMA has no gather on sm_90.
// Their writes are generic-proxy writes: before a wgmma (async proxy) reads them, the writing
// thread waits for them and issues fence.proxy.async.shared::cta (tma.cuh).
#pragma once

#include <cstdint>

#include "megakernel/ptx/common.cuh"
#include "megakernel/ptx/mbarrier.cuh"
#include "megakernel/ptx/tma.cuh"

namespace detmoe::ptx {

// Copies 16 bytes from global `src` to shared `dst` (L2 only, bypassing L1); the first
// `src_bytes` (0 or 16) are read and the rest zero-filled, so src_bytes = 0 writes zeros and
// reads nothing.
DETMOE_DEVICE void cp_async_16(uint32_t dst, const void* src, uint32_t src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

DETMOE_DEVICE void cp_async_commit_group() { asm volatile("cp.async.commit_group;" ::: "memory"); }

// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
DETMOE_DEVICE void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// Announces this thread's copies on `bar` once all but the N most recent groups have landed:
// the wait, the proxy fence that hands the generic writes to the async proxy (wgmma), the
// arrival (release).
template <int N>
DETMOE_DEVICE void cp_async_arrive_when_landed(uint64_t* bar) {
  cp_async_wait_group<N>();
  fence_proxy_async_shared();
  mbarrier_arrive(bar);
}

}  // namespace detmoe::ptx
