#include "gpu_inventory.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

namespace detmoe::cli {

GpuInventory query_gpus() {
  GpuInventory inv;
  cudaDriverGetVersion(&inv.driver_version);
  cudaRuntimeGetVersion(&inv.runtime_version);
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    inv.unavailable_reason = no_gpu_reason();
    return inv;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    GpuInfo g;
    g.index = i;
    g.name = p.name;
    std::string uuid = "GPU-";
    for (int b = 0; b < 16; ++b) {
      uuid += fmt::format("{:02x}", static_cast<unsigned char>(p.uuid.bytes[b]));
      if (b == 3 || b == 5 || b == 7 || b == 9) uuid += '-';
    }
    g.uuid = uuid;
    char bus[32] = {};
    cudaDeviceGetPCIBusId(bus, sizeof bus, i);
    g.pci_bus_id = bus;
    g.sm_count = p.multiProcessorCount;
    g.cc_major = p.major;
    g.cc_minor = p.minor;
    g.memory_bytes = p.totalGlobalMem;
    cudaDeviceGetAttribute(&g.clock_khz, cudaDevAttrClockRate, i);
    cudaDeviceGetAttribute(&g.memory_clock_khz, cudaDevAttrMemoryClockRate, i);
    inv.gpus.push_back(g);
  }
  return inv;
}

std::string no_gpu_reason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return fmt::format("no usable NVIDIA driver/GPU ({})", cudaGetErrorString(err));
  if (count == 0) return "no usable NVIDIA driver/GPU (the driver reports 0 devices)";
  return {};
}

report::Inventory to_report(const GpuInventory& inv) {
  report::Inventory r;
  auto version = [](int v) { return v ? fmt::format("{}.{}", v / 1000, (v % 1000) / 10) : std::string(); };
  r.driver_version = version(inv.driver_version);
  r.runtime_version = version(inv.runtime_version);
  r.unavailable_reason = inv.unavailable_reason;
  for (const GpuInfo& g : inv.gpus)
    r.gpus.push_back({g.index, g.name, g.uuid, g.pci_bus_id, g.sm_count, fmt::format("{}.{}", g.cc_major, g.cc_minor),
                      static_cast<std::uint64_t>(g.memory_bytes)});
  return r;
}

}  // namespace detmoe::cli
