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

}  // namespace detmoe::cli
