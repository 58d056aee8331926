#include "detmoe/safetensors.h"

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

const NamedTensor* find(const std::vector<NamedTensor>& ts, const std::string& name) {
  auto it = std::find_if(ts.begin(), ts.end(), [&](const NamedTensor& t) { return t.name == name; });
  return it == ts.end() ? nullptr : &*it;
}

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

StatusOr<std::vector<NamedTensor>> read_safetensors(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return io_error(fmt::format("cannot open {}", path));
  f.seekg(0, std::ios::end);
  const uint64_t file_size = static_cast<uint64_t>(f.tellg());
  f.seekg(0);
  uint64_t header_len = 0;
  if (file_size < 8 || !f.read(reinterpret_cast<char*>(&header_len), 8))
    return io_error(fmt::format("{} is too short to be a safetensors file", path));
  if (header_len > file_size - 8) return io_error(fmt::format("{}: header length {} exceeds the file size {}", path, header_len, file_size));
  std::string header(header_len, '\0');
  f.read(header.data(), static_cast<std::streamsize>(header_len));
  json h;
  try {
    h = json::parse(header);
  } catch (const json::exception& e) {
    return io_error(fmt::format("{}: header is not JSON: {}", path, e.what()));
  }
  const uint64_t data_begin = 8 + header_len, data_size = file_size - data_begin;
  std::vector<NamedTensor> out;
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    try {
      const std::string dt = it->at("dtype").get<std::string>();
      const auto shape = it->at("shape").get<std::vector<int64_t>>();
      const auto offs = it->at("data_offsets").get<std::vector<uint64_t>>();
      if (offs.size() != 2 || offs[0] > offs[1] || offs[1] > data_size)
        return io_error(fmt::format("{}: tensor '{}' has data_offsets outside the data", path, it.key()));
      NamedTensor t;
      t.name = it.key();
      t.shape = shape;
      int64_t width = 0;
      if (dt == "BF16") t.dtype = DType::kBF16, width = 2;
      else if (dt == "F32") t.dtype = DType::kFP32, width = 4;
      else if (dt == "F64") t.dtype = DType::kFP64, width = 8;
      else if (dt == "I32") t.dtype = DType::kInt32, width = 4;
      else if (dt == "I64") t.dtype = DType::kInt32, width = 8;
      else return invalid_argument(fmt::format("{}: tensor '{}' has dtype {}, which is not supported (BF16, F32, F64, I32, I64)", path, t.name, dt));
      if (static_cast<int64_t>(offs[1] - offs[0]) != t.numel() * width)
        return io_error(fmt::format("{}: tensor '{}' has {} bytes for {} elements of {}", path, t.name, offs[1] - offs[0], t.numel(), dt));
      std::vector<uint8_t> raw(offs[1] - offs[0]);
      f.seekg(static_cast<std::streamoff>(data_begin + offs[0]));
      f.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size()));
      if (!f) return io_error(fmt::format("{}: cannot read tensor '{}'", path, t.name));
      if (dt == "I64") {
        t.bytes.resize(t.numel() * 4);
        for (int64_t i = 0; i < t.numel(); ++i) {
          int64_t v;
          std::memcpy(&v, &raw[i * 8], 8);
          if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
            return invalid_argument(fmt::format("{}: tensor '{}' element {} = {} does not fit int32", path, t.name, i, v));
          const int32_t w = static_cast<int32_t>(v);
          std::memcpy(&t.bytes[i * 4], &w, 4);
        }
      } else {
        t.bytes = std::move(raw);
      }
      out.push_back(std::move(t));
    } catch (const json::exception& e) {
      return io_error(fmt::format("{}: tensor '{}': {}", path, it.key(), e.what()));
    }
  }
  return out;
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
  const NamedTensor *x = find(ts, "x"), *idx = find(ts, "topk_idx"), *w = find(ts, "topk_w");
  const NamedTensor *wg = find(ts, "w_gate"), *wu = find(ts, "w_up"), *wd = find(ts, "w_down");
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
  const NamedTensor *sg = find(ts, "ws_gate"), *su = find(ts, "ws_up"), *sd = find(ts, "ws_down");
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
  if (const NamedTensor* d = find(ts, "dout")) {
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
