#include "gate_baseline.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "data_paths.h"
#include "impl_registry.h"

namespace detmoe::cli {
namespace {

using nlohmann::json;

// Every complaint names the file, the key path and the offending value.
struct Reader {
  std::string file, base_dir;

  [[noreturn]] void fail(const std::string& key, const json& value, const std::string& why) const {
    std::string shown = value.dump();
    if (shown.size() > 80) shown = shown.substr(0, 77) + "...";
    throw Error(invalid_argument(fmt::format("--baseline {}: {} = {}: {}", file, key, shown, why)));
  }

  void only_keys(const std::string& key, const json& obj, std::initializer_list<const char*> allowed) const {
    if (!obj.is_object()) fail(key.empty() ? "(document)" : key, obj, "must be a JSON object");
    for (const auto& [k, v] : obj.items())
      if (std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return k == a; }))
        fail(key.empty() ? k : key + "." + k, v,
             fmt::format("unknown key (allowed here: {})", fmt::join(allowed.begin(), allowed.end(), ", ")));
  }

  std::string string(const std::string& key, const json& v) const {
    if (!v.is_string()) fail(key, v, "must be a string");
    if (v.get<std::string>().empty()) fail(key, v, "must not be empty");
    return v.get<std::string>();
  }

  std::vector<std::string> strings(const std::string& key, const json& v, bool non_empty) const {
    if (!v.is_array()) fail(key, v, "must be a list of strings");
    if (non_empty && v.empty()) fail(key, v, "must not be empty: an empty list checks nothing");
    std::vector<std::string> out;
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string s = string(fmt::format("{}[{}]", key, i), v[i]);
      if (std::find(out.begin(), out.end(), s) != out.end()) fail(fmt::format("{}[{}]", key, i), v[i], "listed twice");
      out.push_back(s);
    }
    return out;
  }

  double number(const std::string& key, const json& v, double lo_excl, double hi_excl) const {
    if (!v.is_number()) fail(key, v, "must be a number");
    const double d = v.get<double>();
    if (!(d > lo_excl && d < hi_excl)) fail(key, v, fmt::format("must be in ({:g}, {:g})", lo_excl, hi_excl));
    return d;
  }

  std::string path(const std::string& key, const json& v) const {
    const std::string p = string(key, v);
    return p.front() == '/' ? p : base_dir + "/" + p;
  }

  void impls(const std::string& key, const std::vector<std::string>& names, const json& v) const {
    const std::vector<std::string> known = impl_names();
    for (size_t i = 0; i < names.size(); ++i)
      if (std::find(known.begin(), known.end(), names[i]) == known.end())
        fail(fmt::format("{}[{}]", key, i), v[i], fmt::format("unknown implementation (known: {})", fmt::join(known, ", ")));
  }
};

std::vector<golden::GoldenCase> cases_of(const Reader& r, const std::string& key, const std::string& path) {
  auto cases = golden::load_cases(path);
  if (!cases.ok())
    throw Error({cases.status().code(), fmt::format("--baseline {}: {}: {}", r.file, key, cases.status().message())});
  return *cases;
}

GoldenGateSpec read_golden(const Reader& r, const json& j) {
  r.only_keys("golden", j, {"impls", "cases", "hashes", "store", "comment"});
  if (!j.contains("impls")) r.fail("golden.impls", nullptr, "missing: the implementations whose bits to check");
  GoldenGateSpec s;
  s.impls = r.strings("golden.impls", j["impls"], true);
  r.impls("golden.impls", s.impls, j["impls"]);
  s.cases_path = j.contains("cases") ? r.path("golden.cases", j["cases"]) : data_path("golden/cases.json");
  s.hashes_dir = j.contains("hashes") ? r.path("golden.hashes", j["hashes"]) : data_path("golden/hashes");
  if (j.contains("store")) s.store_dir = r.path("golden.store", j["store"]);
  if (j.contains("comment")) r.string("golden.comment", j["comment"]);
  s.cases = cases_of(r, "golden.cases", s.cases_path);
  for (size_t i = 0; i < s.impls.size(); ++i)
    if (std::none_of(s.cases.begin(), s.cases.end(),
                     [&](const auto& c) { return std::find(c.impls.begin(), c.impls.end(), s.impls[i]) != c.impls.end(); }))
      r.fail(fmt::format("golden.impls[{}]", i), s.impls[i], fmt::format("no case of {} lists it: it would check nothing", s.cases_path));
  return s;
}

AccuracyGateSpec read_accuracy(const Reader& r, const json& j) {
  r.only_keys("accuracy", j, {"impls", "cases", "cases_file", "comment"});
  for (const char* key : {"impls", "cases"})
    if (!j.contains(key)) r.fail(fmt::format("accuracy.{}", key), nullptr, "missing");
  AccuracyGateSpec s;
  s.impls = r.strings("accuracy.impls", j["impls"], true);
  r.impls("accuracy.impls", s.impls, j["impls"]);
  const std::vector<std::string> names = r.strings("accuracy.cases", j["cases"], true);
  s.cases_path = j.contains("cases_file") ? r.path("accuracy.cases_file", j["cases_file"]) : data_path("golden/cases.json");
  if (j.contains("comment")) r.string("accuracy.comment", j["comment"]);
  const std::vector<golden::GoldenCase> all = cases_of(r, "accuracy.cases_file", s.cases_path);
  for (size_t i = 0; i < names.size(); ++i) {
    auto c = std::find_if(all.begin(), all.end(), [&](const auto& x) { return x.name == names[i]; });
    if (c == all.end()) r.fail(fmt::format("accuracy.cases[{}]", i), names[i], fmt::format("not a case of {}", s.cases_path));
    s.cases.push_back(*c);
  }
  return s;
}

PerformanceSuite read_suite(const Reader& r, const std::string& key, const json& j) {
  r.only_keys(key, j, {"binary", "args", "filter", "stored", "max_slowdown", "repeats", "min_time", "timeout_s", "comment"});
  for (const char* k : {"binary", "stored"})
    if (!j.contains(k)) r.fail(fmt::format("{}.{}", key, k), nullptr, "missing");
  PerformanceSuite s;
  s.binary = r.string(key + ".binary", j["binary"]);
  s.stored_path = r.path(key + ".stored", j["stored"]);
  if (j.contains("args")) s.args = r.strings(key + ".args", j["args"], false);
  if (j.contains("filter")) s.filter = r.string(key + ".filter", j["filter"]);
  if (j.contains("max_slowdown")) s.max_slowdown = r.number(key + ".max_slowdown", j["max_slowdown"], 0, 10);
  if (j.contains("repeats")) {
    const json& v = j["repeats"];
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 1000)
      r.fail(key + ".repeats", v, "must be an integer from 1 to 1000");
    s.repeats = v.get<int>();
  }
  if (j.contains("min_time")) s.min_time = r.number(key + ".min_time", j["min_time"], 0, 3600);
  if (j.contains("timeout_s")) s.timeout_s = r.number(key + ".timeout_s", j["timeout_s"], 0, 86400);
  if (j.contains("comment")) r.string(key + ".comment", j["comment"]);
  return s;
}

}  // namespace

StatusOr<GateBaseline> load_gate_baseline(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status(ErrorCode::kIoError, fmt::format("cannot open --baseline {}", path));
  json doc;
  try {
    doc = json::parse(f);
  } catch (const json::exception& e) {
    return invalid_argument(fmt::format("--baseline {} is not JSON: {}", path, e.what()));
  }
  const Reader r{path, std::filesystem::absolute(path).parent_path().string()};
  GateBaseline b;
  b.path = path;
  try {
    r.only_keys("", doc, {"schema", "comment", "golden", "accuracy", "performance"});
    if (!doc.contains("schema") || doc["schema"] != "detmoe.gate-baseline/1")
      r.fail("schema", doc.value("schema", json()), "must be \"detmoe.gate-baseline/1\"");
    if (doc.contains("comment")) r.string("comment", doc["comment"]);
    if (doc.contains("golden")) b.golden = read_golden(r, doc["golden"]);
    if (doc.contains("accuracy")) b.accuracy = read_accuracy(r, doc["accuracy"]);
    if (doc.contains("performance")) {
      const json& p = doc["performance"];
      r.only_keys("performance", p, {"suites", "comment"});
      if (!p.contains("suites")) r.fail("performance.suites", nullptr, "missing");
      const json& suites = p["suites"];
      if (!suites.is_array() || suites.empty()) r.fail("performance.suites", suites, "must be a non-empty list of suites");
      for (size_t i = 0; i < suites.size(); ++i) b.suites.push_back(read_suite(r, fmt::format("performance.suites[{}]", i), suites[i]));
      if (p.contains("comment")) r.string("performance.comment", p["comment"]);
    }
    if (!b.golden && !b.accuracy && b.suites.empty())
      r.fail("(document)", doc, "selects no check: give at least one of golden, accuracy, performance");
  } catch (const Error& e) {
    return e.status();
  }
  return b;
}

}  // namespace detmoe::cli
