// GemmEngine over cuBLASLt: row-major out[M,N] = x[M,K] @ W[N,K]^T is column-major out^T = W x^T:
// cuBLAS A = W (TRANSA = T, stored [K,N] col-major, ld = ldw), B = x (TRANSB = N, [K,M] col-major,
// ld = ldx), D [N,M] col-major (ld = ldd) — the "TN" layout FP8 requires on Hopper.
// One handle, one 32 MiB workspace, a plan cache (descriptors + chosen algorithm) per exact call shape,
// and the pinned table from `vortex gemm-tune`. Tested in tests/gemm/gemm_test.cpp (E1 vs FP64) and
// tests/gemm/nvfp4_gemm_test.cpp (NVFP4 emulation with alpha on the device; FP4 plans compiled, not run on sm_90).
#include <cublasLt.h>
#include <cuda.h>  // CUDA_VERSION: the FP4 (E2M1, VEC16_UE4M3) enums exist from CUDA 12.8 on

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <tuple>

#include "gemm/gemm.h"
#include "gemm/gemm_table.h"

namespace vortex {
namespace {

Status cublas_error(cublasStatus_t st, const char* what) {
  return Status(ErrorCode::kCublas, std::string(what) + " failed: " + cublasLtGetStatusString(st) + " (" +
                                        std::to_string(static_cast<int>(st)) + ")");
}
Status cuda_error(cudaError_t err, const char* what) {
  return Status(ErrorCode::kCuda, std::string(what) + " failed: " + cudaGetErrorString(err));
}
#define VORTEX_CUBLAS(expr)                                                                        \
  do {                                                                                             \
    cublasStatus_t vortex_cublas_st_ = (expr);                                                     \
    if (vortex_cublas_st_ != CUBLAS_STATUS_SUCCESS) return cublas_error(vortex_cublas_st_, #expr); \
  } while (0)
#define VORTEX_CUDA_OK(expr)                                                         \
  do {                                                                               \
    cudaError_t vortex_cuda_err_ = (expr);                                           \
    if (vortex_cuda_err_ != cudaSuccess) return cuda_error(vortex_cuda_err_, #expr); \
  } while (0)

struct PlanKey {
  int precision;
  int64_t m, n, k, ldx, ldw, ldd;
  bool bias;
  bool gelu;
  auto tie() const { return std::tie(precision, m, n, k, ldx, ldw, ldd, bias, gelu); }
  bool operator<(const PlanKey& o) const { return tie() < o.tie(); }
};

// Descriptors for one call shape. Pointers (bias, scales) are set per call on the shared descriptor.
struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  GemmAlgoConfig config;
  bool pinned = false;
  std::string pin_note;  // why a matching table entry was not used (empty otherwise)
  ~Plan() {
    if (op) cublasLtMatmulDescDestroy(op);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (d) cublasLtMatrixLayoutDestroy(d);
  }
};

struct Types {
  cudaDataType_t ab, d;
  cublasComputeType_t compute;
  size_t ab_size, d_size;
};
Types types_for(GemmPrecision p) {
  switch (p) {
    case GemmPrecision::kBf16:
    case GemmPrecision::kNvfp4Emulated:
      return {CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2, 2};
    case GemmPrecision::kNvfp4:
#if CUDA_VERSION >= 12080
      return {CUDA_R_4F_E2M1, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 1, 2};  // ab_size unused (packed pairs)
#else
      return {CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2, 2};  // rejected in validate_call
#endif
    case GemmPrecision::kF32:
      return {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, 4, 4};
    case GemmPrecision::kBf16F32Out:
      return {CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F, 2, 4};
    case GemmPrecision::kFp8PerTensor:
    case GemmPrecision::kFp8Blockwise:
    case GemmPrecision::kFp8RowScaled:
      return {CUDA_R_8F_E4M3, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 1, 2};
  }
  return {CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2, 2};
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

Status validate_call(const GemmCall& c) {
  std::ostringstream where;
  where << gemm_precision_name(c.precision) << " GEMM M=" << c.m << " N=" << c.n << " K=" << c.k << " ldx=" << c.ldx
        << " ldw=" << c.ldw << " ldd=" << c.ldd;
  if (c.m <= 0 || c.n <= 0 || c.k <= 0) return invalid_argument(where.str() + ": sizes must be positive");
  if (!c.x || !c.w || !c.d) return invalid_argument(where.str() + ": null operand pointer");
  if (c.ldx < c.k || c.ldw < c.k || c.ldd < c.n)
    return invalid_argument(where.str() + ": a leading dimension is smaller than the row width");
  const Types t = types_for(c.precision);
  const bool fp8 = c.precision == GemmPrecision::kFp8PerTensor || c.precision == GemmPrecision::kFp8Blockwise ||
                   c.precision == GemmPrecision::kFp8RowScaled;
  if (fp8) {
    // cuBLASLt FP8 (Hopper): 16-byte aligned pointers and leading dimensions, K a multiple of 16.
    if (!aligned16(c.x) || !aligned16(c.w) || !aligned16(c.d))
      return invalid_argument(where.str() + ": FP8 GEMM operands must be 16-byte aligned");
    if ((c.ldx * t.ab_size) % 16 || (c.ldw * t.ab_size) % 16 || (c.ldd * t.d_size) % 16 || c.k % 16)
      return invalid_argument(where.str() +
                              ": FP8 GEMM needs K and leading dims that are multiples of 16 bytes "
                              "(pad the activation rows)");
    if (!c.x_scale || !c.w_scale) return invalid_argument(where.str() + ": FP8 GEMM needs scales");
    if (c.precision == GemmPrecision::kFp8Blockwise) {
      if (c.m % 4 || c.n % 4)
        return invalid_argument(where.str() +
                                ": blockwise FP8 needs M and N multiples of 4 (pad the token rows; "
                                "linear() does this itself)");
      if (!aligned16(c.x_scale) || !aligned16(c.w_scale))
        return invalid_argument(where.str() + ": blockwise scale arrays must be 16-byte aligned");
    }
    if (c.precision == GemmPrecision::kFp8RowScaled && (!aligned16(c.x_scale) || !aligned16(c.w_scale)))
      return invalid_argument(where.str() + ": row-scaled FP8 needs 16-byte aligned x_scale [M] and w_scale [N]");
  } else if (c.x_scale || c.w_scale) {
    return invalid_argument(where.str() + ": scales are only legal for FP8 GEMMs");
  }
  const bool nvfp4 = c.precision == GemmPrecision::kNvfp4Emulated || c.precision == GemmPrecision::kNvfp4;
  if (c.accumulate && (c.alpha || c.precision == GemmPrecision::kF32))
    return invalid_argument(where.str() +
                            ": accumulate (d += ...) is for the bf16-input host-alpha GEMMs only (bf16, fp8, "
                            "bf16_f32out)");
  if (c.gelu && (c.precision != GemmPrecision::kBf16 || c.accumulate))
    return invalid_argument(where.str() + ": the GELU epilogue is for the bf16 GEMM without accumulate only");
  if (nvfp4 && !c.alpha)
    return invalid_argument(where.str() + ": NVFP4 GEMMs need alpha (g_x * g_w) as one f32 in device memory");
  if (!nvfp4 && c.alpha) return invalid_argument(where.str() + ": a device alpha is only legal for the NVFP4 GEMMs");
  if (c.precision == GemmPrecision::kNvfp4) {
#if CUDA_VERSION < 12080
    return unsupported(where.str() + ": this build's CUDA headers predate FP4 (CUDA_R_4F_E2M1 needs CUDA >= 12.8)");
#endif
    if (!c.x_block_scale || !c.w_block_scale)
      return invalid_argument(where.str() + ": NVFP4 GEMM needs the E4M3 block scales of x and w");
    if (!aligned16(c.x) || !aligned16(c.w) || !aligned16(c.d) || !aligned16(c.x_block_scale) ||
        !aligned16(c.w_block_scale))
      return invalid_argument(where.str() + ": NVFP4 GEMM operands and block scales must be 16-byte aligned");
    if (c.k % 32 || c.ldx % 32 || c.ldw % 32 || c.ldd % 8)
      return invalid_argument(where.str() +
                              ": NVFP4 GEMM needs K and ldx/ldw multiples of 32 elements "
                              "(16 bytes of packed E2M1) and ldd a multiple of 8");
  } else if (c.x_block_scale || c.w_block_scale) {
    return invalid_argument(where.str() + ": block scales are only legal for the NVFP4 (FP4) GEMM");
  }
  return Status::Ok();
}

class CublasLtGemmEngine final : public GemmEngine {
 public:
  ~CublasLtGemmEngine() override {
    plans_.clear();
    if (device_zero_) cudaFree(device_zero_);
    if (handle_) cublasLtDestroy(handle_);
  }

  Status init(const GemmEngineOptions& options) {
    workspace_bytes_ = options.workspace_bytes;
    memory_ = options.memory ? options.memory : cuda_malloc_resource();
    VORTEX_CUBLAS(cublasLtCreate(&handle_));
    if (workspace_bytes_ > 0) VORTEX_RETURN_IF_ERROR(workspace_.reserve(memory_, workspace_bytes_));
    // beta = 0 in device memory for the device-pointer-mode (NVFP4) plans: alpha and beta share one mode.
    VORTEX_CUDA_OK(cudaMalloc(&device_zero_, 256));
    VORTEX_CUDA_OK(cudaMemset(device_zero_, 0, 256));
    int dev = 0;
    VORTEX_CUDA_OK(cudaGetDevice(&dev));
    cudaDeviceProp prop{};
    VORTEX_CUDA_OK(cudaGetDeviceProperties(&prop, dev));
    device_name_ = prop.name;
    sm_count_ = prop.multiProcessorCount;
    cc_major_ = prop.major;
    std::string path = options.load_pinned_table ? options.pinned_table_path : std::string();
    if (path.empty() && options.load_pinned_table) {
      const char* env = std::getenv("VORTEX_GEMM_TABLE");
      if (env) path = env;
    }
    if (!path.empty()) {
      auto table = load_gemm_table(path);
      if (!table.ok()) return table.status().with_context("loading the pinned GEMM table");
      table_ = std::move(table).value();
    } else if (options.load_pinned_table && options.use_builtin_table) {
      auto table = builtin_gemm_table();
      if (!table.ok()) return table.status();
      table_ = std::move(table).value();
    }
    return Status::Ok();
  }

  size_t workspace_bytes() const override { return workspace_bytes_; }

  Status gemm(const GemmCall& call, cudaStream_t stream) override {
    VORTEX_RETURN_IF_ERROR(validate_call(call));
    VORTEX_ASSIGN_OR_RETURN(Plan * plan, get_plan(call));
    return launch(*plan, plan->algo, call, stream);
  }

  Status gemm_with_algo(const GemmCall& call, const GemmAlgoConfig& cfg, cudaStream_t stream) override {
    VORTEX_RETURN_IF_ERROR(validate_call(call));
    VORTEX_ASSIGN_OR_RETURN(Plan * plan, get_plan(call));
    cublasLtMatmulAlgo_t algo;
    VORTEX_RETURN_IF_ERROR(build_algo(*plan, call, cfg, &algo));
    return launch(*plan, algo, call, stream);
  }

  Result<GemmAlgoConfig> selected_algo(const GemmCall& call, bool* pinned) override {
    VORTEX_RETURN_IF_ERROR(validate_call(call));
    VORTEX_ASSIGN_OR_RETURN(Plan * plan, get_plan(call));
    if (pinned) *pinned = plan->pinned;
    return plan->config;
  }

  std::string pin_note(const GemmCall& call) override {
    if (!validate_call(call).ok()) return {};
    auto plan = get_plan(call);
    return plan.ok() ? (*plan)->pin_note : std::string();
  }

  Result<std::vector<GemmAlgoConfig>> enumerate_algos(const GemmCall& call, int max_configs) override {
    VORTEX_RETURN_IF_ERROR(validate_call(call));
    VORTEX_ASSIGN_OR_RETURN(Plan * plan, get_plan(call));
    const Types t = types_for(call.precision);
    std::vector<GemmAlgoConfig> out;
    int ids[256];
    int n_ids = 0;
    VORTEX_CUBLAS(cublasLtMatmulAlgoGetIds(handle_, t.compute, CUDA_R_32F, t.ab, t.ab, t.d, t.d, 256, ids, &n_ids));
    // The heuristic's own candidates first (they carry cluster/inner shapes the search fills in).
    VORTEX_ASSIGN_OR_RETURN(auto heuristic, heuristic_configs(*plan, 16));
    for (const auto& h : heuristic) out.push_back(h);
    // Spread the budget over the algorithm ids (split-K 1 first) so one id cannot take it all.
    const int per_id = std::max(2, (max_configs - static_cast<int>(out.size())) / std::max(1, n_ids));
    for (int i = 0; i < n_ids && static_cast<int>(out.size()) < max_configs; ++i) {
      int taken_for_id = 0;
      cublasLtMatmulAlgo_t algo;
      if (cublasLtMatmulAlgoInit(handle_, t.compute, CUDA_R_32F, t.ab, t.ab, t.d, t.d, ids[i], &algo) !=
          CUBLAS_STATUS_SUCCESS)
        continue;
      std::vector<uint32_t> tiles = cap_array(algo, CUBLASLT_ALGO_CAP_TILE_IDS);
      std::vector<uint32_t> stages = cap_array(algo, CUBLASLT_ALGO_CAP_STAGES_IDS);
      if (tiles.empty()) tiles.push_back(CUBLASLT_MATMUL_TILE_UNDEFINED);
      if (stages.empty()) stages.push_back(CUBLASLT_MATMUL_STAGES_UNDEFINED);
      int32_t splitk_support = 0;
      uint32_t red_mask = 0, swizzle_support = 0;
      size_t written = 0;
      cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &splitk_support,
                                        sizeof(splitk_support), &written);
      cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &red_mask, sizeof(red_mask),
                                        &written);
      cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT, &swizzle_support,
                                        sizeof(swizzle_support), &written);
      std::vector<std::pair<int, int>> splits = {{1, CUBLASLT_REDUCTION_SCHEME_NONE}};
      if (splitk_support) {
        for (int s : {2, 4})  // FP32 reductions only, as the heuristic (run_heuristic)
          if (red_mask & CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE)
            splits.emplace_back(s, static_cast<int>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE));
      }
      for (uint32_t tile : tiles)
        for (uint32_t stage : stages)
          for (auto [splitk, red] : splits)
            for (int swz = 0; swz <= (swizzle_support ? 1 : 0); ++swz) {
              if (static_cast<int>(out.size()) >= max_configs || taken_for_id >= per_id) break;
              GemmAlgoConfig cfg;
              cfg.algo_id = ids[i];
              cfg.tile_id = static_cast<int>(tile);
              cfg.stages_id = static_cast<int>(stage);
              cfg.splitk_num = splitk;
              cfg.reduction_scheme = red;
              cfg.cta_swizzling = swz;
              cublasLtMatmulAlgo_t candidate;
              if (build_algo(*plan, call, cfg, &candidate).ok()) {
                out.push_back(cfg);
                ++taken_for_id;
              }
            }
    }
    return out;
  }

  Status linear(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out, cudaStream_t stream) override;

 private:
  std::vector<uint32_t> cap_array(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
    size_t bytes = 0;
    if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, nullptr, 0, &bytes) != CUBLAS_STATUS_SUCCESS) return {};
    std::vector<uint32_t> v(bytes / sizeof(uint32_t));
    if (v.empty()) return v;
    if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, v.data(), bytes, &bytes) != CUBLAS_STATUS_SUCCESS) return {};
    return v;
  }

  static GemmAlgoConfig read_config(const cublasLtMatmulAlgo_t& algo) {
    GemmAlgoConfig c;
    size_t w = 0;
    int32_t id = 0, splitk = 1;
    uint32_t tile = 0, red = 0, swz = 0, custom = 0, stages = 0;
    uint16_t inner = 0, cluster = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), &w);
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &w);
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof(splitk), &w);
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof(red), &w);
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swz, sizeof(swz), &w);
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom, sizeof(custom), &w);
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof(stages), &w);
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, &inner, sizeof(inner), &w);
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof(cluster), &w);
    c.algo_id = id;
    c.tile_id = static_cast<int>(tile);
    c.splitk_num = splitk;
    c.reduction_scheme = static_cast<int>(red);
    c.cta_swizzling = static_cast<int>(swz);
    c.custom_option = static_cast<int>(custom);
    c.stages_id = static_cast<int>(stages);
    c.inner_shape_id = inner;
    c.cluster_shape_id = cluster;
    return c;
  }

  Status build_algo(const Plan& plan, const GemmCall& call, const GemmAlgoConfig& cfg, cublasLtMatmulAlgo_t* algo) {
    const Types t = types_for(call.precision);
    VORTEX_CUBLAS(cublasLtMatmulAlgoInit(handle_, t.compute, CUDA_R_32F, t.ab, t.ab, t.d, t.d, cfg.algo_id, algo));
    uint32_t tile = static_cast<uint32_t>(cfg.tile_id), red = static_cast<uint32_t>(cfg.reduction_scheme);
    uint32_t swz = static_cast<uint32_t>(cfg.cta_swizzling), custom = static_cast<uint32_t>(cfg.custom_option);
    uint32_t stages = static_cast<uint32_t>(cfg.stages_id);
    int32_t splitk = cfg.splitk_num;
    uint16_t inner = static_cast<uint16_t>(cfg.inner_shape_id);
    uint16_t cluster = static_cast<uint16_t>(cfg.cluster_shape_id);
    VORTEX_CUBLAS(cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile)));
    VORTEX_CUBLAS(cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof(stages)));
    VORTEX_CUBLAS(cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof(splitk)));
    VORTEX_CUBLAS(cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof(red)));
    VORTEX_CUBLAS(cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swz, sizeof(swz)));
    VORTEX_CUBLAS(
        cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom, sizeof(custom)));
    VORTEX_CUBLAS(
        cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, &inner, sizeof(inner)));
    VORTEX_CUBLAS(
        cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof(cluster)));
    cublasLtMatmulHeuristicResult_t check{};
    cublasStatus_t st = cublasLtMatmulAlgoCheck(handle_, plan.op, plan.a, plan.b, plan.d, plan.d, algo, &check);
    if (st != CUBLAS_STATUS_SUCCESS)
      return unsupported("cuBLASLt rejects algorithm " + cfg.describe() +
                         " for this GEMM: " + cublasLtGetStatusString(st));
    if (check.workspaceSize > workspace_bytes_)
      return unsupported("algorithm " + cfg.describe() + " needs " + std::to_string(check.workspaceSize) +
                         " workspace bytes, engine has " + std::to_string(workspace_bytes_));
    return Status::Ok();
  }

  Result<std::vector<GemmAlgoConfig>> heuristic_configs(const Plan& plan, int count) {
    std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(count));
    VORTEX_ASSIGN_OR_RETURN(int n, run_heuristic(plan, results.data(), count));
    std::vector<GemmAlgoConfig> out;
    for (int i = 0; i < n; ++i) out.push_back(read_config(results[static_cast<size_t>(i)].algo));
    return out;
  }

  Result<int> run_heuristic(const Plan& plan, cublasLtMatmulHeuristicResult_t* results, int count) {
    cublasLtMatmulPreference_t pref = nullptr;
    VORTEX_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = workspace_bytes_;
    cublasStatus_t st =
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    // Split-K partial sums reduced in the compute type (FP32) only: a reduction in the output type (or in place
    // in the BF16 output) would round each partial sum, a second rounding the one-rounding program has not.
    uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reductions,
                                                sizeof(reductions));
    int n = 0;
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulAlgoGetHeuristic(handle_, plan.op, plan.a, plan.b, plan.d, plan.d, pref, count, results, &n);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || n == 0)
      return unsupported(std::string("cuBLASLt has no algorithm for this GEMM on this GPU (") +
                         cublasLtGetStatusString(st) +
                         "); check dtypes, alignment and the scaling mode for this architecture");
    return n;
  }

  Result<Plan*> get_plan(const GemmCall& call) {
    std::lock_guard<std::mutex> lock(mu_);
    PlanKey key{static_cast<int>(call.precision),
                call.m,
                call.n,
                call.k,
                call.ldx,
                call.ldw,
                call.ldd,
                call.bias != nullptr,
                call.gelu};
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second.get();
    auto plan = std::make_unique<Plan>();
    const Types t = types_for(call.precision);
    VORTEX_CUBLAS(cublasLtMatmulDescCreate(&plan->op, t.compute, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    VORTEX_CUBLAS(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    VORTEX_CUBLAS(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    if (call.gelu && !call.bias) {
      cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_GELU;
      VORTEX_CUBLAS(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    }
    if (call.bias) {
      cublasLtEpilogue_t epi = call.gelu ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
      VORTEX_CUBLAS(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
      cudaDataType_t bias_type = t.d;  // bf16 bias for bf16 outputs, f32 for f32
      VORTEX_CUBLAS(
          cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
    }
    if (call.alpha) {
      // NVFP4: alpha = g_x * g_w lives on the device (no host sync to read the dynamic activation scale).
      cublasLtPointerMode_t mode = CUBLASLT_POINTER_MODE_DEVICE;
      VORTEX_CUBLAS(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &mode, sizeof(mode)));
    }
#if CUDA_VERSION >= 12080
    if (call.precision == GemmPrecision::kNvfp4) {
      // comfy-kitchen's cublas_gemm_blockwise_fp4 configuration (research §1.9): A = W, B = x, both
      // VEC16_UE4M3 block scales in 128x4 tiles, FP32 scale type, TN.
      cublasLtMatmulMatrixScale_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3;
      VORTEX_CUBLAS(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode)));
      VORTEX_CUBLAS(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode)));
      VORTEX_CUBLAS(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &call.w_block_scale,
                                                   sizeof(call.w_block_scale)));
      VORTEX_CUBLAS(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &call.x_block_scale,
                                                   sizeof(call.x_block_scale)));
    }
#endif
    if (call.precision == GemmPrecision::kFp8Blockwise) {
      // cuBLAS A = W (128x128 blocks), B = x (1x128 per token) — the pairing PyTorch's DeepSeek-style
      // _scaled_mm reaches for a row-major output (it swaps mat1/mat2 the same way).
      cublasLtMatmulMatrixScale_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
      cublasLtMatmulMatrixScale_t b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
      VORTEX_CUBLAS(
          cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof(a_mode)));
      VORTEX_CUBLAS(
          cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof(b_mode)));
    }
    if (call.precision == GemmPrecision::kFp8RowScaled) {
      // cuBLAS A = W: one scale per row of op(A) = output channel; B = x: one per column of op(B) = token.
      cublasLtMatmulMatrixScale_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
      VORTEX_CUBLAS(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode)));
      VORTEX_CUBLAS(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode)));
    }
    if (call.x_scale) {
      // Scale pointers must be on the descriptor before the heuristic runs: with blockwise modes and
      // null scale pointers cuBLASLt 13.1 answered CUBLAS_STATUS_INVALID_VALUE on the H200
      // (2026-11-29 run); NVIDIA's LtBlk128x128Fp8Matmul sample and PyTorch also set them first.
      VORTEX_CUBLAS(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &call.w_scale,
                                                   sizeof(call.w_scale)));
      VORTEX_CUBLAS(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &call.x_scale,
                                                   sizeof(call.x_scale)));
    }
    VORTEX_CUBLAS(cublasLtMatrixLayoutCreate(&plan->a, t.ab, static_cast<uint64_t>(call.k),
                                             static_cast<uint64_t>(call.n), call.ldw));
    VORTEX_CUBLAS(cublasLtMatrixLayoutCreate(&plan->b, t.ab, static_cast<uint64_t>(call.k),
                                             static_cast<uint64_t>(call.m), call.ldx));
    VORTEX_CUBLAS(cublasLtMatrixLayoutCreate(&plan->d, t.d, static_cast<uint64_t>(call.n),
                                             static_cast<uint64_t>(call.m), call.ldd));
    // Pinned entries were proven without the GELU epilogue.
    const GemmTableEntry* pinned =
        table_ && !call.gelu ? table_->find(call.precision, call.m, call.n, call.k, call.ldx, call.ldw, call.ldd,
                                            call.bias != nullptr, device_name_, cublasLtGetVersion())
                             : nullptr;
    Status pin_status = Status::Ok();
    if (pinned) pin_status = build_algo(*plan, call, pinned->algo, &plan->algo);
    if (pinned && pin_status.ok()) {
      plan->config = pinned->algo;
      plan->pinned = true;
    } else {
      // No entry, or one cuBLASLt rejects now (e.g. a changed workspace): the heuristic, with the reason kept.
      if (pinned)
        plan->pin_note = "pinned entry (" + pinned->evidence + ") rejected, heuristic used: " + pin_status.to_string() +
                         "; re-run fp8_gemm_bench / `vortex gemm-tune`";
      cublasLtMatmulHeuristicResult_t result{};
      VORTEX_ASSIGN_OR_RETURN(int n, run_heuristic(*plan, &result, 1));
      (void)n;
      plan->algo = result.algo;
      plan->config = read_config(result.algo);
    }
    Plan* raw = plan.get();
    plans_.emplace(key, std::move(plan));
    return raw;
  }

  Status launch(const Plan& plan, const cublasLtMatmulAlgo_t& algo, const GemmCall& call, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mu_);
    if (call.bias)
      VORTEX_CUBLAS(
          cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &call.bias, sizeof(call.bias)));
    if (call.x_scale) {
      // cuBLAS A = W, B = x.
      VORTEX_CUBLAS(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &call.w_scale,
                                                   sizeof(call.w_scale)));
      VORTEX_CUBLAS(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &call.x_scale,
                                                   sizeof(call.x_scale)));
    }
    if (call.x_block_scale) {
      VORTEX_CUBLAS(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &call.w_block_scale,
                                                   sizeof(call.w_block_scale)));
      VORTEX_CUBLAS(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &call.x_block_scale,
                                                   sizeof(call.x_block_scale)));
    }
    const float alpha = 1.0f, beta = call.accumulate ? 1.0f : 0.0f;  // accumulate: C = D, in place
    // Device pointer mode (NVFP4 plans): alpha from the call, beta from the engine's device zero.
    const void* alpha_ptr = call.alpha ? static_cast<const void*>(call.alpha) : static_cast<const void*>(&alpha);
    const void* beta_ptr = call.alpha ? static_cast<const void*>(device_zero_) : static_cast<const void*>(&beta);
    VORTEX_CUBLAS(cublasLtMatmul(handle_, plan.op, alpha_ptr, call.w, plan.a, call.x, plan.b, beta_ptr, call.d, plan.d,
                                 call.d, plan.d, &algo, workspace_.data(), workspace_bytes_, stream));
    return Status::Ok();
  }

  // Scratch for linear()'s FP8 activation path (quantized x, scales, padded output).
  Result<char*> scratch(size_t bytes) {
    // A replaced block goes back to the resource; only later work on the same stream reuses it.
    VORTEX_RETURN_IF_ERROR(scratch_.reserve(memory_, bytes));
    return scratch_.as<char>();
  }

  cublasLtHandle_t handle_ = nullptr;
  std::shared_ptr<DeviceMemoryResource> memory_;
  DeviceBuffer workspace_;  // [workspace_bytes_] cuBLASLt workspace
  size_t workspace_bytes_ = 0;
  DeviceBuffer scratch_;         // FP8 quantized activation, scales, amax (grown on demand)
  void* device_zero_ = nullptr;  // 256 bytes of zeros: beta for device-pointer-mode plans
  std::string device_name_;
  int sm_count_ = 0;
  int cc_major_ = 0;
  std::optional<GemmTable> table_;
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;
  std::mutex mu_;
};

int64_t row_stride(const Tensor& t) { return t.ndim() == 2 ? t.stride(0) : t.dim(-1); }

Status check_matrix(const Tensor& t, const char* name, Device device) {
  if (!t.defined()) return invalid_argument(std::string(name) + " is undefined");
  if (t.device() != device)
    return invalid_argument(std::string(name) + " must be on " + device_name(device) + ", got " +
                            device_name(t.device()));
  if (t.ndim() != 2) return invalid_argument(std::string(name) + " must be 2-D, got " + t.describe());
  if (t.stride(1) != 1)
    return invalid_argument(std::string(name) + " must have unit column stride, got " + t.describe());
  return Status::Ok();
}

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

Status CublasLtGemmEngine::linear(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out,
                                  cudaStream_t stream) {
  VORTEX_RETURN_IF_ERROR(check_matrix(x, "linear input x", Device::kCuda));
  VORTEX_RETURN_IF_ERROR(check_matrix(w.weight, "linear weight", Device::kCuda));
  VORTEX_RETURN_IF_ERROR(check_matrix(out, "linear output", Device::kCuda));
  const int64_t m = x.dim(0), k = x.dim(1), n = w.weight.dim(0);
  if (w.weight.dim(1) != k || out.dim(0) != m || out.dim(1) != n)
    return invalid_argument("linear shape mismatch: x " + x.describe() + ", weight " + w.weight.describe() + ", out " +
                            out.describe());
  if (bias) {
    if (!bias->defined() || bias->device() != Device::kCuda || bias->numel() != n || !bias->is_contiguous())
      return invalid_argument("linear bias must be a contiguous device vector of " + std::to_string(n) +
                              " elements, got " + bias->describe());
  }
  GemmCall call;
  call.m = m;
  call.n = n;
  call.k = k;
  call.x = x.raw_data();
  call.ldx = row_stride(x);
  call.w = w.weight.raw_data();
  call.ldw = row_stride(w.weight);
  call.d = out.raw_data();
  call.ldd = row_stride(out);
  call.bias = bias ? bias->raw_data() : nullptr;
  if (w.format == QuantFormat::kNone) {
    if (x.dtype() == DType::kBF16 && w.weight.dtype() == DType::kBF16 && out.dtype() == DType::kBF16) {
      if (bias && bias->dtype() != DType::kBF16) return invalid_argument("bf16 linear needs a bf16 bias");
      call.precision = GemmPrecision::kBf16;
    } else if (x.dtype() == DType::kF32 && w.weight.dtype() == DType::kF32 && out.dtype() == DType::kF32) {
      if (bias && bias->dtype() != DType::kF32) return invalid_argument("f32 linear needs an f32 bias");
      call.precision = GemmPrecision::kF32;
    } else {
      return unsupported("linear: unsupported dtype combination x " + x.describe() + ", weight " + w.weight.describe() +
                         ", out " + out.describe() + " (supported: bf16/bf16/bf16, f32/f32/f32, bf16 x fp8 -> bf16)");
    }
    return gemm(call, stream);
  }
  if (w.format == QuantFormat::kNvfp4)
    return unsupported(
        "linear: NVFP4 weights need a quantized activation: use Nvfp4Gemm (gemm/nvfp4_gemm.h), "
        "as CudaBackend::linear does, or expand the weight (--precision nvfp4-weight-only)");
  if (w.format != QuantFormat::kFp8Scaled)
    return unsupported(std::string("linear: weight format ") + quant_format_name(w.format) +
                       " is not handled by the cuBLASLt engine on this GPU");
  if (x.dtype() != DType::kBF16 || out.dtype() != DType::kBF16 || w.weight.dtype() != DType::kF8E4M3)
    return invalid_argument("fp8 linear needs bf16 x, f8e4m3 weight and bf16 out; got x " + x.describe() + ", weight " +
                            w.weight.describe() + ", out " + out.describe());
  if (bias && bias->dtype() != DType::kBF16) return invalid_argument("fp8 linear needs a bf16 bias");
  if (!w.weight_scale.defined() || w.weight_scale.device() != Device::kCuda || w.weight_scale.dtype() != DType::kF32)
    return invalid_argument("fp8 linear needs weight_scale as f32 on the device");
  if (k % 16) return invalid_argument("fp8 linear needs K % 16 == 0, got K=" + std::to_string(k));
  const int64_t l_blocks = (k + 127) / 128, l4 = (l_blocks + 3) / 4 * 4;
  const bool blockwise = w.weight_scale.numel() != 1;
  if (blockwise && w.weight_scale.numel() != (n + 127) / 128 * l4)
    return invalid_argument("fp8 blockwise weight_scale must have ceil(N/128) x roundup(ceil(K/128),4) = " +
                            std::to_string((n + 127) / 128 * l4) + " elements, got " + w.weight_scale.describe());
  call.w_scale = static_cast<const float*>(w.weight_scale.raw_data());
  const int64_t m_pad = blockwise ? (m + 3) / 4 * 4 : m;
  // Scratch: q [m_pad, K] e4m3 | scales | amax | padded output (blockwise with M % 4 != 0).
  const size_t q_bytes = align_up(static_cast<size_t>(m_pad * k), 256);
  const size_t s_bytes = align_up(static_cast<size_t>(blockwise ? l_blocks * m_pad : 1) * 4, 256);
  const size_t a_bytes = 256;
  const bool pad_out = blockwise && m_pad != m;
  const size_t o_bytes = pad_out ? align_up(static_cast<size_t>(m_pad * n) * 2, 256) : 0;
  VORTEX_ASSIGN_OR_RETURN(char* base, scratch(q_bytes + s_bytes + a_bytes + o_bytes));
  void* q = base;
  float* scales = reinterpret_cast<float*>(base + q_bytes);
  uint32_t* amax = reinterpret_cast<uint32_t*>(base + q_bytes + s_bytes);
  void* padded_out = base + q_bytes + s_bytes + a_bytes;
  call.x = q;
  call.ldx = k;
  call.x_scale = scales;
  if (!blockwise) {
    call.precision = GemmPrecision::kFp8PerTensor;
    if (w.input_scale.defined()) {
      if (w.input_scale.device() != Device::kCuda || w.input_scale.dtype() != DType::kF32)
        return invalid_argument("fp8 linear: input_scale must be f32 on the device");
      call.x_scale = static_cast<const float*>(w.input_scale.raw_data());
      VORTEX_RETURN_IF_ERROR(
          quantize_fp8_per_tensor_static(x.raw_data(), m, k, row_stride(x), q, call.x_scale, stream));
    } else {
      VORTEX_RETURN_IF_ERROR(quantize_fp8_per_tensor(x.raw_data(), m, k, row_stride(x), q, scales, amax, stream));
    }
    return gemm(call, stream);
  }
  call.precision = GemmPrecision::kFp8Blockwise;
  VORTEX_RETURN_IF_ERROR(quantize_fp8_rowblock128(x.raw_data(), m, k, row_stride(x), q, scales, m_pad, stream));
  call.m = m_pad;
  if (pad_out) {
    call.d = padded_out;
    call.ldd = n;
  }
  VORTEX_RETURN_IF_ERROR(gemm(call, stream));
  if (pad_out)
    VORTEX_CUDA_OK(cudaMemcpy2DAsync(out.raw_data(), static_cast<size_t>(row_stride(out)) * 2, padded_out,
                                     static_cast<size_t>(n) * 2, static_cast<size_t>(n) * 2, static_cast<size_t>(m),
                                     cudaMemcpyDeviceToDevice, stream));
  return Status::Ok();
}

}  // namespace

const char* fp8_scaling_name(Fp8Scaling scaling) {
  return scaling == Fp8Scaling::kPerTensor ? "per_tensor" : "blockwise";
}

const char* gemm_precision_name(GemmPrecision precision) {
  switch (precision) {
    case GemmPrecision::kBf16:
      return "bf16";
    case GemmPrecision::kF32:
      return "f32";
    case GemmPrecision::kFp8PerTensor:
      return "fp8_per_tensor";
    case GemmPrecision::kFp8Blockwise:
      return "fp8_blockwise";
    case GemmPrecision::kNvfp4Emulated:
      return "nvfp4_emulated";
    case GemmPrecision::kNvfp4:
      return "nvfp4";
    case GemmPrecision::kFp8RowScaled:
      return "fp8_row_scaled";
    case GemmPrecision::kBf16F32Out:
      return "bf16_f32out";
  }
  return "unknown";
}

Result<GemmPrecision> gemm_precision_from_name(const std::string& name) {
  for (GemmPrecision p :
       {GemmPrecision::kBf16, GemmPrecision::kF32, GemmPrecision::kFp8PerTensor, GemmPrecision::kFp8Blockwise,
        GemmPrecision::kNvfp4Emulated, GemmPrecision::kNvfp4, GemmPrecision::kFp8RowScaled, GemmPrecision::kBf16F32Out})
    if (name == gemm_precision_name(p)) return p;
  return invalid_argument(
      "unknown GEMM precision '" + name +
      "' (expected bf16, f32, fp8_per_tensor, fp8_blockwise, fp8_row_scaled, nvfp4_emulated, nvfp4 or bf16_f32out)");
}

std::string GemmAlgoConfig::describe() const {
  std::ostringstream s;
  s << "algo " << algo_id << " tile " << tile_id << " stages " << stages_id << " splitk " << splitk_num << " reduction "
    << reduction_scheme << " swizzle " << cta_swizzling << " custom " << custom_option << " inner " << inner_shape_id
    << " cluster " << cluster_shape_id;
  return s.str();
}

namespace {
class CudaMallocResource final : public DeviceMemoryResource {
 public:
  Result<void*> allocate(size_t bytes) override {
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return Status(err == cudaErrorMemoryAllocation ? ErrorCode::kOutOfMemory : ErrorCode::kCuda,
                    "cudaMalloc(" + std::to_string(bytes) + " bytes) failed: " + cudaGetErrorString(err));
    }
    return p;
  }
  void release(void* ptr, size_t) override { (void)cudaFree(ptr); }  // cudaFree waits for the device
};
}  // namespace

std::shared_ptr<DeviceMemoryResource> cuda_malloc_resource() {
  static const std::shared_ptr<DeviceMemoryResource> kResource = std::make_shared<CudaMallocResource>();
  return kResource;
}

Result<std::unique_ptr<GemmEngine>> GemmEngine::create() { return create(GemmEngineOptions{}); }

Result<std::unique_ptr<GemmEngine>> GemmEngine::create(const GemmEngineOptions& options) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0)
    return Status(ErrorCode::kCuda, std::string("GemmEngine needs a CUDA device: ") +
                                        (err != cudaSuccess ? cudaGetErrorString(err) : "none found"));
  auto engine = std::make_unique<CublasLtGemmEngine>();
  VORTEX_RETURN_IF_ERROR(engine->init(options));
  return std::unique_ptr<GemmEngine>(std::move(engine));
}

}  // namespace vortex
