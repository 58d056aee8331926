// Run reports: one JSON document per run of a `detmoe` command (schema "detmoe.run/1"), written
// incrementally while the run goes, rendered afterwards to a self-contained HTML page and a
// Markdown summary.
//
// The JSON Schema in reports/schema/run-v1.schema.json is the contract; it is compiled into the
// library and every document is checked against it (and against the cross-field rules it cannot
// express) before it is written and after it is read, so a report this library writes is one it
// can read. Changing a field's meaning, or adding one, makes "detmoe.run/2": a reader accepts only
// the version it knows and says so, instead of misreading a newer document (DCGM's JSON had no
// stable schema and its consumers paid for it).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "detmoe/status.h"

namespace detmoe::report {

inline constexpr std::string_view kRunSchemaId = "detmoe.run/1";

// DCGM's verdicts. Skip is for a check that does not apply (no GPU present, level too low) and
// its detail says why. "Could not run" where the check applies depends on the question asked:
// `accept` judges a node, so a node that cannot run a check fails it (Fail); `gate` judges a
// commit, so a check the machine cannot run is Skip with "could not run: …" and the gate exits
// 3, never blaming the commit for its environment (ci/bisect.sh maps 3 to skip, 125).
enum class Verdict { kPass, kFail, kSkip, kWarn };
// What an operator should do about a failed check (after DCGM's error severities).
enum class Severity { kMonitor, kRetry, kReset, kConfig, kTriage, kIsolate };
// A crashed run leaves "running" in its file: the reader can tell it never finished.
enum class RunState { kRunning, kFinished, kAborted };
enum class TargetKind { kCpu, kGpu, kPair, kNode };
enum class BenchPass { kForward, kForwardBackward };

const char* to_string(Verdict v);        // "Pass" | "Fail" | "Skip" | "Warn"
const char* to_string(Severity s);       // "monitor" | "retry" | "reset" | "config" | "triage" | "isolate"
const char* to_string(RunState s);       // "running" | "finished" | "aborted"
const char* to_string(TargetKind k);     // "cpu" | "gpu" | "pair" | "node"
const char* to_string(BenchPass p);      // "fwd" | "fwd+bwd"
StatusOr<Verdict> parse_verdict(std::string_view s);
StatusOr<Severity> parse_severity(std::string_view s);
StatusOr<RunState> parse_run_state(std::string_view s);
StatusOr<TargetKind> parse_target_kind(std::string_view s);
StatusOr<BenchPass> parse_bench_pass(std::string_view s);

struct RunInfo {
  std::string tool_version;
  std::string git_sha;                    // empty when not given
  std::string command;                    // the subcommand: "accept", "bench", ...
  std::vector<std::string> command_line;  // argv as given
  std::string host;
  std::string started_at;                 // ISO 8601 UTC, "2025-12-02T10:17:36Z"
  std::string finished_at;                // empty while running
  RunState state = RunState::kRunning;
  bool operator==(const RunInfo&) const = default;
};

struct GpuRecord {
  int index = 0;
  std::string name, uuid, pci_bus_id;
  int sm_count = 0;
  std::string compute_capability;  // "9.0"; empty when unknown
  std::uint64_t memory_bytes = 0;
  bool operator==(const GpuRecord&) const = default;
};

struct Inventory {
  std::string driver_version, runtime_version;  // "13.0"; empty when there is no driver
  std::string unavailable_reason;               // why there are no GPUs, when gpus is empty
  std::vector<GpuRecord> gpus;
  bool operator==(const Inventory&) const = default;
};

// What a check judged: the CPU, one GPU, an ordered pair (source, destination), or the node as a
// whole (all GPUs together, listed).
struct CheckTarget {
  TargetKind kind = TargetKind::kCpu;
  std::vector<int> gpus;  // cpu: none, gpu: 1, pair: 2 distinct, node: any
  static CheckTarget cpu() { return {TargetKind::kCpu, {}}; }
  static CheckTarget gpu(int index) { return {TargetKind::kGpu, {index}}; }
  static CheckTarget pair(int from, int to) { return {TargetKind::kPair, {from, to}}; }
  static CheckTarget node(std::vector<int> gpus) { return {TargetKind::kNode, std::move(gpus)}; }
  std::string to_string() const;  // "cpu", "gpu3", "gpu0→gpu1", "node"
  bool operator==(const CheckTarget&) const = default;
};

struct CheckResult {
  std::string name;
  CheckTarget target;
  Verdict verdict = Verdict::kSkip;
  std::string detail;
  std::optional<Severity> severity;
  double duration_s = 0;
  bool operator==(const CheckResult&) const = default;
};

// One measured configuration. Baselines are rows of their own (impl "torch-grouped-mm", no
// baseline); an implementation's row names the baseline it was measured against in the same run.
struct BenchmarkResult {
  std::string impl;
  std::string baseline;  // empty when this row is not compared to another
  std::string shape;     // a named shape ("qwen3-30b-a3b") or Shape::to_string()
  std::string routing;   // RoutingSpec::to_string()
  BenchPass pass = BenchPass::kForward;
  int ep_ranks = 1;
  double median_ms = 0;
  double tflops = 0;
  std::optional<double> ratio_to_baseline;    // this row's TFLOP/s / the baseline's
  std::optional<double> fraction_of_ceiling;  // tflops / perf_ceiling.tflops
  int repetitions = 1;
  // Spread and energy, where the run measured them: quartiles of the step times (a bimodal step
  // time shows as a p25–p75 gap the median hides), NVML joules per step and average watts.
  std::optional<double> p25_ms, p75_ms, joules_per_step, avg_watts;
  bool operator==(const BenchmarkResult&) const = default;
};

struct PerfCeiling {
  std::string name;  // how it was measured: "cuBLAS bf16 GEMM 8192³"
  double tflops = 0;
  bool operator==(const PerfCeiling&) const = default;
};

// Directed GB/s: gbps[i][j] is from gpus[i] to gpus[j]; nullopt where not measured (the diagonal).
struct BandwidthMatrix {
  std::string method;  // "ncclSend/Recv 256 MiB, median of 5"
  std::optional<double> link_rate_gbps;  // nominal per-direction rate, for the colour scale
  std::vector<int> gpus;
  std::vector<std::vector<std::optional<double>>> gbps;
  bool operator==(const BandwidthMatrix&) const = default;
};

// Values as printed ("0.50390625", "nan"): a mismatch is often a NaN, which JSON cannot hold.
struct GoldenDifference {
  std::int64_t index = 0;              // flat element index
  std::vector<std::int64_t> coords;    // the same, per dimension (may be empty)
  std::string expected, actual;
  bool operator==(const GoldenDifference&) const = default;
};

struct GoldenResult {
  std::string case_name;
  std::string output;  // "out", "d_x", ...
  bool match = false;
  std::string expected_hash, actual_hash;
  std::optional<GoldenDifference> first_difference;
  bool operator==(const GoldenResult&) const = default;
};

struct RunReport {
  RunInfo run;
  Inventory inventory;
  std::vector<CheckResult> checks;
  std::vector<BenchmarkResult> benchmarks;
  std::optional<PerfCeiling> perf_ceiling;
  std::optional<BandwidthMatrix> bandwidth;
  std::vector<GoldenResult> golden;
  bool operator==(const RunReport&) const = default;
};

// tool_version, host, started_at (now, UTC) and git_sha (env DETMOE_GIT_SHA, if set) filled in.
RunInfo current_run_info(std::string command, std::vector<std::string> command_line);
std::string utc_now_iso8601();

// ---- JSON --------------------------------------------------------------------------------

// One problem found in a document, at a JSONPath-style location ("$.checks[2].verdict").
struct SchemaViolation {
  std::string path;
  std::string message;
};

// The checked-in JSON Schema, as compiled into the library.
const std::string& run_schema_text();
// Every schema violation (up to `limit`), then the cross-field rules. Empty = valid.
std::vector<SchemaViolation> validate_run_json(const nlohmann::json& doc, std::size_t limit = 50);
// Rules JSON Schema cannot say: finite numbers, target arity, GPU indices that exist, a square
// bandwidth matrix. Applied before writing too.
std::vector<SchemaViolation> check_consistency(const RunReport& report);

nlohmann::json to_json(const RunReport& report);
// Validates first; the Status lists the violations with their paths.
StatusOr<RunReport> run_report_from_json(const nlohmann::json& doc);
// Pretty-printed JSON; invalid UTF-8 in strings is replaced (U+FFFD), never an exception.
std::string to_json_text(const RunReport& report);
StatusOr<RunReport> parse_run_report(std::string_view text);
StatusOr<RunReport> load_run_report(const std::string& path);
// The shards of one campaign as one report: checks, benchmarks and golden results in the order
// given; run info of the first, started at the earliest start and finished at the latest finish
// (aborted if any shard was, running if any still is). Refused (InvalidArgument naming the
// shard): another command, commit, tool version, inventory, perf ceiling or bandwidth matrix,
// or a check (name and target) already in an earlier shard (overlapping shards).
StatusOr<RunReport> merge_run_reports(std::span<const RunReport> shards);
// Atomic: writes `path`.tmp.<pid> and renames it over `path`, so a reader (or a crash) sees the
// old document or the new one, never half of one. Refuses a report that would not validate.
Status save_run_report(const std::string& path, const RunReport& report);

// Keeps the report on disk current while a run goes: every add rewrites the file atomically, so
// a crash loses nothing already added. The file says "running" until finish().
class RunReportWriter {
 public:
  static StatusOr<RunReportWriter> open(std::string path, RunReport initial);
  Status add_check(CheckResult check);
  Status add_benchmark(BenchmarkResult result);
  Status add_golden(GoldenResult result);
  Status set_perf_ceiling(PerfCeiling ceiling);
  Status set_bandwidth(BandwidthMatrix matrix);
  Status set_inventory(Inventory inventory);
  // Records the end state and time (now, when `finished_at` is empty).
  Status finish(RunState state = RunState::kFinished, std::string finished_at = {});
  const RunReport& report() const { return report_; }
  const std::string& path() const { return path_; }

 private:
  RunReportWriter(std::string path, RunReport report) : path_(std::move(path)), report_(std::move(report)) {}
  // Validates and writes `next`; adopts it only when the write succeeded.
  Status commit(RunReport next);
  std::string path_;
  RunReport report_;
};

// ---- rendering ---------------------------------------------------------------------------

// One HTML file: inline CSS and SVG, no script, no external resource (its Content-Security-Policy
// forbids both, so a browser reports any that slips in). Every string from the report is escaped.
std::string render_html(const RunReport& report);
// The same tables in GitHub-flavoured Markdown (no plots).
std::string render_markdown(const RunReport& report);

}  // namespace detmoe::report
