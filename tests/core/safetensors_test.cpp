// safetensors round trip and the errors a replay user sees for bad files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>

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

}  // namespace
}  // namespace detmoe
