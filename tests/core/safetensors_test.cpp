// safetensors round trip and the errors a replay user sees for bad files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "detmoe/safetensors.h"

namespace detmoe {
namespace {

std::vector<NamedTensor> tiny_problem_tensors(int64_t T = 4, int64_t H = 64, int64_t F = 64, int64_t E = 4, int64_t k = 2) {
  auto bf16 = [](const char* n, std::vector<int64_t> shape) {
    NamedTensor t{n, DType::kBF16, std::move(shape), {}};
    t.bytes.assign(t.numel() * 2, 0);
    for (int64_t i = 0; i < t.numel(); ++i) t.bytes[i * 2 + 1] = 0x3f;  // bf16 0x3f00 = 0.5
    return t;
  };
  std::vector<NamedTensor> ts{bf16("x", {T, H}), bf16("w_gate", {E, F, H}), bf16("w_up", {E, F, H}), bf16("w_down", {E, H, F})};
  NamedTensor idx{"topk_idx", DType::kInt32, {T, k}, std::vector<uint8_t>(T * k * 4)};
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = static_cast<int32_t>((t + j) % E);
      std::memcpy(&idx.bytes[(t * k + j) * 4], &e, 4);
    }
  NamedTensor w{"topk_w", DType::kFP32, {T, k}, std::vector<uint8_t>(T * k * 4)};
  for (int64_t i = 0; i < T * k; ++i) {
    const float f = 0.5f;
    std::memcpy(&w.bytes[i * 4], &f, 4);
  }
  ts.push_back(idx);
  ts.push_back(w);
  return ts;
}

std::string temp(const char* name) { return ::testing::TempDir() + name; }

TEST(Safetensors, RoundTripKeepsBytes) {
  const auto ts = tiny_problem_tensors();
  ASSERT_TRUE(write_safetensors(temp("rt.safetensors"), ts, {{"k", "v"}}).ok());
  auto back = read_safetensors(temp("rt.safetensors"));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  ASSERT_EQ(back->size(), ts.size());
  for (const auto& t : ts) {
    auto it = std::find_if(back->begin(), back->end(), [&](const NamedTensor& b) { return b.name == t.name; });
    ASSERT_NE(it, back->end()) << t.name;
    EXPECT_EQ(it->bytes, t.bytes) << t.name;
    EXPECT_EQ(it->shape, t.shape) << t.name;
  }
  auto p = problem_from_tensors(*back, GradPrecision::kFP32);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->shape, (Shape{4, 64, 64, 4, 2, 1, 0}));
  EXPECT_FALSE(p->backward());
}

TEST(Safetensors, MissingTensorIsNamed) {
  auto ts = tiny_problem_tensors();
  ts.erase(ts.begin() + 2);  // w_up
  auto p = problem_from_tensors(ts, GradPrecision::kFP32);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("'w_up' is missing"), std::string::npos) << p.status().message();
}

TEST(Safetensors, WrongDtypeAndShapeAreNamed) {
  auto ts = tiny_problem_tensors();
  ts[0].dtype = DType::kFP32;  // x
  auto p = problem_from_tensors(ts, GradPrecision::kFP32);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("'x' has dtype fp32, expected bf16"), std::string::npos) << p.status().message();
  ts = tiny_problem_tensors();
  ts[3].shape = {4, 64, 128};  // w_down
  ts[3].bytes.resize(4 * 64 * 128 * 2);
  p = problem_from_tensors(ts, GradPrecision::kFP32);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("'w_down' has shape [4, 64, 128], expected [4, 64, 64]"), std::string::npos)
      << p.status().message();
}

TEST(Safetensors, InvalidRoutingInFileIsNamed) {
  auto ts = tiny_problem_tensors();
  const int32_t bad = 9;
  std::memcpy(&ts[4].bytes[3 * 4], &bad, 4);  // topk_idx[1,1]
  auto p = problem_from_tensors(ts, GradPrecision::kFP32);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("= 9"), std::string::npos) << p.status().message();
}

TEST(Safetensors, Int64IndicesAreNarrowedOrRejected) {
  // Hand-made file: topk_idx as I64 with one value that does not fit int32.
  const std::string header = R"({"topk_idx":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})";
  std::string file(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(file.data(), &n, 8);
  file += header;
  const int64_t vals[2] = {3, int64_t{1} << 40};
  file.append(reinterpret_cast<const char*>(vals), 16);
  {
    std::ofstream(temp("i64.safetensors"), std::ios::binary) << file;
  }
  auto r = read_safetensors(temp("i64.safetensors"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("1099511627776"), std::string::npos) << r.status().message();
}

TEST(Safetensors, TruncatedFileIsAnIoError) {
  { std::ofstream(temp("short.safetensors"), std::ios::binary) << "abc"; }
  auto r = read_safetensors(temp("short.safetensors"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kIoError);
}


// A file written by hand: header JSON as given, then `data_bytes` of data (a sparse tail when
// `sparse`, so a declared 64 GiB tensor costs no disk).
std::string hand_written(const char* name, const std::string& header, uint64_t data_bytes) {
  const std::string path = temp(name);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  const uint64_t len = header.size();
  f.write(reinterpret_cast<const char*>(&len), 8);
  f << header;
  f.close();
  std::filesystem::resize_file(path, 8 + header.size() + data_bytes);
  return path;
}

// The tiny problem with extra tensors appended (JSON fragments placed after its data).
std::string with_extras(const char* name, const std::string& extra_entries, uint64_t extra_bytes) {
  const auto ts = tiny_problem_tensors();
  std::string header = "{";
  uint64_t off = 0;
  for (const auto& t : ts) {
    header += fmt::format("\"{}\":{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}},", t.name,
                          t.dtype == DType::kBF16 ? "BF16" : t.dtype == DType::kFP32 ? "F32" : "I32",
                          fmt::join(t.shape, ","), off, off + t.bytes.size());
    off += t.bytes.size();
  }
  header += fmt::format(fmt::runtime(extra_entries), off) + "}";
  const std::string path = hand_written(name, header, off + extra_bytes);
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(static_cast<std::streamoff>(8 + header.size()));
  for (const auto& t : ts) f.write(reinterpret_cast<const char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
  return path;
}

TEST(Safetensors, HugeUnusedTensorIsNeverRead) {
  const uint64_t big = uint64_t{1} << 36;  // 64 GiB, sparse on disk
  const auto ts = tiny_problem_tensors();
  uint64_t used = 0;
  for (const auto& t : ts) used += t.bytes.size();
  const std::string path = with_extras(
      "huge.safetensors",
      "\"optimizer_state\":{{\"dtype\":\"F32\",\"shape\":[" + std::to_string(big / 4) + "],\"data_offsets\":[{0}," +
          std::to_string(used + big) + "]}},\"router_fp8\":{{\"dtype\":\"F8_E4M3\",\"shape\":[4],\"data_offsets\":[" +
          std::to_string(used + big) + "," + std::to_string(used + big + 4) + "]}}",
      big + 4);
  std::vector<std::string> unused;
  auto p = read_problem_safetensors(path, GradPrecision::kFP32, &unused);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->shape, (Shape{4, 64, 64, 4, 2, 1, 0}));
  EXPECT_EQ(unused, (std::vector<std::string>{"optimizer_state", "router_fp8"}));
  // Reading everything still refuses the dtype it cannot hold, naming it.
  auto all = read_safetensors_index(path);
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  auto fp8_entry = std::find_if(all->entries.begin(), all->entries.end(), [](const auto& e) { return e.name == "router_fp8"; });
  ASSERT_NE(fp8_entry, all->entries.end());
  auto fp8 = read_safetensors_tensor(*all, *fp8_entry);
  ASSERT_FALSE(fp8.ok());
  EXPECT_NE(fp8.status().message().find("F8_E4M3"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(Safetensors, FractionalOverlappingAndOversizedHeadersAreRefused) {
  auto expect_refused = [](const std::string& header, uint64_t data, const char* what) {
    const std::string path = hand_written("bad.safetensors", header, data);
    auto idx = read_safetensors_index(path);
    ASSERT_FALSE(idx.ok()) << header;
    EXPECT_NE(idx.status().message().find(what), std::string::npos) << idx.status().message();
  };
  expect_refused(R"({"x":{"dtype":"BF16","shape":[2.5,2],"data_offsets":[0,10]}})", 10, "2.5");
  expect_refused(R"({"x":{"dtype":"BF16","shape":[2,2],"data_offsets":[0.0,8]}})", 8, "0.0");
  expect_refused(R"({"x":{"dtype":"BF16","shape":[-2,2],"data_offsets":[0,8]}})", 8, "-2");
  expect_refused(R"({"a":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]},"b":{"dtype":"BF16","shape":[4],"data_offsets":[4,12]}})", 12,
                 "overlap");
  expect_refused(R"({"x":{"dtype":"BF16","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8, "more elements");
  expect_refused(R"([1,2,3])", 0, "not a JSON object");
  // A declared header length beyond the format's cap (the file is sparse, so this costs nothing).
  const std::string path = temp("hugeheader.safetensors");
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    const uint64_t len = (uint64_t{1} << 27);
    f.write(reinterpret_cast<const char*>(&len), 8);
  }
  std::filesystem::resize_file(path, 8 + (uint64_t{1} << 27));
  auto idx = read_safetensors_index(path);
  ASSERT_FALSE(idx.ok());
  EXPECT_NE(idx.status().message().find("limit"), std::string::npos) << idx.status().message();
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace detmoe
