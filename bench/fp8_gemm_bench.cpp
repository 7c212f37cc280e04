// fp8_gemm_bench: the FP8 per-tensor GEMMs of one H3 block (QKV, out_proj, FC1, FC2 at M = 37,810)
// as the block runs them — activation quantization (amax pass + quantize pass) and the cuBLASLt GEMM —
// with every cuBLASLt configuration enumerated, checked and timed for each shape (tune_gemm), and the
// block-level pieces timed alternating in one run: element-path vs vector-path quantizer (bytes compared
// on the whole tensor), heuristic vs best GEMM, and the two "linear" programs end to end.
//   fp8_gemm_bench OUT_DIR [--m M] [--configs N] [--reps R] [--evidence-ref PATH]
// Writes OUT_DIR/fp8_gemm.json (evidence: commit, GPU, SM clock samples, p10/p50/p90, same-run ratios)
// and OUT_DIR/h200-cublaslt-<version>.json (the pinned table: the shipped table with its fp8 entries
// replaced by this run's best; copy it over src/gemm/tables/ with the evidence to pin). Prints a table.
#include <cuda_runtime.h>
#include <cublasLt.h>

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

#include "gemm/gemm.h"
#include "gemm/gemm_table.h"
#include "gemm/gemm_tune.h"
#include "profiling/evidence.h"
#include "vortex/build_info.h"

namespace {

using namespace vortex;

#define BENCH_CUDA(expr)                                                                         \
  do {                                                                                           \
    cudaError_t bench_err_ = (expr);                                                             \
    if (bench_err_ != cudaSuccess)                                                               \
      return Status(ErrorCode::kCuda, std::string(#expr) + ": " + cudaGetErrorString(bench_err_)); \
  } while (0)

// SM clock sampled by nvidia-smi every ~200 ms while timing runs (clocks sag under load).
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
  std::string evidence_ref = "benchmarks/2026-12-01-h200-fp8-gemm/fp8_gemm.json";
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

// The block-level pieces of one shape, timed alternating (A, B, C, ... per repetition).
Result<nlohmann::json> time_block_pieces(GemmEngine& engine, const GemmShape& shape, const GemmTuneResult& tuned,
                                         const Options& opt, ClockSampler& clocks) {
  const int64_t m = tuned.m, n = shape.n, k = shape.k;
  const GemmAlgoConfig& heuristic = tuned.candidates[0].algo;
  const GemmAlgoConfig& best = tuned.candidates[static_cast<size_t>(tuned.best)].algo;
  VORTEX_ASSIGN_OR_RETURN(auto ops, GemmOperands::create(GemmPrecision::kFp8PerTensor, m, n, k, opt.reps + 7, nullptr));
  DevBuf x, q_elem, q_vec, scales, amax, mism;
  VORTEX_RETURN_IF_ERROR(x.alloc(static_cast<size_t>(m * k) * 2));         // [M, K] bf16, the block's activation
  VORTEX_RETURN_IF_ERROR(q_elem.alloc(static_cast<size_t>(m * k)));        // [M, K] e4m3
  VORTEX_RETURN_IF_ERROR(q_vec.alloc(static_cast<size_t>(m * k)));         // [M, K] e4m3
  VORTEX_RETURN_IF_ERROR(scales.alloc(256));
  VORTEX_RETURN_IF_ERROR(amax.alloc(256));
  VORTEX_RETURN_IF_ERROR(mism.alloc(256));
  VORTEX_RETURN_IF_ERROR(fill_uniform_bf16_device(x.p, m * k, 1000 + static_cast<uint64_t>(k), 2.0f, nullptr));
  float* s_elem = static_cast<float*>(scales.p);
  float* s_vec = s_elem + 16;
  uint32_t* amax_elem = static_cast<uint32_t*>(amax.p);
  uint32_t* amax_vec = amax_elem + 16;

  // Correctness first: both quantizer paths on the whole tensor, bytes and scale equal.
  BENCH_CUDA(cudaMemset(q_elem.p, 0xEE, static_cast<size_t>(m * k)));
  BENCH_CUDA(cudaMemset(q_vec.p, 0x11, static_cast<size_t>(m * k)));
  VORTEX_RETURN_IF_ERROR(quantize_fp8_per_tensor_element_path(x.p, m, k, k, q_elem.p, s_elem, amax_elem, nullptr));
  VORTEX_RETURN_IF_ERROR(quantize_fp8_per_tensor(x.p, m, k, k, q_vec.p, s_vec, amax_vec, nullptr));
  VORTEX_RETURN_IF_ERROR(count_u16_mismatches_device(q_elem.p, q_vec.p, m * k / 2,
                                                     static_cast<unsigned long long*>(mism.p), nullptr));
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
  pieces.push_back({"quantize_element_path", [&] {
                      return quantize_fp8_per_tensor_element_path(x.p, m, k, k, q_elem.p, s_elem, amax_elem, nullptr);
                    }, {}});
  pieces.push_back({"quantize_vector_path",
                    [&] { return quantize_fp8_per_tensor(x.p, m, k, k, q_vec.p, s_vec, amax_vec, nullptr); }, {}});
  pieces.push_back({"gemm_heuristic", [&] { return engine.gemm_with_algo(call, heuristic, nullptr); }, {}});
  pieces.push_back({"gemm_best", [&] { return engine.gemm_with_algo(call, best, nullptr); }, {}});
  pieces.push_back({"linear_before", [&]() -> Status {  // element quantizer + heuristic GEMM
                      VORTEX_RETURN_IF_ERROR(
                          quantize_fp8_per_tensor_element_path(x.p, m, k, k, q_vec.p, s_vec, amax_vec, nullptr));
                      return engine.gemm_with_algo(call, heuristic, nullptr);
                    }, {}});
  pieces.push_back({"linear_after", [&]() -> Status {  // vector quantizer + best GEMM
                      VORTEX_RETURN_IF_ERROR(quantize_fp8_per_tensor(x.p, m, k, k, q_vec.p, s_vec, amax_vec, nullptr));
                      return engine.gemm_with_algo(call, best, nullptr);
                    }, {}});
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
    pj[p.name] = {{"ms_p10", pc.p10}, {"ms_p50", pc.p50}, {"ms_p90", pc.p90}, {"n", pc.n},
                  {"tflops_p50_on_gemm_flop", flop / (pc.p50 * 1e-3) / 1e12}};
  }
  j["pieces"] = pj;
  auto p50 = [&](const char* name) { return pj[name]["ms_p50"].get<double>(); };
  j["ratio_quantize_element_over_vector"] = p50("quantize_element_path") / p50("quantize_vector_path");
  j["ratio_gemm_heuristic_over_best"] = p50("gemm_heuristic") / p50("gemm_best");
  j["ratio_linear_before_over_after"] = p50("linear_before") / p50("linear_after");
  // Bytes the quantizer must move: read x twice (amax, quantize), write q once.
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
      "per shape: tune_gemm (heuristic top-16 + AlgoGetIds x tiles x stages x split-K x reduction x swizzle, each "
      "checked on poisoned output vs the heuristic's bytes and FP64 samples, passing ones timed alternating); then "
      "the block's pieces timed alternating in one loop (2 warm-up + reps, CUDA events, default stream): element vs "
      "vector quantizer (bytes compared on the whole tensor first), heuristic vs best GEMM, and quantize+GEMM end "
      "to end; nvidia-smi SM clock sampled every 200 ms during each loop";
  ev["options"] = {{"m", opt.m}, {"configs", opt.configs}, {"reps", opt.reps}};
  ev["shapes"] = nlohmann::json::array();
  GemmTable table;
  // The shipped table, with its fp8 per-tensor entries for this GPU replaced by this run's pins.
  const std::string shipped = std::string(VORTEX_SOURCE_DIR) + "/src/gemm/tables/h200-cublaslt-130100.json";
  if (std::filesystem::exists(shipped)) {
    VORTEX_ASSIGN_OR_RETURN(table, load_gemm_table(shipped));
  }
  std::vector<GemmTableEntry> kept;
  for (const auto& e : table.entries)
    if (e.precision != GemmPrecision::kFp8PerTensor || e.m != opt.m) kept.push_back(e);
  table.entries = kept;
  ClockSampler clocks;
  std::vector<std::string> lines;
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
    std::snprintf(line, sizeof(line), "%-4s %8.3f %8.3f %6.0f %6.0f | %7.3f %7.3f | %8.3f %8.3f %5.2fx | %5.0f MHz",
                  shape.name.c_str(), pj["gemm_heuristic"]["ms_p50"].get<double>(),
                  pj["gemm_best"]["ms_p50"].get<double>(),
                  pj["gemm_heuristic"]["tflops_p50_on_gemm_flop"].get<double>(),
                  pj["gemm_best"]["tflops_p50_on_gemm_flop"].get<double>(),
                  pj["quantize_element_path"]["ms_p50"].get<double>(), pj["quantize_vector_path"]["ms_p50"].get<double>(),
                  pj["linear_before"]["ms_p50"].get<double>(), pj["linear_after"]["ms_p50"].get<double>(),
                  pieces["ratio_linear_before_over_after"].get<double>(),
                  pieces["sm_clock_mhz"]["p50"].get<double>());
    lines.push_back(line);
    // Written after every shape so an interrupted run keeps what it measured.
    std::ofstream f(opt.out_dir + "/fp8_gemm.json");
    if (!f) return io_error("cannot write " + opt.out_dir + "/fp8_gemm.json");
    f << ev.dump(1) << "\n";
  }
  const std::string table_path =
      opt.out_dir + "/h200-cublaslt-" + std::to_string(cublasLtGetVersion()) + ".json";
  VORTEX_RETURN_IF_ERROR(save_gemm_table(table, table_path));
  std::printf("FP8 per-tensor GEMMs, M=%lld (p50; TFLOP/s on GEMM flops; quantize = amax + quantize passes)\n",
              static_cast<long long>(opt.m));
  std::printf("%-4s %8s %8s %6s %6s | %7s %7s | %8s %8s %6s | %s\n", "shape", "heur ms", "best ms", "heurTF", "bestTF",
              "qElem", "qVec", "lin old", "lin new", "ratio", "SM clock p50");
  for (const auto& l : lines) std::printf("%s\n", l.c_str());
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
      std::fprintf(stderr, "error: unknown option %s\nusage: fp8_gemm_bench OUT_DIR [--m M] [--configs N] [--reps R] "
                           "[--evidence-ref PATH]\n", a.c_str());
      return 2;
    } else opt.out_dir = a;
  }
  if (opt.out_dir.empty() || opt.m <= 0 || opt.configs <= 0 || opt.reps <= 0) {
    std::fprintf(stderr, "usage: fp8_gemm_bench OUT_DIR [--m M] [--configs N] [--reps R] [--evidence-ref PATH]\n");
    return 2;
  }
  vortex::Status st = run(opt);
  if (!st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.to_string().c_str());
    return 1;
  }
  return 0;
}
