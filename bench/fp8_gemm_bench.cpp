// fp8_gemm_bench: the FP8 per-tensor GEMMs of one H3 block (QKV, out_proj, FC1,
// FC2 at M = 37,810) as the block runs them — activation quantization (amax
// pass + quantize pass) and the cuBLASLt GEMM — with every cuBLASLt
// configuration enumerated, checked and timed for each shape (tune_gemm), and
// the block-level pieces timed alternating in one run: element-path vs
// vector-path quantizer (bytes compared on the whole tensor), heuristic vs best
// GEMM, and the two "linear" programs end to end; then the row-scaled path
// (per-token quantizer, OUTER_VEC_32F GEMM) and, for out_proj / FC2, the gated
// residual x = x + gate * (X W^T) as the block runs it today (quantize, GEMM,
// gate_add kernel) against the same in the GEMM epilogue (per-row quantize,
// GEMM with C = D, beta = 1, w_scale = s_w * gate).
//   fp8_gemm_bench OUT_DIR [--m M] [--configs N] [--reps R] [--evidence-ref
//   PATH]
// Writes OUT_DIR/fp8_gemm.json (evidence: commit, GPU, SM clock samples,
// p10/p50/p90, same-run ratios) and OUT_DIR/h200-cublaslt-<version>.json (the
// pinned table: the shipped table with its fp8 entries replaced by this run's
// best; copy it over src/gemm/tables/ with the evidence to pin). Prints a
// table.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cuda/ops/ops.h"
#include "gemm/gemm.h"
#include "gemm/gemm_table.h"
#include "measure/gemm_tune.h"
#include "profiling/evidence.h"
#include "vortex/build_info.h"
#include "vortex/config.h"

namespace {

using namespace vortex;

#define BENCH_CUDA(expr)                                                                           \
  do {                                                                                             \
    cudaError_t bench_err_ = (expr);                                                               \
    if (bench_err_ != cudaSuccess)                                                                 \
      return Status(ErrorCode::kCuda, std::string(#expr) + ": " + cudaGetErrorString(bench_err_)); \
  } while (0)

// SM clock sampled by nvidia-smi every ~200 ms while timing runs (clocks sag
// under load).
class ClockSampler {
 public:
  void start() {
    running_ = true;
    thread_ = std::thread([this] {
      while (running_) {
        RunEnvironment env;
        refresh_clocks(env);
        if (env.clock_sm_mhz > 0) {
          std::lock_guard<std::mutex> lock(mu_);
          samples_.push_back(env.clock_sm_mhz);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
  }
  // Stops and returns the samples taken since start().
  std::vector<double> stop() {
    running_ = false;
    if (thread_.joinable()) thread_.join();
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<double> out = std::move(samples_);
    samples_.clear();
    return out;
  }

 private:
  std::atomic<bool> running_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<double> samples_;
};

nlohmann::json pct_json(const std::vector<double>& v) {
  Percentiles p = percentiles(v);
  return {{"p10", p.p10}, {"p50", p.p50}, {"p90", p.p90}, {"min", p.min}, {"max", p.max}, {"n", p.n}};
}

struct Options {
  std::string out_dir;
  int64_t m = kCanonicalTokens;
  int configs = 48;
  int reps = 20;
  std::string evidence_ref;  // the table entries' "evidence"; default OUT_DIR/fp8_gemm.json
};

// One device allocation, freed on scope exit.
struct DevBuf {
  void* p = nullptr;
  ~DevBuf() {
    if (p) cudaFree(p);
  }
  Status alloc(size_t bytes) {
    BENCH_CUDA(cudaMalloc(&p, bytes < 256 ? 256 : bytes));
    return Status::Ok();
  }
};

Tensor device_tensor(void* p, size_t bytes, Shape shape, DType dtype) {
  auto storage = std::make_shared<Storage>();
  storage->ptr = p;
  storage->bytes = bytes;
  storage->device = Device::kCuda;
  return Tensor::from_storage(storage, 0, std::move(shape), dtype, {});
}

// The block-level pieces of one shape, timed alternating (A, B, C, ... per
// repetition).
Result<nlohmann::json> time_block_pieces(GemmEngine& engine, const GemmShape& shape, const GemmTuneResult& tuned,
                                         const Options& opt, ClockSampler& clocks) {
  const int64_t m = tuned.m, n = shape.n, k = shape.k;
  const GemmAlgoConfig& heuristic = tuned.candidates[0].algo;
  const GemmAlgoConfig& best = tuned.candidates[static_cast<size_t>(tuned.best)].algo;
  VORTEX_ASSIGN_OR_RETURN(auto ops, GemmOperands::create(GemmPrecision::kFp8PerTensor, m, n, k, opt.reps + 7, nullptr));
  DevBuf x, q_elem, q_vec, scales, amax, mism;
  VORTEX_RETURN_IF_ERROR(x.alloc(static_cast<size_t>(m * k) * 2));   // [M, K] bf16, the block's activation
  VORTEX_RETURN_IF_ERROR(q_elem.alloc(static_cast<size_t>(m * k)));  // [M, K] e4m3
  VORTEX_RETURN_IF_ERROR(q_vec.alloc(static_cast<size_t>(m * k)));   // [M, K] e4m3
  VORTEX_RETURN_IF_ERROR(scales.alloc(256));
  VORTEX_RETURN_IF_ERROR(amax.alloc(256));
  VORTEX_RETURN_IF_ERROR(mism.alloc(256));
  VORTEX_RETURN_IF_ERROR(fill_uniform_bf16_device(x.p, m * k, 1000 + static_cast<uint64_t>(k), 2.0f, nullptr));
  float* s_elem = static_cast<float*>(scales.p);
  float* s_vec = s_elem + 16;
  uint32_t* amax_elem = static_cast<uint32_t*>(amax.p);
  uint32_t* amax_vec = amax_elem + 16;

  // Correctness first: both quantizer paths on the whole tensor, bytes and
  // scale equal.
  BENCH_CUDA(cudaMemset(q_elem.p, 0xEE, static_cast<size_t>(m * k)));
  BENCH_CUDA(cudaMemset(q_vec.p, 0x11, static_cast<size_t>(m * k)));
  VORTEX_RETURN_IF_ERROR(quantize_fp8_per_tensor_element_path(x.p, m, k, k, q_elem.p, s_elem, amax_elem, nullptr));
  VORTEX_RETURN_IF_ERROR(quantize_fp8_per_tensor(x.p, m, k, k, q_vec.p, s_vec, amax_vec, nullptr));
  VORTEX_RETURN_IF_ERROR(
      count_u16_mismatches_device(q_elem.p, q_vec.p, m * k / 2, static_cast<unsigned long long*>(mism.p), nullptr));
  unsigned long long q_mismatch = 0;
  float sh[2] = {0, 0};
  BENCH_CUDA(cudaMemcpy(&q_mismatch, mism.p, sizeof(q_mismatch), cudaMemcpyDeviceToHost));
  BENCH_CUDA(cudaMemcpy(&sh[0], s_elem, 4, cudaMemcpyDeviceToHost));
  BENCH_CUDA(cudaMemcpy(&sh[1], s_vec, 4, cudaMemcpyDeviceToHost));
  if (q_mismatch != 0 || sh[0] != sh[1])
    return internal_error(shape.name + ": vector quantizer differs from the element path (" +
                          std::to_string(q_mismatch) + " differing 16-bit words, scales " + std::to_string(sh[0]) +
                          " vs " + std::to_string(sh[1]) + ")");

  GemmCall call = ops->call();  // weight, output and shapes from the tune operands
  call.x = q_vec.p;
  call.x_scale = s_vec;
  struct Piece {
    const char* name;
    std::function<Status()> run;
    std::vector<double> ms;
  };
  std::vector<Piece> pieces;
  pieces.push_back(
      {"quantize_element_path",
       [&] { return quantize_fp8_per_tensor_element_path(x.p, m, k, k, q_elem.p, s_elem, amax_elem, nullptr); },
       {}});
  pieces.push_back({"quantize_vector_path",
                    [&] { return quantize_fp8_per_tensor(x.p, m, k, k, q_vec.p, s_vec, amax_vec, nullptr); },
                    {}});
  pieces.push_back({"gemm_heuristic", [&] { return engine.gemm_with_algo(call, heuristic, nullptr); }, {}});
  pieces.push_back({"gemm_best", [&] { return engine.gemm_with_algo(call, best, nullptr); }, {}});
  pieces.push_back({"linear_before",
                    [&]() -> Status {  // element quantizer + heuristic GEMM
                      VORTEX_RETURN_IF_ERROR(
                          quantize_fp8_per_tensor_element_path(x.p, m, k, k, q_vec.p, s_vec, amax_vec, nullptr));
                      return engine.gemm_with_algo(call, heuristic, nullptr);
                    },
                    {}});
  pieces.push_back({"linear_after",
                    [&]() -> Status {  // vector quantizer + best GEMM
                      VORTEX_RETURN_IF_ERROR(quantize_fp8_per_tensor(x.p, m, k, k, q_vec.p, s_vec, amax_vec, nullptr));
                      return engine.gemm_with_algo(call, best, nullptr);
                    },
                    {}});
  // Row-scaled path: per-token activation scales, per-channel weight scales
  // (s_w broadcast).
  DevBuf xs_row, ws_row, gate_ws, resid, proj, table, row_map;
  VORTEX_RETURN_IF_ERROR(xs_row.alloc(static_cast<size_t>(m) * 4));
  VORTEX_RETURN_IF_ERROR(ws_row.alloc(static_cast<size_t>(n) * 4));
  VORTEX_RETURN_IF_ERROR(gate_ws.alloc(static_cast<size_t>(n) * 4));
  VORTEX_RETURN_IF_ERROR(fill_uniform_f32_device(static_cast<float*>(ws_row.p), n, 77, 0.5e-3f, 2e-3f, nullptr));
  VORTEX_RETURN_IF_ERROR(fill_uniform_f32_device(static_cast<float*>(gate_ws.p), n, 78, -2e-3f, 2e-3f, nullptr));
  GemmCall row_call = call;
  row_call.precision = GemmPrecision::kFp8RowScaled;
  row_call.x = q_vec.p;
  row_call.x_scale = static_cast<const float*>(xs_row.p);
  row_call.w_scale = static_cast<const float*>(ws_row.p);
  VORTEX_RETURN_IF_ERROR(quantize_fp8_per_row(x.p, m, k, k, q_vec.p, static_cast<float*>(xs_row.p), nullptr));
  bool row_pinned = false;
  auto row_algo = engine.selected_algo(row_call, &row_pinned);
  // A cuBLASLt without OUTER_VEC_32F for this GEMM: the row-scaled pieces are
  // reported as unavailable.
  const bool row_ok = row_algo.ok();
  if (row_ok) {
    pieces.push_back(
        {"quantize_per_row",
         [&] { return quantize_fp8_per_row(x.p, m, k, k, q_vec.p, static_cast<float*>(xs_row.p), nullptr); },
         {}});
    pieces.push_back({"gemm_row_scaled", [&] { return engine.gemm(row_call, nullptr); }, {}});
    pieces.push_back({"linear_row_scaled",
                      [&]() -> Status {
                        VORTEX_RETURN_IF_ERROR(
                            quantize_fp8_per_row(x.p, m, k, k, q_vec.p, static_cast<float*>(xs_row.p), nullptr));
                        return engine.gemm(row_call, nullptr);
                      },
                      {}});
  }
  // Gated residual (out_proj and FC2 write the residual stream): [M, N] bf16 residual and GEMM output, a
  // one-row AdaLN table [1, 6N] bf16 and its row map (every token reads table row 0).
  const bool gated = row_ok && n == 5376;
  GemmCall gated_call = row_call;
  gated_call.w_scale = static_cast<const float*>(gate_ws.p);
  gated_call.accumulate = true;
  Tensor resid_t, proj_t, table_t;
  cuda_ops::DeviceRowMap map;
  if (gated) {
    VORTEX_RETURN_IF_ERROR(resid.alloc(static_cast<size_t>(m * n) * 2));
    VORTEX_RETURN_IF_ERROR(proj.alloc(static_cast<size_t>(m * n) * 2));
    VORTEX_RETURN_IF_ERROR(table.alloc(static_cast<size_t>(6 * n) * 2));
    VORTEX_RETURN_IF_ERROR(row_map.alloc(static_cast<size_t>(m) * 4));
    VORTEX_RETURN_IF_ERROR(fill_uniform_bf16_device(resid.p, m * n, 79, 4.0f, nullptr));
    VORTEX_RETURN_IF_ERROR(fill_uniform_bf16_device(table.p, 6 * n, 80, 1.0f, nullptr));
    BENCH_CUDA(cudaMemset(row_map.p, 0, static_cast<size_t>(m) * 4));
    resid_t = device_tensor(resid.p, static_cast<size_t>(m * n) * 2, {m, n}, DType::kBF16);
    proj_t = device_tensor(proj.p, static_cast<size_t>(m * n) * 2, {m, n}, DType::kBF16);
    table_t = device_tensor(table.p, static_cast<size_t>(6 * n) * 2, {1, 6 * n}, DType::kBF16);
    map.table_row = static_cast<const int32_t*>(row_map.p);
    map.rows = m;
    map.table_rows = 1;
    gated_call.d = resid.p;  // x += gate * (a @ W^T), in place on the residual stream
    GemmCall proj_call = call;
    proj_call.d = proj.p;
    // Today's program: quantize (vector path), best per-tensor GEMM into proj,
    // gate_add kernel.
    pieces.push_back({"gated_residual_unfused",
                      [&, proj_call]() -> Status {
                        VORTEX_RETURN_IF_ERROR(
                            quantize_fp8_per_tensor(x.p, m, k, k, q_vec.p, s_vec, amax_vec, nullptr));
                        VORTEX_RETURN_IF_ERROR(engine.gemm_with_algo(proj_call, best, nullptr));
                        return cuda_ops::gate_add(resid_t, proj_t, &table_t, kGateMsa, &map, nullptr);
                      },
                      {}});
    pieces.push_back({"gated_residual_epilogue",
                      [&]() -> Status {
                        VORTEX_RETURN_IF_ERROR(
                            quantize_fp8_per_row(x.p, m, k, k, q_vec.p, static_cast<float*>(xs_row.p), nullptr));
                        return engine.gemm(gated_call, nullptr);
                      },
                      {}});
    pieces.push_back({"gemm_row_scaled_accumulate", [&] { return engine.gemm(gated_call, nullptr); }, {}});
  }
  cudaEvent_t a, b;
  BENCH_CUDA(cudaEventCreate(&a));
  BENCH_CUDA(cudaEventCreate(&b));
  clocks.start();
  Status st = Status::Ok();
  for (int rep = 0; rep < opt.reps + 2 && st.ok(); ++rep) {  // reps 0-1: warm-up
    for (Piece& p : pieces) {
      cudaEventRecord(a, nullptr);
      st = p.run();
      cudaEventRecord(b, nullptr);
      if (!st.ok()) break;
      if (cudaEventSynchronize(b) != cudaSuccess) {
        st = Status(ErrorCode::kCuda, std::string("timing ") + p.name + ": " + cudaGetErrorString(cudaGetLastError()));
        break;
      }
      float ms = 0;
      cudaEventElapsedTime(&ms, a, b);
      if (rep >= 2) p.ms.push_back(ms);
    }
  }
  std::vector<double> mhz = clocks.stop();
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  VORTEX_RETURN_IF_ERROR(st);
  const double flop = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  nlohmann::json j;
  j["quantizer_bytes_identical"] = true;  // checked above on the whole [M, K] tensor
  j["sm_clock_mhz"] = pct_json(mhz);
  nlohmann::json pj = nlohmann::json::object();
  for (const Piece& p : pieces) {
    Percentiles pc = percentiles(p.ms);
    pj[p.name] = {{"ms_p10", pc.p10},
                  {"ms_p50", pc.p50},
                  {"ms_p90", pc.p90},
                  {"n", pc.n},
                  {"tflops_p50_on_gemm_flop", flop / (pc.p50 * 1e-3) / 1e12}};
  }
  j["pieces"] = pj;
  auto p50 = [&](const char* name) { return pj[name]["ms_p50"].get<double>(); };
  j["ratio_quantize_element_over_vector"] = p50("quantize_element_path") / p50("quantize_vector_path");
  j["ratio_gemm_heuristic_over_best"] = p50("gemm_heuristic") / p50("gemm_best");
  j["ratio_linear_before_over_after"] = p50("linear_before") / p50("linear_after");
  // Bytes the quantizer must move: read x twice (amax, quantize), write q once.
  if (row_ok) {
    j["row_scaled_algo"] = row_algo->describe();
    j["ratio_linear_after_over_row_scaled"] = p50("linear_after") / p50("linear_row_scaled");
  } else {
    j["row_scaled_error"] = row_algo.status().to_string();
  }
  if (gated) j["ratio_gated_unfused_over_epilogue"] = p50("gated_residual_unfused") / p50("gated_residual_epilogue");
  j["quantize_min_bytes"] = static_cast<double>(m * k) * 5.0;
  j["quantize_vector_tbps_p50"] = static_cast<double>(m * k) * 5.0 / (p50("quantize_vector_path") * 1e-3) / 1e12;
  j["quantize_element_tbps_p50"] = static_cast<double>(m * k) * 5.0 / (p50("quantize_element_path") * 1e-3) / 1e12;
  return j;
}

Status run(const Options& opt) {
  std::filesystem::create_directories(opt.out_dir);
  GemmEngineOptions eopt;
  eopt.load_pinned_table = false;  // measure the heuristic itself; pins come from this run
  VORTEX_ASSIGN_OR_RETURN(auto engine, GemmEngine::create(eopt));
  nlohmann::json ev;
  ev["schema"] = "vortex.fp8_gemm_bench.v1";
  ev["environment"] = nlohmann::json::parse(gemm_environment_json(VORTEX_GIT_COMMIT_STRING, VORTEX_GIT_DIRTY != 0));
  ev["method"] =
      "per shape: tune_gemm (heuristic top-16 + AlgoGetIds x tiles x stages x "
      "split-K x reduction x swizzle, each "
      "checked on poisoned output vs the heuristic's bytes and FP64 samples, "
      "passing ones timed alternating); then "
      "the block's pieces timed alternating in one loop (2 warm-up + reps, "
      "CUDA events, default stream): element vs "
      "vector quantizer (bytes compared on the whole tensor first), heuristic "
      "vs best GEMM, and quantize+GEMM end "
      "to end; nvidia-smi SM clock sampled every 200 ms during each loop";
  ev["options"] = {{"m", opt.m}, {"configs", opt.configs}, {"reps", opt.reps}};
  ev["shapes"] = nlohmann::json::array();
  GemmTable table;
  // The shipped table, with its fp8 per-tensor entries for this GPU replaced by
  // this run's pins.
  const std::string shipped = std::string(VORTEX_SOURCE_DIR) + "/src/gemm/tables/h200-cublaslt-130100.json";
  if (std::filesystem::exists(shipped)) {
    VORTEX_ASSIGN_OR_RETURN(table, load_gemm_table(shipped));
  }
  std::vector<GemmTableEntry> kept;
  for (const auto& e : table.entries)
    if (e.precision != GemmPrecision::kFp8PerTensor || e.m != opt.m) kept.push_back(e);
  table.entries = kept;
  ClockSampler clocks;
  std::vector<std::string> lines, row_lines;
  for (const GemmShape& shape : h3_gemm_shapes()) {
    std::fprintf(stderr, "[fp8_gemm_bench] %s: tuning (up to %d configs) ...\n", shape.name.c_str(), opt.configs);
    GemmTuneOptions topt;
    topt.m = opt.m;
    topt.max_configs = opt.configs;
    topt.reps = opt.reps;
    clocks.start();
    auto tuned = tune_gemm(*engine, GemmPrecision::kFp8PerTensor, shape, topt);
    std::vector<double> tune_mhz = clocks.stop();
    if (!tuned.ok()) return tuned.status().with_context("tuning " + shape.name);
    std::fprintf(stderr, "[fp8_gemm_bench] %s: timing the block pieces ...\n", shape.name.c_str());
    VORTEX_ASSIGN_OR_RETURN(nlohmann::json pieces, time_block_pieces(*engine, shape, *tuned, opt, clocks));
    nlohmann::json sj = nlohmann::json::parse(tuned->json());
    sj["tune_sm_clock_mhz"] = pct_json(tune_mhz);
    sj["block_pieces"] = pieces;
    const auto& best = tuned->candidates[static_cast<size_t>(tuned->best)];
    sj["best_algo"] = best.algo.describe();
    sj["best_bit_identical_to_heuristic"] = best.mismatches_vs_default == 0;
    ev["shapes"].push_back(sj);
    VORTEX_ASSIGN_OR_RETURN(GemmTableEntry e, table_entry_from_tune(*tuned, opt.evidence_ref));
    e.cublaslt_version = cublasLtGetVersion();
    table.entries.push_back(e);
    const auto& pj = pieces["pieces"];
    char line[512];
    std::snprintf(
        line, sizeof(line),
        "%-4s %8.3f %8.3f %6.0f %6.0f | %7.3f %7.3f | %8.3f %8.3f "
        "%5.2fx | %5.0f MHz",
        shape.name.c_str(), pj["gemm_heuristic"]["ms_p50"].get<double>(), pj["gemm_best"]["ms_p50"].get<double>(),
        pj["gemm_heuristic"]["tflops_p50_on_gemm_flop"].get<double>(),
        pj["gemm_best"]["tflops_p50_on_gemm_flop"].get<double>(), pj["quantize_element_path"]["ms_p50"].get<double>(),
        pj["quantize_vector_path"]["ms_p50"].get<double>(), pj["linear_before"]["ms_p50"].get<double>(),
        pj["linear_after"]["ms_p50"].get<double>(), pieces["ratio_linear_before_over_after"].get<double>(),
        pieces["sm_clock_mhz"]["p50"].get<double>());
    lines.push_back(line);
    if (!pj.contains("gemm_row_scaled")) {
      row_lines.push_back(shape.name + " row-scaled unavailable: " + pieces.value("row_scaled_error", std::string()));
    } else {
      std::snprintf(line, sizeof(line), "%-4s %8.3f %8.3f %8.3f | %s", shape.name.c_str(),
                    pj["quantize_per_row"]["ms_p50"].get<double>(), pj["gemm_row_scaled"]["ms_p50"].get<double>(),
                    pj["gemm_row_scaled"]["tflops_p50_on_gemm_flop"].get<double>(),
                    pieces.contains("ratio_gated_unfused_over_epilogue")
                        ? (std::to_string(pj["gated_residual_unfused"]["ms_p50"].get<double>()) + " -> " +
                           std::to_string(pj["gated_residual_epilogue"]["ms_p50"].get<double>()) + " ms (" +
                           std::to_string(pieces["ratio_gated_unfused_over_epilogue"].get<double>()) + "x)")
                              .c_str()
                        : "-");
      row_lines.push_back(line);
    }
    // Written after every shape so an interrupted run keeps what it measured.
    std::ofstream f(opt.out_dir + "/fp8_gemm.json");
    if (!f) return io_error("cannot write " + opt.out_dir + "/fp8_gemm.json");
    f << ev.dump(1) << "\n";
  }
  const std::string table_path = opt.out_dir + "/h200-cublaslt-" + std::to_string(cublasLtGetVersion()) + ".json";
  VORTEX_RETURN_IF_ERROR(save_gemm_table(table, table_path));
  std::printf(
      "FP8 per-tensor GEMMs, M=%lld (p50; TFLOP/s on GEMM flops; "
      "quantize = amax + quantize passes)\n",
      static_cast<long long>(opt.m));
  std::printf("%-4s %8s %8s %6s %6s | %7s %7s | %8s %8s %6s | %s\n", "shape", "heur ms", "best ms", "heurTF", "bestTF",
              "qElem", "qVec", "lin old", "lin new", "ratio", "SM clock p50");
  for (const auto& l : lines) std::printf("%s\n", l.c_str());
  std::printf(
      "\nrow-scaled (E2): per-row quantize ms, OUTER_VEC GEMM ms, "
      "TFLOP/s | gated residual: quantize + GEMM + "
      "gate_add -> quantize_per_row + GEMM(C = D, beta 1)\n");
  for (const auto& l : row_lines) std::printf("%s\n", l.c_str());
  std::printf("evidence: %s/fp8_gemm.json\npinned table: %s\n", opt.out_dir.c_str(), table_path.c_str());
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "error: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--m") opt.m = std::atoll(next().c_str());
    else if (a == "--configs") opt.configs = std::atoi(next().c_str());
    else if (a == "--reps") opt.reps = std::atoi(next().c_str());
    else if (a == "--evidence-ref") opt.evidence_ref = next();
    else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr,
                   "error: unknown option %s\nusage: fp8_gemm_bench OUT_DIR "
                   "[--m M] [--configs N] [--reps R] "
                   "[--evidence-ref PATH]\n",
                   a.c_str());
      return 2;
    } else opt.out_dir = a;
  }
  if (opt.out_dir.empty() || opt.m <= 0 || opt.configs <= 0 || opt.reps <= 0) {
    std::fprintf(stderr,
                 "usage: fp8_gemm_bench OUT_DIR [--m M] [--configs N] "
                 "[--reps R] [--evidence-ref PATH]\n");
    return 2;
  }
  if (opt.evidence_ref.empty()) opt.evidence_ref = opt.out_dir + "/fp8_gemm.json";
  vortex::Status st = run(opt);
  if (!st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.to_string().c_str());
    return 1;
  }
  return 0;
}
