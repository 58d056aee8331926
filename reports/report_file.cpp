// Reports on disk: atomic save, load, and the incremental writer.
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "detmoe/output_file.h"
#include "detmoe/report.h"
#include "report_validation.h"

#ifndef DETMOE_VERSION
#define DETMOE_VERSION "unknown"
#endif

namespace detmoe::report {
namespace {

Status io_error(const std::string& what, const std::string& path, int err) {
  return {ErrorCode::kIoError, fmt::format("{} {}: {}", what, path, std::strerror(err))};
}

}  // namespace

std::string utc_now_iso8601() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

RunInfo current_run_info(std::string command, std::vector<std::string> command_line) {
  RunInfo info;
  info.tool_version = DETMOE_VERSION;
  if (const char* sha = std::getenv("DETMOE_GIT_SHA"); sha != nullptr) info.git_sha = sha;
  info.command = std::move(command);
  info.command_line = std::move(command_line);
  char host[256] = {};
  info.host = ::gethostname(host, sizeof host - 1) == 0 ? host : "unknown";
  info.started_at = utc_now_iso8601();
  info.state = RunState::kRunning;
  return info;
}

StatusOr<RunReport> load_run_report(const std::string& path) {
  // A directory opens as a stream and fails on the first read with "basic_filebuf::underflow".
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return Status(ErrorCode::kIoError, fmt::format("cannot read report {}: it is a directory", path));
  std::ifstream f(path, std::ios::binary);
  if (!f) return io_error("cannot open report", path, errno);
  std::ostringstream text;
  text << f.rdbuf();
  if (f.bad()) return io_error("cannot read report", path, errno);
  StatusOr<RunReport> r = parse_run_report(text.str());
  if (!r.ok()) return Status(r.status().code(), fmt::format("{}: {}", path, r.status().message()));
  return r;
}

Status save_run_report(const std::string& path, const RunReport& report) {
  DETMOE_RETURN_IF_ERROR(validate_before_write(report));
  return write_output_file(path, to_json_text(report));
}

StatusOr<RunReportWriter> RunReportWriter::open(std::string path, RunReport initial) {
  if (path.empty()) return invalid_argument("report path is empty");
  RunReportWriter w(std::move(path), RunReport{});
  DETMOE_RETURN_IF_ERROR(w.commit(std::move(initial)));
  return w;
}

Status RunReportWriter::commit(RunReport next) {
  DETMOE_RETURN_IF_ERROR(save_run_report(path_, next));
  report_ = std::move(next);
  return Status::Ok();
}

Status RunReportWriter::add_check(CheckResult check) {
  RunReport next = report_;
  next.checks.push_back(std::move(check));
  return commit(std::move(next));
}

Status RunReportWriter::add_benchmark(BenchmarkResult result) {
  RunReport next = report_;
  next.benchmarks.push_back(std::move(result));
  return commit(std::move(next));
}

Status RunReportWriter::add_golden(GoldenResult result) {
  RunReport next = report_;
  next.golden.push_back(std::move(result));
  return commit(std::move(next));
}

Status RunReportWriter::set_perf_ceiling(PerfCeiling ceiling) {
  RunReport next = report_;
  next.perf_ceiling = std::move(ceiling);
  return commit(std::move(next));
}

Status RunReportWriter::set_bandwidth(BandwidthMatrix matrix) {
  RunReport next = report_;
  next.bandwidth = std::move(matrix);
  return commit(std::move(next));
}

Status RunReportWriter::set_inventory(Inventory inventory) {
  RunReport next = report_;
  next.inventory = std::move(inventory);
  return commit(std::move(next));
}

Status RunReportWriter::finish(RunState state, std::string finished_at) {
  RunReport next = report_;
  next.run.state = state;
  next.run.finished_at = finished_at.empty() ? utc_now_iso8601() : std::move(finished_at);
  return commit(std::move(next));
}

}  // namespace detmoe::report
