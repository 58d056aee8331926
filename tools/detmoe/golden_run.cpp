#include "golden_run.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

namespace detmoe::cli {

bool could_not_run_here(const Status& s) {
  if (s.code() == ErrorCode::kNotImplemented || s.code() == ErrorCode::kOutOfMemory) return true;
  if (s.code() != ErrorCode::kCudaError) return false;
  int count = 0;
  return cudaGetDeviceCount(&count) != cudaSuccess || count == 0;
}

std::string why_impl_cannot_run(const ImplEntry& impl) {
  // impl_registry's GPU platforms say "gpu-unavailable" when this process sees no CUDA device.
  if (impl.platform() == "gpu-unavailable")
    return fmt::format("--impl {} needs a CUDA device and this process sees none", impl.name);
  return {};
}

StatusOr<golden::HashFile> load_recorded_hashes(const std::string& hashes_dir, const std::string& impl,
                                                const std::string& platform) {
  const std::string path = golden::hash_file_path(hashes_dir, impl, platform);
  auto file = golden::read_hash_file(path);
  if (!file.ok())
    return Status(ErrorCode::kIoError, fmt::format("no usable recorded hashes for {} on platform {}: {}", impl, platform,
                                                   file.status().message()));
  if (file->impl != impl || file->platform != platform)
    return Status(ErrorCode::kIoError, fmt::format("{} records impl {} on platform {}, not {} on {}", path, file->impl,
                                                   file->platform, impl, platform));
  return file;
}

GoldenCaseRun run_golden_case(const ImplEntry& impl, const golden::GoldenCase& c, const golden::HashFile& file,
                              const std::string& store_dir) {
  GoldenCaseRun r;
  auto problem = golden::make_case_problem(c);
  if (!problem.ok()) {
    r.outcome = could_not_run_here(problem.status()) ? GoldenOutcome::kCouldNotRun : GoldenOutcome::kFail;
    r.detail = (r.outcome == GoldenOutcome::kFail ? "cannot build the case's problem: " : "could not run: ") +
               problem.status().to_string();
    return r;
  }
  auto fresh = impl.run(runnable_problem(impl, *problem));  // forward-only for an impl without backward
  if (!fresh.ok()) {
    r.outcome = could_not_run_here(fresh.status()) ? GoldenOutcome::kCouldNotRun : GoldenOutcome::kFail;
    r.detail = fmt::format("{}: {}", r.outcome == GoldenOutcome::kFail ? "run failed" : "could not run",
                           fresh.status().to_string());
    return r;
  }
  r.verdict = golden::check_case(c.name, golden::find_case(file, c.name), *fresh, store_dir, file.impl, file.platform);
  r.outcome = r.verdict.pass() ? GoldenOutcome::kPass : GoldenOutcome::kFail;
  r.detail = r.verdict.summary();
  return r;
}

}  // namespace detmoe::cli
