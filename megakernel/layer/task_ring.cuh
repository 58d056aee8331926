// Dynamic task assignment inside a rank's slice: the CTAs of a (rank, role) take the next task
// number of their list from one global ticket counter (atomicAdd), so tasks start in list order
// whatever each task took to run. A static deal (task j to CTA j mod members) let CTAs drift
// apart when tiles differ in length, and the CTAs sharing an expert's weight panel — consecutive
// tasks — then read it from HBM at different times (ncu, docs/perf-journal/megakernel-forward.md step 5). With tickets
// the tasks running at once are always a window of consecutive tasks.
//
// Who runs a task still changes only speed: a task's result depends on its number alone. The
// no-deadlock argument of the static deal (cta_role in task_list.cuh) holds unchanged: every
// task has one owner, each CTA runs its tasks in increasing number (so by level), and a task
// waits only on tasks of lower levels, which have lower numbers and were taken earlier by CTAs
// that run them without waiting on anything higher.
//
// Inside the CTA the producer thread takes the tickets and hands each task number to the two
// consumer warpgroups through a small ring in shared memory (mbarriers: full = 1 producer
// arrival, empty = one arrival per consumer thread, each after its own read — with one arrival
// per warp behind a __syncwarp, compute-sanitizer racecheck reported the producer's next write
// to the slot as racing with the other lanes' reads); −1 ends the list. The producer pushes a task
// number only once the previous GEMM task's loads are issued, so it runs at most kTaskRing tasks
// ahead. (The backward's producer takes that ticket earlier, before the previous task's loads,
// so the atomic's round trip overlaps them: backward 1 % faster on deepseek-v3; the same in the
// forward slowed qwen3-30b-a3b by 2.5 %, docs/PERF.md session 22.)
// With descriptions the consumers release a slot when their task is done (epilogue included),
// so the producer pushes task i + 2 only after task i is finished — it could not load i + 2 earlier anyway: the
// stages free up only as the consumers run i + 1.
//
// In the forward a slot also carries the task's description (Payload = GemmTask), which the
// producer computes anyway to load the tile. The consumers used to describe the task again after
// popping it — integer divisions and dependent L2 loads of the plan's offsets between two
// mainloops, ≈ 3 % of their warp samples on deepseek-v3 (ncu source counters, docs/PERF.md
// session 16) — and now read it from the slot, which they release when the task is done. The
// backward's ring carries numbers only (NoDescription; backward_kernel.cuh says why).
#pragma once

#include <cstdint>

#include "megakernel/layer/layer_params.h"
#include "megakernel/ptx/common.cuh"
#include "megakernel/ptx/mbarrier.cuh"

namespace detmoe::mk {

inline constexpr int kTaskRing = 2;
inline constexpr uint32_t kTaskRingConsumerThreads = 256;  // the two consumer warpgroups

// Shared-memory state of the ring (static __shared__ in the kernel). Payload must be trivially
// constructible (a __shared__ variable takes no initializer).
// The payload of a ring that carries task numbers only (the backward's).
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
  // description (copy tasks, the end).
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

// The ticket counter of (rank, role): tasks of the rank's list taken so far in this launch.
// Reset to 0 by the plan (run_plan) before its first grid barrier.
DETMOE_DEVICE unsigned int* ticket_counter(const LayerParams& p, int32_t rank, bool comm_role) {
  return p.ws.tickets + 2 * rank + (comm_role ? 1 : 0);
}

// The backward's d_x sum units taken so far of rank `rank` (backward_tasks.cuh dx_sum_unit).
DETMOE_DEVICE unsigned int* sum_unit_ticket(const LayerParams& p, int32_t rank) {
  return p.ws.tickets + 2 * p.P + rank;
}

// Producer thread: the next task number of its (rank, role) list, −1 when the list is done.
DETMOE_DEVICE int32_t take_ticket(unsigned int* counter, int32_t total) {
  const unsigned int i = atomicAdd(counter, 1u);
  return i < static_cast<unsigned int>(total) ? static_cast<int32_t>(i) : -1;
}

}  // namespace detmoe::mk
