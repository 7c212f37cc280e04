// nvfp4_bench: times the NVFP4 producers at the canonical shape (S = 37,810): (b) plain quantize at K = 5376 and
// 14336, (c) modulation -> NVFP4 at D = 5376 vs the unfused path (modulate kernel + quantize), (d) SwiGLU -> NVFP4
// from the [S, 28672] FC1 output vs the unfused path (swiglu kernel + quantize). Per row: p10/p50/p90 of --reps
// CUDA-event timings after warm-up, GB/s on bytes read + written (both passes: the input is read twice) and the
// fraction of 4.18 TB/s, each pass alone with its own bytes (amax: the input read; pack: input read + NVFP4
// written), the baseline/producer ratio, and the check column: a fused producer's bytes (data, scales, g) == its
// unfused path's on the same input (the E0 tests compare both with the CPU reference). Inputs: device Philox fills.
// Usage: nvfp4_bench [--rows 37810] [--reps 20] [--evidence-dir DIR] (appends evidence rows, docs/evidence.md, to
// DIR/<date>-<gpu>-nvfp4-bench.jsonl). A fused producer's same-run baseline is its unfused path (kernel + quantize);
// a plain quantizer's is a device-to-device copy of the bytes it moves (same run).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cuda/ops/nvfp4_quantize.h"
#include "cuda/ops/ops.h"
#include "measure/gemm_evidence.h"
#include "ref/nvfp4_quantize.h"

using namespace vortex;

namespace {

constexpr double kPeakBytesPerSecond = 4.18e12;

struct DeviceMem {
  void* p = nullptr;
  size_t bytes = 0;
  explicit DeviceMem(size_t n) : bytes(n) {
    if (cudaMalloc(&p, n) != cudaSuccess) p = nullptr;
  }
  ~DeviceMem() { cudaFree(p); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

Tensor view(const DeviceMem& m, Shape shape, DType dtype) {
  auto st = std::make_shared<Storage>();
  st->ptr = m.p;
  st->bytes = m.bytes;
  st->device = Device::kCuda;
  return Tensor::from_storage(st, 0, std::move(shape), dtype);
}

// Percentiles of fn's milliseconds over reps (after 3 warm-ups); n = 0 on error.
Percentiles time_ms(const std::function<Status()>& fn, int reps) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<double> ms;
  for (int i = 0; i < reps + 3; ++i) {
    cudaEventRecord(a);
    const Status s = fn();
    cudaEventRecord(b);
    if (!s.ok() || cudaEventSynchronize(b) != cudaSuccess) {
      std::fprintf(stderr, "nvfp4_bench: %s %s\n", s.message().c_str(), cudaGetErrorString(cudaGetLastError()));
      return Percentiles{};
    }
    float t = 0.0f;
    cudaEventElapsedTime(&t, a, b);
    if (i >= 3) ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return percentiles(ms);
}
// The p50 of a timing, -1 when it failed.
double p50_or_fail(const Percentiles& p) { return p.n > 0 ? p.p50 : -1.0; }

}  // namespace

int main(int argc, char** argv) {
  int64_t rows = 37810;
  int reps = 20;
  std::string evidence_dir;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--rows") rows = std::stoll(argv[i + 1]);
    else if (a == "--reps") reps = std::max(1, std::stoi(argv[i + 1]));
    else if (a == "--evidence-dir") evidence_dir = argv[i + 1];
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::fprintf(stderr, "nvfp4_bench: no CUDA device\n");
    return 1;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  const int64_t d = 5376, f = 14336;
  // Buffers: u [S, 2F] (FC1 output), m [S, F] (materialized SwiGLU / plain input), n [S, D], nm [S, D] copy.
  DeviceMem u(rows * 2 * f * 2), m(rows * f * 2), n(rows * d * 2), nm(rows * d * 2), table(3 * 6 * d * 2);
  DeviceMem silu(65536 * 2), map(rows * 4 + 16), g(16), amax(16);
  const ref::Nvfp4Layout lw = ref::nvfp4_layout(rows, f), ld = ref::nvfp4_layout(rows, d);
  DeviceMem data(lw.data_bytes()), scales(lw.scale_bytes());
  for (const DeviceMem* b : {&u, &m, &n, &nm, &table, &silu, &map, &g, &amax, &data, &scales})
    if (b->p == nullptr) {
      std::fprintf(stderr, "nvfp4_bench: cudaMalloc failed\n");
      return 1;
    }
  Tensor ut = view(u, {rows, 2 * f}, DType::kBF16), mt = view(m, {rows, f}, DType::kBF16);
  Tensor nt = view(n, {rows, d}, DType::kBF16), nmt = view(nm, {rows, d}, DType::kBF16);
  Tensor tt = view(table, {3, 6 * d}, DType::kBF16);
  for (auto [t, seed, scale] :
       {std::tuple{&ut, 1ull, 3.0f}, {&mt, 2ull, 2.0f}, {&nt, 3ull, 2.0f}, {&tt, 4ull, 0.01f}}) {
    const Status s = cuda_ops::fill_synthetic(*t, seed, scale, 0.0f, nullptr);
    if (!s.ok()) {
      std::fprintf(stderr, "nvfp4_bench: %s\n", s.message().c_str());
      return 1;
    }
  }
  const std::vector<uint16_t> silu_host = cuda_ops::silu_bf16_table_host();
  cudaMemcpy(silu.p, silu_host.data(), 65536 * 2, cudaMemcpyHostToDevice);
  std::vector<int32_t> map_host(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) map_host[static_cast<size_t>(r)] = r < rows * 2 / 3 ? 0 : 1;  // video | audio
  cudaMemcpy(map.p, map_host.data(), map_host.size() * 4, cudaMemcpyHostToDevice);
  const cuda_ops::DeviceRowMap row_map{map.as<int32_t>(), rows, 3};
  const cuda_ops::Nvfp4GlobalScale gs{true, g.as<float>(), amax.as<uint32_t>()};
  const cuda_ops::Nvfp4Buffers out{data.as<uint8_t>(), scales.as<uint8_t>()};

  auto q_bytes = [&](const ref::Nvfp4Layout& l) { return static_cast<double>(l.data_bytes() + l.scale_bytes()); };
  // The output of one run (after a full run: data, scales and g), for the check column.
  struct Output {
    std::vector<uint8_t> data, scales;
    uint32_t g = 0;
  };
  auto fetch = [&](const ref::Nvfp4Layout& l) {
    Output o;
    o.data.resize(l.data_bytes());
    o.scales.resize(l.scale_bytes());
    cudaDeviceSynchronize();
    cudaMemcpy(o.data.data(), data.p, o.data.size(), cudaMemcpyDeviceToHost);
    cudaMemcpy(o.scales.data(), scales.p, o.scales.size(), cudaMemcpyDeviceToHost);
    cudaMemcpy(&o.g, g.p, 4, cudaMemcpyDeviceToHost);
    return o;
  };
  auto same = [](const Output& a, const Output& b) {
    return a.g == b.g && a.data.size() == b.data.size() && a.scales.size() == b.scales.size() &&
           std::memcmp(a.data.data(), b.data.data(), a.data.size()) == 0 &&
           std::memcmp(a.scales.data(), b.scales.data(), a.scales.size()) == 0;
  };
  struct Row {
    std::string name;
    double ms, bytes, amax_ms, amax_bytes, pack_ms, pack_bytes;
    std::string check;
    std::string baseline;    // what the same-run baseline is
    double baseline_ms = 0;  // its p50
    Percentiles full;        // the full run's timings (ms is its p50)
  };
  std::vector<Row> rowsout;
  // The same-run copy baseline of a plain quantizer: cudaMemcpyAsync of `bytes` / 2 (read + write = bytes).
  auto copy_ms = [&](double bytes) {
    const size_t n = std::min(static_cast<size_t>(bytes / 2), std::min(u.bytes, m.bytes));
    return p50_or_fail(time_ms(
        [&]() -> Status {
          if (cudaMemcpyAsync(u.p, m.p, n, cudaMemcpyDeviceToDevice, nullptr) != cudaSuccess)
            return internal_error("cudaMemcpyAsync failed");
          return Status::Ok();
        },
        reps));
  };
  // One case: run(options) launches the producer; unfused(options) the materialize-then-quantize path (or null).
  using Run = std::function<Status(const cuda_ops::Nvfp4RunOptions&)>;
  auto bench_case = [&](const std::string& name, const ref::Nvfp4Layout& l, double in_bytes, const Run& run,
                        const Run& unfused) {
    cuda_ops::Nvfp4RunOptions full, amax_only, pack_only;
    amax_only.pack_pass = false;
    pack_only.amax_pass = false;
    Row r{name, 0, 2 * in_bytes + q_bytes(l), 0, in_bytes, 0, in_bytes + q_bytes(l), "-", "", 0, {}};
    auto poison = [&] {  // every byte must be rewritten
      cudaMemset(data.p, 0xA5, l.data_bytes());
      cudaMemset(scales.p, 0x5A, l.scale_bytes());
      cudaMemset(g.p, 0xFF, 4);
    };
    poison();
    const Status once = run(full);
    if (!once.ok()) {
      std::fprintf(stderr, "nvfp4_bench: %s: %s\n", r.name.c_str(), once.message().c_str());
      r.ms = -1.0;
      rowsout.push_back(r);
      return;
    }
    const Output fused = fetch(l);
    if (unfused) {
      poison();
      const Status s = unfused(full);
      r.check = s.ok() && same(fetch(l), fused) ? "bytes == unfused: pass" : "bytes == unfused: FAIL";
    }
    r.full = time_ms([&] { return run(full); }, reps);
    r.ms = p50_or_fail(r.full);
    r.amax_ms = p50_or_fail(time_ms([&] { return run(amax_only); }, reps));
    r.pack_ms = p50_or_fail(time_ms([&] { return run(pack_only); }, reps));  // reads the amax word the full runs left
    if (unfused) {
      r.baseline = "unfused: the op's kernel + nvfp4_quantize (same run)";
      r.baseline_ms = p50_or_fail(time_ms([&] { return unfused(full); }, reps));
    } else {
      r.baseline = "device-to-device copy of the same bytes (same run)";
      r.baseline_ms = copy_ms(r.bytes);
    }
    rowsout.push_back(r);
  };
  for (int64_t k : {d, f}) {
    bench_case(
        "plain_K" + std::to_string(k), ref::nvfp4_layout(rows, k), 2.0 * rows * k,
        [&](const cuda_ops::Nvfp4RunOptions& o) {
          return cuda_ops::nvfp4_quantize(m.as<uint16_t>(), rows, k, k, gs, out, nullptr, o);
        },
        nullptr);
  }
  cudaMemcpy(nm.p, n.p, n.bytes, cudaMemcpyDeviceToDevice);
  bench_case(
      "modulate_D5376", ld, 2.0 * rows * d,
      [&](const cuda_ops::Nvfp4RunOptions& o) {
        return cuda_ops::nvfp4_quantize_modulated(n.as<uint16_t>(), rows, d, d, table.as<uint16_t>(), 6 * d, 3, 4,
                                                  row_map, gs, out, nullptr, o);
      },
      [&](const cuda_ops::Nvfp4RunOptions& o) {
        VORTEX_RETURN_IF_ERROR(cuda_ops::modulate(nmt, tt, 3, 4, row_map, nullptr));
        return cuda_ops::nvfp4_quantize(nm.as<uint16_t>(), rows, d, d, gs, out, nullptr, o);
      });
  const uint16_t* silu_dev = silu.as<uint16_t>();
  bench_case(
      "swiglu_F14336", lw, 2.0 * rows * 2 * f,
      [&](const cuda_ops::Nvfp4RunOptions& o) {
        return cuda_ops::nvfp4_quantize_swiglu(u.as<uint16_t>(), rows, f, 2 * f, silu_dev, gs, out, nullptr, o);
      },
      [&](const cuda_ops::Nvfp4RunOptions& o) {
        VORTEX_RETURN_IF_ERROR(cuda_ops::swiglu(ut, mt, silu_dev, nullptr));
        return cuda_ops::nvfp4_quantize(m.as<uint16_t>(), rows, f, f, gs, out, nullptr, o);
      });
  RunEnvironment env = cuda_run_environment();  // clocks right after the timed runs
  std::vector<nlohmann::json> evidence;
  bool ok = true;
  auto gbs = [](double bytes, double ms) { return ms > 0 ? bytes / (ms * 1e-3) / 1e9 : 0.0; };
  for (size_t i = 0; i < rowsout.size(); ++i) {
    const Row& r = rowsout[i];
    ok = ok && r.ms > 0 && r.amax_ms > 0 && r.pack_ms > 0 && r.baseline_ms > 0 &&
         r.check.find("FAIL") == std::string::npos;
    std::printf("%-16s %8.3f ms %7.1f GB/s (%4.1f%% of 4.18 TB/s)  amax %7.3f ms %7.1f GB/s  pack %7.3f ms %7.1f GB/s",
                r.name.c_str(), r.ms, gbs(r.bytes, r.ms), 100.0 * gbs(r.bytes, r.ms) * 1e9 / kPeakBytesPerSecond,
                r.amax_ms, gbs(r.amax_bytes, r.amax_ms), r.pack_ms, gbs(r.pack_bytes, r.pack_ms));
    if (r.baseline_ms > 0 && r.ms > 0) std::printf("  baseline %7.3f ms %.2fx", r.baseline_ms, r.baseline_ms / r.ms);
    std::printf("  %s\n", r.check.c_str());
    const EvidenceBaseline base{r.baseline, r.baseline_ms, 0};
    const nlohmann::json extra = {{"bytes", r.bytes},
                                  {"gb_s", gbs(r.bytes, r.ms)},
                                  {"amax_ms_p50", r.amax_ms},
                                  {"pack_ms_p50", r.pack_ms},
                                  {"check", r.check}};
    evidence.push_back(evidence_row(env, "nvfp4 " + r.name + " S=" + std::to_string(rows), "vortex nvfp4 producer",
                                    "reps=" + std::to_string(reps), r.full, base, extra));
    std::printf("%s\n", evidence.back().dump().c_str());
  }
  if (!evidence_dir.empty()) {
    const std::string path = evidence_path(evidence_dir, env, "nvfp4-bench");
    const Status st = append_jsonl(path, evidence);
    if (!st.ok()) {
      std::fprintf(stderr, "nvfp4_bench: %s\n", st.to_string().c_str());
      return 1;
    }
    std::printf("evidence: %s\n", path.c_str());
  }
  return ok ? 0 : 1;
}
