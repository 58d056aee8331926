// detmoe golden record | check: golden hashes of fixed cases per (implementation, platform).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "commands.h"
#include "data_paths.h"
#include "golden/golden.h"
#include "impl_registry.h"

namespace detmoe::cli {
namespace {

struct GoldenArgs {
  std::string impl = "oracle";
  std::string cases_path = data_path("golden/cases.json");
  std::string hashes_dir = data_path("golden/hashes");
  std::string store_dir;
  std::vector<std::string> only;
};

std::vector<golden::GoldenCase> selected_cases(const GoldenArgs& a) {
  std::vector<golden::GoldenCase> all = golden::load_cases(a.cases_path).value(), out;
  for (auto& c : all) {
    if (std::find(c.impls.begin(), c.impls.end(), a.impl) == c.impls.end()) continue;
    if (!a.only.empty() && std::find(a.only.begin(), a.only.end(), c.name) == a.only.end()) continue;
    out.push_back(std::move(c));
  }
  if (out.empty()) throw Error(invalid_argument(fmt::format("no golden case in {} selects --impl {}", a.cases_path, a.impl)));
  return out;
}

int record(const GoldenArgs& a) {
  const ImplEntry impl = find_impl(a.impl).value();
  const std::string platform = impl.platform();
  golden::HashFile file{a.impl, platform, {}};
  for (const auto& c : selected_cases(a)) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<NamedTensor> outs = impl.run(runnable_problem(impl, golden::make_case_problem(c).value())).value();
    golden::CaseRecord rec{c.name, {}};
    for (const NamedTensor& t : outs) {
      rec.outputs.push_back(golden::make_output_record(t));
      if (!a.store_dir.empty()) throw_if_error(golden::store_tensor(a.store_dir, a.impl, platform, c.name, t));
    }
    fmt::print("recorded {:<22} {} outputs ({:.2f} s)\n", c.name, outs.size(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    file.cases.push_back(std::move(rec));
  }
  const std::string path = golden::hash_file_path(a.hashes_dir, a.impl, platform);
  throw_if_error(golden::write_hash_file(path, file));
  fmt::print("wrote {}\n", path);
  return kExitOk;
}

int check(const GoldenArgs& a) {
  const ImplEntry impl = find_impl(a.impl).value();
  const std::string platform = impl.platform();
  const std::string path = golden::hash_file_path(a.hashes_dir, a.impl, platform);
  auto file = golden::read_hash_file(path);
  if (!file.ok()) {
    fmt::print(stderr, "golden check: no recorded hashes for --impl {} on platform {}: {}\n", a.impl, platform,
               file.status().message());
    return kExitCouldNotRun;
  }
  int failed = 0, passed = 0;
  for (const auto& c : selected_cases(a)) {
    auto rec = std::find_if(file->cases.begin(), file->cases.end(), [&](const auto& r) { return r.name == c.name; });
    if (rec == file->cases.end()) {
      fmt::print("FAIL {:<22} not recorded in {}\n", c.name, path);
      ++failed;
      continue;
    }
    const std::vector<NamedTensor> outs = impl.run(runnable_problem(impl, golden::make_case_problem(c).value())).value();
    const auto diffs = golden::compare_case(*rec, outs, a.store_dir, a.impl, platform);
    if (diffs.empty()) {
      fmt::print("PASS {:<22} {} outputs bitwise equal\n", c.name, outs.size());
      ++passed;
    } else {
      ++failed;
      for (const auto& d : diffs) fmt::print("FAIL {:<22} {:<9} {}\n", d.case_name, d.output, d.summary);
    }
  }
  fmt::print("golden check --impl {} on {}: {} passed, {} failed\n", a.impl, platform, passed, failed);
  return failed ? kExitCheckFailed : kExitOk;
}

}  // namespace

void add_golden_command(CLI::App& app, Action& run) {
  auto args = std::make_shared<GoldenArgs>();
  CLI::App* cmd = app.add_subcommand("golden", "record or check golden hashes of the fixed cases (golden/cases.json)");
  cmd->require_subcommand(1);
  for (const char* verb : {"record", "check"}) {
    CLI::App* sub = cmd->add_subcommand(verb, std::string(verb) == "record"
                                                  ? "run the cases and write golden/hashes/<impl>.<platform>.json"
                                                  : "run the cases and compare with the recorded hashes (exit 1 on any change)");
    sub->add_option("--impl", args->impl, "oracle | reference | megakernel")->capture_default_str();
    sub->add_option("--cases", args->cases_path, "case definitions (default found in " + data_root_description() + ")")->capture_default_str();
    sub->add_option("--dir", args->hashes_dir, "folder of hash files")->capture_default_str();
    sub->add_option("--store", args->store_dir, "tensor store (record writes it, check reads it for element values)");
    sub->add_option("--case", args->only, "only these cases");
    const bool is_record = std::string(verb) == "record";
    sub->callback([args, is_record, &run] { run = [args, is_record] { return is_record ? record(*args) : check(*args); }; });
  }
}

}  // namespace detmoe::cli
