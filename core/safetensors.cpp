#include "detmoe/safetensors.h"

#include "detmoe/host_memory.h"
#include "detmoe/output_file.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>

namespace detmoe {
namespace {

using nlohmann::json;

const char* st_dtype(DType d) {
  switch (d) {
    case DType::kBF16: return "BF16";
    case DType::kFP32: return "F32";
    case DType::kFP64: return "F64";
    case DType::kInt32: return "I32";
  }
  return "?";
}

Status io_error(std::string msg) { return {ErrorCode::kIoError, std::move(msg)}; }

Status expect(const NamedTensor* t, const char* name, DType dtype, size_t rank) {
  if (t == nullptr) return invalid_argument(fmt::format("input tensor '{}' is missing", name));
  if (t->dtype != dtype)
    return invalid_argument(fmt::format("input tensor '{}' has dtype {}, expected {}", name, to_string(t->dtype), to_string(dtype)));
  if (t->shape.size() != rank)
    return invalid_argument(fmt::format("input tensor '{}' has {} dimensions, expected {}", name, t->shape.size(), rank));
  return Status::Ok();
}

Status expect_shape(const NamedTensor& t, const std::vector<int64_t>& want) {
  if (t.shape != want)
    return invalid_argument(fmt::format("input tensor '{}' has shape [{}], expected [{}]", t.name, fmt::join(t.shape, ", "),
                                        fmt::join(want, ", ")));
  return Status::Ok();
}

std::vector<uint16_t> as_u16(const NamedTensor& t) {
  std::vector<uint16_t> v(t.numel());
  std::memcpy(v.data(), t.bytes.data(), v.size() * 2);
  return v;
}

}  // namespace

namespace {

// The format caps the header at 100 MB; a larger declared length is a corrupt or hostile file.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

bool dtype_width(const std::string& dt, DType& dtype, int64_t& width) {
  if (dt == "BF16") dtype = DType::kBF16, width = 2;
  else if (dt == "F32") dtype = DType::kFP32, width = 4;
  else if (dt == "F64") dtype = DType::kFP64, width = 8;
  else if (dt == "I32") dtype = DType::kInt32, width = 4;
  else if (dt == "I64") dtype = DType::kInt32, width = 8;  // narrowed to int32 when every value fits
  else return false;
  return true;
}

}  // namespace

StatusOr<SafetensorsIndex> read_safetensors_index(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return io_error(fmt::format("cannot open {}", path));
  f.seekg(0, std::ios::end);
  const std::streamoff end = f.tellg();
  if (end < 0) return io_error(fmt::format("{} cannot be read as a file (is it a directory?)", path));
  const uint64_t file_size = static_cast<uint64_t>(end);
  f.seekg(0);
  uint64_t header_len = 0;
  if (file_size < 8 || !f.read(reinterpret_cast<char*>(&header_len), 8))
    return io_error(fmt::format("{} is too short to be a safetensors file", path));
  if (header_len > file_size - 8) return io_error(fmt::format("{}: header length {} exceeds the file size {}", path, header_len, file_size));
  if (header_len > kMaxHeaderBytes)
    return io_error(fmt::format("{}: header length {} exceeds the format's limit of {} bytes", path, header_len, kMaxHeaderBytes));
  std::string header(header_len, '\0');
  f.read(header.data(), static_cast<std::streamsize>(header_len));
  if (!f) return io_error(fmt::format("{}: cannot read the header", path));
  json h;
  try {
    h = json::parse(header);
  } catch (const json::exception& e) {
    return io_error(fmt::format("{}: header is not JSON: {}", path, e.what()));
  }
  if (!h.is_object()) return io_error(fmt::format("{}: header is not a JSON object", path));
  SafetensorsIndex index;
  index.path = path;
  index.data_begin = 8 + header_len;
  index.data_size = file_size - index.data_begin;
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const json& v = *it;
    auto bad = [&](const std::string& why) { return io_error(fmt::format("{}: tensor '{}': {}", path, it.key(), why)); };
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      return bad("needs dtype, shape and data_offsets");
    if (!v["dtype"].is_string()) return bad("dtype is not a string");
    const json& shape = v["shape"];
    const json& offs = v["data_offsets"];
    if (!shape.is_array()) return bad("shape is not an array");
    if (!offs.is_array() || offs.size() != 2) return bad("data_offsets is not a pair");
    SafetensorsEntry e;
    e.name = it.key();
    e.dtype = v["dtype"].get<std::string>();
    // Whole numbers only: 1.5 would otherwise be truncated into a valid-looking size.
    int64_t numel = 1;
    for (const json& d : shape) {
      if (!d.is_number_unsigned()) return bad(fmt::format("shape entry {} is not a non-negative integer", d.dump()));
      const uint64_t n = d.get<uint64_t>();
      if (n > (uint64_t{1} << 40) || (numel > 0 && static_cast<uint64_t>(numel) > (uint64_t{1} << 62) / std::max<uint64_t>(n, 1)))
        return bad(fmt::format("shape {} has more elements than any file can hold", shape.dump()));
      e.shape.push_back(static_cast<int64_t>(n));
      numel *= static_cast<int64_t>(n);
    }
    for (const json& o : offs)
      if (!o.is_number_unsigned()) return bad(fmt::format("data offset {} is not a non-negative integer", o.dump()));
    e.begin = offs[0].get<uint64_t>();
    e.end = offs[1].get<uint64_t>();
    if (e.begin > e.end || e.end > index.data_size)
      return bad(fmt::format("data_offsets [{}, {}] lie outside the data ({} bytes)", e.begin, e.end, index.data_size));
    DType dtype{};
    int64_t width = 0;
    if (dtype_width(e.dtype, dtype, width) && static_cast<uint64_t>(numel) * static_cast<uint64_t>(width) != e.end - e.begin)
      return bad(fmt::format("{} bytes for {} elements of {}", e.end - e.begin, numel, e.dtype));
    index.entries.push_back(std::move(e));
  }
  // Tensors must not share bytes: an overlap is a corrupt file whose tensors would alias.
  std::vector<const SafetensorsEntry*> by_begin;
  for (const auto& e : index.entries) by_begin.push_back(&e);
  std::sort(by_begin.begin(), by_begin.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_begin.size(); ++i)
    if (by_begin[i]->begin < by_begin[i - 1]->end)
      return io_error(fmt::format("{}: tensors '{}' [{}, {}) and '{}' [{}, {}) overlap", path, by_begin[i - 1]->name,
                                  by_begin[i - 1]->begin, by_begin[i - 1]->end, by_begin[i]->name, by_begin[i]->begin,
                                  by_begin[i]->end));
  return index;
}

StatusOr<NamedTensor> read_safetensors_tensor(const SafetensorsIndex& index, const SafetensorsEntry& e) {
  const std::string& path = index.path;
  NamedTensor t;
  t.name = e.name;
  t.shape = e.shape;
  int64_t width = 0;
  if (!dtype_width(e.dtype, t.dtype, width))
    return invalid_argument(fmt::format("{}: tensor '{}' has dtype {}, which is not supported (BF16, F32, F64, I32, I64)", path, e.name, e.dtype));
  std::ifstream f(path, std::ios::binary);
  if (!f) return io_error(fmt::format("cannot open {}", path));
  std::vector<uint8_t> raw(e.end - e.begin);
  f.seekg(static_cast<std::streamoff>(index.data_begin + e.begin));
  f.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size()));
  if (!f) return io_error(fmt::format("{}: cannot read tensor '{}'", path, e.name));
  if (e.dtype == "I64") {
    t.bytes.resize(t.numel() * 4);
    for (int64_t i = 0; i < t.numel(); ++i) {
      int64_t v;
      std::memcpy(&v, &raw[i * 8], 8);
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
        return invalid_argument(fmt::format("{}: tensor '{}' element {} = {} does not fit int32", path, e.name, i, v));
      const int32_t w = static_cast<int32_t>(v);
      std::memcpy(&t.bytes[i * 4], &w, 4);
    }
  } else {
    t.bytes = std::move(raw);
  }
  return t;
}

StatusOr<std::vector<NamedTensor>> read_safetensors(const std::string& path) {
  auto index = read_safetensors_index(path);
  if (!index.ok()) return index.status();
  std::vector<NamedTensor> out;
  for (const SafetensorsEntry& e : index->entries) {
    auto t = read_safetensors_tensor(*index, e);
    if (!t.ok()) return t.status();
    out.push_back(std::move(*t));
  }
  return out;
}

StatusOr<HostProblem> read_problem_safetensors(const std::string& path, GradPrecision grad_precision,
                                               std::vector<std::string>* unused) {
  auto index = read_safetensors_index(path);
  if (!index.ok()) return index.status();
  uint64_t bytes = 0;
  for (const SafetensorsEntry& e : index->entries)
    if (is_problem_input_name(e.name)) bytes += e.end - e.begin;
    else if (unused != nullptr) unused->push_back(e.name);
  // The tensors, then the problem built from them (a copy of the dense data).
  DETMOE_RETURN_IF_ERROR(require_host_bytes(static_cast<int64_t>(2 * bytes), "reading the inputs of " + path));
  std::vector<NamedTensor> tensors;
  for (const SafetensorsEntry& e : index->entries) {
    if (!is_problem_input_name(e.name)) continue;
    auto t = read_safetensors_tensor(*index, e);
    if (!t.ok()) return t.status();
    tensors.push_back(std::move(*t));
  }
  return problem_from_tensors(tensors, grad_precision);
}

bool is_problem_input_name(const std::string& name) {
  for (const char* n : kProblemInputNames)
    if (name == n) return true;
  return false;
}

Status write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  json h = json::object();
  uint64_t offset = 0;
  for (const NamedTensor& t : tensors) {
    h[t.name] = {{"dtype", st_dtype(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  if (!metadata.empty()) h["__metadata__"] = metadata;
  std::string header = h.dump();
  header.append((8 - header.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned
  const uint64_t len = header.size();
  std::vector<std::string_view> pieces{std::string_view(reinterpret_cast<const char*>(&len), 8), header};
  for (const NamedTensor& t : tensors) pieces.emplace_back(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  return write_output_file(path, pieces);
}

StatusOr<HostProblem> problem_from_tensors(const std::vector<NamedTensor>& ts, GradPrecision grad_precision) {
  const NamedTensor *x = find_tensor(ts, "x"), *idx = find_tensor(ts, "topk_idx"), *w = find_tensor(ts, "topk_w");
  const NamedTensor *wg = find_tensor(ts, "w_gate"), *wu = find_tensor(ts, "w_up"), *wd = find_tensor(ts, "w_down");
  DETMOE_RETURN_IF_ERROR(expect(x, "x", DType::kBF16, 2));
  DETMOE_RETURN_IF_ERROR(expect(idx, "topk_idx", DType::kInt32, 2));
  DETMOE_RETURN_IF_ERROR(expect(w, "topk_w", DType::kFP32, 2));
  DETMOE_RETURN_IF_ERROR(expect(wg, "w_gate", DType::kBF16, 3));
  DETMOE_RETURN_IF_ERROR(expect(wu, "w_up", DType::kBF16, 3));
  DETMOE_RETURN_IF_ERROR(expect(wd, "w_down", DType::kBF16, 3));
  Shape s;
  s.T = x->shape[0];
  s.H = x->shape[1];
  s.k = idx->shape[1];
  s.E = wg->shape[0];
  s.F = wg->shape[1];
  const NamedTensor *sg = find_tensor(ts, "ws_gate"), *su = find_tensor(ts, "ws_up"), *sd = find_tensor(ts, "ws_down");
  if (sg || su || sd) {
    DETMOE_RETURN_IF_ERROR(expect(sg, "ws_gate", DType::kBF16, 2));
    DETMOE_RETURN_IF_ERROR(expect(su, "ws_up", DType::kBF16, 2));
    DETMOE_RETURN_IF_ERROR(expect(sd, "ws_down", DType::kBF16, 2));
    s.Fs = sg->shape[0];
  }
  DETMOE_RETURN_IF_ERROR(validate(s));
  DETMOE_RETURN_IF_ERROR(expect_shape(*idx, {s.T, s.k}));
  DETMOE_RETURN_IF_ERROR(expect_shape(*w, {s.T, s.k}));
  DETMOE_RETURN_IF_ERROR(expect_shape(*wg, {s.E, s.F, s.H}));
  DETMOE_RETURN_IF_ERROR(expect_shape(*wu, {s.E, s.F, s.H}));
  DETMOE_RETURN_IF_ERROR(expect_shape(*wd, {s.E, s.H, s.F}));
  HostProblem p;
  p.shape = s;
  p.grad_precision = grad_precision;
  p.data.shape = s;
  p.data.x = as_u16(*x);
  p.data.w_gate = as_u16(*wg);
  p.data.w_up = as_u16(*wu);
  p.data.w_down = as_u16(*wd);
  if (s.Fs > 0) {
    DETMOE_RETURN_IF_ERROR(expect_shape(*sg, {s.Fs, s.H}));
    DETMOE_RETURN_IF_ERROR(expect_shape(*su, {s.Fs, s.H}));
    DETMOE_RETURN_IF_ERROR(expect_shape(*sd, {s.H, s.Fs}));
    p.data.ws_gate = as_u16(*sg);
    p.data.ws_up = as_u16(*su);
    p.data.ws_down = as_u16(*sd);
  }
  if (const NamedTensor* d = find_tensor(ts, "dout")) {
    DETMOE_RETURN_IF_ERROR(expect(d, "dout", DType::kBF16, 2));
    DETMOE_RETURN_IF_ERROR(expect_shape(*d, {s.T, s.H}));
    p.data.dout = as_u16(*d);
  }
  p.routing.tokens = s.T;
  p.routing.k = s.k;
  p.routing.topk_idx.resize(s.T * s.k);
  std::memcpy(p.routing.topk_idx.data(), idx->bytes.data(), idx->bytes.size());
  p.routing.topk_w.resize(s.T * s.k);
  std::memcpy(p.routing.topk_w.data(), w->bytes.data(), w->bytes.size());
  DETMOE_RETURN_IF_ERROR(validate_routing(s, p.routing.topk_idx.data(), p.routing.topk_w.data(), s.T));
  return p;
}

}  // namespace detmoe
