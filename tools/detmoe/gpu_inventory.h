// What GPUs this process sees, for `detmoe accept` and reports.
#pragma once

#include <string>
#include <vector>

#include "detmoe/report.h"

namespace detmoe::cli {

struct GpuInfo {
  int index = 0;
  std::string name, uuid, pci_bus_id;
  int sm_count = 0, cc_major = 0, cc_minor = 0;
  size_t memory_bytes = 0;
  int clock_khz = 0, memory_clock_khz = 0;
};

struct GpuInventory {
  std::vector<GpuInfo> gpus;
  int driver_version = 0, runtime_version = 0;
  std::string unavailable_reason;  // why there are none, when gpus is empty
};

GpuInventory query_gpus();
// The inventory as run reports hold it (versions as "13.0").
report::Inventory to_report(const GpuInventory& inv);

// Why this process has no GPU to run on, or "" when cudaGetDeviceCount found one: "no usable
// NVIDIA driver/GPU (<CUDA's text>)". CUDA's own text for a missing driver, "CUDA driver version
// is insufficient for CUDA runtime version", reads like a version mismatch to fix.
std::string no_gpu_reason();

}  // namespace detmoe::cli
