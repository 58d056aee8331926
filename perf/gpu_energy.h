// GPU energy over a stretch of work, from NVML's total-energy counter (millijoules since the
// driver loaded; Volta and later). On the H200 this kernel runs at the board's power cap, where a
// launch's time follows the energy it spends (docs/PERF.md step 7), so joules per step are the
// quantity an optimisation has to move, and they vary less run to run than the clock does.
//
// NVML is opened at run time (dlopen of the driver's libnvidia-ml.so.1), so the benchmarks still
// load and run where the library is absent; the meter then reports itself unavailable.
#pragma once

#include <memory>
#include <string>

namespace detmoe::perf {

class GpuEnergyMeter {
 public:
  // The meter of CUDA device `cuda_device` (matched to NVML by PCI bus id).
  explicit GpuEnergyMeter(int cuda_device);
  ~GpuEnergyMeter();
  GpuEnergyMeter(const GpuEnergyMeter&) = delete;
  GpuEnergyMeter& operator=(const GpuEnergyMeter&) = delete;

  bool available() const { return available_; }
  // Why not, when it is not.
  const std::string& reason() const { return reason_; }

  // Energy counter now, in joules; negative when unavailable or the read fails.
  double joules() const;
  // Power cap enforced now, in watts; negative when unknown.
  double power_limit_watts() const;

 private:
  struct Api;
  std::unique_ptr<Api> api_;
  bool available_ = false;
  std::string reason_;
};

}  // namespace detmoe::perf
