#include "impl_registry.h"

#include <fmt/format.h>

#include "detmoe/data.h"
#include "detmoe/host_memory.h"
#include "detmoe/oracle.h"
#include "detmoe/layer_session.h"
#include "detmoe/problem_session.h"

#include <cuda_runtime_api.h>

namespace detmoe::cli {
namespace {

std::string cpu_platform() {
#if defined(__x86_64__)
  return "cpu-x86_64";
#elif defined(__aarch64__)
  return "cpu-aarch64";
#else
  return "cpu-other";
#endif
}

StatusOr<std::vector<NamedTensor>> run_oracle_problem(const HostProblem& p) {
  OracleOptions opt;
  opt.grad_precision = p.grad_precision;
  DETMOE_RETURN_IF_ERROR(require_host_bytes(oracle_host_bytes(p.shape, p.backward(), opt), "the CPU oracle of " + p.shape.to_string()));
  const OracleInputs in = make_oracle_inputs(p.data, p.routing);
  auto out = run_oracle(in, opt);
  if (!out.ok()) return out.status();
  return oracle_output_tensors(*out, p.shape, opt);
}

std::string gpu_platform() {
  int device = 0, runtime = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) return "gpu-unavailable";
  cudaRuntimeGetVersion(&runtime);
  // cuBLAS promises the same bits only for one architecture, SM count and toolkit.
  return fmt::format("sm{}{}-{}sm-cuda{}.{}", prop.major, prop.minor, prop.multiProcessorCount, runtime / 1000, (runtime % 1000) / 10);
}

// Every GPU implementation through the one seam (detmoe/layer_session.h): loopback ranks on the
// current device, the problem's tensors on the device (seeded ones filled there, others
// uploaded), outputs poisoned with NaN, forward [+ backward], synchronise, download.
StatusOr<std::vector<NamedTensor>> run_on_gpu(const std::string& impl, const HostProblem& p, const LayerConfig& knobs) {
  // Not implemented (exit 2) comes before could not run (exit 3).
  if (p.backward() && !layer_session_has_backward(impl))
    return Status(ErrorCode::kNotImplemented, fmt::format("the {}'s backward is not built yet (forward only)", impl));
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
    return Status(ErrorCode::kCudaError, fmt::format("--impl {} needs a CUDA device and this process sees none", impl));
  int device = 0;
  cudaGetDevice(&device);
  auto ex = make_loopback_exchange(static_cast<int>(p.shape.P), device);
  if (!ex.ok()) return ex.status();
  auto session = ProblemSession::create(impl, p, std::shared_ptr<RowExchange>(std::move(*ex)), knobs);
  if (!session.ok()) return session.status();
  return (*session)->run(p.backward());
}

// A GPU implementation's row: its LayerSession by name, so a new implementation is one row of
// harness/layer_session.cpp and nothing here.
ImplEntry gpu_entry(const std::string& name) {
  ImplEntry e{name, &gpu_platform, nullptr, layer_session_has_backward(name), nullptr};
  e.run = [name](const HostProblem& p) { return run_on_gpu(name, p, {}); };
  e.run_with_knobs = [name](const HostProblem& p, const LayerConfig& k) { return run_on_gpu(name, p, k); };
  return e;
}

const std::vector<ImplEntry>& registry() {
  static const std::vector<ImplEntry> kImpls = [] {
    std::vector<ImplEntry> v = {{"oracle", &cpu_platform, &run_oracle_problem, /*has_backward=*/true, nullptr}};
    for (const std::string& name : layer_session_impls()) v.push_back(gpu_entry(name));
    return v;
  }();
  return kImpls;
}

}  // namespace

HostProblem runnable_problem(const ImplEntry& impl, HostProblem p) {
  if (!impl.has_backward) p.data.dout.clear();
  return p;
}

std::vector<std::string> impl_names() {
  std::vector<std::string> names;
  for (const auto& e : registry()) names.push_back(e.name);
  return names;
}

StatusOr<ImplEntry> find_impl(const std::string& name) {
  for (const auto& e : registry())
    if (e.name == name) return e;
  return invalid_argument(fmt::format("--impl {} is unknown or not built (known: {})", name, fmt::join(impl_names(), ", ")));
}

}  // namespace detmoe::cli
