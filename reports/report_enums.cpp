// Names of the report enums as they appear in JSON, and back.
#include <fmt/format.h>

#include <array>
#include <utility>

#include "detmoe/enum_names.h"
#include "detmoe/report.h"

namespace detmoe::report {

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "Pass";
    case Verdict::kFail: return "Fail";
    case Verdict::kSkip: return "Skip";
    case Verdict::kWarn: return "Warn";
  }
  return "?";
}

const char* to_string(Severity s) {
  switch (s) {
    case Severity::kMonitor: return "monitor";
    case Severity::kRetry: return "retry";
    case Severity::kReset: return "reset";
    case Severity::kConfig: return "config";
    case Severity::kTriage: return "triage";
    case Severity::kIsolate: return "isolate";
  }
  return "?";
}

const char* to_string(RunState s) {
  switch (s) {
    case RunState::kRunning: return "running";
    case RunState::kFinished: return "finished";
    case RunState::kAborted: return "aborted";
  }
  return "?";
}

const char* to_string(TargetKind k) {
  switch (k) {
    case TargetKind::kCpu: return "cpu";
    case TargetKind::kGpu: return "gpu";
    case TargetKind::kPair: return "pair";
    case TargetKind::kNode: return "node";
  }
  return "?";
}

const char* to_string(BenchPass p) {
  switch (p) {
    case BenchPass::kForward: return "fwd";
    case BenchPass::kForwardBackward: return "fwd+bwd";
  }
  return "?";
}

StatusOr<Verdict> parse_verdict(std::string_view s) {
  return parse_name(s, std::array{Verdict::kPass, Verdict::kFail, Verdict::kSkip, Verdict::kWarn}, "verdict");
}
StatusOr<Severity> parse_severity(std::string_view s) {
  return parse_name(s,
                    std::array{Severity::kMonitor, Severity::kRetry, Severity::kReset, Severity::kConfig, Severity::kTriage,
                               Severity::kIsolate},
                    "severity");
}
StatusOr<RunState> parse_run_state(std::string_view s) {
  return parse_name(s, std::array{RunState::kRunning, RunState::kFinished, RunState::kAborted}, "run state");
}
StatusOr<TargetKind> parse_target_kind(std::string_view s) {
  return parse_name(s, std::array{TargetKind::kCpu, TargetKind::kGpu, TargetKind::kPair, TargetKind::kNode}, "target kind");
}
StatusOr<BenchPass> parse_bench_pass(std::string_view s) {
  return parse_name(s, std::array{BenchPass::kForward, BenchPass::kForwardBackward}, "benchmark pass");
}

std::string CheckTarget::to_string() const {
  switch (kind) {
    case TargetKind::kCpu: return "cpu";
    case TargetKind::kGpu: return gpus.size() == 1 ? fmt::format("gpu{}", gpus[0]) : "gpu?";
    case TargetKind::kPair: return gpus.size() == 2 ? fmt::format("gpu{}→gpu{}", gpus[0], gpus[1]) : "pair?";
    case TargetKind::kNode: return "node";
  }
  return "?";
}

}  // namespace detmoe::report
