// GPU energy over a stretch of work, from NVML's total-energy counter (millijoules since the
// driver loaded; Volta and later). On the H200 this kernel runs at the board's power cap, where a
// launch's time follows the energy it spends (docs/perf-journal/megakernel-forward.md step 7), so joules per step are the
// quantity an optimisation has to move, and they vary less run to run than the clock does.
//
// NVML is opened at run time (dlopen of the driver's libnvidia-ml.so.1), so the benchmarks still
// load and run where the library is absent; the meter then reports itself unavailable.
#pragma once

#include <chrono>
#include <cstddef>
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
  // SM clock now, in MHz; negative when unknown.
  int sm_clock_mhz() const;
  // Why the clocks are held below their maximum now (NVML's clocks event reasons, formerly
  // throttle reasons: 0x4 software power cap, 0x20 software thermal, 0x40 hardware thermal,
  // 0x80 hardware power brake, …); negative when unknown.
  long long clock_event_reasons() const;

 private:
  struct Api;
  std::unique_ptr<Api> api_;
  bool available_ = false;
  std::string reason_;
};

// Joules per step over a window of repeated steps: construct it just before the first timed
// step; finish(n, more) takes the n timed steps, calls more() (one more step of the same pattern,
// synchronised) until `seconds` have passed since construction — so the window is long against
// NVML's counter updates — and returns the figures (ok = false when the meter is unavailable).
struct EnergyFigures {
  bool ok = false;
  double joules_per_step = 0;
  double avg_watts = 0;
  size_t steps = 0;
};

class EnergyWindow {
 public:
  EnergyWindow(const GpuEnergyMeter& meter, double seconds)
      : meter_(meter), seconds_(seconds), joules0_(meter.available() && seconds > 0 ? meter.joules() : -1.0),
        wall0_(std::chrono::steady_clock::now()) {}

  template <class More>
  EnergyFigures finish(size_t steps, More&& more) const {
    EnergyFigures f;
    if (joules0_ < 0) return f;
    while (elapsed() < seconds_) {
      more();
      ++steps;
    }
    const double joules = meter_.joules() - joules0_;
    if (joules <= 0 || steps == 0) return f;
    f.ok = true;
    f.joules_per_step = joules / static_cast<double>(steps);
    f.avg_watts = joules / elapsed();
    f.steps = steps;
    return f;
  }

 private:
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0_).count();
  }

  const GpuEnergyMeter& meter_;
  double seconds_;
  double joules0_;
  std::chrono::steady_clock::time_point wall0_;
};

}  // namespace detmoe::perf
