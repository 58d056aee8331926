#include "impl_registry.h"

#include <fmt/format.h>

#include "detmoe/data.h"
#include "detmoe/host_memory.h"
#include "detmoe/oracle.h"
#include "detmoe/device_problem.h"
#include "detmoe/layer.h"
#include "detmoe/reference_session.h"

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

StatusOr<std::vector<NamedTensor>> run_reference_with(const HostProblem& p, const LayerConfig& knobs) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
    return Status(ErrorCode::kCudaError, "the GPU reference needs a CUDA device and this process sees none");
  int device = 0;
  cudaGetDevice(&device);
  auto ex = make_loopback_exchange(static_cast<int>(p.shape.P), device);
  if (!ex.ok()) return ex.status();
  auto session = ReferenceSession::create(p, std::shared_ptr<RowExchange>(std::move(*ex)), knobs);
  if (!session.ok()) return session.status();
  return (*session)->run(p.backward());
}
StatusOr<std::vector<NamedTensor>> run_reference_problem(const HostProblem& p) { return run_reference_with(p, {}); }

// The forward megakernel (work in progress, docs/MEGAKERNEL.md): forward only for now.
StatusOr<std::vector<NamedTensor>> run_megakernel_with(const HostProblem& p, const LayerConfig& knobs) {
  if (p.backward()) return Status(ErrorCode::kNotImplemented, "the megakernel's backward is not built yet (forward only)");
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
    return Status(ErrorCode::kCudaError, "the megakernel needs a CUDA device and this process sees none");
  int device = 0;
  cudaGetDevice(&device);
  auto ex = make_loopback_exchange(static_cast<int>(p.shape.P), device);
  if (!ex.ok()) return ex.status();
  auto problem = DeviceProblem::create(p, **ex);
  if (!problem.ok()) return problem.status();
  LayerOptions options;
  options.device = device;
  auto layer = Layer::create(p.shape, knobs, options);
  if (!layer.ok()) return layer.status();
  cudaStream_t stream = (*ex)->stream(0);
  DETMOE_RETURN_IF_ERROR((*problem)->poison_outputs());
  DETMOE_RETURN_IF_ERROR((*layer)->forward({(*problem)->inputs(), (*problem)->outputs()}, stream));
  DETMOE_RETURN_IF_ERROR((*layer)->synchronize(stream));
  return (*problem)->download(false);
}
StatusOr<std::vector<NamedTensor>> run_megakernel_problem(const HostProblem& p) { return run_megakernel_with(p, {}); }

const std::vector<ImplEntry>& registry() {
  static const std::vector<ImplEntry> kImpls = {
      {"oracle", &cpu_platform, &run_oracle_problem, /*has_backward=*/true, nullptr},
      {"reference", &gpu_platform, &run_reference_problem, /*has_backward=*/true, &run_reference_with},
      {"megakernel", &gpu_platform, &run_megakernel_problem, /*has_backward=*/false, &run_megakernel_with},
  };
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
