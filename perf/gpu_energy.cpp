#include "perf/gpu_energy.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

namespace detmoe::perf {

namespace {
// The few NVML entry points used, declared as nvml.h declares them (NVML's C ABI: 0 = success).
using NvmlDevice = struct NvmlDeviceOpaque*;
using NvmlInit = int (*)();
using NvmlShutdown = int (*)();
using NvmlHandleByBusId = int (*)(const char*, NvmlDevice*);
using NvmlTotalEnergy = int (*)(NvmlDevice, unsigned long long*);
using NvmlEnforcedLimit = int (*)(NvmlDevice, unsigned int*);
using NvmlClockInfo = int (*)(NvmlDevice, int, unsigned int*);
using NvmlClockReasons = int (*)(NvmlDevice, unsigned long long*);
constexpr int kNvmlClockSm = 1;  // NVML_CLOCK_SM
}  // namespace

struct GpuEnergyMeter::Api {
  void* lib = nullptr;
  NvmlShutdown shutdown = nullptr;
  NvmlTotalEnergy total_energy = nullptr;
  NvmlEnforcedLimit enforced_limit = nullptr;
  NvmlClockInfo clock_info = nullptr;
  NvmlClockReasons clock_reasons = nullptr;
  NvmlDevice device = nullptr;
};

GpuEnergyMeter::GpuEnergyMeter(int cuda_device) : api_(std::make_unique<Api>()) {
  api_->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (api_->lib == nullptr) {
    reason_ = "libnvidia-ml.so.1 not found";
    return;
  }
  const auto init = reinterpret_cast<NvmlInit>(dlsym(api_->lib, "nvmlInit_v2"));
  const auto by_bus = reinterpret_cast<NvmlHandleByBusId>(dlsym(api_->lib, "nvmlDeviceGetHandleByPciBusId_v2"));
  api_->shutdown = reinterpret_cast<NvmlShutdown>(dlsym(api_->lib, "nvmlShutdown"));
  api_->total_energy = reinterpret_cast<NvmlTotalEnergy>(dlsym(api_->lib, "nvmlDeviceGetTotalEnergyConsumption"));
  api_->enforced_limit = reinterpret_cast<NvmlEnforcedLimit>(dlsym(api_->lib, "nvmlDeviceGetEnforcedPowerLimit"));
  api_->clock_info = reinterpret_cast<NvmlClockInfo>(dlsym(api_->lib, "nvmlDeviceGetClockInfo"));
  // Renamed in NVML 12.535 ("throttle" → "clocks event"); older drivers have only the old name.
  api_->clock_reasons = reinterpret_cast<NvmlClockReasons>(dlsym(api_->lib, "nvmlDeviceGetCurrentClocksEventReasons"));
  if (api_->clock_reasons == nullptr)
    api_->clock_reasons = reinterpret_cast<NvmlClockReasons>(dlsym(api_->lib, "nvmlDeviceGetCurrentClocksThrottleReasons"));
  if (init == nullptr || by_bus == nullptr || api_->shutdown == nullptr || api_->total_energy == nullptr) {
    reason_ = "NVML lacks an entry point (nvmlInit_v2, nvmlDeviceGetHandleByPciBusId_v2, energy)";
    return;
  }
  if (const int rc = init(); rc != 0) {
    reason_ = "nvmlInit_v2 returned " + std::to_string(rc);
    api_->shutdown = nullptr;
    return;
  }
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, cuda_device) != cudaSuccess) {
    reason_ = "cudaDeviceGetPCIBusId failed for device " + std::to_string(cuda_device);
    return;
  }
  if (const int rc = by_bus(bus, &api_->device); rc != 0) {
    reason_ = std::string("no NVML device at PCI bus ") + bus + " (" + std::to_string(rc) + ")";
    return;
  }
  unsigned long long mj = 0;
  if (const int rc = api_->total_energy(api_->device, &mj); rc != 0) {
    reason_ = "nvmlDeviceGetTotalEnergyConsumption returned " + std::to_string(rc);
    return;
  }
  available_ = true;
}

GpuEnergyMeter::~GpuEnergyMeter() {
  if (api_->shutdown != nullptr) api_->shutdown();
  if (api_->lib != nullptr) dlclose(api_->lib);
}

double GpuEnergyMeter::joules() const {
  unsigned long long mj = 0;
  if (!available_ || api_->total_energy(api_->device, &mj) != 0) return -1.0;
  return static_cast<double>(mj) * 1e-3;
}

double GpuEnergyMeter::power_limit_watts() const {
  unsigned int mw = 0;
  if (!available_ || api_->enforced_limit == nullptr || api_->enforced_limit(api_->device, &mw) != 0) return -1.0;
  return static_cast<double>(mw) * 1e-3;
}

int GpuEnergyMeter::sm_clock_mhz() const {
  unsigned int mhz = 0;
  if (!available_ || api_->clock_info == nullptr || api_->clock_info(api_->device, kNvmlClockSm, &mhz) != 0) return -1;
  return static_cast<int>(mhz);
}

long long GpuEnergyMeter::clock_event_reasons() const {
  unsigned long long bits = 0;
  if (!available_ || api_->clock_reasons == nullptr || api_->clock_reasons(api_->device, &bits) != 0) return -1;
  return static_cast<long long>(bits);
}

}  // namespace detmoe::perf
