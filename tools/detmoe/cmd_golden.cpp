// detmoe golden record | check: golden hashes of fixed cases per (implementation, platform).
//   record  runs the selected cases and merges them into the hash file: a record of some cases
//           (--case) keeps every other recorded case; a record of all cases drops the cases the
//           cases file no longer lists, and says so.
//   check   runs the selected cases and judges each with golden::check_case (symmetric: every
//           output recorded and produced, with the recorded bits). Exit 1 when a case that ran
//           differs, else 3 when one could not run here (no hash file for this platform, no CUDA
//           device), else 0. A --case the cases file lacks for --impl is a usage error (2).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "commands.h"
#include "data_paths.h"
#include "golden/golden.h"
#include "golden_run.h"
#include "impl_registry.h"

namespace detmoe::cli {
namespace {

struct GoldenArgs {
  std::string impl = "oracle";
  std::string cases_path;  // default data_path("golden/cases.json"), resolved when the command runs
  std::string hashes_dir;  // default data_path("golden/hashes")
  std::string store_dir;
  std::vector<std::string> only;
};

bool contains(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

// Every case of the cases file recorded for --impl, in file order.
std::vector<golden::GoldenCase> impl_cases(const GoldenArgs& a) {
  std::vector<golden::GoldenCase> all = golden::load_cases(a.cases_path).value(), out;
  for (auto& c : all)
    if (contains(c.impls, a.impl)) out.push_back(std::move(c));
  if (out.empty()) throw Error(invalid_argument(fmt::format("no golden case in {} selects --impl {}", a.cases_path, a.impl)));
  return out;
}

// `cases` narrowed to --case; a name that is not among them is a usage error naming it.
std::vector<golden::GoldenCase> selected(const GoldenArgs& a, const std::vector<golden::GoldenCase>& cases) {
  for (const std::string& name : a.only)
    if (std::none_of(cases.begin(), cases.end(), [&](const auto& c) { return c.name == name; }))
      throw Error(invalid_argument(fmt::format("--case {} is not a case of {} for --impl {}", name, a.cases_path, a.impl)));
  std::vector<golden::GoldenCase> out;
  for (const auto& c : cases)
    if (a.only.empty() || contains(a.only, c.name)) out.push_back(c);
  return out;
}

int record(const GoldenArgs& a) {
  const ImplEntry impl = find_impl(a.impl).value();
  const std::vector<golden::GoldenCase> all = impl_cases(a), chosen = selected(a, all);
  if (const std::string why = why_impl_cannot_run(impl); !why.empty()) {
    fmt::print(stderr, "golden record: could not run: {}\n", why);
    return kExitCouldNotRun;
  }
  const std::string platform = impl.platform();
  const std::string path = golden::hash_file_path(a.hashes_dir, a.impl, platform);
  // The file is merged into, never silently replaced: an unreadable one stops the record.
  golden::HashFile old{a.impl, platform, {}};
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    auto existing = golden::read_hash_file(path);
    if (!existing.ok())
      throw Error({ErrorCode::kIoError, fmt::format("cannot merge into {}: {} (move it away to record from scratch)", path,
                                                    existing.status().message())});
    if (existing->impl != a.impl || existing->platform != platform)
      throw Error({ErrorCode::kIoError, fmt::format("cannot merge into {}: it records impl {} on {}, not {} on {}", path,
                                                    existing->impl, existing->platform, a.impl, platform)});
    old = std::move(*existing);
  }
  std::vector<golden::CaseRecord> fresh;
  for (const auto& c : chosen) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<NamedTensor> outs = impl.run(runnable_problem(impl, golden::make_case_problem(c).value())).value();
    if (outs.empty()) throw Error({ErrorCode::kInternal, fmt::format("--impl {} produced no outputs for case {}", a.impl, c.name)});
    golden::CaseRecord rec{c.name, {}};
    for (const NamedTensor& t : outs) {
      rec.outputs.push_back(golden::make_output_record(t));
      if (!a.store_dir.empty()) throw_if_error(golden::store_tensor(a.store_dir, a.impl, platform, c.name, t));
    }
    fmt::print("recorded {:<22} {} outputs ({:.2f} s)\n", c.name, outs.size(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    fresh.push_back(std::move(rec));
  }
  // In the cases file's order: the fresh records, and the old ones of the cases not chosen.
  golden::HashFile file{a.impl, platform, {}};
  int kept = 0;
  for (const auto& c : all) {
    auto f = std::find_if(fresh.begin(), fresh.end(), [&](const auto& r) { return r.name == c.name; });
    if (f != fresh.end()) {
      file.cases.push_back(std::move(*f));
    } else if (const golden::CaseRecord* o = golden::find_case(old, c.name)) {
      file.cases.push_back(*o);
      ++kept;
    }
  }
  for (const golden::CaseRecord& o : old.cases) {
    if (std::any_of(all.begin(), all.end(), [&](const auto& c) { return c.name == o.name; })) continue;
    if (a.only.empty()) {
      fmt::print("dropped  {:<22} no longer a case of {} for --impl {}\n", o.name, a.cases_path, a.impl);
    } else {
      fmt::print("kept     {:<22} not a case of {} for --impl {} (a record of all cases drops it)\n", o.name, a.cases_path, a.impl);
      file.cases.push_back(o);
      ++kept;
    }
  }
  throw_if_error(golden::write_hash_file(path, file));
  fmt::print("wrote {}: {} cases recorded now, {} kept as recorded before\n", path, chosen.size(), kept);
  return kExitOk;
}

int check(const GoldenArgs& a) {
  const ImplEntry impl = find_impl(a.impl).value();
  const std::vector<golden::GoldenCase> all = impl_cases(a), chosen = selected(a, all);
  if (const std::string why = why_impl_cannot_run(impl); !why.empty()) {
    fmt::print(stderr, "golden check: could not run: {}\n", why);
    return kExitCouldNotRun;
  }
  const std::string platform = impl.platform();
  auto file = load_recorded_hashes(a.hashes_dir, a.impl, platform);
  if (!file.ok()) {
    fmt::print(stderr, "golden check: could not run: {}\n", file.status().message());
    return kExitCouldNotRun;
  }
  for (const golden::CaseRecord& r : file->cases)
    if (std::none_of(all.begin(), all.end(), [&](const auto& c) { return c.name == r.name; }))
      fmt::print("note: case {} is recorded but {} no longer lists it for --impl {} (not checked)\n", r.name, a.cases_path, a.impl);
  int failed = 0, passed = 0, could_not_run = 0;
  for (const auto& c : chosen) {
    const GoldenCaseRun r = run_golden_case(impl, c, *file, a.store_dir);
    switch (r.outcome) {
      case GoldenOutcome::kPass:
        ++passed;
        fmt::print("PASS {:<22} {}\n", c.name, r.detail);
        break;
      case GoldenOutcome::kCouldNotRun:
        ++could_not_run;
        fmt::print("SKIP {:<22} {}\n", c.name, r.detail);
        break;
      case GoldenOutcome::kFail:
        ++failed;
        if (r.verdict.differences.empty()) fmt::print("FAIL {:<22} {}\n", c.name, r.detail);
        for (const auto& d : r.verdict.differences) fmt::print("FAIL {:<22} {:<9} {}\n", d.case_name, d.output, d.summary);
        break;
    }
  }
  fmt::print("golden check --impl {} on {}: {} passed, {} failed, {} could not run\n", a.impl, platform, passed, failed,
             could_not_run);
  // A change of bits is reported as such even when other cases could not run.
  return failed ? kExitCheckFailed : could_not_run ? kExitCouldNotRun : kExitOk;
}

}  // namespace

void add_golden_command(CLI::App& app, Action& run) {
  auto args = std::make_shared<GoldenArgs>();
  CLI::App* cmd = app.add_subcommand("golden", "record or check golden hashes of the fixed cases (golden/cases.json)");
  cmd->require_subcommand(1);
  for (const char* verb : {"record", "check"}) {
    CLI::App* sub = cmd->add_subcommand(verb, std::string(verb) == "record"
                                                  ? "run the cases and merge them into golden/hashes/<impl>.<platform>.json"
                                                  : "run the cases and compare with the recorded hashes (exit 1 on any change, "
                                                    "3 when a case could not run here)");
    sub->add_option("--impl", args->impl, "oracle | reference | megakernel")->capture_default_str();
    sub->add_option("--cases", args->cases_path, "case definitions (default: golden/cases.json of the data folder, see README)");
    sub->add_option("--dir", args->hashes_dir, "folder of hash files (default: golden/hashes of the data folder)");
    sub->add_option("--store", args->store_dir, "tensor store (record writes it, check reads it for element values)");
    sub->add_option("--case", args->only, "only these cases (record keeps the others' recorded hashes)");
    const bool is_record = std::string(verb) == "record";
    sub->callback([args, is_record, &run] {
      run = [args, is_record] {
        if (args->cases_path.empty()) args->cases_path = data_path("golden/cases.json");
        if (args->hashes_dir.empty()) args->hashes_dir = data_path("golden/hashes");
        return is_record ? record(*args) : check(*args);
      };
    });
  }
}

}  // namespace detmoe::cli
