#include "bench_report.h"

#include <fmt/format.h>

#include <map>
#include <string>
#include <tuple>

#include "detmoe/shapes.h"

namespace detmoe::cli {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t b = 0;
  for (size_t e; (e = s.find(sep, b)) != std::string::npos; b = e + 1) out.push_back(s.substr(b, e - b));
  out.push_back(s.substr(b));
  return out;
}

int ep_ranks_of(const std::string& shape) {
  auto s = find_named_shape(shape);
  return s.ok() ? static_cast<int>(s->P) : 1;
}

}  // namespace

std::vector<report::BenchmarkResult> bench_results(const nlohmann::json& gbench, const nlohmann::json& torch,
                                                   int repetitions) {
  using Key = std::tuple<std::string, std::string, std::string>;  // shape, routing, pass
  std::map<Key, double> torch_tflops;
  std::vector<report::BenchmarkResult> torch_rows;
  if (torch.is_object() && torch.contains("results"))
    for (const auto& t : torch["results"]) {
      report::BenchmarkResult r;
      r.impl = "torch-pipeline";
      r.shape = t.at("shape").get<std::string>();
      r.routing = t.at("routing").get<std::string>();
      r.pass = t.at("pass").get<std::string>() == "fwd" ? report::BenchPass::kForward : report::BenchPass::kForwardBackward;
      r.ep_ranks = ep_ranks_of(r.shape);
      r.median_ms = t.at("median_ms").get<double>();
      r.tflops = t.at("tflops").get<double>();
      r.repetitions = t.value("timed", repetitions);
      if (t.contains("joules_per_step") && t["joules_per_step"].is_number()) r.joules_per_step = t["joules_per_step"].get<double>();
      if (t.contains("avg_watts") && t["avg_watts"].is_number()) r.avg_watts = t["avg_watts"].get<double>();
      torch_tflops[{r.shape, r.routing, t.at("pass").get<std::string>()}] = r.tflops;
      torch_rows.push_back(r);
    }
  std::vector<report::BenchmarkResult> out;
  if (gbench.is_object() && gbench.contains("benchmarks"))
    for (const auto& b : gbench["benchmarks"]) {
      if (!b.contains("median_ms") || !b.contains("tflops")) continue;
      // <impl>/<shape>/<routing>/<pass>[/variant…][/iterations:N][/manual_time]
      std::vector<std::string> parts = split(b.at("name").get<std::string>(), '/');
      if (parts.size() < 4 || (parts[3] != "fwd" && parts[3] != "fwd+bwd")) continue;
      std::vector<std::string> variant;
      for (size_t i = 4; i < parts.size(); ++i)
        if (parts[i].rfind("iterations:", 0) != 0 && parts[i] != "manual_time" && parts[i].rfind("repeats:", 0) != 0)
          variant.push_back(parts[i]);
      report::BenchmarkResult r;
      r.impl = variant.empty() ? parts[0] : fmt::format("{} ({})", parts[0], fmt::join(variant, ", "));
      r.shape = parts[1];
      r.routing = parts[2];
      r.pass = parts[3] == "fwd" ? report::BenchPass::kForward : report::BenchPass::kForwardBackward;
      r.ep_ranks = ep_ranks_of(r.shape);
      r.median_ms = b.at("median_ms").get<double>();
      r.tflops = b.at("tflops").get<double>();
      r.repetitions = repetitions;
      auto counter = [&](const char* key) {
        return b.contains(key) && b.at(key).is_number() ? std::optional<double>(b.at(key).get<double>()) : std::nullopt;
      };
      r.p25_ms = counter("p25_ms");
      r.p75_ms = counter("p75_ms");
      r.joules_per_step = counter("joules_per_step");
      r.avg_watts = counter("avg_watts");
      if (auto it = torch_tflops.find({r.shape, r.routing, parts[3]}); it != torch_tflops.end() && it->second > 0) {
        r.baseline = "torch-pipeline";
        r.ratio_to_baseline = r.tflops / it->second;
      }
      out.push_back(r);
    }
  out.insert(out.end(), torch_rows.begin(), torch_rows.end());
  return out;
}

BenchTable bench_table(const std::vector<report::BenchmarkResult>& results, const std::string& impl) {
  struct Measured {
    const report::BenchmarkResult* under_test = nullptr;
    const report::BenchmarkResult* reference = nullptr;
    const report::BenchmarkResult* grouped = nullptr;
    const report::BenchmarkResult* torch = nullptr;
  };
  std::map<std::string, Measured> cases;
  std::vector<std::string> order;
  for (const report::BenchmarkResult& r : results) {
    const std::string key = fmt::format("{}/{}/{}", r.shape, r.routing, report::to_string(r.pass));
    if (r.impl == "torch-pipeline") {  // after every DetMoE row (bench_results): only cases DetMoE ran
      if (cases.count(key)) cases[key].torch = &r;
      continue;
    }
    if (!cases.count(key)) order.push_back(key);
    Measured& m = cases[key];
    if (r.impl == impl) m.under_test = &r;
    else if (r.impl == "reference") m.reference = &r;
    else if (r.impl == "reference (grouped)") m.grouped = &r;
  }
  auto ms = [](const report::BenchmarkResult* r) { return r ? fmt::format("{:.3f}", r->median_ms) : std::string("-"); };
  auto tf = [](const report::BenchmarkResult* r) { return r ? fmt::format("{:.1f}", r->tflops) : std::string("-"); };
  auto ratio = [](const report::BenchmarkResult* num, const report::BenchmarkResult* den) {
    return num && den && den->median_ms > 0 ? fmt::format("{:.2f}", num->median_ms / den->median_ms) : std::string("-");
  };
  auto energy = [](const report::BenchmarkResult* r) {
    return r && r->joules_per_step ? fmt::format("{:.3f} ({:.0f})", *r->joules_per_step, r->avg_watts.value_or(0))
                                   : std::string("-");
  };
  BenchTable t;
  const bool is_reference = impl == "reference";
  bool any_grouped = false;
  for (const auto& [key, m] : cases) any_grouped = any_grouped || m.grouped;
  if (is_reference) {
    t.text += fmt::format("{:<34} {:>13} {:>9} {}{:>10} {:>9} {:>10}\n", "shape / routing / pass", "reference ms", "TFLOP/s",
                          any_grouped ? fmt::format("{:>13} ", "grouped ms") : "", "torch ms", "TFLOP/s", "ref/torch");
  } else {
    t.text += fmt::format("{:<34} {:>13} {:>9} {:>13} {:>9} {:>10} {:>11} {:>17} {:>16}\n", "shape / routing / pass",
                          impl + " ms", "TFLOP/s", "reference ms", "ref/" + impl.substr(0, 4), "torch ms",
                          "torch/" + impl.substr(0, 4), impl.substr(0, 4) + " J/step (W)", "torch J/step (W)");
  }
  for (const std::string& key : order) {
    const Measured& m = cases[key];
    const report::BenchmarkResult* mine = is_reference ? (m.under_test ? m.under_test : m.reference) : m.under_test;
    nlohmann::json row = {{"case", key}};
    if (mine) {
      row[impl + "_ms"] = mine->median_ms;
      row[impl + "_tflops"] = mine->tflops;
      if (mine->joules_per_step) row[impl + "_joules_per_step"] = *mine->joules_per_step;
      if (mine->avg_watts) row[impl + "_avg_watts"] = *mine->avg_watts;
    }
    if (!is_reference && m.reference) row["reference_ms"] = m.reference->median_ms;
    if (m.grouped) row["reference_grouped_ms"] = m.grouped->median_ms;
    if (m.torch) {
      row["torch_ms"] = m.torch->median_ms;
      row["torch_tflops"] = m.torch->tflops;
      if (mine && mine->median_ms > 0) {
        if (is_reference) row["reference_over_torch"] = mine->median_ms / m.torch->median_ms;
        else row["torch_over_" + impl] = m.torch->median_ms / mine->median_ms;
      }
      if (m.torch->joules_per_step) row["torch_joules_per_step"] = *m.torch->joules_per_step;
      if (m.torch->avg_watts) row["torch_avg_watts"] = *m.torch->avg_watts;
    }
    t.rows.push_back(row);
    if (is_reference)
      t.text += fmt::format("{:<34} {:>13} {:>9} {}{:>10} {:>9} {:>10}\n", key, ms(mine), tf(mine),
                            any_grouped ? fmt::format("{:>13} ", ms(m.grouped)) : "", ms(m.torch), tf(m.torch),
                            m.torch && mine ? ratio(mine, m.torch) + "x" : "-");
    else
      t.text += fmt::format("{:<34} {:>13} {:>9} {:>13} {:>9} {:>10} {:>11} {:>17} {:>16}\n", key, ms(mine), tf(mine),
                            ms(m.reference), ratio(m.reference, mine), ms(m.torch), ratio(m.torch, mine), energy(mine),
                            energy(m.torch));
  }
  return t;
}

}  // namespace detmoe::cli
