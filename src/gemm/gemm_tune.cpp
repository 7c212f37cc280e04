// gemm-tune / bench_gemm implementation (see gemm_tune.h). Correctness before timing: every candidate
// runs on poisoned output, is compared word for word with the heuristic default and against FP64 on
// sampled elements; only then are candidates timed, alternating, with CUDA events.
// Exercised by tests/gemm/gemm_tune_test.cpp (small shapes) and `vortex gemm-tune` on the H200.
#include "gemm/gemm_tune.h"

#include <cublasLt.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "gemm/fp8_reference.h"
#include "profiling/evidence.h"
#include "vortex/dtype.h"

namespace vortex {
namespace {

#define VORTEX_TUNE_CUDA(expr)                                                                      \
  do {                                                                                              \
    cudaError_t vortex_err_ = (expr);                                                               \
    if (vortex_err_ != cudaSuccess)                                                                 \
      return Status(ErrorCode::kCuda, std::string(#expr) + ": " + cudaGetErrorString(vortex_err_)); \
  } while (0)

bool is_fp8(GemmPrecision p) {
  return p == GemmPrecision::kFp8PerTensor || p == GemmPrecision::kFp8Blockwise || p == GemmPrecision::kFp8RowScaled;
}
size_t out_elem_size(GemmPrecision p) { return p == GemmPrecision::kF32 ? 4 : 2; }

nlohmann::json algo_json(const GemmAlgoConfig& a) {
  return {{"id", a.algo_id},
          {"tile", a.tile_id},
          {"stages", a.stages_id},
          {"splitk", a.splitk_num},
          {"reduction", a.reduction_scheme},
          {"swizzle", a.cta_swizzling},
          {"custom", a.custom_option},
          {"inner_shape", a.inner_shape_id},
          {"cluster_shape", a.cluster_shape_id}};
}
nlohmann::json timing_json(const TimingStats& t) {
  return {{"ms_p10", t.p10}, {"ms_p50", t.p50}, {"ms_p90", t.p90}, {"ms_p95", t.p95}, {"n", t.n}};
}

}  // namespace

const std::vector<GemmShape>& h3_gemm_shapes() {
  static const std::vector<GemmShape> shapes = {
      {"qkv", 21504, 5376}, {"out", 5376, 7168}, {"fc1", 28672, 5376}, {"fc2", 5376, 14336}};
  return shapes;
}

TimingStats timing_stats(std::vector<double> ms) {
  const Percentiles p = percentiles(std::move(ms));
  TimingStats t;
  t.n = p.n;
  t.p10 = p.p10;
  t.p50 = p.p50;
  t.p90 = p.p90;
  t.p95 = p.p95;
  return t;
}

// ---- operands ------------------------------------------------------------------------------------
GemmOperands::~GemmOperands() {
  for (void* p : allocations_) cudaFree(p);
}

Result<std::unique_ptr<GemmOperands>> GemmOperands::create(GemmPrecision precision, int64_t m, int64_t n, int64_t k,
                                                           uint64_t seed, cudaStream_t s) {
  std::unique_ptr<GemmOperands> ops(new GemmOperands());
  auto alloc = [&](size_t bytes) -> Result<void*> {
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, std::max<size_t>(bytes, 256));
    if (err != cudaSuccess)
      return Status(ErrorCode::kOutOfMemory,
                    "cudaMalloc(" + std::to_string(bytes) + ") for GEMM operands: " + cudaGetErrorString(err));
    ops->allocations_.push_back(p);
    return p;
  };
  if (precision == GemmPrecision::kNvfp4)
    return unsupported(
        "gemm-tune does not tune the Blackwell FP4 GEMM yet (no FP4 operand generator); tune "
        "nvfp4_emulated on Hopper");
  GemmCall& c = ops->call_;
  c.precision = precision;
  c.m = precision == GemmPrecision::kFp8Blockwise ? (m + 3) / 4 * 4 : m;
  c.n = n;
  c.k = k;
  c.ldx = k;
  c.ldw = k;
  c.ldd = n;
  const size_t um = static_cast<size_t>(c.m), un = static_cast<size_t>(n), uk = static_cast<size_t>(k);
  VORTEX_ASSIGN_OR_RETURN(c.d, alloc(um * un * out_elem_size(precision)));
  if (precision == GemmPrecision::kF32) {
    VORTEX_ASSIGN_OR_RETURN(void* x, alloc(um * uk * 4));
    VORTEX_ASSIGN_OR_RETURN(void* w, alloc(un * uk * 4));
    VORTEX_RETURN_IF_ERROR(fill_uniform_f32_device(static_cast<float*>(x), c.m * k, seed, -1.f, 1.f, s));
    VORTEX_RETURN_IF_ERROR(fill_uniform_f32_device(static_cast<float*>(w), n * k, seed + 1, -1.f, 1.f, s));
    c.x = x;
    c.w = w;
  } else if (precision == GemmPrecision::kBf16 || precision == GemmPrecision::kNvfp4Emulated) {
    if (precision == GemmPrecision::kNvfp4Emulated) {
      // The emulation's plan: BF16 operands (exactly what dequantized NVFP4 operands are) and alpha = 1 on
      // the device, so the FP64 reference is the BF16 one.
      VORTEX_ASSIGN_OR_RETURN(void* alpha, alloc(256));
      const float one = 1.0f;
      VORTEX_TUNE_CUDA(cudaMemcpy(alpha, &one, sizeof(one), cudaMemcpyHostToDevice));
      c.alpha = static_cast<const float*>(alpha);
    }
    VORTEX_ASSIGN_OR_RETURN(void* x, alloc(um * uk * 2));
    VORTEX_ASSIGN_OR_RETURN(void* w, alloc(un * uk * 2));
    VORTEX_RETURN_IF_ERROR(fill_uniform_bf16_device(x, c.m * k, seed, 1.0f, s));
    VORTEX_RETURN_IF_ERROR(fill_uniform_bf16_device(w, n * k, seed + 1, 0.05f, s));
    c.x = x;
    c.w = w;
  } else {
    // Random bf16 source (freed below), quantized by the engine's own quantizers.
    void* src = nullptr;
    const size_t src_elems = std::max(um, un) * uk;
    VORTEX_TUNE_CUDA(cudaMalloc(&src, src_elems * 2));
    VORTEX_ASSIGN_OR_RETURN(void* xq, alloc(um * uk));
    VORTEX_ASSIGN_OR_RETURN(void* wq, alloc(un * uk));
    const int64_t groups = (k + 127) / 128;
    Status st = Status::Ok();
    if (precision == GemmPrecision::kFp8PerTensor) {
      VORTEX_ASSIGN_OR_RETURN(void* xs, alloc(256));
      VORTEX_ASSIGN_OR_RETURN(void* ws, alloc(256));
      VORTEX_ASSIGN_OR_RETURN(void* amax, alloc(256));
      st = fill_uniform_bf16_device(src, m * k, seed, 1.0f, s);
      if (st.ok())
        st = quantize_fp8_per_tensor(src, m, k, k, xq, static_cast<float*>(xs), static_cast<uint32_t*>(amax), s);
      if (st.ok()) st = fill_uniform_bf16_device(src, n * k, seed + 1, 0.05f, s);
      if (st.ok())
        st = quantize_fp8_per_tensor(src, n, k, k, wq, static_cast<float*>(ws), static_cast<uint32_t*>(amax), s);
      c.x_scale = static_cast<const float*>(xs);
      c.w_scale = static_cast<const float*>(ws);
    } else if (precision == GemmPrecision::kFp8RowScaled) {
      // Per-token activation scales and per-channel weight scales (any valid OUTER_VEC operand).
      VORTEX_ASSIGN_OR_RETURN(void* xs, alloc(um * 4));
      VORTEX_ASSIGN_OR_RETURN(void* ws, alloc(un * 4));
      st = fill_uniform_bf16_device(src, m * k, seed, 1.0f, s);
      if (st.ok()) st = quantize_fp8_per_row(src, m, k, k, xq, static_cast<float*>(xs), s);
      if (st.ok()) st = fill_uniform_bf16_device(src, n * k, seed + 1, 0.05f, s);
      if (st.ok()) st = quantize_fp8_per_row(src, n, k, k, wq, static_cast<float*>(ws), s);
      c.x_scale = static_cast<const float*>(xs);
      c.w_scale = static_cast<const float*>(ws);
    } else {
      VORTEX_ASSIGN_OR_RETURN(void* xs, alloc(static_cast<size_t>(groups) * um * 4));
      const int64_t wrows = (n + 127) / 128, wcols = fp8_block_scale_cols(k);
      VORTEX_ASSIGN_OR_RETURN(void* ws, alloc(static_cast<size_t>(wrows * wcols) * 4));
      VORTEX_ASSIGN_OR_RETURN(void* tmp_scales, alloc(static_cast<size_t>(groups) * un * 4));
      st = fill_uniform_bf16_device(src, m * k, seed, 1.0f, s);
      if (st.ok()) st = quantize_fp8_rowblock128(src, m, k, k, xq, static_cast<float*>(xs), c.m, s);
      if (st.ok()) st = fill_uniform_bf16_device(src, n * k, seed + 1, 0.05f, s);
      if (st.ok()) st = quantize_fp8_rowblock128(src, n, k, k, wq, static_cast<float*>(tmp_scales), n, s);
      if (st.ok()) st = fill_uniform_f32_device(static_cast<float*>(ws), wrows * wcols, seed + 2, 0.5f, 1.5f, s);
      c.x_scale = static_cast<const float*>(xs);
      c.w_scale = static_cast<const float*>(ws);
      ops->scale_ld_ = c.m;
    }
    cudaError_t sync = cudaStreamSynchronize(s);
    cudaFree(src);
    VORTEX_RETURN_IF_ERROR(st);
    VORTEX_TUNE_CUDA(sync);
    c.x = xq;
    c.w = wq;
  }
  VORTEX_TUNE_CUDA(cudaStreamSynchronize(s));
  return ops;
}

Result<double> GemmOperands::reference_f64(int64_t i, int64_t j) const {
  const GemmCall& c = call_;
  const size_t uk = static_cast<size_t>(c.k);
  const size_t es = c.precision == GemmPrecision::kF32 ? 4 : (is_fp8(c.precision) ? 1 : 2);
  std::vector<uint8_t> xr(uk * es), wr(uk * es);
  VORTEX_TUNE_CUDA(cudaMemcpy(xr.data(), static_cast<const char*>(c.x) + static_cast<size_t>(i * c.ldx) * es, uk * es,
                              cudaMemcpyDeviceToHost));
  VORTEX_TUNE_CUDA(cudaMemcpy(wr.data(), static_cast<const char*>(c.w) + static_cast<size_t>(j * c.ldw) * es, uk * es,
                              cudaMemcpyDeviceToHost));
  double acc = 0;
  if (c.precision == GemmPrecision::kF32) {
    const float* x = reinterpret_cast<const float*>(xr.data());
    const float* w = reinterpret_cast<const float*>(wr.data());
    for (size_t t = 0; t < uk; ++t) acc += static_cast<double>(x[t]) * static_cast<double>(w[t]);
  } else if (c.precision == GemmPrecision::kBf16 || c.precision == GemmPrecision::kNvfp4Emulated) {
    const uint16_t* x = reinterpret_cast<const uint16_t*>(xr.data());
    const uint16_t* w = reinterpret_cast<const uint16_t*>(wr.data());
    for (size_t t = 0; t < uk; ++t)
      acc += static_cast<double>(f32_from_bf16_bits(x[t])) * static_cast<double>(f32_from_bf16_bits(w[t]));
  } else if (c.precision == GemmPrecision::kFp8PerTensor) {
    float xs = 0, ws = 0;
    VORTEX_TUNE_CUDA(cudaMemcpy(&xs, c.x_scale, 4, cudaMemcpyDeviceToHost));
    VORTEX_TUNE_CUDA(cudaMemcpy(&ws, c.w_scale, 4, cudaMemcpyDeviceToHost));
    for (size_t t = 0; t < uk; ++t)
      acc += static_cast<double>(f32_from_e4m3(xr[t])) * static_cast<double>(f32_from_e4m3(wr[t]));
    acc *= static_cast<double>(xs) * static_cast<double>(ws);
  } else if (c.precision == GemmPrecision::kFp8RowScaled) {
    float xs = 0, ws = 0;
    VORTEX_TUNE_CUDA(cudaMemcpy(&xs, c.x_scale + i, 4, cudaMemcpyDeviceToHost));
    VORTEX_TUNE_CUDA(cudaMemcpy(&ws, c.w_scale + j, 4, cudaMemcpyDeviceToHost));
    for (size_t t = 0; t < uk; ++t)
      acc += static_cast<double>(f32_from_e4m3(xr[t])) * static_cast<double>(f32_from_e4m3(wr[t]));
    acc *= static_cast<double>(xs) * static_cast<double>(ws);
  } else {
    const int64_t groups = (c.k + 127) / 128, wcols = fp8_block_scale_cols(c.k);
    std::vector<float> xs(static_cast<size_t>(groups)), ws(static_cast<size_t>(wcols));
    VORTEX_TUNE_CUDA(cudaMemcpy2D(xs.data(), 4, c.x_scale + i, static_cast<size_t>(scale_ld_) * 4, 4,
                                  static_cast<size_t>(groups), cudaMemcpyDeviceToHost));
    VORTEX_TUNE_CUDA(
        cudaMemcpy(ws.data(), c.w_scale + (j / 128) * wcols, static_cast<size_t>(wcols) * 4, cudaMemcpyDeviceToHost));
    for (size_t t = 0; t < uk; ++t)
      acc += static_cast<double>(f32_from_e4m3(xr[t])) * static_cast<double>(f32_from_e4m3(wr[t])) *
             static_cast<double>(xs[t / 128]) * static_cast<double>(ws[t / 128]);
  }
  return acc;
}

// ---- tune ----------------------------------------------------------------------------------------
namespace {

struct Sample {
  int64_t i, j;
  double ref;
};

Result<double> sampled_error(const GemmCall& call, const std::vector<Sample>& samples) {
  double ss = 0, worst = 0;
  for (const auto& s : samples) ss += s.ref * s.ref;
  const double rms = std::sqrt(ss / static_cast<double>(samples.size())) + 1e-30;
  const size_t es = out_elem_size(call.precision);
  for (const auto& s : samples) {
    uint32_t raw = 0;
    VORTEX_TUNE_CUDA(cudaMemcpy(&raw, static_cast<const char*>(call.d) + static_cast<size_t>(s.i * call.ldd + s.j) * es,
                                es, cudaMemcpyDeviceToHost));
    double v;
    if (es == 4) {
      float f;
      std::memcpy(&f, &raw, 4);
      v = f;
    } else {
      v = f32_from_bf16_bits(static_cast<uint16_t>(raw));
    }
    const double e = std::fabs(v - s.ref) / rms;
    if (!(e == e)) return std::numeric_limits<double>::infinity();  // NaN never passes
    worst = std::max(worst, e);
  }
  return worst;
}

}  // namespace

Result<GemmTuneResult> tune_gemm(GemmEngine& engine, GemmPrecision precision, const GemmShape& shape,
                                 const GemmTuneOptions& options) {
  cudaStream_t s = nullptr;
  GemmTuneResult result;
  result.shape = shape;
  result.precision = precision;
  VORTEX_ASSIGN_OR_RETURN(auto ops, GemmOperands::create(precision, options.m, shape.n, shape.k, options.seed, s));
  GemmCall call = ops->call();
  result.m = call.m;
  const int64_t words = call.m * call.ldd * static_cast<int64_t>(out_elem_size(precision) / 2);
  void* d_default = nullptr;
  unsigned long long* mismatches = nullptr;
  VORTEX_TUNE_CUDA(cudaMalloc(&d_default, static_cast<size_t>(words) * 2));
  struct Free {
    void* a;
    void* b;
    ~Free() {
      cudaFree(a);
      cudaFree(b);
    }
  };
  VORTEX_TUNE_CUDA(cudaMalloc(reinterpret_cast<void**>(&mismatches), sizeof(unsigned long long)));
  Free guard{d_default, mismatches};

  // Sampled FP64 references (corners included).
  std::mt19937_64 rng(options.seed * 7919 + 17);
  std::vector<Sample> samples;
  samples.push_back({0, 0, 0});
  samples.push_back({call.m - 1, call.n - 1, 0});
  while (static_cast<int>(samples.size()) < options.samples)
    samples.push_back({static_cast<int64_t>(rng() % static_cast<uint64_t>(options.m)),
                       static_cast<int64_t>(rng() % static_cast<uint64_t>(call.n)), 0});
  for (auto& sm : samples) {
    if (sm.i >= options.m) sm.i = options.m - 1;  // padding rows of the blockwise path are not data
    VORTEX_ASSIGN_OR_RETURN(sm.ref, ops->reference_f64(sm.i, sm.j));
  }

  // Heuristic default.
  bool pinned = false;
  VORTEX_ASSIGN_OR_RETURN(result.heuristic, engine.selected_algo(call, &pinned));
  VORTEX_RETURN_IF_ERROR(fill_u16_device(call.d, words, 0xFFFF, s));
  VORTEX_RETURN_IF_ERROR(engine.gemm(call, s));
  VORTEX_TUNE_CUDA(cudaStreamSynchronize(s));
  VORTEX_TUNE_CUDA(cudaMemcpy(d_default, call.d, static_cast<size_t>(words) * 2, cudaMemcpyDeviceToDevice));
  VORTEX_ASSIGN_OR_RETURN(result.heuristic_max_rel_err, sampled_error(call, samples));

  VORTEX_ASSIGN_OR_RETURN(auto configs, engine.enumerate_algos(call, options.max_configs));
  cudaEvent_t check_start, check_stop;
  VORTEX_TUNE_CUDA(cudaEventCreate(&check_start));
  VORTEX_TUNE_CUDA(cudaEventCreate(&check_stop));
  struct Events {
    cudaEvent_t a, b;
    ~Events() {
      cudaEventDestroy(a);
      cudaEventDestroy(b);
    }
  } check_events{check_start, check_stop};
  // Candidate 0 is the heuristic default itself, rebuilt from its config (checks the rebuild is exact).
  configs.insert(configs.begin(), result.heuristic);
  for (size_t c = 0; c < configs.size(); ++c) {
    GemmTuneCandidate cand;
    cand.algo = configs[c];
    cand.from_heuristic = c == 0;
    VORTEX_RETURN_IF_ERROR(fill_u16_device(call.d, words, 0xFFFF, s));
    cudaEventRecord(check_start, s);
    Status st = engine.gemm_with_algo(call, cand.algo, s);
    cudaEventRecord(check_stop, s);
    cudaError_t err = cudaStreamSynchronize(s);
    float check_ms = 0;
    cudaEventElapsedTime(&check_ms, check_start, check_stop);
    cand.check_ms = check_ms;
    if (err != cudaSuccess)
      return Status(ErrorCode::kCuda, "GEMM candidate " + cand.algo.describe() +
                                          " faulted: " + cudaGetErrorString(err) + " (the CUDA context is lost)");
    if (!st.ok()) {
      cand.error = st.to_string();
      result.candidates.push_back(cand);
      continue;
    }
    cand.ran = true;
    VORTEX_RETURN_IF_ERROR(count_u16_mismatches_device(call.d, d_default, words, mismatches, s));
    unsigned long long mm = 0;
    VORTEX_TUNE_CUDA(cudaMemcpy(&mm, mismatches, sizeof(mm), cudaMemcpyDeviceToHost));
    cand.mismatches_vs_default = static_cast<int64_t>(mm);
    VORTEX_ASSIGN_OR_RETURN(cand.max_rel_err, sampled_error(call, samples));
    result.candidates.push_back(cand);
  }

  // Timing: alternate candidates inside each repetition.
  cudaEvent_t start, stop;
  VORTEX_TUNE_CUDA(cudaEventCreate(&start));
  VORTEX_TUNE_CUDA(cudaEventCreate(&stop));
  std::vector<std::vector<double>> times(result.candidates.size());
  const double floor = precision == GemmPrecision::kF32 ? 1e-6 : 2e-3;
  auto passes = [&](const GemmTuneCandidate& cand) {
    return cand.ran && cand.max_rel_err <= 2.0 * result.heuristic_max_rel_err + floor;
  };
  // Candidates more than 2x slower than the default in the check run are not worth alternating reps.
  const double default_check_ms = result.candidates.empty() ? 0 : result.candidates[0].check_ms;
  auto timed = [&](const GemmTuneCandidate& cand) {
    return passes(cand) && (cand.from_heuristic || cand.check_ms <= 2.0 * default_check_ms);
  };
  Status timing_status = Status::Ok();
  for (int rep = 0; rep < options.reps + 1 && timing_status.ok(); ++rep) {  // rep 0 = warm-up
    for (size_t c = 0; c < result.candidates.size(); ++c) {
      if (!timed(result.candidates[c])) continue;
      cudaEventRecord(start, s);
      timing_status = engine.gemm_with_algo(call, result.candidates[c].algo, s);
      cudaEventRecord(stop, s);
      if (!timing_status.ok()) break;
      if (cudaEventSynchronize(stop) != cudaSuccess) {
        timing_status = Status(ErrorCode::kCuda, "event sync failed while timing");
        break;
      }
      float ms = 0;
      cudaEventElapsedTime(&ms, start, stop);
      if (rep > 0) times[c].push_back(ms);
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  VORTEX_RETURN_IF_ERROR(timing_status);
  for (size_t c = 0; c < result.candidates.size(); ++c) result.candidates[c].ms = timing_stats(times[c]);
  // The pin is the heuristic default (freezing its numerics) unless a passing candidate is faster by
  // more than the 2% that alternating reps resolve; ties within noise keep the default.
  result.best = 0;
  double best_ms =
      result.candidates.empty() || result.candidates[0].ms.n == 0 ? 1e30 : result.candidates[0].ms.p50 * 0.98;
  for (size_t c = 1; c < result.candidates.size(); ++c) {
    const auto& cand = result.candidates[c];
    if (passes(cand) && cand.ms.n > 0 && cand.ms.p50 < best_ms) {
      best_ms = cand.ms.p50;
      result.best = static_cast<int>(c);
    }
  }
  return result;
}

std::string GemmTuneResult::json() const {
  nlohmann::json j;
  j["shape"] = shape.name;
  j["precision"] = gemm_precision_name(precision);
  j["m"] = m;
  j["n"] = shape.n;
  j["k"] = shape.k;
  j["flop"] = 2.0 * static_cast<double>(m) * static_cast<double>(shape.n) * static_cast<double>(shape.k);
  j["heuristic"] = algo_json(heuristic);
  // cuBLASLt exposes no "Stream-K" flag; the raw split-K / reduction fields are reported so a
  // reader can tell; splitk 1 / reduction 0 means no public split-K (a Stream-K kernel would only
  // show in the kernel name, e.g. under nsys or ncu).
  j["heuristic_uses_splitk"] = heuristic.splitk_num != 1 || heuristic.reduction_scheme != 0;
  j["heuristic_max_rel_err"] = heuristic_max_rel_err;
  j["best"] = best;
  nlohmann::json cands = nlohmann::json::array();
  for (const auto& c : candidates) {
    nlohmann::json cj = {{"algo", algo_json(c.algo)},
                         {"from_heuristic", c.from_heuristic},
                         {"ran", c.ran},
                         {"mismatches_vs_default", c.mismatches_vs_default},
                         {"max_rel_err", c.max_rel_err},
                         {"check_ms", c.check_ms},
                         {"timing", timing_json(c.ms)}};
    if (!c.error.empty()) cj["error"] = c.error;
    if (c.ms.n > 0) cj["tflops_p50"] = j["flop"].get<double>() / (c.ms.p50 * 1e-3) / 1e12;
    cands.push_back(cj);
  }
  j["candidates"] = cands;
  return j.dump();
}

Result<GemmTableEntry> table_entry_from_tune(const GemmTuneResult& result, const std::string& evidence) {
  if (result.candidates.empty() || result.best < 0 || result.best >= static_cast<int>(result.candidates.size()))
    return internal_error("tune result has no best candidate");
  int dev = 0;
  cudaDeviceProp prop{};
  VORTEX_TUNE_CUDA(cudaGetDevice(&dev));
  VORTEX_TUNE_CUDA(cudaGetDeviceProperties(&prop, dev));
  GemmTableEntry e;
  e.precision = result.precision;
  e.m = result.m;
  e.n = result.shape.n;
  e.k = result.shape.k;
  e.ldx = result.shape.k;
  e.ldw = result.shape.k;
  e.ldd = result.shape.n;
  e.bias = false;
  e.gpu = prop.name;
  e.cublaslt_version = 0;  // filled by the caller from cublasLtGetVersion()
  e.algo = result.candidates[static_cast<size_t>(result.best)].algo;
  e.evidence = evidence;
  return e;
}

// ---- bench ---------------------------------------------------------------------------------------
Result<std::vector<GemmBenchRow>> bench_gemm(GemmEngine& engine, const GemmBenchOptions& options) {
  std::vector<GemmBenchRow> rows;
  cudaStream_t s = nullptr;
  cudaEvent_t start, stop;
  VORTEX_TUNE_CUDA(cudaEventCreate(&start));
  VORTEX_TUNE_CUDA(cudaEventCreate(&stop));
  struct Ev {
    cudaEvent_t a, b;
    ~Ev() {
      cudaEventDestroy(a);
      cudaEventDestroy(b);
    }
  } ev{start, stop};
  for (const auto& shape : h3_gemm_shapes()) {
    for (GemmPrecision p : options.precisions) {
      VORTEX_ASSIGN_OR_RETURN(auto ops, GemmOperands::create(p, options.m, shape.n, shape.k, options.seed, s));
      GemmCall call = ops->call();
      GemmBenchRow row;
      row.shape = shape.name;
      row.precision = p;
      row.m = call.m;
      row.n = call.n;
      row.k = call.k;
      auto algo = engine.selected_algo(call, &row.pinned);
      if (!algo.ok()) {  // e.g. a scaling mode this GPU / cuBLASLt rejects: reported in the row
        row.error = algo.status().to_string();
        rows.push_back(row);
        continue;
      }
      row.algo = algo->describe();
      for (int w = 0; w < options.warmup; ++w) VORTEX_RETURN_IF_ERROR(engine.gemm(call, s));
      std::vector<double> ms;
      for (int r = 0; r < options.reps; ++r) {
        cudaEventRecord(start, s);
        VORTEX_RETURN_IF_ERROR(engine.gemm(call, s));
        cudaEventRecord(stop, s);
        VORTEX_TUNE_CUDA(cudaEventSynchronize(stop));
        float t = 0;
        cudaEventElapsedTime(&t, start, stop);
        ms.push_back(t);
      }
      row.ms = timing_stats(ms);
      row.tflops_p50 = 2.0 * static_cast<double>(row.m) * static_cast<double>(row.n) * static_cast<double>(row.k) /
                       (row.ms.p50 * 1e-3) / 1e12;
      rows.push_back(row);
    }
  }
  return rows;
}

std::string GemmBenchRow::json() const {
  nlohmann::json j = {{"workload", "gemm_" + shape},
                      {"impl", std::string("cublaslt_") + gemm_precision_name(precision)},
                      {"m", m},
                      {"n", n},
                      {"k", k},
                      {"ms_p10", ms.p10},
                      {"ms_p50", ms.p50},
                      {"ms_p90", ms.p90},
                      {"ms_p95", ms.p95},
                      {"n_reps", ms.n},
                      {"tflops", tflops_p50},
                      {"algo", algo},
                      {"pinned", pinned}};
  if (!error.empty()) j["error"] = error;
  return j.dump();
}

}  // namespace vortex

// ---- the gemm-tune run ---------------------------------------------------------------------------
namespace vortex {

std::string gemm_environment_json(const std::string& commit, bool dirty) {
  nlohmann::json j;
  char ts[32] = {0};
  std::time_t now = std::time(nullptr);
  std::strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  j["time_utc"] = ts;
  j["commit"] = commit;
  j["dirty"] = dirty;
  int dev = 0, driver = 0, runtime = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess) {
    j["gpu"] = prop.name;
    j["sm"] = prop.major * 10 + prop.minor;
    j["sm_count"] = prop.multiProcessorCount;
  }
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  j["driver"] = driver;
  j["cuda"] = runtime;
  j["cublaslt_version"] = cublasLtGetVersion();
  j["clocks_mhz"] = nullptr;  // not queried here: record `nvidia-smi --query-gpu=clocks.sm,clocks.mem` beside it
  return j.dump();
}

Status run_gemm_tune(const GemmTuneRunOptions& options, void (*log)(const std::string&)) {
  GemmEngineOptions eopt;
  eopt.load_pinned_table = false;  // measure the heuristic default itself
  VORTEX_ASSIGN_OR_RETURN(auto engine, GemmEngine::create(eopt));
  nlohmann::json evidence;
  evidence["schema"] = "vortex.gemm_tune.v1";
  evidence["environment"] = nlohmann::json::parse(gemm_environment_json(options.commit, options.dirty));
  evidence["method"] =
      "candidates = heuristic top-16 + AlgoGetIds x tiles x stages x split-K {1,2,4} x reduction x "
      "swizzle, filtered by cublasLtMatmulAlgoCheck; each run on poisoned output, compared word for "
      "word with the heuristic default and vs FP64 on sampled elements; passing candidates timed "
      "alternating (1 warm-up + reps), CUDA events; best = lowest p50 that passes";
  evidence["results"] = nlohmann::json::array();
  evidence["failures"] = nlohmann::json::array();
  int failures = 0;
  GemmTable table;
  for (const auto& name : options.shapes) {
    const GemmShape* shape = nullptr;
    for (const auto& s : h3_gemm_shapes())
      if (s.name == name) shape = &s;
    if (!shape) return invalid_argument("unknown GEMM shape '" + name + "' (expected qkv, out, fc1, fc2)");
    for (GemmPrecision p : options.precisions) {
      log("tuning " + name + " " + gemm_precision_name(p) + " M=" + std::to_string(options.tune.m) + " ...");
      auto tuned = tune_gemm(*engine, p, *shape, options.tune);
      if (!tuned.ok()) {
        // Recorded and skipped: one unsupported precision must not hide the others' evidence.
        log("  " + name + " " + gemm_precision_name(p) + ": FAILED: " + tuned.status().to_string());
        evidence["failures"].push_back(
            {{"shape", name}, {"precision", gemm_precision_name(p)}, {"error", tuned.status().to_string()}});
        failures++;
        continue;
      }
      const GemmTuneResult& r = *tuned;
      const auto& best = r.candidates[static_cast<size_t>(r.best)];
      const auto& def = r.candidates[0];
      char line[512];
      std::snprintf(line, sizeof(line),
                    "  %s %s: heuristic [%s] %.3f ms (split-K/stream-K fields: %s); best [%s] %.3f ms, %s vs default, "
                    "%zu candidates",
                    name.c_str(), gemm_precision_name(p), r.heuristic.describe().c_str(), def.ms.p50,
                    (r.heuristic.splitk_num != 1 || r.heuristic.reduction_scheme != 0) ? "yes" : "no",
                    best.algo.describe().c_str(), best.ms.p50,
                    best.mismatches_vs_default == 0 ? "bit-identical" : "NOT bit-identical", r.candidates.size());
      log(line);
      evidence["results"].push_back(nlohmann::json::parse(r.json()));
      VORTEX_ASSIGN_OR_RETURN(GemmTableEntry e, table_entry_from_tune(r, options.evidence_path));
      e.cublaslt_version = cublasLtGetVersion();
      table.entries.push_back(e);
      // Written after every (shape, precision) so an interrupted run keeps what it proved.
      if (!options.evidence_path.empty()) {
        std::ofstream f(options.evidence_path);
        if (!f) return io_error("cannot write evidence '" + options.evidence_path + "'");
        f << evidence.dump(1) << "\n";
      }
      if (!options.table_path.empty()) VORTEX_RETURN_IF_ERROR(save_gemm_table(table, options.table_path));
    }
  }
  if (!options.evidence_path.empty()) log("evidence: " + options.evidence_path);
  if (!options.table_path.empty())
    log("pinned table: " + options.table_path + " (load with VORTEX_GEMM_TABLE or GemmEngineOptions)");
  if (failures > 0)
    return internal_error(std::to_string(failures) +
                          " (shape, precision) tunes failed; see the log and the "
                          "evidence file's \"failures\"");
  return Status::Ok();
}

}  // namespace vortex
