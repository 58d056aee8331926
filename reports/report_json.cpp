// RunReport <-> JSON, and the two layers of validation: the checked-in schema (structure,
// types, enums, minimums) and the cross-field rules it cannot express.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <set>

#include "detmoe/report.h"
#include "json_schema_subset.h"
#include "report_validation.h"

namespace detmoe::report {

using nlohmann::json;

// ---- to_json / from_json (ADL hooks for nlohmann). from_json runs only on documents that
// passed the schema, so .at() never meets a missing required field or a wrong type.

void to_json(json& j, const RunInfo& r) {
  j = {{"tool_version", r.tool_version}, {"command", r.command}, {"command_line", r.command_line},
       {"host", r.host}, {"started_at", r.started_at}, {"state", to_string(r.state)}};
  if (!r.git_sha.empty()) j["git_sha"] = r.git_sha;
  if (!r.finished_at.empty()) j["finished_at"] = r.finished_at;
}
void from_json(const json& j, RunInfo& r) {
  r.tool_version = j.at("tool_version");
  r.git_sha = j.value("git_sha", "");
  r.command = j.at("command");
  r.command_line = j.at("command_line").get<std::vector<std::string>>();
  r.host = j.at("host");
  r.started_at = j.at("started_at");
  r.finished_at = j.value("finished_at", "");
  r.state = parse_run_state(j.at("state").get<std::string>()).value();
}

void to_json(json& j, const GpuRecord& g) {
  j = {{"index", g.index}, {"name", g.name}, {"uuid", g.uuid}, {"pci_bus_id", g.pci_bus_id},
       {"sm_count", g.sm_count}, {"memory_bytes", g.memory_bytes}};
  if (!g.compute_capability.empty()) j["compute_capability"] = g.compute_capability;
}
void from_json(const json& j, GpuRecord& g) {
  g.index = j.at("index");
  g.name = j.at("name");
  g.uuid = j.at("uuid");
  g.pci_bus_id = j.at("pci_bus_id");
  g.sm_count = j.at("sm_count");
  g.compute_capability = j.value("compute_capability", "");
  g.memory_bytes = j.at("memory_bytes");
}

void to_json(json& j, const Inventory& inv) {
  j = {{"driver_version", inv.driver_version}, {"runtime_version", inv.runtime_version}, {"gpus", inv.gpus}};
  if (!inv.unavailable_reason.empty()) j["unavailable_reason"] = inv.unavailable_reason;
}
void from_json(const json& j, Inventory& inv) {
  inv.driver_version = j.at("driver_version");
  inv.runtime_version = j.at("runtime_version");
  inv.unavailable_reason = j.value("unavailable_reason", "");
  inv.gpus = j.at("gpus").get<std::vector<GpuRecord>>();
}

void to_json(json& j, const CheckTarget& t) { j = {{"kind", to_string(t.kind)}, {"gpus", t.gpus}}; }
void from_json(const json& j, CheckTarget& t) {
  t.kind = parse_target_kind(j.at("kind").get<std::string>()).value();
  t.gpus = j.at("gpus").get<std::vector<int>>();
}

void to_json(json& j, const CheckResult& c) {
  j = {{"name", c.name}, {"target", c.target}, {"verdict", to_string(c.verdict)}, {"detail", c.detail},
       {"duration_s", c.duration_s}};
  if (c.severity) j["severity"] = to_string(*c.severity);
}
void from_json(const json& j, CheckResult& c) {
  c.name = j.at("name");
  c.target = j.at("target");
  c.verdict = parse_verdict(j.at("verdict").get<std::string>()).value();
  c.detail = j.at("detail");
  c.severity.reset();
  if (j.contains("severity")) c.severity = parse_severity(j.at("severity").get<std::string>()).value();
  c.duration_s = j.at("duration_s");
}

void to_json(json& j, const BenchmarkResult& b) {
  j = {{"impl", b.impl}, {"shape", b.shape}, {"routing", b.routing}, {"pass", to_string(b.pass)},
       {"ep_ranks", b.ep_ranks}, {"median_ms", b.median_ms}, {"tflops", b.tflops}, {"repetitions", b.repetitions}};
  if (!b.baseline.empty()) j["baseline"] = b.baseline;
  if (b.ratio_to_baseline) j["ratio_to_baseline"] = *b.ratio_to_baseline;
  if (b.fraction_of_ceiling) j["fraction_of_ceiling"] = *b.fraction_of_ceiling;
  if (b.p25_ms) j["p25_ms"] = *b.p25_ms;
  if (b.p75_ms) j["p75_ms"] = *b.p75_ms;
  if (b.joules_per_step) j["joules_per_step"] = *b.joules_per_step;
  if (b.avg_watts) j["avg_watts"] = *b.avg_watts;
}
void from_json(const json& j, BenchmarkResult& b) {
  b.impl = j.at("impl");
  b.baseline = j.value("baseline", "");
  b.shape = j.at("shape");
  b.routing = j.at("routing");
  b.pass = parse_bench_pass(j.at("pass").get<std::string>()).value();
  b.ep_ranks = j.at("ep_ranks");
  b.median_ms = j.at("median_ms");
  b.tflops = j.at("tflops");
  b.ratio_to_baseline.reset();
  b.fraction_of_ceiling.reset();
  if (j.contains("ratio_to_baseline")) b.ratio_to_baseline = j.at("ratio_to_baseline").get<double>();
  if (j.contains("fraction_of_ceiling")) b.fraction_of_ceiling = j.at("fraction_of_ceiling").get<double>();
  auto optional_number = [&](const char* key) {
    return j.contains(key) ? std::optional<double>(j.at(key).get<double>()) : std::nullopt;
  };
  b.p25_ms = optional_number("p25_ms");
  b.p75_ms = optional_number("p75_ms");
  b.joules_per_step = optional_number("joules_per_step");
  b.avg_watts = optional_number("avg_watts");
  b.repetitions = j.at("repetitions");
}

void to_json(json& j, const PerfCeiling& c) { j = {{"name", c.name}, {"tflops", c.tflops}}; }
void from_json(const json& j, PerfCeiling& c) {
  c.name = j.at("name");
  c.tflops = j.at("tflops");
}

void to_json(json& j, const BandwidthMatrix& m) {
  json rows = json::array();
  for (const auto& row : m.gbps) {
    json r = json::array();
    for (const auto& cell : row) r.push_back(cell ? json(*cell) : json(nullptr));
    rows.push_back(std::move(r));
  }
  j = {{"method", m.method}, {"gpus", m.gpus}, {"gbps", std::move(rows)}};
  if (m.link_rate_gbps) j["link_rate_gbps"] = *m.link_rate_gbps;
}
void from_json(const json& j, BandwidthMatrix& m) {
  m.method = j.at("method");
  m.link_rate_gbps.reset();
  if (j.contains("link_rate_gbps")) m.link_rate_gbps = j.at("link_rate_gbps").get<double>();
  m.gpus = j.at("gpus").get<std::vector<int>>();
  m.gbps.clear();
  for (const json& row : j.at("gbps")) {
    auto& r = m.gbps.emplace_back();
    for (const json& cell : row) r.push_back(cell.is_null() ? std::nullopt : std::optional<double>(cell.get<double>()));
  }
}

void to_json(json& j, const GoldenResult& g) {
  j = {{"case", g.case_name}, {"output", g.output}, {"match", g.match}};
  if (!g.expected_hash.empty()) j["expected_hash"] = g.expected_hash;
  if (!g.actual_hash.empty()) j["actual_hash"] = g.actual_hash;
  if (g.first_difference) {
    const GoldenDifference& d = *g.first_difference;
    json fd = {{"index", d.index}, {"expected", d.expected}, {"actual", d.actual}};
    if (!d.coords.empty()) fd["coords"] = d.coords;
    j["first_difference"] = std::move(fd);
  }
}
void from_json(const json& j, GoldenResult& g) {
  g.case_name = j.at("case");
  g.output = j.at("output");
  g.match = j.at("match");
  g.expected_hash = j.value("expected_hash", "");
  g.actual_hash = j.value("actual_hash", "");
  g.first_difference.reset();
  if (j.contains("first_difference")) {
    const json& fd = j.at("first_difference");
    GoldenDifference d;
    d.index = fd.at("index");
    if (fd.contains("coords")) d.coords = fd.at("coords").get<std::vector<std::int64_t>>();
    d.expected = fd.at("expected");
    d.actual = fd.at("actual");
    g.first_difference = std::move(d);
  }
}

// ---- validation

namespace {

const JsonSchemaSubset& run_schema() {
  // The embedded schema is part of the build; if it does not compile, no report can be trusted.
  static const JsonSchemaSubset schema = JsonSchemaSubset::compile(json::parse(run_schema_text())).value();
  return schema;
}

class ConsistencyChecker {
 public:
  std::vector<SchemaViolation> out;

  void run(const RunReport& r) {
    std::set<int> known;
    for (std::size_t i = 0; i < r.inventory.gpus.size(); ++i) {
      const int index = r.inventory.gpus[i].index;
      if (!known.insert(index).second)
        add(fmt::format("$.inventory.gpus[{}].index", i), fmt::format("GPU index {} is listed twice", index));
    }
    for (std::size_t i = 0; i < r.checks.size(); ++i) check_check(r.checks[i], fmt::format("$.checks[{}]", i), known);
    for (std::size_t i = 0; i < r.benchmarks.size(); ++i) check_bench(r.benchmarks[i], fmt::format("$.benchmarks[{}]", i));
    if (r.perf_ceiling) {
      finite(r.perf_ceiling->tflops, "$.perf_ceiling.tflops");
      if (!(r.perf_ceiling->tflops > 0)) add("$.perf_ceiling.tflops", fmt::format("{} must be positive", r.perf_ceiling->tflops));
    }
    if (r.bandwidth) check_bandwidth(*r.bandwidth, known);
    for (std::size_t i = 0; i < r.golden.size(); ++i) {
      const GoldenResult& g = r.golden[i];
      if (g.match && g.first_difference)
        add(fmt::format("$.golden[{}].first_difference", i), "a matching output cannot have a first difference");
    }
  }

 private:
  void add(std::string path, std::string message) { out.push_back({std::move(path), std::move(message)}); }
  void finite(double v, const std::string& path) {
    if (!std::isfinite(v)) add(path, fmt::format("{} is not a finite number", v));
  }
  void nonempty(const std::string& s, const std::string& path) {
    if (s.empty()) add(path, "must not be empty");
  }
  void gpu_exists(int index, const std::set<int>& known, const std::string& path) {
    if (!known.count(index)) add(path, fmt::format("GPU {} is not in $.inventory.gpus", index));
  }

  void check_check(const CheckResult& c, const std::string& at, const std::set<int>& known) {
    nonempty(c.name, at + ".name");
    finite(c.duration_s, at + ".duration_s");
    if (c.duration_s < 0) add(at + ".duration_s", fmt::format("{} is negative", c.duration_s));
    const auto& g = c.target.gpus;
    const std::string gp = at + ".target.gpus";
    const std::size_t want = c.target.kind == TargetKind::kCpu ? 0 : c.target.kind == TargetKind::kGpu ? 1 : 2;
    if (c.target.kind != TargetKind::kNode && g.size() != want)
      add(gp, fmt::format("a {} target must list {} GPU(s), not {}", to_string(c.target.kind), want, g.size()));
    if (std::set<int>(g.begin(), g.end()).size() != g.size()) add(gp, "lists a GPU twice");
    for (std::size_t i = 0; i < g.size(); ++i) gpu_exists(g[i], known, fmt::format("{}[{}]", gp, i));
  }

  void check_bench(const BenchmarkResult& b, const std::string& at) {
    nonempty(b.impl, at + ".impl");
    nonempty(b.shape, at + ".shape");
    finite(b.median_ms, at + ".median_ms");
    finite(b.tflops, at + ".tflops");
    if (b.median_ms < 0) add(at + ".median_ms", fmt::format("{} is negative", b.median_ms));
    if (b.tflops < 0) add(at + ".tflops", fmt::format("{} is negative", b.tflops));
    if (b.ratio_to_baseline) finite(*b.ratio_to_baseline, at + ".ratio_to_baseline");
    if (b.fraction_of_ceiling) finite(*b.fraction_of_ceiling, at + ".fraction_of_ceiling");
    if (b.p25_ms) finite(*b.p25_ms, at + ".p25_ms");
    if (b.p75_ms) finite(*b.p75_ms, at + ".p75_ms");
    if (b.joules_per_step) finite(*b.joules_per_step, at + ".joules_per_step");
    if (b.avg_watts) finite(*b.avg_watts, at + ".avg_watts");
    if (b.p25_ms && b.p75_ms && *b.p25_ms > *b.p75_ms) add(at + ".p25_ms", "above p75_ms");
    if (b.ratio_to_baseline && b.baseline.empty()) add(at + ".ratio_to_baseline", "given without a baseline name");
    if (b.repetitions < 1) add(at + ".repetitions", fmt::format("{} is below 1", b.repetitions));
    if (b.ep_ranks < 1) add(at + ".ep_ranks", fmt::format("{} is below 1", b.ep_ranks));
  }

  void check_bandwidth(const BandwidthMatrix& m, const std::set<int>& known) {
    if (m.link_rate_gbps) finite(*m.link_rate_gbps, "$.bandwidth.link_rate_gbps");
    for (std::size_t i = 0; i < m.gpus.size(); ++i) gpu_exists(m.gpus[i], known, fmt::format("$.bandwidth.gpus[{}]", i));
    if (std::set<int>(m.gpus.begin(), m.gpus.end()).size() != m.gpus.size()) add("$.bandwidth.gpus", "lists a GPU twice");
    if (m.gbps.size() != m.gpus.size())
      add("$.bandwidth.gbps", fmt::format("has {} rows for {} GPUs", m.gbps.size(), m.gpus.size()));
    for (std::size_t i = 0; i < m.gbps.size(); ++i) {
      if (m.gbps[i].size() != m.gpus.size())
        add(fmt::format("$.bandwidth.gbps[{}]", i), fmt::format("has {} columns for {} GPUs", m.gbps[i].size(), m.gpus.size()));
      for (std::size_t j = 0; j < m.gbps[i].size(); ++j) {
        if (!m.gbps[i][j]) continue;
        const std::string p = fmt::format("$.bandwidth.gbps[{}][{}]", i, j);
        finite(*m.gbps[i][j], p);
        if (*m.gbps[i][j] < 0) add(p, fmt::format("{} is negative", *m.gbps[i][j]));
      }
    }
  }
};

std::string describe(const std::vector<SchemaViolation>& v) {
  std::string s;
  const std::size_t shown = std::min<std::size_t>(v.size(), 10);
  for (std::size_t i = 0; i < shown; ++i) s += fmt::format("{}{}: {}", i ? "; " : "", v[i].path, v[i].message);
  if (v.size() > shown) s += fmt::format("; and {} more", v.size() - shown);
  return s;
}

RunReport from_valid_json(const json& doc) {
  RunReport r;
  r.run = doc.at("run");
  r.inventory = doc.at("inventory");
  r.checks = doc.at("checks").get<std::vector<CheckResult>>();
  r.benchmarks = doc.at("benchmarks").get<std::vector<BenchmarkResult>>();
  if (doc.contains("perf_ceiling")) r.perf_ceiling = doc.at("perf_ceiling").get<PerfCeiling>();
  if (doc.contains("bandwidth")) r.bandwidth = doc.at("bandwidth").get<BandwidthMatrix>();
  r.golden = doc.at("golden").get<std::vector<GoldenResult>>();
  return r;
}

}  // namespace

std::vector<SchemaViolation> check_consistency(const RunReport& report) {
  ConsistencyChecker c;
  c.run(report);
  return std::move(c.out);
}

std::vector<SchemaViolation> validate_run_json(const json& doc, std::size_t limit) {
  // A different version is one finding, not dozens of misleading ones.
  if (doc.is_object() && doc.contains("schema") && doc["schema"].is_string() && doc["schema"] != kRunSchemaId)
    return {{"$.schema", fmt::format("\"{}\" is not a schema this build reads (it reads \"{}\")",
                                     doc["schema"].get<std::string>(), kRunSchemaId)}};
  std::vector<SchemaViolation> v = run_schema().validate(doc, limit);
  if (!v.empty()) return v;
  try {
    v = check_consistency(from_valid_json(doc));
  } catch (const std::exception& e) {  // the schema let through what from_json cannot read: a bug here
    v.push_back({"$", fmt::format("valid by the schema but unreadable: {}", e.what())});
  }
  if (v.size() > limit) v.resize(limit);
  return v;
}

json to_json(const RunReport& r) {
  json j = {{"schema", kRunSchemaId}, {"run", r.run}, {"inventory", r.inventory}, {"checks", r.checks},
            {"benchmarks", r.benchmarks}, {"golden", r.golden}};
  if (r.perf_ceiling) j["perf_ceiling"] = *r.perf_ceiling;
  if (r.bandwidth) j["bandwidth"] = *r.bandwidth;
  return j;
}

StatusOr<RunReport> run_report_from_json(const json& doc) {
  const std::vector<SchemaViolation> v = validate_run_json(doc);
  if (!v.empty()) return invalid_argument(fmt::format("not a valid {} report: {}", kRunSchemaId, describe(v)));
  return from_valid_json(doc);
}

std::string to_json_text(const RunReport& report) {
  return to_json(report).dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

StatusOr<RunReport> parse_run_report(std::string_view text) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    return invalid_argument(fmt::format("report is not JSON: {}", e.what()));
  }
  return run_report_from_json(doc);
}

// Used by the writer: the same two layers, on the in-memory report, before anything is written.
Status validate_before_write(const RunReport& report) {
  std::vector<SchemaViolation> v = check_consistency(report);
  if (v.empty()) v = run_schema().validate(to_json(report));
  if (v.empty()) return Status::Ok();
  return invalid_argument(fmt::format("refusing to write an invalid report: {}", describe(v)));
}

}  // namespace detmoe::report
