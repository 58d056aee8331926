// Validation of a GroupedGemm: every rule names the field and the value that broke it.
#include <cstdint>
#include <string>

#include "detmoe/gemm.h"

namespace detmoe::gemm {

const char* to_string(Layout layout) {
  switch (layout) {
    case Layout::kForward: return "forward";
    case Layout::kDataGrad: return "data-grad";
    case Layout::kWeightGrad: return "weight-grad";
  }
  return "unknown-layout";
}

const char* to_string(Epilogue epilogue) {
  switch (epilogue) {
    case Epilogue::kStoreBF16: return "store-bf16";
    case Epilogue::kStoreFP32: return "store-fp32";
    case Epilogue::kRowScaleBF16: return "row-scale-bf16";
    case Epilogue::kSwiGLU: return "swiglu";
  }
  return "unknown-epilogue";
}

TileConfig tile_config(Layout /*layout*/, int64_t /*n*/, int64_t /*k*/) {
  // One compiled shape today (megakernel/gemm/tile_config.cuh). A second shape would be chosen
  // here from (layout, n, k) only — never the SM count or the group sizes.
  return TileConfig{128, 256, 64, 4};
}

namespace {

constexpr int64_t kMaxIndex = (int64_t{1} << 31) - 1 - 256;  // rows + one box stay in int32

std::string str(int64_t v) { return std::to_string(v); }

Status check_dim(const char* name, int64_t v) {
  if (v < 0) return invalid_argument(std::string("gemm: ") + name + " = " + str(v) + " is negative");
  if (v > kMaxIndex) return invalid_argument(std::string("gemm: ") + name + " = " + str(v) + " exceeds " + str(kMaxIndex));
  return Status::Ok();
}

// A row-major operand of `cols` columns with leading dimension `ld` (0 = cols).
Status check_matrix(const char* name, const void* ptr, int64_t ld, int64_t cols, int64_t element_bytes, bool used) {
  const int64_t pitch = ld == 0 ? cols : ld;
  if (ld != 0 && ld < cols)
    return invalid_argument(std::string("gemm: ld") + name + " = " + str(ld) + " is smaller than the " + str(cols) +
                            " columns of " + name);
  if (!used) return Status::Ok();
  if (ptr == nullptr) return invalid_argument(std::string("gemm: ") + name + " is null");
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0)
    return invalid_argument(std::string("gemm: ") + name + " is not 16-byte aligned (TMA needs it)");
  if ((pitch * element_bytes) % 16 != 0)
    return invalid_argument(std::string("gemm: the row pitch of ") + name + " (" + str(pitch) + " elements of " +
                            str(element_bytes) + " bytes) is not a multiple of 16 bytes; pad ld" + name +
                            " to a multiple of " + str(16 / element_bytes));
  return Status::Ok();
}

}  // namespace

Status validate(const GroupedGemm& g) {
  const bool forward = g.layout == Layout::kForward;
  const bool dgrad = g.layout == Layout::kDataGrad;
  const bool wgrad = g.layout == Layout::kWeightGrad;
  if (!forward && !dgrad && !wgrad)
    return invalid_argument("gemm: layout = " + str(static_cast<int>(g.layout)) + " is not a Layout");
  const bool swiglu = g.epilogue == Epilogue::kSwiGLU;
  const bool row_scale = g.epilogue == Epilogue::kRowScaleBF16;
  if (g.epilogue != Epilogue::kStoreBF16 && g.epilogue != Epilogue::kStoreFP32 && !row_scale && !swiglu)
    return invalid_argument("gemm: epilogue = " + str(static_cast<int>(g.epilogue)) + " is not an Epilogue");
  if (swiglu && !forward)
    return invalid_argument(std::string("gemm: the swiglu epilogue needs the forward layout, not ") + to_string(g.layout));
  if (row_scale && wgrad) return invalid_argument("gemm: the row-scale-bf16 epilogue is not defined for weight-grad");

  DETMOE_RETURN_IF_ERROR(check_dim("rows", g.rows));
  DETMOE_RETURN_IF_ERROR(check_dim("n", g.n));
  DETMOE_RETURN_IF_ERROR(check_dim("k", g.k));
  DETMOE_RETURN_IF_ERROR(check_dim("m", g.m));
  if (g.groups < 1) return invalid_argument("gemm: groups = " + str(g.groups) + " must be at least 1");
  if (g.group_offsets == nullptr && g.groups != 1)
    return invalid_argument("gemm: groups = " + str(g.groups) + " needs group_offsets (only one group may omit them)");
  if (g.grid_ctas < 0) return invalid_argument("gemm: grid_ctas = " + str(g.grid_ctas) + " is negative (0 = one per SM)");
  if (reinterpret_cast<uintptr_t>(g.tile_tickets) % alignof(unsigned int) != 0)
    return invalid_argument("gemm: tile_tickets is not 4-byte aligned (address % 4 = " +
                            str(static_cast<int64_t>(reinterpret_cast<uintptr_t>(g.tile_tickets) % 4)) + ")");
  if (g.band_budget_kb < 0)
    return invalid_argument("gemm: band_budget_kb = " + str(g.band_budget_kb) + " is negative (0 = fixed bands)");
  if (g.band_budget_kb != 0 && !wgrad)
    return invalid_argument("gemm: band_budget_kb = " + str(g.band_budget_kb) + " orders weight-grad tiles only, not " +
                            to_string(g.layout) + " (0 there)");
  if (g.deep_store_ring && !wgrad)
    return invalid_argument(std::string("gemm: deep_store_ring is a weight-grad form, not ") + to_string(g.layout));
  if (swiglu && g.n % 16 != 0)
    return invalid_argument("gemm: n = " + str(g.n) + " must be a multiple of 16 for swiglu (gate/up blocks of 8)");
  // Stacked per-group operands are indexed in int32 on the device.
  if (forward && static_cast<int64_t>(g.groups) * g.n > kMaxIndex)
    return invalid_argument("gemm: groups·n = " + str(static_cast<int64_t>(g.groups) * g.n) + " weight rows exceed " + str(kMaxIndex));
  if (dgrad && static_cast<int64_t>(g.groups) * g.k > kMaxIndex)
    return invalid_argument("gemm: groups·k = " + str(static_cast<int64_t>(g.groups) * g.k) + " weight rows exceed " + str(kMaxIndex));
  if (wgrad && static_cast<int64_t>(g.groups) * g.m > kMaxIndex)
    return invalid_argument("gemm: groups·m = " + str(static_cast<int64_t>(g.groups) * g.m) + " output rows exceed " + str(kMaxIndex));

  // Which operands the kernel reads or writes at all.
  const bool has_output = wgrad ? (g.m > 0 && g.n > 0) : (g.rows > 0 && g.n > 0);
  const bool reads_inputs = has_output && (wgrad ? g.rows > 0 : g.k > 0);
  const int64_t out_bytes = g.epilogue == Epilogue::kStoreFP32 ? 4 : 2;
  const int64_t out_cols = swiglu ? g.n / 2 : g.n;
  if (forward) {
    DETMOE_RETURN_IF_ERROR(check_matrix("a", g.a, g.lda, g.k, 2, reads_inputs));
    DETMOE_RETURN_IF_ERROR(check_matrix("b", g.b, g.ldb, g.k, 2, reads_inputs));
  } else if (dgrad) {
    DETMOE_RETURN_IF_ERROR(check_matrix("a", g.a, g.lda, g.k, 2, reads_inputs));
    DETMOE_RETURN_IF_ERROR(check_matrix("b", g.b, g.ldb, g.n, 2, reads_inputs));
  } else {
    DETMOE_RETURN_IF_ERROR(check_matrix("a", g.a, g.lda, g.m, 2, reads_inputs));
    DETMOE_RETURN_IF_ERROR(check_matrix("b", g.b, g.ldb, g.n, 2, reads_inputs));
  }
  DETMOE_RETURN_IF_ERROR(check_matrix("c", g.c, g.ldc, out_cols, out_bytes, has_output));
  if (swiglu && g.h != nullptr) DETMOE_RETURN_IF_ERROR(check_matrix("h", g.h, g.ldh, g.n, 2, has_output));
  if (row_scale && has_output && g.row_scale == nullptr)
    return invalid_argument("gemm: row_scale is null but the epilogue is row-scale-bf16");
  return Status::Ok();
}

}  // namespace detmoe::gemm
