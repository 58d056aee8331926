// GroupedGemm::a_gather (kForward, experimental): A's rows read in place from a source buffer,
// one TMA box per row. It must give the bits of the same GEMM over the gathered rows stored
// contiguously — same operand values, same k order — including rows past a group's end, indices
// outside the source (zeros), repeated indices and groups of every fill.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gemm_test_util.h"
#include "support/gpu.h"

namespace detmoe::gemm::testing {
namespace {

struct GatherCase {
  std::vector<int32_t> sizes;
  int64_t n, k, source_rows;
  Epilogue epilogue;
  int32_t grid_ctas = 0;  // 0: one per SM
  bool identity = false;  // index r → r (no repeats, none outside)
};

// DETMOE_GATHER_MODE selects the diagnostic issue form (GroupedGemm::a_gather_mode); 0 by default.
int32_t gather_mode() {
  const char* m = std::getenv("DETMOE_GATHER_MODE");
  return m == nullptr ? 0 : std::atoi(m);
}

// Runs the case twice — contiguous A built on the host, and A gathered from the source — on
// NaN-poisoned outputs, and compares C bit for bit.
void check_gather(const GatherCase& gc, uint64_t seed) {
  Problem p;
  p.layout = Layout::kForward;
  p.offsets = offsets_from_sizes(gc.sizes);
  p.rows = p.offsets.back();
  p.n = gc.n;
  p.k = gc.k;
  const auto source = normal_bf16(static_cast<size_t>(gc.source_rows * gc.k), seed);
  const auto b = normal_bf16(static_cast<size_t>(p.b_rows() * p.pitch_b()), seed + 1);
  // Indices: random source rows with repeats, every 17th row outside the source (must read 0).
  std::mt19937_64 rng(seed + 2);
  std::vector<int32_t> index(static_cast<size_t>(p.rows));
  std::vector<uint16_t> a(static_cast<size_t>(p.rows * gc.k), 0);
  for (int64_t r = 0; r < p.rows; ++r) {
    const bool outside = !gc.identity && r % 17 == 5;
    const int32_t s = outside ? static_cast<int32_t>(gc.source_rows + r % 3)
                          : gc.identity ? static_cast<int32_t>(r % gc.source_rows)
                                        : static_cast<int32_t>(rng() % static_cast<uint64_t>(gc.source_rows));
    index[static_cast<size_t>(r)] = outside && r % 2 ? -1 : s;
    if (!outside) std::memcpy(&a[static_cast<size_t>(r * gc.k)], &source[static_cast<size_t>(s * gc.k)], gc.k * 2);
  }
  DeviceProblem contiguous;
  upload_problem(p, a, b, gc.epilogue, contiguous);
  const Status sc = run_problem(p, gc.epilogue, contiguous);
  ASSERT_TRUE(sc.ok()) << describe(p) << ": " << sc.to_string();

  DeviceProblem gathered;
  upload_problem(p, a, b, gc.epilogue, gathered);
  const DeviceBuffer src = upload(source), idx = upload(index);
  cudaMemset(gathered.c.get(), 0xFF, gathered.c.bytes());
  GroupedGemm g;
  g.layout = Layout::kForward;
  g.epilogue = gc.epilogue;
  g.rows = p.rows;
  g.n = p.n;
  g.k = p.k;
  g.groups = p.groups();
  g.group_offsets = gathered.offsets.as<int32_t>();
  g.a = src.get();
  g.a_gather = idx.as<int32_t>();
  g.a_source_rows = gc.source_rows;
  g.a_gather_mode = gather_mode();
  g.grid_ctas = gc.grid_ctas;
  g.b = gathered.b.get();
  g.c = gathered.c.get();
  g.ldc = gathered.ldc;
  const Status sg = run(g, nullptr);
  ASSERT_TRUE(sg.ok()) << sg.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  const size_t bytes = contiguous.c.bytes();
  const auto want = download<uint8_t>(contiguous.c, bytes);
  const auto got = download<uint8_t>(gathered.c, bytes);
  size_t first = bytes;
  for (size_t i = 0; i < bytes && first == bytes; ++i)
    if (want[i] != got[i]) first = i;
  EXPECT_EQ(first, bytes) << describe(p) << ", " << to_string(gc.epilogue) << ": first differing byte " << first
                          << " of " << bytes << " (row " << first / (bytes / static_cast<size_t>(p.rows)) << ")";
}

struct NamedGatherCase {
  const char* name;
  GatherCase gc;
};

class GemmGatherCases : public ::testing::TestWithParam<NamedGatherCase> {};

TEST_P(GemmGatherCases, SameBitsAsTheContiguousRows) {
  DETMOE_REQUIRE_GPU();
  check_gather(GetParam().gc, 41 + 10 * static_cast<uint64_t>(GetParam().gc.k));
}

// Small cases give every CTA at most one tile; the larger ones make CTAs walk several tiles
// (the stage ring wraps across tiles) — session 20's benchmark fault and session 21's first
// multi-tile case faulted there. The diagnostic cases split the suspects: K alone (one tile per
// CTA at K = 2048), tiles alone (K = 512, many tiles), the grid (one CTA per tile) and the
// index pattern (identity).
INSTANTIATE_TEST_SUITE_P(
    GemmGatherA, GemmGatherCases,
    ::testing::Values(
        NamedGatherCase{"OneTile", {{128}, 256, 64, 300, Epilogue::kStoreBF16}},
        NamedGatherCase{"RaggedGroups", {{1, 0, 127, 129, 300}, 256, 192, 1000, Epilogue::kStoreBF16}},
        NamedGatherCase{"FP32Store", {{77, 256, 5}, 512, 1024, 97, Epilogue::kStoreFP32}},
        NamedGatherCase{"TwoTallGroups", {{2048, 2048}, 256, 512, 4096, Epilogue::kStoreBF16}},
        NamedGatherCase{"LongKOneTilePerCta", {std::vector<int32_t>(8, 1000), 256, 2048, 16384, Epilogue::kStoreBF16}},
        NamedGatherCase{"ShortKManyTiles", {std::vector<int32_t>(16, 1000), 512, 512, 16384, Epilogue::kStoreBF16}},
        NamedGatherCase{"LongKManyTiles", {std::vector<int32_t>(16, 1000), 512, 2048, 16384, Epilogue::kStoreBF16}},
        NamedGatherCase{"LongKManyTilesOneEach", {std::vector<int32_t>(16, 1000), 512, 2048, 16384, Epilogue::kStoreBF16, 256}},
        NamedGatherCase{"LongKManyTilesIdentity", {std::vector<int32_t>(16, 1000), 512, 2048, 16384, Epilogue::kStoreBF16, 0, true}}),
    [](const ::testing::TestParamInfo<NamedGatherCase>& info) { return std::string(info.param.name); });

// qwen3-30b-a3b's up-projection at full size (128 experts × 1024 rows, K = 2048, N = 1536, x of
// 16384 rows): 6144 tiles, ~47 per CTA.
TEST(GemmGatherA, FullSizeUpProjectionSameBits) {
  DETMOE_REQUIRE_GPU();
  check_gather({std::vector<int32_t>(128, 1024), 1536, 2048, 16384, Epilogue::kStoreBF16}, 97);
}

TEST(GemmGatherA, OnlyTheForwardLayoutGathers) {
  GroupedGemm g;
  g.layout = Layout::kDataGrad;
  int32_t dummy = 0;
  g.a_gather = &dummy;
  g.a_source_rows = 1;
  const Status s = validate(g);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.to_string().find("a_gather"), std::string::npos) << s.to_string();
  g.layout = Layout::kForward;
  g.a_source_rows = 0;
  const Status s2 = validate(g);
  EXPECT_NE(s2.to_string().find("a_source_rows = 0"), std::string::npos) << s2.to_string();
}

}  // namespace
}  // namespace detmoe::gemm::testing
