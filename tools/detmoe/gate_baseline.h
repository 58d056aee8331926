// The gate's baseline file (schema detmoe.gate-baseline/1), read strictly: an unknown key at any
// level, a value of the wrong type, an empty list, an out-of-range number, or a baseline that
// selects no check is a usage error naming the file, the key path and the value. A lenient
// reader let a misspelt section yield "0 checks, PASS" — and `git bisect run` call every commit
// good.
//
//   {"schema": "detmoe.gate-baseline/1", "comment": "...",
//    "golden":      {"impls": [..], "cases": "golden/cases.json", "hashes": "golden/hashes", "store": "DIR", "comment": ".."},
//    "accuracy":    {"impls": [..], "cases": ["case", ..], "cases_file": "golden/cases.json", "comment": ".."},
//    "performance": {"suites": [{"binary": "perf/detmoe_perf_layer", "args": [..], "filter": "regex",
//                                "stored": "results.json", "max_slowdown": 0.05, "repeats": 3,
//                                "min_time": 0.2, "timeout_s": 900, "comment": ".."}], "comment": ".."}}
// Relative paths are taken from the baseline's folder; the cases files default to the data root's.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "detmoe/status.h"
#include "golden/golden.h"

namespace detmoe::cli {

struct GoldenGateSpec {
  std::vector<std::string> impls;
  std::string cases_path, hashes_dir, store_dir;
  std::vector<golden::GoldenCase> cases;  // the cases file's, loaded
};

struct AccuracyGateSpec {
  std::vector<std::string> impls;
  std::vector<golden::GoldenCase> cases;  // those named, in the order named
  std::string cases_path;
};

struct PerformanceSuite {
  std::string binary;  // as written (relative to the build folder, or absolute)
  std::vector<std::string> args;
  std::string filter = ".";
  std::string stored_path;  // resolved
  double max_slowdown = 0.05;
  int repeats = 3;
  double min_time = 0.2;
  double timeout_s = 900;  // bounds each run of the binary
};

struct GateBaseline {
  std::string path;
  std::optional<GoldenGateSpec> golden;
  std::optional<AccuracyGateSpec> accuracy;
  std::vector<PerformanceSuite> suites;
};

// kIoError when the file (or a cases file it names) cannot be read; kInvalidArgument for
// everything the file says wrongly.
StatusOr<GateBaseline> load_gate_baseline(const std::string& path);

}  // namespace detmoe::cli
