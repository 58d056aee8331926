#include "impl_registry.h"

#include <fmt/format.h>

#include "detmoe/data.h"
#include "detmoe/oracle.h"

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
  const OracleInputs in = make_oracle_inputs(p.data, p.routing);
  OracleOptions opt;
  opt.grad_precision = p.grad_precision;
  auto out = run_oracle(in, opt);
  if (!out.ok()) return out.status();
  return oracle_output_tensors(*out, p.shape, opt);
}

const std::vector<ImplEntry>& registry() {
  static const std::vector<ImplEntry> kImpls = {
      {"oracle", &cpu_platform, &run_oracle_problem},
  };
  return kImpls;
}

}  // namespace

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
