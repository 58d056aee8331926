// The row exchange backends: rows land where the segments say, merged runs included; the NCCL
// backend with one rank runs the same segments; bad segment lists are refused.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <numeric>

#include "detmoe/row_exchange.h"
#include "support/gpu.h"

namespace detmoe {
namespace {

constexpr int64_t kRowBytes = 32;

// Rank r's source row i is filled with bytes (r·16 + i) & 0xff; destinations start at 0xee.
void run_and_check(RowExchange& ex, const std::vector<RowSegment>& segments, int64_t rows) {
  const int n = ex.local_count();
  std::vector<void*> src(n), dst(n);
  for (int slot = 0; slot < n; ++slot) {
    ASSERT_EQ(cudaMalloc(&src[slot], rows * kRowBytes), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dst[slot], rows * kRowBytes), cudaSuccess);
    std::vector<uint8_t> host(rows * kRowBytes);
    for (int64_t i = 0; i < rows; ++i)
      std::fill_n(host.begin() + i * kRowBytes, kRowBytes, static_cast<uint8_t>((ex.local_rank(slot) * 16 + i) & 0xff));
    ASSERT_EQ(cudaMemcpy(src[slot], host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemset(dst[slot], 0xee, rows * kRowBytes), cudaSuccess);
  }
  // cudaMemset and a pageable cudaMemcpy may return before they land; the exchange's
  // non-blocking streams do not wait for the legacy stream.
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<const void*> csrc(src.begin(), src.end());
  const Status st = ex.exchange(segments, csrc, dst, kRowBytes);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_TRUE(ex.synchronize().ok());
  for (int slot = 0; slot < n; ++slot) {
    std::vector<uint8_t> expect(rows * kRowBytes, 0xee), got(rows * kRowBytes);
    for (const RowSegment& s : segments)
      if (s.dst_rank == ex.local_rank(slot))
        for (int64_t i = 0; i < s.rows; ++i)
          std::fill_n(expect.begin() + (s.dst_row + i) * kRowBytes, kRowBytes,
                      static_cast<uint8_t>((s.src_rank * 16 + s.src_row + i) & 0xff));
    ASSERT_EQ(cudaMemcpy(got.data(), dst[slot], got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(got, expect) << "rank " << ex.local_rank(slot);
    cudaFree(src[slot]);
    cudaFree(dst[slot]);
  }
}

TEST(RowExchange, LoopbackMovesEverySegment) {
  DETMOE_REQUIRE_GPU();
  auto ex = make_loopback_exchange(3);
  ASSERT_TRUE(ex.ok()) << ex.status().to_string();
  EXPECT_STREQ((*ex)->backend(), "loopback");
  // Contiguous runs (merged into one copy), a self-copy, and rows from several sources.
  const std::vector<RowSegment> segments = {{0, 1, 0, 0, 2}, {0, 1, 2, 2, 3}, {2, 1, 7, 5, 1}, {1, 1, 3, 6, 2},
                                            {1, 0, 0, 9, 4}, {2, 2, 1, 0, 3}, {0, 2, 0, 3, 0}};
  run_and_check(**ex, segments, 16);
}

TEST(RowExchange, NcclSingleRankRunsTheSameSegments) {
  DETMOE_REQUIRE_GPU();
  auto ex = make_nccl_exchange({0});
  ASSERT_TRUE(ex.ok()) << ex.status().to_string() << " (NCCL " << nccl_version_string() << ")";
  EXPECT_STREQ((*ex)->backend(), "nccl");
  run_and_check(**ex, {{0, 0, 0, 4, 3}, {0, 0, 5, 0, 2}, {0, 0, 9, 9, 0}}, 16);
}

TEST(RowExchange, RefusesWhatCannotWork) {
  DETMOE_REQUIRE_GPU();
  EXPECT_FALSE(make_loopback_exchange(0).ok());
  EXPECT_FALSE(make_nccl_exchange({0, 0}).ok());  // NCCL allows one rank per GPU
  const std::vector<int64_t> rows = {8, 8};
  const std::vector<RowSegment> bad_rank = {{0, 2, 0, 0, 1}};
  EXPECT_EQ(validate_segments(bad_rank, 2, rows, rows).code(), ErrorCode::kInvalidArgument);
  const std::vector<RowSegment> overflow = {{0, 1, 6, 0, 3}};
  const Status st = validate_segments(overflow, 2, rows, rows);
  EXPECT_EQ(st.code(), ErrorCode::kCapacityExceeded);
  EXPECT_NE(st.message().find("holds 8 rows"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace detmoe
