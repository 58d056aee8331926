// detmoe fuzz: a campaign of drawn problems (fuzz_cases.h) through one implementation of the
// registry, each checked for
//   D0   a rerun gives the same bits (every output);
//   D1   a run with drawn speed knobs (num_sms, comm_sms, overlap_rows, save_h,
//        weight_grad_launch, weight_grad_band_budget_kb, weight_grad_stream_stores,
//        weight_grad_deep_ring) gives the same bits, for implementations that have knobs;
//   vs   the --against implementation within the docs/NUMERICS.md tolerance, and bitwise on the
//        outputs named by --bitwise (the megakernel's out and y equal the reference's);
//   D2   the same global problem split over another EP size gives the same bits (every output
//        but the shared expert's weight gradients, which are per-rank partial sums);
//   D3   a subset of the tokens in reverse order (P = 1) gives the same rows of out, y, d_x and
//        d_topk_w as the full problem.
// Every output must be written (outputs are NaN-poisoned). A failure is shrunk (fewer tokens,
// experts, …) while it keeps failing, and the command that replays it is printed. Progress goes
// to stdout; the run report (detmoe.run/1, one check per problem) is rewritten every few
// seconds, at every failure and at the end. Problem i of a seed is a pure function of (seed, i),
// so a campaign continues with --start.
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstring>
#include <optional>

#include "commands.h"
#include "detmoe/compare.h"
#include "detmoe/host_problem.h"
#include "detmoe/report.h"
#include "detmoe/test_plant.h"
#include "fuzz_cases.h"
#include "gpu_inventory.h"
#include "impl_registry.h"
#include "interrupt.h"
#include "output_paths.h"
#include "problem_options.h"

namespace detmoe::cli {
namespace {

struct FuzzArgs {
  std::string impl = "megakernel";
  std::string against = "reference";
  std::vector<std::string> bitwise;  // output names
  int64_t problems = 0;
  double minutes = 0;
  uint64_t seed = 1;
  int64_t start = 0;
  int64_t shrink_steps = 30;
  std::string report_path;
  FuzzLimits limits;
  std::vector<std::string> argv;
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// What one problem came to: passed, failed (why), or refused by the implementation (a limit it
// states, e.g. a shape it does not take yet: reported as Skip with the reason, never hidden).
struct Outcome {
  enum Kind { kPass, kFail, kRefused } kind = kPass;
  std::string detail;  // why it failed or was refused; for a pass, what was not checked and why
};

bool refusal(const Status& s) {
  return s.code() == ErrorCode::kNotImplemented || s.code() == ErrorCode::kOutOfMemory;
}

// Whether token row `a_row` of `a` and token row `b_row` of `b` (tensors whose first dimension
// is the token, same row size) hold the same bytes.
bool same_token_row(const NamedTensor& a, int64_t a_row, const NamedTensor& b, int64_t b_row) {
  const size_t bytes = a.bytes.size() / static_cast<size_t>(a.shape.at(0));
  if (b.bytes.size() / static_cast<size_t>(b.shape.at(0)) != bytes) return false;
  return std::memcmp(a.bytes.data() + a_row * bytes, b.bytes.data() + b_row * bytes, bytes) == 0;
}

// The problem restricted to `tokens` (global ids, in the order given) on one rank.
HostProblem token_subset(const HostProblem& p, const std::vector<int64_t>& tokens) {
  HostProblem q = p;
  const int64_t H = p.shape.H, k = p.shape.k, n = static_cast<int64_t>(tokens.size());
  q.shape.T = n;
  q.shape.P = 1;
  q.data.shape = q.shape;
  q.seed.reset();  // not the seeded problem of its shape: the GPU paths upload it
  q.data.x.assign(static_cast<size_t>(n * H), 0);
  if (p.backward()) q.data.dout.assign(static_cast<size_t>(n * H), 0);
  q.routing.tokens = n;
  q.routing.topk_idx.assign(static_cast<size_t>(n * k), 0);
  q.routing.topk_w.assign(static_cast<size_t>(n * k), 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = tokens[static_cast<size_t>(i)];
    std::memcpy(&q.data.x[i * H], &p.data.x[t * H], H * sizeof(uint16_t));
    if (p.backward()) std::memcpy(&q.data.dout[i * H], &p.data.dout[t * H], H * sizeof(uint16_t));
    for (int64_t j = 0; j < k; ++j) {
      q.routing.topk_idx[i * k + j] = p.routing.topk_idx[t * k + j];
      q.routing.topk_w[i * k + j] = p.routing.topk_w[t * k + j];
    }
  }
  return q;
}

class Checker {
 public:
  Checker(const FuzzArgs& a, ImplEntry impl, ImplEntry against, int sms)
      : a_(a), impl_(std::move(impl)), against_(std::move(against)), bitwise_(a.bitwise), sms_(sms) {}

  Outcome check(const FuzzCase& c) const {
    auto made = make_seeded_problem(c.shape, c.spec, c.data_seed, c.backward, c.grad_precision);
    if (!made.ok()) return {Outcome::kFail, "the drawn problem is invalid (a fuzzer bug): " + made.status().to_string()};
    const HostProblem p = runnable_problem(impl_, *made);
    auto first = impl_.run(p);
    if (!first.ok())
      return {refusal(first.status()) ? Outcome::kRefused : Outcome::kFail, impl_.name + ": " + first.status().to_string()};
    int64_t nan = 0;
    for (const NamedTensor& t : *first) nan += count_nan(t);
    if (nan > 0) return {Outcome::kFail, fmt::format("{} elements left unwritten or NaN", nan)};
    // D0
    auto second = impl_.run(p);
    if (!second.ok()) return {Outcome::kFail, "rerun: " + second.status().to_string()};
    if (test_plant_enabled("fuzz-mismatch") && c.shape.T * c.shape.P > 37 && !second->front().bytes.empty())
      second->front().bytes[0] ^= 1;  // harness test: a nondeterminism above 37 tokens
    for (const BitwiseResult& b : compare_all_bitwise(*first, *second))
      if (!b.equal) return {Outcome::kFail, fmt::format("D0: {} differs on a rerun", b.name)};
    std::string notes;
    // D1
    if (impl_.run_with_knobs && sms_ > 0) {
      const LayerConfig knobs = draw_knobs(c, sms_);
      const std::string what =
          fmt::format("num_sms={} comm_sms={} overlap_rows={} save_h={} weight_grad_launch={} weight_grad_band_kb={} "
                      "weight_grad_stream={} weight_grad_deep_ring={}",
                      knobs.num_sms, knobs.comm_sms, knobs.overlap_rows, knobs.save_h,
                      to_string(knobs.weight_grad_launch), knobs.weight_grad_band_budget_kb,
                      knobs.weight_grad_stream_stores, knobs.weight_grad_deep_ring);
      auto tuned = impl_.run_with_knobs(p, knobs);
      if (!tuned.ok()) {
        if (tuned.status().code() != ErrorCode::kInvalidArgument && !refusal(tuned.status()))
          return {Outcome::kFail, fmt::format("D1 ({}): {}", what, tuned.status().to_string())};
        notes += fmt::format("; D1 not checked: {} refused: {}", what, tuned.status().message());
      } else {
        for (const BitwiseResult& b : compare_all_bitwise(*first, *tuned))
          if (!b.equal) return {Outcome::kFail, fmt::format("D1: {} differs with {}", b.name, what)};
      }
    }
    // Against the other implementation.
    if (!a_.against.empty()) {
      auto theirs = against_.run(runnable_problem(against_, p));
      if (!theirs.ok()) return {Outcome::kFail, against_.name + ": " + theirs.status().to_string()};
      for (const CompareResult& r : compare_all_with_tolerance(*first, *theirs))
        if (!r.ok()) return {Outcome::kFail, fmt::format("vs {}: {} has {} of {} elements outside the tolerance", against_.name,
                                                         r.name, r.violations, r.count)};
      for (const std::string& name : bitwise_) {
        const NamedTensor* x = find_tensor(*first, name);
        const NamedTensor* y = find_tensor(*theirs, name);
        if (x != nullptr && y != nullptr && x->bytes != y->bytes)
          return {Outcome::kFail, fmt::format("vs {}: {} is not bitwise equal", against_.name, name)};
      }
    }
    // D2: another EP size, same global problem.
    const int64_t tokens = c.shape.T * c.shape.P;
    for (int64_t P : a_.limits.ranks) {
      if (P == c.shape.P || c.shape.E % P != 0 || tokens % P != 0) continue;
      Shape s = c.shape;
      s.P = P;
      s.T = tokens / P;
      auto other = make_seeded_problem(s, c.spec, c.data_seed, c.backward, c.grad_precision);
      if (!other.ok()) return {Outcome::kFail, fmt::format("D2: P = {}: {}", P, other.status().to_string())};
      auto out = impl_.run(runnable_problem(impl_, *other));
      if (!out.ok()) {
        if (refusal(out.status())) break;
        return {Outcome::kFail, fmt::format("D2: P = {}: {}", P, out.status().to_string())};
      }
      for (const BitwiseResult& b : compare_all_bitwise(*first, *out, {"dws_gate", "dws_up", "dws_down"}))
        if (!b.equal) return {Outcome::kFail, fmt::format("D2: {} differs between P = {} and P = {}", b.name, c.shape.P, P)};
      break;  // one other P per problem
    }
    // D3: every other token, reversed, on one rank.
    if (tokens >= 2) {
      std::vector<int64_t> subset;
      for (int64_t t = tokens - 1; t >= 0; t -= 2) subset.push_back(t);
      auto out = impl_.run(token_subset(p, subset));
      if (!out.ok()) {
        if (!refusal(out.status())) return {Outcome::kFail, "D3: " + out.status().to_string()};
      } else {
        for (const char* name : {"out", "y", "d_x", "d_topk_w"}) {
          const NamedTensor* full = find_tensor(*first, name);
          const NamedTensor* part = find_tensor(*out, name);
          if (full == nullptr || part == nullptr) continue;
          for (size_t i = 0; i < subset.size(); ++i)
            if (!same_token_row(*full, subset[i], *part, static_cast<int64_t>(i)))
              return {Outcome::kFail, fmt::format("D3: {} of token {} changes when only {} of the {} tokens run, reversed",
                                                  name, subset[i], subset.size(), tokens)};
        }
      }
    }
    return {Outcome::kPass, notes};
  }

 private:
  const FuzzArgs& a_;
  ImplEntry impl_, against_;
  std::vector<std::string> bitwise_;
  int sms_;  // of the GPU the knobs are drawn for; 0 = none
};

int run_fuzz(const FuzzArgs& a) {
  if (a.problems <= 0 && a.minutes <= 0)
    throw Error(invalid_argument("fuzz: give --problems N or --minutes M (or both: whichever ends first)"));
  check_output_path("--report", a.report_path);
  const ImplEntry impl = find_impl(a.impl).value();
  const ImplEntry against = a.against.empty() ? impl : find_impl(a.against).value();
  const bool gpu = impl.name != "oracle" || against.name != "oracle";
  if (gpu)
    if (const std::string why = no_gpu_reason(); !why.empty()) {
      fmt::print(stderr, "detmoe fuzz: {}; --impl {} --against {} run on a GPU\n", why, impl.name, against.name);
      return kExitCouldNotRun;
    }
  request_graceful_interrupt();
  report::RunReport rep;
  rep.run = report::current_run_info("fuzz", a.argv);
  rep.inventory = to_report(query_gpus());
  int sms = 0;
  if (gpu && cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess) sms = 0;
  const Checker checker(a, impl, against, sms);
  const auto t0 = Clock::now();
  auto last_save = t0, last_print = t0;
  int64_t done = 0, passed = 0, failed = 0, refused = 0;
  auto save = [&](report::RunState state) {
    if (a.report_path.empty()) return;
    rep.run.state = state;
    if (state != report::RunState::kRunning) rep.run.finished_at = report::utc_now_iso8601();
    const Status s = report::save_run_report(a.report_path, rep);
    if (!s.ok()) throw Error(s);
    last_save = Clock::now();
  };
  save(report::RunState::kRunning);
  fmt::print("fuzz {} against {} — seed {}, problems {}…{}{}\n", impl.name, a.against.empty() ? "nothing" : against.name,
             a.seed, a.start, a.problems > 0 ? std::to_string(a.start + a.problems - 1) : "",
             a.minutes > 0 ? fmt::format(", at most {} min", a.minutes) : "");
  for (int64_t i = a.start;; ++i) {
    if (a.problems > 0 && done >= a.problems) break;
    if (a.minutes > 0 && seconds_since(t0) >= a.minutes * 60) break;
    if (const int sig = interrupt_signal(); sig != 0) {
      save(report::RunState::kAborted);
      die_of_signal(sig);
    }
    const FuzzCase c = draw_case(a.seed, i, a.limits);
    const auto c0 = Clock::now();
    Outcome o = checker.check(c);
    report::CheckResult r{fmt::format("fuzz/{}", i), gpu ? report::CheckTarget::gpu(0) : report::CheckTarget::cpu(),
                          report::Verdict::kPass, c.describe(), {}, 0};
    ++done;
    if (o.kind == Outcome::kPass) {
      ++passed;
      r.detail += o.detail;
    } else if (o.kind == Outcome::kRefused) {
      ++refused;
      r.verdict = report::Verdict::kSkip;
      r.detail += " — refused: " + o.detail;
      fmt::print("refused problem {} ({}): {}\n", i, c.describe(), o.detail);
    } else {
      ++failed;
      fmt::print("FAIL problem {} ({}): {}\n", i, c.describe(), o.detail);
      // Shrink: keep the first smaller problem that still fails, until none does.
      FuzzCase small = c;
      std::string why = o.detail;
      for (int64_t step = 0; step < a.shrink_steps; ++step) {
        bool smaller = false;
        for (const FuzzCase& cand : shrink_candidates(small)) {
          const Outcome co = checker.check(cand);
          if (co.kind == Outcome::kFail) {
            small = cand, why = co.detail, smaller = true;
            fmt::print("  still fails at {}: {}\n", small.describe(), why);
            break;
          }
        }
        if (!smaller) break;
      }
      const FuzzLimits& L = a.limits;
      const std::string replay = fmt::format(
          "detmoe fuzz --impl {} --against {} --seed {} --start {} --problems 1 --max-tokens {} --max-experts {} --max-k {} "
          "--max-hidden {} --max-intermediate {} --max-shared {} --ranks {}",
          impl.name, a.against.empty() ? "''" : against.name, a.seed, i, L.max_tokens, L.max_experts, L.max_k, L.max_hidden,
          L.max_intermediate, L.max_shared, fmt::join(L.ranks, ","));
      FuzzCase shown = small;
      if (!impl.has_backward) shown.backward = false;  // what ran
      fmt::print("  shrunk to: {} — {}\n  replay the problem: {}\n  the shrunk problem, for `detmoe verify --impl {}` (or "
                 "`detmoe run --write-inputs F`): {}\n",
                 small.describe(), why, replay, impl.name, shown.problem_options());
      r.verdict = report::Verdict::kFail;
      r.detail += fmt::format(" — {}; shrunk to {} ({}); replay: {}", o.detail, small.describe(), why, replay);
    }
    r.duration_s = seconds_since(c0);
    rep.checks.push_back(std::move(r));
    if (o.kind == Outcome::kFail || seconds_since(last_save) > 10) save(report::RunState::kRunning);
    if (seconds_since(last_print) > 5 || (a.problems > 0 && done == a.problems)) {
      fmt::print("fuzz: {} problems ({} passed, {} failed, {} refused), {:.1f} problems/s; last: {}\n", done, passed, failed,
                 refused, done / std::max(1e-9, seconds_since(t0)), c.describe());
      std::fflush(stdout);
      last_print = Clock::now();
    }
  }
  save(report::RunState::kFinished);
  fmt::print("fuzz {}: {} problems, {} passed, {} failed, {} refused in {:.0f} s{}\n", failed ? "FAIL" : "PASS", done, passed,
             failed, refused, seconds_since(t0), a.report_path.empty() ? "" : "; report " + a.report_path);
  if (failed > 0) return kExitCheckFailed;
  return passed == 0 && refused > 0 ? kExitCouldNotRun : kExitOk;
}

}  // namespace

void add_fuzz_command(CLI::App& app, Action& run) {
  auto a = std::make_shared<FuzzArgs>();
  CLI::App* cmd = app.add_subcommand("fuzz", "A campaign of drawn problems: D0, D2, D3 and the match with another implementation");
  cmd->add_option("--impl", a->impl, "implementation under test")->capture_default_str();
  cmd->add_option("--against", a->against, "implementation it must match within tolerance ('' = none)")->capture_default_str();
  cmd->add_option("--bitwise", a->bitwise, "outputs that must equal --against's bit for bit (e.g. out,y)")->delimiter(',');
  cmd->add_option("--problems", a->problems, "stop after N problems")->check(CLI::PositiveNumber);
  cmd->add_option("--minutes", a->minutes, "stop after M minutes (the problem running then finishes)")->check(CLI::PositiveNumber);
  cmd->add_option("--seed", a->seed, "campaign seed: problem i is a pure function of (seed, i)")->check(seed_validator());
  cmd->add_option("--start", a->start, "first problem index (to continue a campaign)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--shrink-steps", a->shrink_steps, "most shrinking steps per failure")->check(CLI::NonNegativeNumber);
  cmd->add_option("--report", a->report_path, "run report (detmoe.run/1), rewritten as the campaign goes");
  cmd->add_option("--max-tokens", a->limits.max_tokens, "largest P·T drawn")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--max-experts", a->limits.max_experts, "largest E drawn")->check(CLI::Range(1, 1024));
  cmd->add_option("--max-k", a->limits.max_k, "largest k drawn")->check(CLI::Range(1, 32));
  cmd->add_option("--max-hidden", a->limits.max_hidden, "largest H drawn (multiples of 64)")->check(CLI::Range(64, 65536));
  cmd->add_option("--max-intermediate", a->limits.max_intermediate, "largest F drawn")->check(CLI::Range(64, 65536));
  cmd->add_option("--max-shared", a->limits.max_shared, "largest Fs drawn (half the problems have none)")->check(CLI::Range(64, 65536));
  cmd->add_option("--ranks", a->limits.ranks, "EP sizes drawn (and tried for D2)")->delimiter(',')->check(CLI::Range(1, 64));
  cmd->callback([a, cmd, &run] {
    a->argv = {"detmoe", "fuzz", "--impl", a->impl, "--against", a->against, "--seed", std::to_string(a->seed), "--start",
               std::to_string(a->start)};
    if (a->problems > 0) a->argv.insert(a->argv.end(), {"--problems", std::to_string(a->problems)});
    if (a->minutes > 0) a->argv.insert(a->argv.end(), {"--minutes", fmt::format("{}", a->minutes)});
    run = [a] { return run_fuzz(*a); };
  });
}

}  // namespace detmoe::cli
