// detmoe accept: hardware acceptance of the GPUs this process sees (DCGM-style verdicts).
//
// What runs now: inventory, and a CPU self-check (the oracle on a tiny problem, rerun
// bitwise). The GPU stages (tiny layer per GPU with bitwise reruns, cross-GPU equality, named
// shapes vs reference, golden, NCCL pair bandwidth) are listed with the reason they were
// skipped: no GPU present, or not built yet. "Could not run" where a GPU is present is Fail.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <vector>

#include "commands.h"
#include "detmoe/data.h"
#include "detmoe/oracle.h"
#include "detmoe/shapes.h"
#include "gpu_inventory.h"

namespace detmoe::cli {
namespace {

enum class Verdict { kPass, kFail, kSkip, kWarn };
const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "Pass";
    case Verdict::kFail: return "Fail";
    case Verdict::kSkip: return "Skip";
    case Verdict::kWarn: return "Warn";
  }
  return "?";
}

struct Check {
  std::string name, target, detail;
  Verdict verdict;
};

struct AcceptArgs {
  int level = 1;
  std::string json_path;
  bool require_gpu = false;
};

// The oracle on `tiny`, twice: the two runs must hash the same (the CPU side of D0).
Check cpu_oracle_rerun() {
  const Shape shape = find_named_shape("tiny").value();
  const LayerData data = generate_layer_data(shape, 7);
  const Routing routing = generate_routing(shape, RoutingSpec{}, 7).value();
  const OracleInputs in = make_oracle_inputs(data, routing);
  OracleOptions opt;
  auto hashes = [&] {
    std::vector<std::string> h;
    for (const auto& t : oracle_output_tensors(run_oracle(in, opt).value(), shape, opt)) h.push_back(t.hash().hex());
    return h;
  };
  const auto a = hashes(), b = hashes();
  if (a == b) return {"oracle-rerun", "cpu", fmt::format("{} outputs, identical bits on rerun", a.size()), Verdict::kPass};
  return {"oracle-rerun", "cpu", "oracle outputs differ between two runs", Verdict::kFail};
}

int run_accept(const AcceptArgs& a) {
  std::vector<Check> checks;
  const GpuInventory inv = query_gpus();
  fmt::print("detmoe accept --level {}\n", a.level);
  fmt::print("driver {} runtime {}\n", inv.driver_version, inv.runtime_version);
  for (const GpuInfo& g : inv.gpus)
    fmt::print("GPU {}: {} {} {} sm_{}{} {} SMs {:.1f} GiB {} MHz\n", g.index, g.name, g.uuid, g.pci_bus_id, g.cc_major,
               g.cc_minor, g.sm_count, g.memory_bytes / 1073741824.0, g.clock_khz / 1000);
  checks.push_back(cpu_oracle_rerun());

  const bool no_gpu = inv.gpus.empty();
  const std::string gpu_reason = no_gpu ? inv.unavailable_reason : "GPU stages are not built into this version yet";
  const Verdict gpu_verdict = no_gpu && !a.require_gpu ? Verdict::kSkip : Verdict::kFail;
  const char* gpu_stages[] = {"tiny-layer-rerun", "cross-gpu-bitwise", "named-shapes-vs-reference", "golden",
                              "nccl-pair-bandwidth"};
  for (const char* stage : gpu_stages) {
    if (a.level < 2 && (std::string(stage) == "named-shapes-vs-reference" || std::string(stage) == "golden" ||
                        std::string(stage) == "nccl-pair-bandwidth"))
      continue;
    checks.push_back({stage, no_gpu ? "all-gpus" : "gpu", gpu_reason, gpu_verdict});
  }

  fmt::print("\n{:<28} {:<10} {:<6} {}\n", "check", "target", "result", "detail");
  bool failed = false;
  nlohmann::json j;
  j["schema"] = "detmoe.accept/0";
  j["level"] = a.level;
  for (const Check& c : checks) {
    fmt::print("{:<28} {:<10} {:<6} {}\n", c.name, c.target, to_string(c.verdict), c.detail);
    failed |= c.verdict == Verdict::kFail;
    j["checks"].push_back({{"name", c.name}, {"target", c.target}, {"verdict", to_string(c.verdict)}, {"detail", c.detail}});
  }
  if (no_gpu) fmt::print("\nCPU-only result: GPU stages skipped ({}).\n", inv.unavailable_reason);
  fmt::print("{}\n", failed ? "ACCEPT: FAIL" : "ACCEPT: PASS (for the checks that ran)");
  if (!a.json_path.empty()) {
    std::ofstream f(a.json_path);
    f << j.dump(2) << "\n";
  }
  return failed ? kExitCheckFailed : kExitOk;
}

}  // namespace

void add_accept_command(CLI::App& app, Action& run) {
  auto args = std::make_shared<AcceptArgs>();
  CLI::App* cmd = app.add_subcommand("accept", "hardware acceptance of every visible GPU (levels 1 seconds, 2 minutes, 3 long)");
  cmd->add_option("--level", args->level, "1 | 2 | 3")->check(CLI::Range(1, 3))->capture_default_str();
  cmd->add_option("--json", args->json_path, "write verdicts as JSON");
  cmd->add_flag("--require-gpu", args->require_gpu, "fail (instead of skip) when no GPU is present");
  cmd->callback([args, &run] { run = [args] { return run_accept(*args); }; });
}

}  // namespace detmoe::cli
