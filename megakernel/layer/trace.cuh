// The optional task timeline of the fused kernel (LayerOptions::trace_tasks_per_cta): thread 128
// of each CTA (the first consumer thread, which runs every task of the CTA) appends (task id,
// start, end, aux) in %globaltimer nanoseconds for the plan and every task it runs (end: its ns
// after start in the low 32 bits, the SM cycles over the same time in the high 32), so a profile
// can split a launch into plan / dispatch / GEMMs / combine / sum / waiting. aux: for a GEMM
// task, the tile's wgmma form in bits 60–63 and two offsets from its start in ns, mainloop end in
// bits 32–59 and the previous tile's signal sent (i.e. epilogue start) in bits 0–31, so the host
// splits a tile into mainloop, signal and epilogue per form; for the plan
// record the SM cycles (clock64) from the launch's start to the CTA's last task, so the host can
// tell the SM clock of each launch; 0 otherwise. Off (p.trace == null) it costs one predicate per
// task.
#pragma once

#include <cstdint>

#include "megakernel/layer/layer_params.h"
#include "megakernel/layer/sync.cuh"

namespace detmoe::mk {

// Stateless on purpose: whether this thread writes is recomputed from the kernel parameters and
// its count and start time live in shared memory, so nothing stays live in registers across the
// GEMM mainloop (the consumers run at their register limit; a live timestamp made ptxas spill).
struct TraceState {
  int32_t count;
  unsigned long long start;
  unsigned long long aux;
  long long launch_clock;  // clock64 at the launch's start
  long long start_clock;   // clock64 at the task's start
  int32_t gated_tiles;     // tiles the producer's wave gate checked this launch (wave_gate.cuh)
};
__shared__ TraceState trace_state;

struct TaskTracer {
  static DETMOE_DEVICE bool writer(const LayerParams& p) { return p.trace != nullptr && threadIdx.x == 128; }

  static DETMOE_DEVICE void begin_launch(const LayerParams& p) {
    if (!writer(p)) return;
    trace_state.count = 0;
    trace_state.gated_tiles = 0;
    trace_state.launch_clock = clock64();
  }

  // The producer's wave gate checked a tile (the producer thread: a shared atomic, read by the
  // writer at finish, after its last tile, whose loads the producer issued after the gate).
  static DETMOE_DEVICE void tile_gated(const LayerParams& p) {
    if (p.trace != nullptr) atomicAdd(&trace_state.gated_tiles, 1);
  }

  static DETMOE_DEVICE void start(const LayerParams& p) {
    if (!writer(p)) return;
    trace_state.start = globaltimer_ns();
    trace_state.start_clock = clock64();
    trace_state.aux = 0;
  }

  // A GEMM task's mainloop has ended; `shape` (0–15, layer/tile_form.h TileShape) goes to the
  // top 4 bits, so the host can time each wgmma form apart.
  static DETMOE_DEVICE void mainloop_done(const LayerParams& p, uint32_t shape) {
    if (writer(p))
      trace_state.aux = (((globaltimer_ns() - trace_state.start) & 0x0fffffffull) << 32) |
                        (static_cast<unsigned long long>(shape & 15u) << 60);
  }

  // A GEMM task's epilogue starts (the previous tile's signal has been sent).
  static DETMOE_DEVICE void epilogue_start(const LayerParams& p) {
    if (writer(p)) trace_state.aux |= (globaltimer_ns() - trace_state.start) & 0xffffffffull;
  }

  static DETMOE_DEVICE void record(const LayerParams& p, uint64_t task) {
    if (!writer(p) || trace_state.count >= p.trace_capacity) return;
    unsigned long long* r = p.trace + (static_cast<int64_t>(blockIdx.x) * p.trace_capacity + trace_state.count) * 4;
    r[0] = task;
    r[1] = trace_state.start;
    r[2] = ((globaltimer_ns() - trace_state.start) & 0xffffffffull) |
           (static_cast<unsigned long long>(clock64() - trace_state.start_clock) << 32);
    r[3] = trace_state.aux;
    ++trace_state.count;
  }

  // Record 0 is the plan's; its aux becomes the CTA's SM cycles over the launch (low 48 bits)
  // and the tiles its wave gate checked (high 16, saturated).
  static DETMOE_DEVICE void finish(const LayerParams& p) {
    if (!writer(p)) return;
    p.trace_count[blockIdx.x] = trace_state.count;
    if (trace_state.count > 0) {
      const unsigned long long gated = min(*static_cast<volatile int32_t*>(&trace_state.gated_tiles), 0xffff);
      p.trace[static_cast<int64_t>(blockIdx.x) * p.trace_capacity * 4 + 3] =
          (static_cast<unsigned long long>(clock64() - trace_state.launch_clock) & 0xffffffffffffull) | (gated << 48);
    }
  }
};

}  // namespace detmoe::mk
