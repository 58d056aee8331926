// A small ring in shared memory through which a CTA's producer thread hands the number of each
// task (a tile, a layer task) it took to the two consumer warpgroups, so that all three run the
// same sequence when the numbers come from a global ticket counter rather than a static deal
// (the fused layer's task lists, megakernel/layer/task_ring.cuh; the GEMM core's weight-gradient
// launches, kernel.cuh).
//
// mbarriers: full = 1 producer arrival, empty = one arrival per consumer thread, each after its
// own read (with one arrival per warp behind a __syncwarp, compute-sanitizer racecheck reported
// the producer's next write to the slot as racing with the other lanes' reads); −1 ends the list.
// A slot may also carry a description of the task (Payload), which the producer fills in place.
#pragma once

#include <cstdint>

#include "megakernel/ptx/common.cuh"
#include "megakernel/ptx/mbarrier.cuh"

namespace detmoe::gemm {

inline constexpr int kTaskRing = 2;
inline constexpr uint32_t kTaskRingConsumerThreads = 256;  // the two consumer warpgroups

// Shared-memory state of the ring (static __shared__ in the kernel). Payload must be trivially
// constructible (a __shared__ variable takes no initializer).
// The payload of a ring that carries task numbers only (the layer backward's, the GEMM core's).
struct NoDescription {};

template <class Payload>
struct TaskRingStorage {
  uint64_t full[kTaskRing];
  uint64_t empty[kTaskRing];
  int32_t task[kTaskRing];
  Payload payload[kTaskRing];
};

template <class Payload>
class TaskRing {
 public:
  DETMOE_DEVICE explicit TaskRing(TaskRingStorage<Payload>* s) : s_(s) {}

  // One thread, before the CTA barrier that precedes any use.
  DETMOE_DEVICE void init() const {
    for (int i = 0; i < kTaskRing; ++i) {
      ptx::mbarrier_init(s_->full + i, 1);
      ptx::mbarrier_init(s_->empty + i, kTaskRingConsumerThreads);
    }
  }

  // Producer thread: hands task number `index` (−1: no more) to the consumers, without a
  // description (the layer's copy tasks, every task of a ring without descriptions, the end).
  DETMOE_DEVICE void push(int32_t index) {
    reserve();
    publish(index);
  }

  // Producer thread, a task with a description: reserve() waits until the consumers are done
  // with the next slot and returns its payload for the producer to fill in place (a copy from
  // registers would hold the whole description live at once: the producer's 64 registers
  // spilled); publish() hands it over. The producer may keep reading the payload until it
  // reserves the same slot again (kTaskRing pushes later: the consumers only read it).
  DETMOE_DEVICE Payload* reserve() {
    ptx::mbarrier_wait_parity(s_->empty + slot_, phase_ ^ 1u);
    return s_->payload + slot_;
  }
  DETMOE_DEVICE void publish(int32_t index) {
    s_->task[slot_] = index;
    ptx::mbarrier_arrive(s_->full + slot_);  // release: the writes above are seen by the waiters
    advance();
  }

  // Every consumer thread: the next task number, −1 at the end, and the slot's description
  // (meaningful only for a task pushed with one), which stays the consumers' to read until
  // release(): read where they are used — the epilogue's fields after the mainloop — rather than
  // copied into registers at the start, where they stayed live across the mainloop and the
  // consumers spilled (ptxas -v, session 16).
  DETMOE_DEVICE int32_t pop(const Payload*& payload) {
    ptx::mbarrier_wait_parity(s_->full + slot_, phase_);
    payload = s_->payload + slot_;
    return *static_cast<volatile int32_t*>(s_->task + slot_);
  }

  // Every consumer thread, a ring without descriptions: the next task number, −1 at the end,
  // its slot released at once (the producer may refill it while the task runs).
  DETMOE_DEVICE int32_t pop_index() {
    const Payload* unused;
    const int32_t index = pop(unused);
    release();
    return index;
  }

  // Every consumer thread, once done with the popped task's slot (not after the −1).
  DETMOE_DEVICE void release() {
    ptx::mbarrier_arrive(s_->empty + slot_);  // release: orders this thread's reads before the next write
    advance();
  }

 private:
  DETMOE_DEVICE void advance() {
    if (++slot_ == kTaskRing) {
      slot_ = 0;
      phase_ ^= 1u;
    }
  }

  TaskRingStorage<Payload>* s_;
  int32_t slot_ = 0;
  uint32_t phase_ = 0;
};

// Producer thread: the next number from a global ticket counter, −1 once `total` are taken.
DETMOE_DEVICE int32_t take_ticket(unsigned int* counter, int32_t total) {
  const unsigned int i = atomicAdd(counter, 1u);
  return i < static_cast<unsigned int>(total) ? static_cast<int32_t>(i) : -1;
}

}  // namespace detmoe::gemm
