// Host launcher of the grouped GEMM: validation, TMA maps, the persistent launch.
#include <cuda.h>
#include <cuda_runtime.h>

#include <string>

#include "detmoe/gemm.h"
#include "megakernel/gemm/epilogue.cuh"
#include "megakernel/gemm/kernel.cuh"
#include "megakernel/gemm/smem_layout.cuh"
#include "megakernel/gemm/tile_config.cuh"
#include "megakernel/host/tensor_map.h"

namespace detmoe::gemm {
namespace {

using Cfg = Tile128x256;

Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  return Status(ErrorCode::kCudaError, std::string("gemm: ") + what + ": " + cudaGetErrorString(err));
}

struct DeviceInfo {
  int sms = 0;
  int major = 0;
  int minor = 0;
};

StatusOr<DeviceInfo> current_device_info() {
  int device = 0;
  DETMOE_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), "cudaGetDevice"));
  DeviceInfo info;
  DETMOE_RETURN_IF_ERROR(cuda_status(cudaDeviceGetAttribute(&info.sms, cudaDevAttrMultiProcessorCount, device), "SM count"));
  DETMOE_RETURN_IF_ERROR(cuda_status(cudaDeviceGetAttribute(&info.major, cudaDevAttrComputeCapabilityMajor, device), "compute capability"));
  DETMOE_RETURN_IF_ERROR(cuda_status(cudaDeviceGetAttribute(&info.minor, cudaDevAttrComputeCapabilityMinor, device), "compute capability"));
  if (info.major != 9 || info.minor != 0)
    return Status(ErrorCode::kNotImplemented, "gemm: device " + std::to_string(device) + " is sm_" +
                                                  std::to_string(info.major * 10 + info.minor) +
                                                  "; the GEMM core needs sm_90a (Hopper)");
  return info;
}

struct Maps {
  CUtensorMap a, b, c, h;
};

host::MatrixView view(const void* p, int64_t rows, int64_t cols, int64_t ld, host::ElementType t = host::ElementType::kBF16) {
  return host::MatrixView{p, t, rows, cols, ld == 0 ? cols : ld};
}

// A valid map over 16 bytes of C for operands the kernel never touches (K = 0, no rows).
host::MatrixView placeholder(const void* c) { return host::MatrixView{c, host::ElementType::kBF16, 1, 8, 8}; }

StatusOr<Maps> make_maps(const GroupedGemm& g) {
  const bool wgrad = g.layout == Layout::kWeightGrad;
  const bool inputs_used = wgrad ? g.rows > 0 : g.k > 0;
  const bool fp32_out = g.epilogue == Epilogue::kStoreFP32;
  const int64_t out_cols = g.epilogue == Epilogue::kSwiGLU ? g.n / 2 : g.n;
  Maps maps{};
  host::MatrixView a = placeholder(g.c), b = placeholder(g.c);
  int a_box_rows = 64, b_box_rows = 64;
  if (inputs_used) {
    switch (g.layout) {
      case Layout::kForward:
        a = view(g.a, g.rows, g.k, g.lda);
        b = view(g.b, int64_t{g.groups} * g.n, g.k, g.ldb);
        a_box_rows = Cfg::kBlockM;
        b_box_rows = Cfg::kBlockN;
        break;
      case Layout::kDataGrad:
        a = view(g.a, g.rows, g.k, g.lda);
        b = view(g.b, int64_t{g.groups} * g.k, g.n, g.ldb);
        a_box_rows = Cfg::kBlockM;
        break;
      case Layout::kWeightGrad:
        a = view(g.a, g.rows, g.m, g.lda);
        b = view(g.b, g.rows, g.n, g.ldb);
        break;
    }
  }
  auto ma = host::encode_ragged_map(a, 64, a_box_rows);
  if (!ma.ok()) return ma.status();
  auto mb = host::encode_ragged_map(b, 64, b_box_rows);
  if (!mb.ok()) return mb.status();
  const host::MatrixView c = view(g.c, wgrad ? int64_t{g.groups} * g.m : g.rows, out_cols, g.ldc,
                                  fp32_out ? host::ElementType::kFP32 : host::ElementType::kBF16);
  auto mc = host::encode_ragged_map(c, fp32_out ? 32 : 64, 64);
  if (!mc.ok()) return mc.status();
  maps.a = *ma;
  maps.b = *mb;
  maps.c = *mc;
  maps.h = *mc;
  if (g.epilogue == Epilogue::kSwiGLU && g.h != nullptr) {
    auto mh = host::encode_ragged_map(view(g.h, g.rows, g.n, g.ldh), 64, 64);
    if (!mh.ok()) return mh.status();
    maps.h = *mh;
  }
  return maps;
}

template <Layout kLayout, class Epi, class LaunchCfg = Cfg>
Status launch(const Maps& maps, const KernelParams& params, int grid, cudaStream_t stream) {
  auto* kernel = grouped_gemm_kernel<kLayout, Epi, LaunchCfg>;
  constexpr int kSmem = SmemLayout<LaunchCfg>::kDynamicBytes;
  DETMOE_RETURN_IF_ERROR(cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem),
                                     "raising the dynamic shared-memory limit"));
  kernel<<<grid, LaunchCfg::kThreads, kSmem, stream>>>(maps.a, maps.b, maps.c, maps.h, params);
  return cuda_status(cudaGetLastError(), "kernel launch");
}

}  // namespace

Status run(const GroupedGemm& g, cudaStream_t stream) {
  DETMOE_RETURN_IF_ERROR(validate(g));
  const bool wgrad = g.layout == Layout::kWeightGrad;
  const bool has_output = wgrad ? (g.m > 0 && g.n > 0) : (g.rows > 0 && g.n > 0);
  if (!has_output) return Status::Ok();
  auto info = current_device_info();
  if (!info.ok()) return info.status();
  auto maps = make_maps(g);
  if (!maps.ok()) return maps.status();

  KernelParams p{};
  p.group_offsets = g.group_offsets;
  p.groups = g.groups;
  p.rows = static_cast<int32_t>(g.rows);
  p.n = static_cast<int32_t>(g.n);
  p.k = static_cast<int32_t>(g.k);
  p.m = static_cast<int32_t>(g.m);
  p.epilogue = static_cast<int32_t>(g.epilogue);
  p.out_cols = static_cast<int32_t>(g.epilogue == Epilogue::kSwiGLU ? g.n / 2 : g.n);
  p.row_scale = g.row_scale;
  p.store_h = g.epilogue == Epilogue::kSwiGLU && g.h != nullptr ? 1 : 0;
  p.tickets = g.tile_tickets;
  p.band_budget_kb = g.band_budget_kb;
  p.stream_stores = g.stream_stores ? 1 : 0;
  const int grid = g.grid_ctas > 0 ? g.grid_ctas : info->sms;
  if (g.tile_tickets != nullptr)
    DETMOE_RETURN_IF_ERROR(cuda_status(cudaMemsetAsync(g.tile_tickets, 0, sizeof(unsigned int), stream),
                                       "zeroing tile_tickets"));

  switch (g.layout) {
    case Layout::kForward:
      if (g.epilogue == Epilogue::kSwiGLU) return launch<Layout::kForward, SwiGLUEpilogue>(*maps, p, grid, stream);
      return launch<Layout::kForward, StoreEpilogue>(*maps, p, grid, stream);
    case Layout::kDataGrad:
      return launch<Layout::kDataGrad, StoreEpilogue>(*maps, p, grid, stream);
    case Layout::kWeightGrad:
      // The same tiles, k order and stores with a deeper store ring: the same bits.
      if (g.deep_store_ring) return launch<Layout::kWeightGrad, StoreEpilogue, Tile128x256DeepRing>(*maps, p, grid, stream);
      return launch<Layout::kWeightGrad, StoreEpilogue>(*maps, p, grid, stream);
  }
  return Status(ErrorCode::kInternal, "gemm: unreachable layout");
}

}  // namespace detmoe::gemm
