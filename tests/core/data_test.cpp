// Seeded problem data: Philox matches the published answers, every tensor is a pure function of
// (seed, stream, global index), and the scales are the documented powers of two.
#include "detmoe/data.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <vector>

namespace detmoe {
namespace {

// rapidcheck scales inRange / element / arbitrary by its size parameter, which crowds early cases at
// the low end of each range; `full` draws from the whole range at every size (shrinking still works).
template <class T>
rc::Gen<T> full(rc::Gen<T> gen) {
  return rc::gen::resize(rc::kNominalSize, std::move(gen));
}

// Known answers of Philox4x32-10 from Random123's kat_vectors; our key is the seed's
// (low, high) 32-bit halves.
TEST(Philox, MatchesRandom123KnownAnswers) {
  struct Case {
    uint32_t counter[4];
    uint64_t seed;
    uint32_t expected[4];
  };
  const Case cases[] = {
      {{0, 0, 0, 0}, 0, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
       0xffffffffffffffffull,
       {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
       (uint64_t{0x299f31d0u} << 32) | 0xa4093822u,
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (const Case& c : cases) {
    const Philox4 out = philox4x32_10(c.seed, c.counter[0], c.counter[1], c.counter[2], c.counter[3]);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out.v[i], c.expected[i]) << "word " << i << " of seed " << c.seed;
  }
}

TEST(Philox, UniformIsTheTop24BitsOfTheFirstWord) {
  const uint32_t word = philox4x32_10(5, 7, 0, 3, 0).v[0];
  EXPECT_EQ(philox_u32(5, 3, 7), word);
  EXPECT_EQ(philox_uniform(5, 3, 7), static_cast<float>(word >> 8) / 16777216.0f);
  // The index's high half is the second counter word.
  EXPECT_EQ(philox_u32(5, 3, (uint64_t{9} << 32) | 7), philox4x32_10(5, 7, 9, 3, 0).v[0]);
}

Shape data_shape(int64_t T, int64_t P, int64_t Fs = 64) { return Shape{T, 128, 64, 4, 2, P, Fs}; }

bool same(const LayerData& a, const LayerData& b) {
  return a.x == b.x && a.w_gate == b.w_gate && a.w_up == b.w_up && a.w_down == b.w_down && a.ws_gate == b.ws_gate &&
         a.ws_up == b.ws_up && a.ws_down == b.ws_down && a.dout == b.dout;
}

TEST(LayerData, SameSeedGivesSameBytes) {
  EXPECT_TRUE(same(generate_layer_data(data_shape(8, 2), 17), generate_layer_data(data_shape(8, 2), 17)));
}

TEST(LayerData, DifferentSeedsDifferInEveryTensor) {
  const LayerData a = generate_layer_data(data_shape(8, 2), 17), b = generate_layer_data(data_shape(8, 2), 18);
  EXPECT_NE(a.x, b.x);
  EXPECT_NE(a.w_gate, b.w_gate);
  EXPECT_NE(a.w_up, b.w_up);
  EXPECT_NE(a.w_down, b.w_down);
  EXPECT_NE(a.ws_gate, b.ws_gate);
  EXPECT_NE(a.ws_up, b.ws_up);
  EXPECT_NE(a.ws_down, b.ws_down);
  EXPECT_NE(a.dout, b.dout);
}

TEST(LayerData, StreamsAreIndependent) {
  // Same seed, same index, different stream: gate and up weights must not be copies.
  const LayerData a = generate_layer_data(data_shape(8, 1), 3);
  EXPECT_NE(a.w_gate, a.w_up);
  EXPECT_NE(a.x, a.dout);
}

// D2: the global problem is the same bits whatever the EP split.
TEST(LayerData, SplitOverRanksGivesTheSameGlobalProblem) {
  EXPECT_TRUE(same(generate_layer_data(data_shape(16, 1), 5), generate_layer_data(data_shape(4, 4), 5)));
}

TEST(LayerData, SizesFollowTheShape) {
  const Shape s = data_shape(8, 2);
  const LayerData d = generate_layer_data(s, 1);
  EXPECT_EQ(d.x.size(), 16u * 128);
  EXPECT_EQ(d.w_gate.size(), 4u * 64 * 128);
  EXPECT_EQ(d.w_down.size(), 4u * 128 * 64);
  EXPECT_EQ(d.ws_down.size(), 128u * 64);
  EXPECT_EQ(d.dout.size(), 16u * 128);
  EXPECT_TRUE(generate_layer_data(data_shape(8, 2, 0), 1).ws_gate.empty());
}

// Counter-based: any sub-range is the matching slice of the whole, including the threaded path
// (fill_bf16 splits counts above 2^20 over threads).
RC_GTEST_PROP(FillBf16, SubRangeEqualsSliceOfWhole, ()) {
  const uint64_t seed = *full(rc::gen::arbitrary<uint64_t>());
  const int64_t whole = *full(rc::gen::inRange<int64_t>(1, 4096));
  const int64_t first = *full(rc::gen::inRange<int64_t>(0, whole));
  const int64_t count = *full(rc::gen::inRange<int64_t>(0, whole - first + 1));
  const int scale = *full(rc::gen::inRange(-8, 1));
  std::vector<uint16_t> all(whole), part(count);
  fill_bf16(all.data(), whole, seed, TensorStream::kX, 0, scale);
  fill_bf16(part.data(), count, seed, TensorStream::kX, static_cast<uint64_t>(first), scale);
  RC_ASSERT(std::equal(part.begin(), part.end(), all.begin() + first));
}

TEST(FillBf16, ThreadedFillEqualsElementwiseGeneration) {
  const int64_t count = (int64_t{1} << 20) + 77;
  const uint64_t first = (uint64_t{3} << 32) + 11;  // index above 2^32 uses the second counter word
  std::vector<uint16_t> v(count);
  fill_bf16(v.data(), count, 99, TensorStream::kWDown, first, -5);
  for (int64_t i = 0; i < count; i += 997)
    ASSERT_EQ(v[i], generated_bf16_bits(99, TensorStream::kWDown, first + i, -5)) << i;
  ASSERT_EQ(v[count - 1], generated_bf16_bits(99, TensorStream::kWDown, first + count - 1, -5));
}

TEST(Scale, WeightScaleIsMinusCeilHalfLog2FanIn) {
  EXPECT_EQ(weight_scale_log2(1), 0);
  EXPECT_EQ(weight_scale_log2(2), -1);
  EXPECT_EQ(weight_scale_log2(64), -3);
  EXPECT_EQ(weight_scale_log2(128), -4);  // ceil(3.5)
  EXPECT_EQ(weight_scale_log2(768), -5);  // log2 768 ≈ 9.58 → ceil(log2)/2 = 5
  EXPECT_EQ(weight_scale_log2(2048), -6);
  EXPECT_EQ(weight_scale_log2(7168), -7);
}

TEST(Scale, StreamsUseTheirFanIn) {
  const Shape s{8, 2048, 768, 8, 2, 1, 1024};
  EXPECT_EQ(stream_scale_log2(s, TensorStream::kX), 0);
  EXPECT_EQ(stream_scale_log2(s, TensorStream::kDout), 0);
  EXPECT_EQ(stream_scale_log2(s, TensorStream::kWGate), weight_scale_log2(2048));
  EXPECT_EQ(stream_scale_log2(s, TensorStream::kWUp), weight_scale_log2(2048));
  EXPECT_EQ(stream_scale_log2(s, TensorStream::kWDown), weight_scale_log2(768));
  EXPECT_EQ(stream_scale_log2(s, TensorStream::kWsGate), weight_scale_log2(2048));
  EXPECT_EQ(stream_scale_log2(s, TensorStream::kWsDown), weight_scale_log2(1024));
}

// Values are bf16(2^scale · (2u − 1)): inside [−2^scale, 2^scale], filling that range (max close to
// the bound, mean near 0), and exactly the documented formula.
TEST(Scale, GeneratedValuesSpanTheirRange) {
  const Shape s{64, 256, 128, 4, 2, 1, 0};
  const LayerData d = generate_layer_data(s, 23);
  auto check = [](const std::vector<uint16_t>& v, int scale, const char* name) {
    const double bound = std::ldexp(1.0, scale);
    double max_abs = 0, sum = 0;
    for (uint16_t b : v) {
      const double f = float_from_bf16_bits(b);
      ASSERT_LE(std::abs(f), bound) << name;
      max_abs = std::max(max_abs, std::abs(f));
      sum += f;
    }
    EXPECT_GT(max_abs, 0.99 * bound) << name;
    EXPECT_LT(std::abs(sum / v.size()), 0.02 * bound) << name;
  };
  check(d.x, 0, "x");
  check(d.dout, 0, "dout");
  check(d.w_gate, -4, "w_gate");  // fan-in H = 256
  check(d.w_down, -4, "w_down");  // fan-in F = 128 → ceil(3.5)
  const float u = philox_uniform(23, static_cast<uint32_t>(TensorStream::kWUp), 5);
  EXPECT_EQ(d.w_up[5], bf16_bits_from_float((2.0f * u - 1.0f) / 16.0f));
}

}  // namespace
}  // namespace detmoe
