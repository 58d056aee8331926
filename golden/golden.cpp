#include "golden/golden.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "detmoe/output_file.h"
#include "detmoe/shapes.h"

namespace detmoe::golden {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int64_t kChunkBytes = 16 * 1024;

StatusOr<json> read_json(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status(ErrorCode::kIoError, fmt::format("cannot open {}", path));
  try {
    return json::parse(f);
  } catch (const json::exception& e) {
    return Status(ErrorCode::kInvalidArgument, fmt::format("{} is not valid JSON: {}", path, e.what()));
  }
}

std::string stored_tensor_path(const std::string& dir, const std::string& impl, const std::string& platform,
                               const std::string& case_name, const std::string& output) {
  return fmt::format("{}/{}.{}/{}/{}.bin", dir, impl, platform, case_name, output);
}

}  // namespace

StatusOr<std::vector<GoldenCase>> load_cases(const std::string& path) {
  auto doc = read_json(path);
  if (!doc.ok()) return doc.status();
  std::vector<GoldenCase> cases;
  try {
    if (doc->value("schema", "") != "detmoe.golden-cases/1")
      return invalid_argument(fmt::format("{}: schema must be \"detmoe.golden-cases/1\"", path));
    for (const json& c : doc->at("cases")) {
      GoldenCase g;
      g.name = c.at("name").get<std::string>();
      g.shape_name = c.at("shape").get<std::string>();
      auto shape = find_named_shape(g.shape_name);
      if (!shape.ok()) return invalid_argument(fmt::format("{}: case {}: {}", path, g.name, shape.status().message()));
      g.shape = *shape;
      if (c.contains("P")) g.shape.P = c["P"].get<int64_t>();
      if (c.contains("Fs")) g.shape.Fs = c["Fs"].get<int64_t>();
      if (c.contains("T")) g.shape.T = c["T"].get<int64_t>();
      DETMOE_RETURN_IF_ERROR(validate(g.shape));
      g.routing = c.value("routing", "balanced");
      auto spec = parse_routing(g.routing);
      if (!spec.ok()) return invalid_argument(fmt::format("{}: case {}: {}", path, g.name, spec.status().message()));
      g.seed = c.value("seed", uint64_t{1});
      g.backward = c.value("backward", true);
      g.grad_precision = c.value("grad", std::string("fp32")) == "bf16" ? GradPrecision::kBF16 : GradPrecision::kFP32;
      g.impls = c.at("impls").get<std::vector<std::string>>();
      g.data = c.value("data", std::string("seeded"));
      if (g.data != "seeded" && g.data != "twin-experts")
        return invalid_argument(fmt::format("{}: case {}: data \"{}\" is not \"seeded\" or \"twin-experts\"", path, g.name, g.data));
      if (std::any_of(cases.begin(), cases.end(), [&](const GoldenCase& o) { return o.name == g.name; }))
        return invalid_argument(fmt::format("{}: case name {} appears twice", path, g.name));
      cases.push_back(std::move(g));
    }
  } catch (const json::exception& e) {
    return invalid_argument(fmt::format("{}: {}", path, e.what()));
  }
  return cases;
}

StatusOr<HostProblem> make_case_problem(const GoldenCase& c) {
  auto spec = parse_routing(c.routing);
  if (!spec.ok()) return spec.status();
  auto problem = make_seeded_problem(c.shape, *spec, c.seed, c.backward, c.grad_precision);
  if (problem.ok() && c.data == "twin-experts") {
    make_twin_experts(problem->data);
    problem->seed.reset();  // no longer the seeded data: GPU paths upload it
  }
  return problem;
}

OutputRecord make_output_record(const NamedTensor& t) {
  OutputRecord r;
  r.name = t.name;
  r.dtype = to_string(t.dtype);
  r.shape = t.shape;
  r.hash = t.hash().hex();
  r.chunk_bytes = kChunkBytes;
  for (size_t off = 0; off < t.bytes.size(); off += kChunkBytes) {
    const size_t n = std::min<size_t>(kChunkBytes, t.bytes.size() - off);
    r.chunk_hashes.push_back(hash_bytes(t.bytes.data() + off, n).hex().substr(0, 16));
  }
  return r;
}

std::string hash_file_path(const std::string& dir, const std::string& impl, const std::string& platform) {
  return fmt::format("{}/{}.{}.json", dir, impl, platform);
}

StatusOr<HashFile> read_hash_file(const std::string& path) {
  auto doc = read_json(path);
  if (!doc.ok()) return doc.status();
  HashFile f;
  try {
    f.impl = doc->at("impl").get<std::string>();
    f.platform = doc->at("platform").get<std::string>();
    for (const json& c : doc->at("cases")) {
      CaseRecord cr;
      cr.name = c.at("name").get<std::string>();
      for (const json& o : c.at("outputs")) {
        OutputRecord r;
        r.name = o.at("name").get<std::string>();
        r.dtype = o.at("dtype").get<std::string>();
        r.shape = o.at("shape").get<std::vector<int64_t>>();
        r.hash = o.at("xxh3_128").get<std::string>();
        r.chunk_bytes = o.at("chunk_bytes").get<int64_t>();
        r.chunk_hashes = o.at("chunks").get<std::vector<std::string>>();
        if (std::any_of(cr.outputs.begin(), cr.outputs.end(), [&](const OutputRecord& o) { return o.name == r.name; }))
          return invalid_argument(fmt::format("{}: case {} records output {} twice", path, cr.name, r.name));
        cr.outputs.push_back(std::move(r));
      }
      if (find_case(f, cr.name) != nullptr) return invalid_argument(fmt::format("{}: case {} is recorded twice", path, cr.name));
      f.cases.push_back(std::move(cr));
    }
  } catch (const json::exception& e) {
    return invalid_argument(fmt::format("{}: {}", path, e.what()));
  }
  return f;
}

Status write_hash_file(const std::string& path, const HashFile& file) {
  json doc;
  doc["schema"] = "detmoe.golden-hashes/1";
  doc["impl"] = file.impl;
  doc["platform"] = file.platform;
  doc["cases"] = json::array();
  for (const CaseRecord& c : file.cases) {
    json jc{{"name", c.name}, {"outputs", json::array()}};
    for (const OutputRecord& r : c.outputs)
      jc["outputs"].push_back({{"name", r.name}, {"dtype", r.dtype}, {"shape", r.shape}, {"xxh3_128", r.hash},
                               {"chunk_bytes", r.chunk_bytes}, {"chunks", r.chunk_hashes}});
    doc["cases"].push_back(std::move(jc));
  }
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);  // a new --dir is fine; the writer reports what fails
  return write_output_file(path, doc.dump(1) + "\n");
}

Status store_tensor(const std::string& dir, const std::string& impl, const std::string& platform,
                    const std::string& case_name, const NamedTensor& t) {
  const std::string path = stored_tensor_path(dir, impl, platform, case_name, t.name);
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  return write_output_file(path, std::string_view(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size()));
}

StatusOr<NamedTensor> load_stored_tensor(const std::string& dir, const std::string& impl, const std::string& platform,
                                         const std::string& case_name, const OutputRecord& record) {
  const std::string path = stored_tensor_path(dir, impl, platform, case_name, record.name);
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status(ErrorCode::kIoError, fmt::format("no stored tensor {}", path));
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string bytes = ss.str();
  NamedTensor t;
  t.name = record.name;
  t.shape = record.shape;
  for (DType d : {DType::kBF16, DType::kFP32, DType::kFP64, DType::kInt32})
    if (record.dtype == to_string(d)) t.dtype = d;
  t.bytes.assign(bytes.begin(), bytes.end());
  if (static_cast<int64_t>(t.bytes.size()) != t.numel() * dtype_size(t.dtype))
    return Status(ErrorCode::kIoError, fmt::format("stored tensor {} has {} bytes, expected {}", path, t.bytes.size(),
                                                   t.numel() * dtype_size(t.dtype)));
  return t;
}

namespace {

// Bits, shape and dtype of each recorded output that was produced; check_case adds the rest.
std::vector<Difference> compare_recorded(const CaseRecord& recorded, const std::vector<NamedTensor>& fresh,
                                     const std::string& store_dir, const std::string& impl, const std::string& platform) {
  std::vector<Difference> diffs;
  for (const OutputRecord& rec : recorded.outputs) {
    auto it = std::find_if(fresh.begin(), fresh.end(), [&](const NamedTensor& t) { return t.name == rec.name; });
    if (it == fresh.end()) continue;  // check_case reports it
    const NamedTensor& t = *it;
    if (t.shape != rec.shape || to_string(t.dtype) != rec.dtype) {
      diffs.push_back({recorded.name, rec.name,
                       fmt::format("shape/dtype changed: recorded {} {}, now {} {}", rec.dtype, fmt::join(rec.shape, "x"),
                                   to_string(t.dtype), fmt::join(t.shape, "x"))});
      continue;
    }
    if (t.hash().hex() == rec.hash) continue;
    // Element-level report from the store when it has the recorded tensor.
    if (!store_dir.empty()) {
      auto old = load_stored_tensor(store_dir, impl, platform, recorded.name, rec);
      if (old.ok() && old->hash().hex() == rec.hash) {
        const int64_t es = dtype_size(t.dtype);
        int64_t first = -1, count = 0;
        for (int64_t i = 0; i < t.numel(); ++i) {
          if (std::memcmp(&t.bytes[i * es], &old->bytes[i * es], es) != 0) {
            if (first < 0) first = i;
            ++count;
          }
        }
        diffs.push_back({recorded.name, rec.name,
                         fmt::format("first differing element {} (flat {}): recorded {:.9g}, now {:.9g}; {} of {} elements differ",
                                     multi_index(first, t.shape), first, old->at(first), t.at(first), count, t.numel())});
        continue;
      }
    }
    const OutputRecord now = make_output_record(t);
    int64_t first_chunk = -1, chunks = 0;
    for (size_t c = 0; c < now.chunk_hashes.size() && c < rec.chunk_hashes.size(); ++c)
      if (now.chunk_hashes[c] != rec.chunk_hashes[c]) {
        if (first_chunk < 0) first_chunk = static_cast<int64_t>(c);
        ++chunks;
      }
    const int64_t per_chunk = rec.chunk_bytes / dtype_size(t.dtype);
    diffs.push_back({recorded.name, rec.name,
                     fmt::format("hash {} != recorded {}; first differing chunk holds elements {}..{} ({} of {} chunks "
                                 "differ); record with --store at the good commit to see element values",
                                 now.hash, rec.hash, multi_index(first_chunk * per_chunk, t.shape),
                                 multi_index(std::min(t.numel(), (first_chunk + 1) * per_chunk) - 1, t.shape), chunks,
                                 rec.chunk_hashes.size())});
  }
  return diffs;
}

}  // namespace

const CaseRecord* find_case(const HashFile& file, const std::string& name) {
  auto it = std::find_if(file.cases.begin(), file.cases.end(), [&](const CaseRecord& r) { return r.name == name; });
  return it == file.cases.end() ? nullptr : &*it;
}

std::string CaseVerdict::summary() const {
  if (pass()) return fmt::format("{} recorded outputs bitwise equal", matched);
  std::string s;
  for (const Difference& d : differences) s += fmt::format("{}{}{}{}", s.empty() ? "" : "; ", d.output, d.output.empty() ? "" : ": ", d.summary);
  return s;
}

CaseVerdict check_case(const std::string& case_name, const CaseRecord* recorded, const std::vector<NamedTensor>& fresh,
                       const std::string& store_dir, const std::string& impl, const std::string& platform) {
  CaseVerdict v;
  v.case_name = case_name;
  if (recorded == nullptr) {
    v.differences.push_back({case_name, "", fmt::format("case not recorded for {} on {}", impl, platform)});
    for (const NamedTensor& t : fresh) v.outputs.push_back({t.name, "", t.hash().hex(), false});
    return v;
  }
  v.recorded = static_cast<int>(recorded->outputs.size());
  if (recorded->outputs.empty())
    v.differences.push_back({case_name, "", "case recorded with no outputs: nothing to compare (record it again)"});
  const std::vector<Difference> changed = compare_recorded(*recorded, fresh, store_dir, impl, platform);
  for (const OutputRecord& rec : recorded->outputs) {
    auto it = std::find_if(fresh.begin(), fresh.end(), [&](const NamedTensor& t) { return t.name == rec.name; });
    OutputVerdict o{rec.name, rec.hash, it == fresh.end() ? "" : it->hash().hex(), false};
    const bool differs = std::any_of(changed.begin(), changed.end(), [&](const Difference& d) { return d.output == rec.name; });
    o.match = it != fresh.end() && !differs;
    if (it == fresh.end()) v.differences.push_back({case_name, rec.name, "output is recorded but was not produced"});
    if (o.match) ++v.matched;
    v.outputs.push_back(std::move(o));
  }
  v.differences.insert(v.differences.end(), changed.begin(), changed.end());
  for (const NamedTensor& t : fresh) {
    const bool is_recorded = std::any_of(recorded->outputs.begin(), recorded->outputs.end(),
                                         [&](const OutputRecord& r) { return r.name == t.name; });
    if (is_recorded) continue;
    v.outputs.push_back({t.name, "", t.hash().hex(), false});
    v.differences.push_back({case_name, t.name, "output was produced but is not recorded (record the case again)"});
  }
  return v;
}

}  // namespace detmoe::golden
