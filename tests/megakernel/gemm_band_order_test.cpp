// The weight-gradient launches' tile order (gemm/band_order.h weight_grad_order and
// ordered_band_coords): plain arithmetic that the scheduler runs on the device, checked here on
// the CPU — every tile exactly once in either orientation, and the orientation each named shape's
// launches get.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "megakernel/gemm/band_order.h"

namespace detmoe::gemm {
namespace {

constexpr int32_t kBlockM = 128, kBlockN = 256, kFixedBand = 8;

TEST(GemmBandOrder, EveryOrderVisitsEachTileOnce) {
  for (int32_t m_blocks : {1, 3, 8, 17, 32, 56}) {
    for (int32_t n_blocks : {1, 2, 8, 12, 28}) {
      for (int32_t band : {1, 3, 8, 16, 64}) {
        for (bool n_fastest : {false, true}) {
          for (bool balanced : {false, true}) {
            const std::string where = "m_blocks " + std::to_string(m_blocks) + " n_blocks " + std::to_string(n_blocks) +
                                      " band " + std::to_string(band) + (n_fastest ? " n-fastest" : " m-fastest") +
                                      (balanced ? " balanced" : "");
            std::vector<int> seen(static_cast<size_t>(m_blocks * n_blocks), 0);
            for (int32_t i = 0; i < m_blocks * n_blocks; ++i) {
              const BandCoords c = ordered_band_coords(i, m_blocks, n_blocks, GridOrder{band, n_fastest}, balanced);
              ASSERT_TRUE(c.m_block >= 0 && c.m_block < m_blocks && c.n_block >= 0 && c.n_block < n_blocks)
                  << where << " tile " << i;
              ++seen[static_cast<size_t>(c.m_block * n_blocks + c.n_block)];
              // The first `band`-block band runs its fast dimension first: tile 1 moves along it.
              if (i == 1 && band > 1 && (n_fastest ? n_blocks : m_blocks) > 1) {
                EXPECT_EQ(n_fastest ? c.n_block : c.m_block, 1) << where;
                EXPECT_EQ(n_fastest ? c.m_block : c.n_block, 0) << where;
              }
            }
            for (size_t t = 0; t < seen.size(); ++t) EXPECT_EQ(seen[t], 1) << where << " tile " << t;
          }
        }
      }
    }
  }
}

TEST(GemmBandOrder, MFastestUnbalancedIsTheFixedOrder) {
  for (int64_t i = 0; i < 56 * 28; ++i) {
    const BandCoords a = ordered_band_coords(i, 56, 28, GridOrder{kFixedBand, false}, false);
    const BandCoords b = band_coords(i, 56, 28, kFixedBand);
    EXPECT_EQ(a.m_block, b.m_block) << i;
    EXPECT_EQ(a.n_block, b.n_block) << i;
  }
}

GridOrder order_of(int64_t m, int64_t n, int32_t rows, int32_t budget_kb) {
  return weight_grad_order(static_cast<int32_t>((m + kBlockM - 1) / kBlockM),
                           static_cast<int32_t>((n + kBlockN - 1) / kBlockN), rows, budget_kb, kBlockM, kBlockN,
                           kFixedBand);
}

// Budget 0, an empty group or an empty grid: the GEMM core's fixed bands (the launch's old order).
TEST(GemmBandOrder, NoBudgetKeepsTheFixedBands) {
  for (const GridOrder o : {order_of(28672, 4096, 2048, 0), order_of(28672, 4096, 0, 8192), order_of(0, 4096, 2048, 8192)}) {
    EXPECT_EQ(o.band, kFixedBand);
    EXPECT_FALSE(o.n_fastest);
  }
}

// The four long-K launches at 8 MB (rows 2,048 per expert, balanced): an A panel is 0.5 MB and a
// B panel 1 MB, so a band holds 16 m-blocks or 8 n-blocks; each launch takes the orientation
// whose other operand is re-read fewer times (perf/wgrad_order_dram.py's predictions in
// docs/PERF.md session 40).
TEST(GemmBandOrder, NamedLaunchesAtEightMegabytes) {
  struct Want {
    const char* launch;
    int64_t m, n;
    int32_t band;
    bool n_fastest;
  };
  const Want wants[] = {
      {"mixtral-8x7b dW_gate_up (A 117 MB, B 17 MB per expert)", 28672, 4096, 8, true},
      {"mixtral-8x7b dW_down (A 17 MB, B 59 MB)", 4096, 14336, 16, false},
      {"deepseek-v3 dW_down (A 29 MB, B 8 MB)", 7168, 2048, 8, true},
      {"deepseek-v3 dW_gate_up (A 17 MB, B 29 MB)", 4096, 7168, 16, false},
  };
  for (const Want& w : wants) {
    const GridOrder o = order_of(w.m, w.n, 2048, 8192);
    EXPECT_EQ(o.band, w.band) << w.launch;
    EXPECT_EQ(o.n_fastest, w.n_fastest) << w.launch;
  }
}

// Bands shrink as the group's rows grow (a hot expert's panels are larger), down to the fixed
// bands' 8 blocks (a long group's concurrent tiles share k-slices, as in the fixed bands), and
// never exceed the grid.
TEST(GemmBandOrder, BandsFollowTheGroupsRows) {
  EXPECT_EQ(order_of(4096, 14336, 512, 8192).band, 32);   // 0.125 MB A panels: the whole A (32 m-blocks)
  EXPECT_EQ(order_of(4096, 14336, 4096, 8192).band, 8);   // 1 MB A panels: 8 m-blocks
  const GridOrder hot = order_of(28672, 4096, 65536, 8192);  // 16 MB A panels, 32 MB B panels
  EXPECT_EQ(hot.band, kFixedBand);
  EXPECT_TRUE(hot.n_fastest);  // A twice (16 n-blocks in bands of 8) reads less than B 28 times
  for (int32_t rows : {1, 64, 2048, 9424, 1 << 20}) {
    for (int32_t budget : {1, 512, 8192, 1 << 20}) {
      for (const auto& [m_blocks, n_blocks] : {std::pair{45, 12}, std::pair{3, 5}}) {
        const GridOrder o = weight_grad_order(m_blocks, n_blocks, rows, budget, kBlockM, kBlockN, kFixedBand);
        const int32_t blocks = o.n_fastest ? n_blocks : m_blocks;
        EXPECT_GE(o.band, std::min(kFixedBand, blocks)) << rows << " rows, " << budget << " KB";
        EXPECT_LE(o.band, blocks) << rows << " rows, " << budget << " KB";
      }
    }
  }
}

}  // namespace
}  // namespace detmoe::gemm
