// Bad input is reported with a message that names the field and value, before any device
// work (these tests need no GPU).
#include <gtest/gtest.h>

#include "detmoe/gemm.h"

namespace detmoe::gemm {
namespace {

alignas(16) uint16_t g_storage[1024];

GroupedGemm valid_forward() {
  GroupedGemm g;
  g.layout = Layout::kForward;
  g.rows = 16;
  g.n = 64;
  g.k = 64;
  g.a = g_storage;
  g.b = g_storage;
  g.c = g_storage;
  return g;
}

void expect_invalid(const GroupedGemm& g, const std::string& fragment) {
  const Status s = validate(g);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find(fragment), std::string::npos) << "message: " << s.message();
  // run() reports the same problem, and never reaches the device.
  const Status r = run(g, nullptr);
  EXPECT_EQ(r.message(), s.message());
}

TEST(GemmValidate, AcceptsAValidProblem) { EXPECT_TRUE(validate(valid_forward()).ok()); }

TEST(GemmValidate, NamesNegativeSizes) {
  GroupedGemm g = valid_forward();
  g.rows = -3;
  expect_invalid(g, "rows = -3 is negative");
  g = valid_forward();
  g.n = -1;
  expect_invalid(g, "n = -1");
}

TEST(GemmValidate, GroupsNeedOffsets) {
  GroupedGemm g = valid_forward();
  g.groups = 4;
  expect_invalid(g, "groups = 4 needs group_offsets");
  g.groups = 0;
  expect_invalid(g, "groups = 0 must be at least 1");
}

TEST(GemmValidate, NamesMisalignedPointersAndPitches) {
  GroupedGemm g = valid_forward();
  g.a = reinterpret_cast<const char*>(g_storage) + 2;
  expect_invalid(g, "a is not 16-byte aligned");
  g = valid_forward();
  g.k = 60;  // 120-byte rows
  expect_invalid(g, "row pitch of a (60 elements of 2 bytes)");
  g = valid_forward();
  g.ldc = 32;
  expect_invalid(g, "ldc = 32 is smaller than the 64 columns of c");
  g = valid_forward();
  g.c = nullptr;
  expect_invalid(g, "c is null");
}

TEST(GemmValidate, NamesAMisalignedTicketCounter) {
  GroupedGemm g = valid_forward();
  g.tile_tickets = reinterpret_cast<unsigned int*>(reinterpret_cast<uintptr_t>(g_storage) + 2);
  expect_invalid(g, "tile_tickets is not 4-byte aligned (address % 4 = 2)");
  g.tile_tickets = reinterpret_cast<unsigned int*>(g_storage);
  EXPECT_TRUE(validate(g).ok());
}

TEST(GemmValidate, NamesABadBandBudget) {
  GroupedGemm g = valid_forward();
  g.band_budget_kb = 8192;
  expect_invalid(g, "band_budget_kb = 8192 orders weight-grad tiles only, not forward (0 there)");
  g = valid_forward();
  g.layout = Layout::kWeightGrad;
  g.m = 64;
  g.k = 0;
  ASSERT_TRUE(validate(g).ok()) << validate(g).to_string();
  g.band_budget_kb = -1;
  expect_invalid(g, "band_budget_kb = -1 is negative (0 = fixed bands)");
  g.band_budget_kb = 8192;
  EXPECT_TRUE(validate(g).ok());
}

TEST(GemmValidate, DeepStoreRingIsAWeightGradForm) {
  GroupedGemm g = valid_forward();
  g.deep_store_ring = true;
  expect_invalid(g, "deep_store_ring is a weight-grad form, not forward");
  g.layout = Layout::kWeightGrad;
  g.m = 64;
  g.k = 0;
  EXPECT_TRUE(validate(g).ok()) << validate(g).to_string();
}

TEST(GemmValidate, EpiloguesMatchLayouts) {
  GroupedGemm g = valid_forward();
  g.layout = Layout::kDataGrad;
  g.epilogue = Epilogue::kSwiGLU;
  expect_invalid(g, "swiglu epilogue needs the forward layout, not data-grad");
  g = valid_forward();
  g.epilogue = Epilogue::kSwiGLU;
  g.n = 72;
  expect_invalid(g, "n = 72 must be a multiple of 16");
  g = valid_forward();
  g.epilogue = Epilogue::kRowScaleBF16;
  expect_invalid(g, "row_scale is null");
  g.layout = Layout::kWeightGrad;
  g.m = 64;
  expect_invalid(g, "row-scale-bf16 epilogue is not defined for weight-grad");
}

TEST(GemmValidate, NamesOverflowingStacks) {
  GroupedGemm g = valid_forward();
  g.groups = 1 << 20;
  g.group_offsets = reinterpret_cast<const int32_t*>(g_storage);
  g.n = 4096;
  expect_invalid(g, "groups·n = 4294967296 weight rows exceed");
}

TEST(GemmValidate, EmptyOutputsAreFine) {
  GroupedGemm g = valid_forward();
  g.rows = 0;
  g.a = nullptr;  // never read
  EXPECT_TRUE(validate(g).ok());
  EXPECT_TRUE(run(g, nullptr).ok());  // nothing to launch
}

TEST(GemmValidate, TileConfigIgnoresTheDevice) {
  const TileConfig t = tile_config(Layout::kForward, 4096, 4096);
  EXPECT_EQ(t.block_m, 128);
  EXPECT_EQ(t.block_n, 256);
  EXPECT_EQ(t.block_k, 64);
  EXPECT_EQ(t.stages, 4);
}

}  // namespace
}  // namespace detmoe::gemm
