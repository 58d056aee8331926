// Epilogues beyond plain stores: per-row scale and fused SwiGLU, each checked bit for bit
// against the fp32 epilogue of the same accumulators.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "detmoe/numeric.h"
#include "gemm_test_util.h"
#include "detmoe/contract_math.h"
#include "support/gpu.h"
#include "swiglu_reference.h"

namespace detmoe::gemm::testing {
namespace {

bool bf16_is_nan(uint16_t b) { return (b & 0x7fffu) > 0x7f80u; }

Problem forward_problem() {
  Problem p;
  p.layout = Layout::kForward;
  p.offsets = offsets_from_sizes({300, 0, 129, 1, 517}, 2);
  p.rows = p.offsets.back() + 3;
  p.n = 528;  // a multiple of 16, not of the 256-column tile
  p.k = 192;
  return p;
}

std::vector<bool> rows_in_groups(const Problem& p) {
  std::vector<bool> in(static_cast<size_t>(p.rows), false);
  for (int32_t g = 0; g < p.groups(); ++g)
    for (int32_t r = p.offsets[g]; r < p.offsets[g + 1]; ++r) in[r] = true;
  return in;
}

TEST(GemmEpilogue, InterleavedGateUpRows) {
  // F = 16: destination rows 0-7 gate 0-7, 8-15 up 0-7, 16-23 gate 8-15, 24-31 up 8-15.
  EXPECT_EQ(interleaved_gate_up_source_row(0, 16), 0);
  EXPECT_EQ(interleaved_gate_up_source_row(7, 16), 7);
  EXPECT_EQ(interleaved_gate_up_source_row(8, 16), 16);
  EXPECT_EQ(interleaved_gate_up_source_row(15, 16), 23);
  EXPECT_EQ(interleaved_gate_up_source_row(16, 16), 8);
  EXPECT_EQ(interleaved_gate_up_source_row(31, 16), 31);
}

TEST(GemmEpilogue, RowScaleIsTheRoundedFp32Product) {
  DETMOE_REQUIRE_GPU();
  const Problem p = forward_problem();
  const auto a = normal_bf16(static_cast<size_t>(p.rows * p.k), 41);
  const auto b = normal_bf16(static_cast<size_t>(p.b_rows() * p.k), 42);
  std::vector<float> scale(static_cast<size_t>(p.rows));
  for (size_t i = 0; i < scale.size(); ++i) scale[i] = 0.25f + 0.01f * static_cast<float>(i % 97);
  DeviceProblem d32, ds;
  upload_problem(p, a, b, Epilogue::kStoreFP32, d32);
  upload_problem(p, a, b, Epilogue::kRowScaleBF16, ds, scale);
  ASSERT_TRUE(run_problem(p, Epilogue::kStoreFP32, d32).ok());
  const Status s = run_problem(p, Epilogue::kRowScaleBF16, ds);
  ASSERT_TRUE(s.ok()) << s.to_string();
  const auto c32 = download<float>(d32.c, static_cast<size_t>(p.rows * p.n));
  const auto cs = download<uint16_t>(ds.c, static_cast<size_t>(p.rows * p.n));
  const auto in = rows_in_groups(p);
  int64_t bad = 0;
  for (int64_t r = 0; r < p.rows; ++r)
    for (int64_t j = 0; j < p.n; ++j) {
      const uint16_t got = cs[r * p.n + j];
      bad += in[r] ? got != float_to_bf16(c32[r * p.n + j] * scale[r]) : !bf16_is_nan(got);
    }
  EXPECT_EQ(bad, 0) << describe(p);
}

TEST(GemmEpilogue, SwiGLUMatchesTheContractBitwise) {
  DETMOE_REQUIRE_GPU();
  Problem p = forward_problem();
  const int64_t f = p.n / 2;
  // Separate gate and up weights per group, interleaved with the public helper.
  const auto x = normal_bf16(static_cast<size_t>(p.rows * p.k), 43);
  const auto w = normal_bf16(static_cast<size_t>(p.groups() * p.n * p.k), 44);  // [G, 2F (gate; up), K]
  std::vector<uint16_t> w_interleaved(w.size());
  for (int32_t g = 0; g < p.groups(); ++g)
    for (int64_t row = 0; row < p.n; ++row) {
      const int64_t src = interleaved_gate_up_source_row(row, f);
      std::copy_n(w.begin() + (g * p.n + src) * p.k, p.k, w_interleaved.begin() + (g * p.n + row) * p.k);
    }

  DeviceProblem d32, ds;
  upload_problem(p, x, w_interleaved, Epilogue::kStoreFP32, d32);
  upload_problem(p, x, w_interleaved, Epilogue::kSwiGLU, ds, {}, /*with_h=*/true);
  ASSERT_TRUE(run_problem(p, Epilogue::kStoreFP32, d32).ok());
  const Status s = run_problem(p, Epilogue::kSwiGLU, ds);
  ASSERT_TRUE(s.ok()) << s.to_string();

  DeviceBuffer ref(static_cast<size_t>(p.rows * f * 2));
  ASSERT_TRUE(swiglu_reference(d32.c.as<float>(), p.rows, p.n, ref.as<uint16_t>()));
  const auto c32 = download<float>(d32.c, static_cast<size_t>(p.rows * p.n));
  const auto act = download<uint16_t>(ds.c, static_cast<size_t>(p.rows * f));
  const auto h = download<uint16_t>(ds.h, static_cast<size_t>(p.rows * p.n));
  const auto want = download<uint16_t>(ref, static_cast<size_t>(p.rows * f));
  const auto in = rows_in_groups(p);

  int64_t bad_h = 0, bad_a = 0, far_from_host = 0;
  for (int64_t r = 0; r < p.rows; ++r) {
    for (int64_t j = 0; j < p.n; ++j) {
      const uint16_t got = h[r * p.n + j];
      bad_h += in[r] ? got != float_to_bf16(c32[r * p.n + j]) : !bf16_is_nan(got);
    }
    for (int64_t j = 0; j < f; ++j) {
      const uint16_t got = act[r * f + j];
      if (!in[r]) {
        bad_a += !bf16_is_nan(got);
        continue;
      }
      bad_a += got != want[r * f + j];
      // The contract in plain terms: gate column j of expert output, up column j, from the
      // un-interleaved weights' order. Host expf may differ from the device's by an ulp.
      const int64_t gate_col = (j / 8) * 16 + j % 8;
      const float g = round_bf16(c32[r * p.n + gate_col]);
      const float u = round_bf16(c32[r * p.n + gate_col + 8]);
      const uint16_t host = float_to_bf16(contract_swiglu(g, u));
      far_from_host += std::abs(static_cast<int>(host) - static_cast<int>(got)) > 1;
    }
  }
  EXPECT_EQ(bad_h, 0) << "h differs from bf16(fp32 GEMM output)";
  EXPECT_EQ(bad_a, 0) << "a differs from the device reference of the same formula";
  EXPECT_EQ(far_from_host, 0) << "a is more than one bf16 ulp from the host formula";
}

// A small grouped case of every layout and epilogue, for compute-sanitizer (memcheck,
// racecheck): ci runs it with --gtest_filter=GemmSanitizerCase.*.
TEST(GemmSanitizerCase, SmallGroupedAllLayouts) {
  DETMOE_REQUIRE_GPU();
  for (Layout l : {Layout::kForward, Layout::kDataGrad, Layout::kWeightGrad}) {
    Problem p;
    p.layout = l;
    p.offsets = offsets_from_sizes({70, 0, 131, 1}, 1);
    p.rows = p.offsets.back() + 2;
    p.n = 272;
    p.k = l == Layout::kWeightGrad ? 0 : 136;
    p.m = l == Layout::kWeightGrad ? 136 : 0;
    const auto a = integer_bf16(static_cast<size_t>(p.a_rows() * p.pitch_a()), -2, 2, 51);
    const auto b = integer_bf16(static_cast<size_t>(p.b_rows() * p.pitch_b()), -2, 2, 52);
    const auto ref = reference_product(p, a, b);
    std::vector<Epilogue> epilogues{Epilogue::kStoreFP32, Epilogue::kStoreBF16};
    if (l != Layout::kWeightGrad) epilogues.push_back(Epilogue::kRowScaleBF16);
    if (l == Layout::kForward) epilogues.push_back(Epilogue::kSwiGLU);
    for (Epilogue e : epilogues) {
      DeviceProblem d;
      upload_problem(p, a, b, e, d, std::vector<float>(static_cast<size_t>(p.rows), 0.5f), e == Epilogue::kSwiGLU);
      const Status s = run_problem(p, e, d, /*grid_ctas=*/3);
      ASSERT_TRUE(s.ok()) << describe(p) << " " << to_string(e) << ": " << s.to_string();
      if (e == Epilogue::kStoreFP32) {
        const auto c = download<float>(d.c, ref.size());
        int64_t bad = 0;
        for (size_t i = 0; i < ref.size(); ++i)
          bad += std::isnan(ref[i]) ? !std::isnan(c[i]) : c[i] != static_cast<float>(ref[i]);
        EXPECT_EQ(bad, 0) << describe(p);
      }
    }
  }
}

}  // namespace
}  // namespace detmoe::gemm::testing
