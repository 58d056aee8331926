// Knobs of a layer run. DESIGN.md §3 D1: every knob here changes speed, never bits — except
// the precision fields, which select a different math contract.
#pragma once

#include <cstdint>

#include "detmoe/problem.h"
#include "detmoe/status.h"

namespace detmoe {

struct LayerConfig {
  Precision precision = Precision::kBF16;
  GradPrecision grad_precision = GradPrecision::kFP32;
  // Keep h = [g, u] from forward for backward (true) or recompute it from x (false). Same bits.
  bool save_h = true;
  // Streaming multiprocessors the persistent kernel may use; 0 = all of the device.
  int32_t num_sms = 0;
  // SMs (of num_sms) given to dispatch/combine; 0 = chosen by the kernel.
  int32_t comm_sms = 0;
  // Rows per dispatch/combine chunk (overlap granularity); 0 = chosen by the kernel.
  int32_t overlap_rows = 0;
  // Rows each rank's receive buffer holds; 0 = the worst case P·T·min(k, E/P), which can never
  // overflow. A smaller cap is checked against the plan before any write.
  int64_t recv_capacity_rows = 0;
  // Bound of every device spin-wait, in milliseconds, before the launch fails with kDeviceTimeout.
  int32_t spin_timeout_ms = 2000;
};

Status validate(const LayerConfig& config, const Shape& shape);

// Rows a rank may receive in the worst case (every token of every rank picks experts of it).
int64_t worst_case_recv_rows(const Shape& shape);

}  // namespace detmoe
