// Schedule invariance (DESIGN.md §3 D1): the bits do not depend on the persistent grid's size,
// and a group computed inside a grouped call equals the same group computed alone.
#include <gtest/gtest.h>

#include <cstring>

#include "gemm_test_util.h"
#include "megakernel/gemm/band_order.h"
#include "support/gpu.h"

namespace detmoe::gemm::testing {
namespace {

struct Case {
  Problem p;
  std::vector<uint16_t> a, b;
};

Case make_case(Layout layout, uint64_t seed) {
  Case c;
  c.p.layout = layout;
  const std::vector<int32_t> sizes{300, 0, 517, 1, 128, 1000, 0, 64};
  c.p.offsets = offsets_from_sizes(sizes, 3);
  c.p.rows = c.p.offsets.back() + 2;
  c.p.n = 520;
  c.p.k = layout == Layout::kWeightGrad ? 0 : 264;
  c.p.m = layout == Layout::kWeightGrad ? 200 : 0;
  c.a = normal_bf16(static_cast<size_t>(c.p.a_rows() * c.p.pitch_a()), seed);
  c.b = normal_bf16(static_cast<size_t>(c.p.b_rows() * c.p.pitch_b()), seed + 1);
  return c;
}

std::vector<uint8_t> run_bytes(const Case& c, Epilogue e, int32_t grid, unsigned int* tickets = nullptr,
                               int32_t band_budget_kb = 0, bool stream_stores = false, bool deep_store_ring = false) {
  DeviceProblem d;
  upload_problem(c.p, c.a, c.b, e, d);
  const Status s = run_problem(c.p, e, d, grid, true, tickets, band_budget_kb, stream_stores, deep_store_ring);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return download<uint8_t>(d.c, d.c.bytes());
}

class GemmSchedule : public ::testing::TestWithParam<Layout> {};

TEST_P(GemmSchedule, GridSizeDoesNotChangeBits) {
  DETMOE_REQUIRE_GPU();
  const Case c = make_case(GetParam(), 21);
  for (Epilogue e : {Epilogue::kStoreFP32, Epilogue::kStoreBF16}) {
    const auto full = run_bytes(c, e, 132);
    for (int32_t grid : {66, 17, 1, 0, 1000}) {
      const auto other = run_bytes(c, e, grid);
      ASSERT_EQ(full.size(), other.size());
      EXPECT_EQ(std::memcmp(full.data(), other.data(), full.size()), 0)
          << describe(c.p) << ", " << to_string(e) << ": grid " << grid << " differs from grid 132";
    }
  }
}

// Output tiles of a problem (128 × 256 each), as the scheduler numbers them.
int64_t tile_count(const Problem& p) {
  const int64_t n_blocks = (p.n + 255) / 256;
  if (p.layout == Layout::kWeightGrad) return p.groups() * ((p.m + 127) / 128) * n_blocks;
  int64_t tiles = 0;
  for (int32_t g = 0; g < p.groups(); ++g) tiles += (p.offsets[g + 1] - p.offsets[g] + 127) / 128 * n_blocks;
  return tiles;
}

unsigned int read_counter(const DeviceBuffer& counter) {
  unsigned int v = 0;
  EXPECT_EQ(cudaMemcpy(&v, counter.get(), sizeof v, cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

// The ticket deal (GroupedGemm::tile_tickets) runs the same tiles on other CTAs: same bits at
// every grid size. Uneven groups (the case's: largest 1000 rows against a mean of 251) take
// tickets — every CTA takes one past the last tile, so the counter ends at tiles + grid; even
// groups keep the static deal and leave it at 0. The counter starts at garbage and is reused by
// every run, so a run() that did not zero it would skip tiles and leave the poisoned NaN in C.
TEST_P(GemmSchedule, TicketDealDoesNotChangeBits) {
  DETMOE_REQUIRE_GPU();
  Case even = make_case(GetParam(), 25);
  even.p.offsets = offsets_from_sizes({256, 256, 256, 256}, 3);
  even.p.rows = even.p.offsets.back() + 2;
  even.a = normal_bf16(static_cast<size_t>(even.p.a_rows() * even.p.pitch_a()), 25);
  even.b = normal_bf16(static_cast<size_t>(even.p.b_rows() * even.p.pitch_b()), 26);
  const Case uneven = make_case(GetParam(), 24);
  DeviceBuffer counter(sizeof(unsigned int));
  ASSERT_EQ(cudaMemset(counter.get(), 0x5A, sizeof(unsigned int)), cudaSuccess);
  const Case* const cases[] = {&uneven, &even};
  for (const Case* c : cases) {
    const bool by_tickets = c == &uneven;
    for (Epilogue e : {Epilogue::kStoreFP32, Epilogue::kStoreBF16}) {
      const auto fixed = run_bytes(*c, e, 132);
      for (int32_t grid : {132, 66, 17, 1, 1000}) {
        const auto dealt = run_bytes(*c, e, grid, counter.as<unsigned int>());
        ASSERT_EQ(fixed.size(), dealt.size());
        EXPECT_EQ(std::memcmp(fixed.data(), dealt.data(), fixed.size()), 0)
            << describe(c->p) << ", " << to_string(e) << ": the deal with a counter on grid " << grid
            << " differs from the static deal on grid 132";
        EXPECT_EQ(int64_t{read_counter(counter)}, by_tickets ? tile_count(c->p) + grid : int64_t{0})
            << describe(c->p) << ", grid " << grid << (by_tickets ? ": uneven groups" : ": even groups");
      }
    }
  }
}

// Evict-first stores (GroupedGemm::stream_stores) change what L2 keeps, not what is stored: every
// layout and store epilogue gives the same bits with them, at two grids.
TEST_P(GemmSchedule, StreamStoresDoNotChangeBits) {
  DETMOE_REQUIRE_GPU();
  const Case c = make_case(GetParam(), 27);
  for (Epilogue e : {Epilogue::kStoreFP32, Epilogue::kStoreBF16}) {
    const auto plain = run_bytes(c, e, 132);
    for (int32_t grid : {132, 17}) {
      const auto hinted = run_bytes(c, e, grid, nullptr, 0, true);
      ASSERT_EQ(plain.size(), hinted.size());
      EXPECT_EQ(std::memcmp(plain.data(), hinted.data(), plain.size()), 0)
          << describe(c.p) << ", " << to_string(e) << ": evict-first stores at grid " << grid << " differ";
    }
  }
}

TEST_P(GemmSchedule, RerunGivesIdenticalBits) {
  DETMOE_REQUIRE_GPU();
  const Case c = make_case(GetParam(), 22);
  const auto first = run_bytes(c, Epilogue::kStoreFP32, 0);
  for (int i = 0; i < 3; ++i) {
    const auto again = run_bytes(c, Epilogue::kStoreFP32, 0);
    EXPECT_EQ(std::memcmp(first.data(), again.data(), first.size()), 0) << "rerun " << i;
  }
}

// Each group run as its own single-group problem (its slices of A, B and C) gives the same bits.
TEST_P(GemmSchedule, GroupedEqualsEachGroupAlone) {
  DETMOE_REQUIRE_GPU();
  const Case c = make_case(GetParam(), 23);
  const Problem& p = c.p;
  const Epilogue e = Epilogue::kStoreFP32;
  const auto grouped = run_bytes(c, e, 0);
  const auto* grouped_c = reinterpret_cast<const float*>(grouped.data());
  for (int32_t g = 0; g < p.groups(); ++g) {
    const int32_t r0 = p.offsets[g], r1 = p.offsets[g + 1];
    Case alone;
    alone.p = p;
    alone.p.offsets = {0, r1 - r0};
    alone.p.rows = r1 - r0;
    alone.a.assign(c.a.begin() + int64_t{r0} * p.pitch_a(), c.a.begin() + int64_t{r1} * p.pitch_a());
    if (p.layout == Layout::kWeightGrad) {
      alone.b.assign(c.b.begin() + int64_t{r0} * p.pitch_b(), c.b.begin() + int64_t{r1} * p.pitch_b());
    } else {
      const int64_t per_group = p.layout == Layout::kForward ? p.n : p.k;
      alone.b.assign(c.b.begin() + g * per_group * p.pitch_b(), c.b.begin() + (g + 1) * per_group * p.pitch_b());
    }
    const auto single = run_bytes(alone, e, 0);
    const auto* single_c = reinterpret_cast<const float*>(single.data());
    const int64_t first_row = p.layout == Layout::kWeightGrad ? int64_t{g} * p.m : r0;
    const int64_t count = (p.layout == Layout::kWeightGrad ? p.m : r1 - r0) * p.n;
    EXPECT_EQ(std::memcmp(grouped_c + first_row * p.n, single_c, static_cast<size_t>(count) * sizeof(float)), 0)
        << describe(p) << ": group " << g << " differs from running it alone";
  }
}

// The weight-grad launches' band budget (GroupedGemm::band_budget_kb) reorders each group's tiles
// by its rows, m-fastest or n-fastest bands: the same tiles on other CTAs, so the same bits — at
// budgets whose groups take both orientations (checked with the scheduler's own rule), with the
// static and the ticket deal, at a grid far below the tile count, and with evict-first stores.
TEST(GemmWeightGradOrder, BandBudgetDoesNotChangeBits) {
  DETMOE_REQUIRE_GPU();
  Case c = make_case(Layout::kWeightGrad, 26);
  c.p.m = 1100;  // 9 m-blocks
  c.p.n = 2400;  // 10 n-blocks
  c.a = normal_bf16(static_cast<size_t>(c.p.a_rows() * c.p.pitch_a()), 26);
  c.b = normal_bf16(static_cast<size_t>(c.p.b_rows() * c.p.pitch_b()), 27);
  const int32_t m_blocks = 9, n_blocks = 10;
  // At 1,000 KB the 1000-row group takes n-fastest bands (its panels allow 4 m-blocks or 2 n-blocks,
  // raised to the 8-block floor: n-blocks in balanced bands of 5) and the 300-row group m-fastest
  // ones (all 9 m-blocks); both must be covered.
  bool n_fastest = false, m_fastest = false;
  for (int32_t g = 0; g < c.p.groups(); ++g) {
    const int32_t rows = c.p.offsets[g + 1] - c.p.offsets[g];
    if (rows == 0) continue;
    const GridOrder o = weight_grad_order(m_blocks, n_blocks, rows, 1000, 128, 256, 8);
    (o.n_fastest ? n_fastest : m_fastest) = true;
  }
  ASSERT_TRUE(n_fastest && m_fastest) << "the case no longer covers both orientations at 1,000 KB";
  DeviceBuffer counter(sizeof(unsigned int));
  for (Epilogue e : {Epilogue::kStoreFP32, Epilogue::kStoreBF16}) {
    const auto fixed = run_bytes(c, e, 132);
    for (int32_t budget : {1, 64, 1000, 8192, 1 << 20}) {
      for (int32_t grid : {132, 7}) {
        for (unsigned int* tickets : {static_cast<unsigned int*>(nullptr), counter.as<unsigned int>()}) {
          const bool stream = grid == 7;
          const auto other = run_bytes(c, e, grid, tickets, budget, stream);
          ASSERT_EQ(fixed.size(), other.size());
          EXPECT_EQ(std::memcmp(fixed.data(), other.data(), fixed.size()), 0)
              << describe(c.p) << ", " << to_string(e) << ": band budget " << budget << " KB, grid " << grid
              << (tickets ? ", tickets" : ", static") << (stream ? ", evict-first stores" : "")
              << " differs from fixed bands";
        }
      }
    }
  }
}

// The deep store ring (GroupedGemm::deep_store_ring: 3 operand stages, 5 staging slabs per
// warpgroup) runs the same weight-gradient tiles with the same k order and stores: the same bits
// for both store epilogues, at the full grid and at 7 CTAs, with the ticket deal, the layer's
// order and evict-first stores — and on a problem of short groups (64 rows: one k-block each),
// where the ring's slabs are reused across many tiles.
TEST(GemmWeightGradOrder, DeepStoreRingDoesNotChangeBits) {
  DETMOE_REQUIRE_GPU();
  Case longer = make_case(Layout::kWeightGrad, 28);
  Case shorter = make_case(Layout::kWeightGrad, 29);
  shorter.p.offsets = offsets_from_sizes({64, 64, 3, 64, 0, 64, 64, 64, 64, 64}, 3);
  shorter.p.rows = shorter.p.offsets.back() + 2;
  shorter.a = normal_bf16(static_cast<size_t>(shorter.p.a_rows() * shorter.p.pitch_a()), 29);
  shorter.b = normal_bf16(static_cast<size_t>(shorter.p.b_rows() * shorter.p.pitch_b()), 30);
  DeviceBuffer counter(sizeof(unsigned int));
  for (const Case* c : {&longer, &shorter}) {
    for (Epilogue e : {Epilogue::kStoreFP32, Epilogue::kStoreBF16}) {
      const auto plain = run_bytes(*c, e, 132);
      for (int32_t grid : {132, 7}) {
        const bool knobs = grid == 7;  // tickets, the layer's order and evict-first stores with the small grid
        const auto ring = run_bytes(*c, e, grid, knobs ? counter.as<unsigned int>() : nullptr, knobs ? 8192 : 0, knobs,
                                    /*deep_store_ring=*/true);
        ASSERT_EQ(plain.size(), ring.size());
        EXPECT_EQ(std::memcmp(plain.data(), ring.data(), plain.size()), 0)
            << describe(c->p) << ", " << to_string(e) << ": the deep store ring at grid " << grid
            << (knobs ? " (tickets, 8 MB order, evict-first)" : "") << " differs";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, GemmSchedule,
                         ::testing::Values(Layout::kForward, Layout::kDataGrad, Layout::kWeightGrad),
                         layout_param_name<::testing::TestParamInfo<Layout>>);

}  // namespace
}  // namespace detmoe::gemm::testing
