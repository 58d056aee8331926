// Host side of the fused layer (runs without a GPU): workspace sizing, the megakernel's limits,
// task ids, and the decoding of the device fault record into a Status that names the task,
// counter and values.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <initializer_list>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "detmoe/config.h"
#include "detmoe/layer.h"
#include "megakernel/gemm/band_order.h"
#include "megakernel/host/layer_sizes.h"
#include "megakernel/host/weight_grads.h"
#include "megakernel/layer/row_table_window.h"
#include "support/gpu.h"

namespace detmoe::mk {
namespace {

Shape small_shape() { return Shape{300, 256, 128, 8, 2, 1, 0}; }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(LayerSizes, WorstCaseCapacityAndDisjointCounters) {
  Shape s{1000, 256, 192, 16, 4, 2, 64};
  LayerConfig c;
  auto z = layer_sizes(s, c, 132);
  ASSERT_TRUE(z.ok()) << z.status().to_string();
  EXPECT_EQ(z->capacity, worst_case_recv_rows(s));
  EXPECT_EQ(z->plan_chunk_tokens, 32);  // 2 ranks · ⌈1000 / 32⌉ = 64 dispatch tasks fit in 132 CTAs
  EXPECT_EQ(z->chunks_per_rank, (1000 + 31) / 32);
  EXPECT_EQ(z->sum_chunks, (1000 + kSumChunkTokens - 1) / kSumChunkTokens);
  EXPECT_EQ(z->token_mblocks, 8);
  // Every expert adds at most one partial m-block to the capacity's full ones.
  EXPECT_EQ(z->mblock_capacity, z->capacity / 128 + s.experts_per_rank() + 1);
  const CounterLayout& L = z->counters;
  EXPECT_EQ(L.dispatch_ready, 0);
  EXPECT_EQ(L.gemm1_done, L.dispatch_ready + z->mblock_capacity);
  EXPECT_EQ(L.shared1_done, L.gemm1_done + z->mblock_capacity);
  EXPECT_EQ(L.shared2_done, L.shared1_done + z->token_mblocks);
  EXPECT_EQ(L.slots_ready, L.shared2_done + z->token_mblocks);
  EXPECT_EQ(L.per_rank, L.slots_ready + z->sum_chunks);
  EXPECT_EQ(z->counter_words, s.P * L.per_rank);
  EXPECT_EQ(z->recv, s.P * z->capacity * s.H);
  EXPECT_EQ(z->h, s.P * z->capacity * 2 * s.F);  // save_h by default
  EXPECT_EQ(z->slots, s.P * s.T * s.k * s.H);
  EXPECT_EQ(z->act_s, s.P * s.T * s.Fs);
  EXPECT_GT(z->workspace_bytes, 2 * (z->recv + z->act + z->h + z->slots + z->act_s + z->s));
}

struct Piece {
  const void* p;
  int64_t bytes;
};

// Every piece 256-byte aligned, in order without overlap, inside [base, base + total); empty ones null.
void expect_pieces_aligned_disjoint_inside(std::initializer_list<Piece> pieces, uintptr_t base, int64_t total) {
  uintptr_t end = base;
  for (const Piece& q : pieces) {
    if (q.bytes == 0) {
      EXPECT_EQ(q.p, nullptr);
      continue;
    }
    const auto at = reinterpret_cast<uintptr_t>(q.p);
    EXPECT_EQ(at % 256, 0u);
    EXPECT_GE(at, end);  // in order, no overlap
    end = at + static_cast<uintptr_t>(q.bytes);
  }
  EXPECT_LE(end, base + static_cast<uintptr_t>(total));
}

// The backward's buffers are a second allocation made at the first backward: sized by the same
// carve, aligned, disjoint, inside it — and not part of the forward's workspace.
TEST(LayerSizes, BackwardBuffersAreTheirOwnAllocation) {
  for (const Shape& s : {Shape{1000, 256, 192, 16, 4, 2, 64}, small_shape(), Shape{1, 64, 64, 1, 1, 1, 0}}) {
    auto z = layer_sizes(s, {}, 17);
    ASSERT_TRUE(z.ok()) << z.status().to_string();
    EXPECT_EQ(z->dy, s.P * z->capacity * s.H);
    EXPECT_EQ(z->dh, s.P * z->capacity * 2 * s.F);
    EXPECT_EQ(z->dx_slots, s.P * s.T * s.k * s.H);
    EXPECT_EQ(z->dhs, s.Fs > 0 ? s.P * s.T * 2 * s.Fs : 0);
    EXPECT_EQ(z->rank_group_offsets, s.P * (s.experts_per_rank() + 1));  // the weight gradients' groups
    const uintptr_t base = uintptr_t{1} << 40;
    const WorkspaceLayout forward = layout_workspace(base, s, *z);
    EXPECT_EQ(forward.ws.dy, nullptr);
    EXPECT_EQ(forward.ws.dx_slots, nullptr);
    EXPECT_LT(z->workspace_bytes, 2 * (z->recv + z->act + z->h + z->slots + z->act_s + z->s + z->hs) + (int64_t{1} << 20));
    Workspace w{};
    EXPECT_EQ(layout_backward_workspace(base, *z, w), z->backward_bytes);
    expect_pieces_aligned_disjoint_inside(
        {{w.dy, 2 * z->dy}, {w.dh, 2 * z->dh}, {w.dx_slots, 2 * z->dx_slots}, {w.dhs, 2 * z->dhs}}, base,
        z->backward_bytes);
  }
}

TEST(LayerSizes, UserCapacityAndNoSavedH) {
  LayerConfig c;
  c.recv_capacity_rows = 77;
  c.save_h = false;
  auto z = layer_sizes(small_shape(), c, 132);
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z->capacity, 77);
  EXPECT_EQ(z->h, 0);
  EXPECT_EQ(z->act_s, 0);
  EXPECT_EQ(z->s, 0);
  // The backward recomputes h: its GEMM groups' offsets come with the backward's buffers.
  const Shape sh = small_shape();
  EXPECT_EQ(z->rank_group_offsets, sh.P * (sh.experts_per_rank() + 1));
  const uintptr_t base = uintptr_t{1} << 40;
  Workspace w{};
  EXPECT_EQ(layout_backward_workspace(base, *z, w), z->backward_bytes);
  expect_pieces_aligned_disjoint_inside({{w.dy, 2 * z->dy}, {w.dh, 2 * z->dh}, {w.dx_slots, 2 * z->dx_slots},
                                         {w.dhs, 2 * z->dhs}, {w.rank_group_offsets, 4 * z->rank_group_offsets}},
                                        base, z->backward_bytes);
}

// The allocation is sized by the same layout that carves it (the first GPU run found the two
// disagreeing): every piece is 256-byte aligned, inside the allocation and disjoint from the
// others, and the control words come first so one memset covers them.
TEST(LayerSizes, WorkspacePiecesAreAlignedDisjointAndInside) {
  for (bool save_h : {true, false}) {
    for (const Shape& s : {Shape{1000, 256, 192, 16, 4, 2, 64}, small_shape(), Shape{1, 64, 64, 1, 1, 1, 0}}) {
      LayerConfig c;
      c.save_h = save_h;
      auto z = layer_sizes(s, c, 17);
      ASSERT_TRUE(z.ok()) << z.status().to_string();
      const uintptr_t base = uintptr_t{1} << 40;
      const WorkspaceLayout L = layout_workspace(base, s, *z);
      EXPECT_EQ(L.total_bytes, z->workspace_bytes);
      const Workspace& w = L.ws;
      expect_pieces_aligned_disjoint_inside(
          {{w.launch_state, 8}, {w.bad_key, 8}, {w.barriers, 8 * kPlanBarriers}, {w.error, sizeof(DeviceErrorRecord)},
           {w.counters, 8 * z->counter_words}, {w.chunk_base, 4 * z->chunk_cells}, {w.expert_count, 4 * s.E},
           {w.expert_offset, 4 * (s.E + 1)}, {w.mblock_offset, 4 * (s.E + 1)}, {w.rank_row_begin, 4 * (s.P + 1)},
           {w.slot_row, 4 * z->rows}, {w.row_token, 4 * z->rows}, {w.row_slot, 4 * z->rows}, {w.recv, 2 * z->recv},
           {w.act, 2 * z->act}, {w.h, 2 * z->h}, {w.slots, 2 * z->slots}, {w.act_s, 2 * z->act_s}, {w.s, 2 * z->s},
           {w.hs, 2 * z->hs}},
          base, L.total_bytes);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(w.chunk_base), base + static_cast<uintptr_t>(L.control_bytes));
    }
  }
}

// The forward's GEMM2 row tables are bulk copies of a 16-byte-aligned window around a tile's
// plan rows (megakernel/layer/row_table.cuh): every window holds the tile's rows, fits the
// table, and ends inside row_token's and row_slot's pieces of the workspace — for every tile
// start, with row counts that are and are not multiples of 4 (a window past a piece would read
// the next piece, or past the workspace, which memcheck only sees on the GPU).
TEST(LayerSizes, RowTableWindowsStayInsideTheRowArrays) {
  for (const Shape& s : {Shape{1000, 256, 192, 16, 4, 2, 64}, small_shape(), Shape{1, 64, 64, 1, 1, 1, 0},
                         Shape{333, 64, 64, 7, 3, 1, 0}}) {
    auto z = layer_sizes(s, LayerConfig{}, 17);
    ASSERT_TRUE(z.ok()) << z.status().to_string();
    const uintptr_t base = uintptr_t{1} << 40;
    const Workspace w = layout_workspace(base, s, *z).ws;
    const auto piece_end = [&](const void* piece, const void* next) {
      return (reinterpret_cast<uintptr_t>(next) - reinterpret_cast<uintptr_t>(piece)) / 4;
    };
    const uintptr_t token_room = piece_end(w.row_token, w.row_slot), slot_room = piece_end(w.row_slot, w.recv);
    const int32_t total = static_cast<int32_t>(z->rows);
    for (int32_t row0 = 0; row0 < total; ++row0) {
      const int32_t rows = std::min(kRowTableTileRows, total - row0);
      const RowTableWindow win = row_table_window(row0, rows);
      ASSERT_EQ(win.begin % 4, 0) << row0;
      ASSERT_EQ(win.end % 4, 0) << row0;
      ASSERT_LE(win.begin, row0);
      ASSERT_GE(win.end, row0 + rows);
      ASSERT_LE(win.end - win.begin, kRowTableRows) << row0 << " " << rows;
      ASSERT_LE(static_cast<uintptr_t>(win.end), token_room) << "rows " << total << ", tile at " << row0;
      ASSERT_LE(static_cast<uintptr_t>(win.end), slot_room) << "rows " << total << ", tile at " << row0;
    }
  }
}

TEST(LayerLimits, NamesTheOffendingValue) {
  LayerConfig c;
  EXPECT_TRUE(check_megakernel_limits(small_shape(), c, 132).ok());
  Shape many_ranks{64, 256, 128, 16, 2, 16, 0};
  Status st = check_megakernel_limits(many_ranks, c, 132);
  EXPECT_EQ(st.code(), ErrorCode::kNotImplemented);
  EXPECT_TRUE(contains(st.message(), "P = 16")) << st.message();
  Shape four{64, 256, 128, 8, 2, 4, 0};
  st = check_megakernel_limits(four, c, 3);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(contains(st.message(), "num_sms = 3")) << st.message();
  Shape big_e{64, 256, 128, 1024, 2, 1, 0};
  EXPECT_TRUE(check_megakernel_limits(big_e, c, 132).ok());
  LayerConfig fp8;
  fp8.precision = Precision::kFP8;
  EXPECT_EQ(check_megakernel_limits(small_shape(), fp8, 132).code(), ErrorCode::kNotImplemented);
  Shape bad_h{64, 100, 128, 8, 2, 1, 0};
  st = check_megakernel_limits(bad_h, c, 132);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
}

TEST(TaskIds, RoundTrip) {
  for (auto kind : {TaskKind::kPlan, TaskKind::kPlaceDispatch, TaskKind::kGemm1, TaskKind::kSharedGemm2,
                    TaskKind::kWeightedSum}) {
    const uint64_t id = make_task_id(kind, 7, 123456789u);
    EXPECT_EQ(task_kind(id), kind);
    EXPECT_EQ(task_rank(id), 7u);
    EXPECT_EQ(task_index(id), 123456789u);
  }
  EXPECT_EQ(describe_task(make_task_id(TaskKind::kGemm2, 1, 3), 128), "GEMM2 (+combine) tile 3 of rank 1");
  EXPECT_EQ(describe_task(make_task_id(TaskKind::kPlaceDispatch, 2, 5), 64),
            "place+dispatch of token chunk 5 (tokens 320..) of rank 2");
  EXPECT_EQ(describe_task(make_task_id(TaskKind::kWeightedSum, 0, 9), 128),
            "weighted sum of token chunk 9 (tokens 288..) of rank 0");
}

// Dispatch chunks: 128 tokens unless half-size chunks still fit the grid in one wave, down to 32.
TEST(LayerSchedule, PlanChunkTokensFillTheGridInOneWave) {
  EXPECT_EQ(plan_chunk_tokens(16384, 1, 132), 128);  // qwen3, gpt-oss: 128 tasks
  EXPECT_EQ(plan_chunk_tokens(8192, 1, 132), 64);    // deepseek, mixtral: 128 tasks, not 64
  EXPECT_EQ(plan_chunk_tokens(8192, 1, 127), 128);   // 128 half chunks would not fit
  EXPECT_EQ(plan_chunk_tokens(8192, 1, 128), 64);
  EXPECT_EQ(plan_chunk_tokens(8192, 8, 132), 128);   // 8 ranks · 64 chunks
  EXPECT_EQ(plan_chunk_tokens(1024, 1, 132), 32);
  EXPECT_EQ(plan_chunk_tokens(1, 1, 1), kMinPlanChunkTokens);
  EXPECT_EQ(plan_chunk_tokens(65536, 1, 1), kMaxPlanChunkTokens);
  for (int64_t T : {1, 31, 100, 4097, 8192, 65536})
    for (int64_t grid : {1, 17, 66, 100, 132}) {
      const int32_t c = plan_chunk_tokens(T, 1, grid);
      EXPECT_TRUE(c == 32 || c == 64 || c == 128) << T << " " << grid;
    }
}

// LayerConfig::overlap_rows → m-blocks per GEMM band (LayerParams::fwd_band_mblocks, down_band_mblocks,
// dgrad_band_mblocks, wgrad_band_mblocks).
TEST(LayerSchedule, BandMBlocksFollowOverlapRows) {
  LayerConfig c;
  EXPECT_EQ(weight_grad_band_mblocks(c), kDefaultWeightGradBandMBlocks);  // 0: the GEMM core's band for weight-gradient tiles,
  EXPECT_EQ(forward_band_mblocks(c), kDefaultForwardBandMBlocks);  // whole 2048-row experts forward
  EXPECT_EQ(data_grad_band_mblocks(c), kDefaultDataGradBandMBlocks);  // and 32 for the backward's da / dx
  EXPECT_EQ(forward_down_band_mblocks(c), kDefaultForwardDownBandMBlocks);  // 8 for the forward's GEMM2
  EXPECT_EQ(kDefaultForwardBandMBlocks, 16);
  EXPECT_EQ(kDefaultForwardDownBandMBlocks, 8);
  EXPECT_EQ(kDefaultDataGradBandMBlocks, 32);
  for (auto [rows, mblocks] : {std::pair{1, 1}, std::pair{64, 1}, std::pair{127, 1}, std::pair{128, 1},
                               std::pair{256, 2}, std::pair{300, 2}, std::pair{1024, 8}, std::pair{4096, 32}}) {
    c.overlap_rows = rows;
    EXPECT_EQ(weight_grad_band_mblocks(c), mblocks) << "overlap_rows " << rows;
    EXPECT_EQ(forward_band_mblocks(c), mblocks) << "overlap_rows " << rows;  // a set value holds everywhere
    EXPECT_EQ(forward_down_band_mblocks(c), mblocks) << "overlap_rows " << rows;
    EXPECT_EQ(data_grad_band_mblocks(c), mblocks) << "overlap_rows " << rows;
  }
}

// The band orders of the GEMM tasks (gemm/band_order.h, the same functions the kernels call):
// each numbers every tile of the m_blocks × n_blocks grid exactly once, m fastest inside a band,
// and the balanced order's bands are ≤ band_rows high and differ by at most one m-block.
TEST(LayerSchedule, BandOrdersAreBijectionsWithBalancedBands) {
  for (int32_t m_blocks : {1, 2, 4, 5, 7, 8, 9, 16, 17, 33}) {
    for (int32_t n_blocks : {1, 3, 12, 23}) {
      for (int32_t band_rows : {1, 2, 3, 8, 32}) {
        const std::string where = fmt::format("m_blocks {} n_blocks {} band_rows {}", m_blocks, n_blocks, band_rows);
        const int32_t tiles = m_blocks * n_blocks;
        std::vector<int> seen_plain(tiles, 0), seen_balanced(tiles, 0);
        std::vector<int32_t> heights;
        int32_t band_begin = 0, band_tile0 = 0;
        for (int32_t i = 0; i <= tiles; ++i) {
          const bool end = i == tiles;
          const gemm::BandCoords b = end ? gemm::BandCoords{m_blocks, 0}
                                         : gemm::balanced_band_coords(i, m_blocks, n_blocks, band_rows);
          // A band is the run of tiles from one m-block to the end of its column n_blocks − 1.
          if (i > 0 && (end || (b.n_block == 0 && b.m_block != band_begin &&
                                gemm::balanced_band_coords(i - 1, m_blocks, n_blocks, band_rows).n_block ==
                                    n_blocks - 1))) {
            const int32_t h = (i - band_tile0) / n_blocks;
            ASSERT_EQ(h * n_blocks, i - band_tile0) << where << ": band of " << i - band_tile0 << " tiles";
            for (int32_t t = band_tile0; t < i; ++t) {
              const gemm::BandCoords c = gemm::balanced_band_coords(t, m_blocks, n_blocks, band_rows);
              EXPECT_EQ(c.m_block, band_begin + (t - band_tile0) % h) << where << " tile " << t;  // m fastest
              EXPECT_EQ(c.n_block, (t - band_tile0) / h) << where << " tile " << t;
            }
            heights.push_back(h);
            band_begin += h;
            band_tile0 = i;
          }
          if (end) break;
          const gemm::BandCoords a = gemm::band_coords(i, m_blocks, n_blocks, band_rows);
          ASSERT_TRUE(a.m_block >= 0 && a.m_block < m_blocks && a.n_block >= 0 && a.n_block < n_blocks) << where;
          ++seen_plain[a.m_block * n_blocks + a.n_block];
          ASSERT_TRUE(b.m_block >= 0 && b.m_block < m_blocks && b.n_block >= 0 && b.n_block < n_blocks) << where;
          ++seen_balanced[b.m_block * n_blocks + b.n_block];
        }
        for (int32_t t = 0; t < tiles; ++t) {
          EXPECT_EQ(seen_plain[t], 1) << where << " tile " << t;
          EXPECT_EQ(seen_balanced[t], 1) << where << " tile " << t;
        }
        if (n_blocks == 1) continue;  // one column: bands cannot be told apart, and do not matter
        EXPECT_EQ(static_cast<int32_t>(heights.size()), (m_blocks + band_rows - 1) / band_rows) << where;
        EXPECT_LE(*std::max_element(heights.begin(), heights.end()), band_rows) << where;
        EXPECT_LE(*std::max_element(heights.begin(), heights.end()) - *std::min_element(heights.begin(), heights.end()),
                  1)
            << where;
      }
    }
  }
}

// LayerConfig::comm_sms → data-movement CTAs per rank slice: ⌈comm_sms / P⌉, never the whole
// slice (the GEMM tiles need an owner), and none for comm_sms = 0.
TEST(LayerSchedule, CommCtasLeaveEverySliceAGemmCta) {
  LayerConfig c;
  EXPECT_EQ(comm_ctas_per_rank(c, 1), 0);
  EXPECT_EQ(comm_ctas_per_rank(c, 8), 0);
  c.comm_sms = 4;
  EXPECT_EQ(comm_ctas_per_rank(c, 1), 4);
  EXPECT_EQ(comm_ctas_per_rank(c, 8), 1);
  c.comm_sms = 5;
  EXPECT_EQ(comm_ctas_per_rank(c, 2), 3);
  EXPECT_EQ(comm_ctas_in_slice(0, 1), 0);
  EXPECT_EQ(comm_ctas_in_slice(0, 66), 0);
  EXPECT_EQ(comm_ctas_in_slice(3, 1), 0);  // a 1-CTA slice never splits
  EXPECT_EQ(comm_ctas_in_slice(3, 2), 1);
  EXPECT_EQ(comm_ctas_in_slice(3, 4), 3);
  EXPECT_EQ(comm_ctas_in_slice(3, 66), 3);
  // Every slice of the loopback split (rank_slice: CTAs [⌈r·G/P⌉, ⌈(r+1)·G/P⌉)) keeps a GEMM CTA.
  for (int64_t P : {1, 2, 3, 8})
    for (int64_t G : {P, P + 1, int64_t{17}, int64_t{132}})
      for (int32_t comm : {0, 1, 4, 16, 131}) {
        c.comm_sms = comm;
        auto first_cta = [&](int64_t r) { return (r * G + P - 1) / P; };
        for (int64_t r = 0; r < P; ++r) {
          const auto size = static_cast<int32_t>(first_cta(r + 1) - first_cta(r));
          const int32_t dedicated = comm_ctas_in_slice(comm_ctas_per_rank(c, P), size);
          EXPECT_GE(dedicated, 0);
          EXPECT_LT(dedicated, size) << "G " << G << " P " << P << " comm_sms " << comm << " rank " << r;
          if (comm > 0 && size > 1) {
            EXPECT_GE(dedicated, 1);
          }
        }
      }
}

DeviceErrorRecord record(FaultCode code, uint32_t epoch) {
  DeviceErrorRecord r{};
  r.state = (static_cast<unsigned long long>(epoch) << 32) | static_cast<uint32_t>(code);
  return r;
}

TEST(FaultStatus, NoneIsOk) { EXPECT_TRUE(fault_status(DeviceErrorRecord{}, small_shape(), 128).ok()); }

TEST(FaultStatus, TimeoutNamesTaskCounterAndValues) {
  DeviceErrorRecord r = record(FaultCode::kTimeout, 5);
  r.task = make_task_id(TaskKind::kGemm2, 1, 3);
  r.counter_kind = static_cast<uint32_t>(CounterKind::kGemm1Done);
  r.rank = 1;
  r.counter_index = 2;
  r.expected = 12;
  r.seen = 10;
  const Status st = fault_status(r, small_shape(), 128);
  EXPECT_EQ(st.code(), ErrorCode::kDeviceTimeout);
  EXPECT_TRUE(contains(st.message(), "GEMM2 (+combine) tile 3 of rank 1")) << st.message();
  EXPECT_TRUE(contains(st.message(), "GEMM1-done counter of m-block 2 of rank 1")) << st.message();
  EXPECT_TRUE(contains(st.message(), "expected 12, saw 10")) << st.message();
  r.seen = -1;
  EXPECT_TRUE(contains(fault_status(r, small_shape(), 128).message(), "saw a stale epoch"));
}

TEST(FaultStatus, BadRoutingNamesTokenSlotAndValue) {
  const Shape s{300, 256, 128, 8, 2, 2, 0};
  DeviceErrorRecord r = record(FaultCode::kInvalidExpert, 1);
  r.counter_index = 305;  // global token 305 = token 5 of rank 1
  r.expected = 1;         // slot
  r.seen = 8;             // the id
  Status st = fault_status(r, s, 128);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(contains(st.message(), "topk_idx[5,1] = 8 of rank 1 is out of range [0, 8)")) << st.message();
  r = record(FaultCode::kRepeatedExpert, 1);
  r.counter_index = 4;
  r.expected = 1;
  r.seen = 3;
  st = fault_status(r, s, 128);
  EXPECT_TRUE(contains(st.message(), "topk_idx[4,1] = 3 of rank 0 repeats")) << st.message();
  r = record(FaultCode::kNonFiniteWeight, 1);
  const float inf = INFINITY;
  uint32_t bits;
  std::memcpy(&bits, &inf, 4);
  r.seen = bits;
  r.counter_index = 0;
  r.expected = 0;
  st = fault_status(r, s, 128);
  EXPECT_TRUE(contains(st.message(), "topk_w[0,0] = inf")) << st.message();
}

TEST(FaultStatus, CapacityNamesRankRowsAndCapacity) {
  DeviceErrorRecord r = record(FaultCode::kCapacityExceeded, 2);
  r.rank = 3;
  r.seen = 900;
  r.expected = 512;
  const Status st = fault_status(r, small_shape(), 128);
  EXPECT_EQ(st.code(), ErrorCode::kCapacityExceeded);
  EXPECT_TRUE(contains(st.message(), "rank 3 would receive 900 rows")) << st.message();
  EXPECT_TRUE(contains(st.message(), "recv_capacity_rows = 512")) << st.message();
}

TEST(Layer, CreateRefusesBadConfigBeforeTouchingTheDevice) {
  LayerConfig c;
  c.spin_timeout_ms = 0;
  auto layer = Layer::create(small_shape(), c);
  ASSERT_FALSE(layer.ok());
  EXPECT_EQ(layer.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(contains(layer.status().message(), "spin_timeout_ms = 0")) << layer.status().message();
}

// kAuto's rule (docs/PERF.md sessions 26–27): both routed weight gradients after the fused
// launch; the explicit arms are what they name.
TEST(WeightGradLaunchRule, ArmsNameWhatRunsLater) {
  LayerConfig c;
  c.weight_grad_launch = WeightGradLaunch::kAuto;
  EXPECT_TRUE(later_weight_grads(c).down && later_weight_grads(c).gate_up);
  c.weight_grad_launch = WeightGradLaunch::kFused;
  EXPECT_FALSE(later_weight_grads(c).any());
  c.weight_grad_launch = WeightGradLaunch::kGateUpLater;
  EXPECT_FALSE(later_weight_grads(c).down);
  EXPECT_TRUE(later_weight_grads(c).gate_up);
  c.weight_grad_launch = WeightGradLaunch::kSecondLaunch;
  EXPECT_TRUE(later_weight_grads(c).down && later_weight_grads(c).gate_up);
}

}  // namespace
}  // namespace detmoe::mk
