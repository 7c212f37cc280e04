// nvfp4_deviation: per-op E2 deviation of the NVFP4 modes from the BF16 program (docs/numerics.md E2), on the
// canonical request with synthetic weights. For each block in --blocks: (1) every GEMM (qkv, out, fc1, fc2)
// is evaluated on the BF16 program's own input with the BF16 weight and with the NVFP4 variants (W4A4
// "nvfp4": activation quantized per call + NVFP4 weight; "nvfp4-weight-only": BF16 activation, expanded
// weight) -> rel-L2, cosine, max-abs of the op output; (2) the whole block is re-run from the same input
// with the variant's weights -> the block-output deviation. A Backend decorator intercepts linear() for the
// probed weights; the BF16 program continues unchanged between probes. Latent deviation after 1 and 12
// steps comes from `vortex generate` + scripts/compare_latents.py (scripts/gpu-check.sh --part deviation).
// Usage: nvfp4_deviation [--config h3|h3-tiny] [--backend cuda|cpu] [--blocks 0,24,49] [--width W --height H
//        --frames F --text T] [--evidence out.jsonl]. On the cpu backend only nvfp4-weight-only is measured.
// Verified on the CPU with h3-tiny here (weight-only); the W4A4 rows need a GPU.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/rng.h"
#include "core/strings.h"
#include "engine/precision.h"
#include "engine/workload.h"
#include "io/quantized_layers.h"
#include "measure/bench.h"
#include "model/h3_spec.h"
#include "model/packing.h"
#include "profiling/evidence.h"
#include "vortex/dtype.h"

namespace vortex {
namespace {

struct Stats {
  double rel_l2 = 0, cosine = 0, max_abs = 0, ref_rms = 0;
  int64_t nonfinite = 0;
};

// Host statistics of candidate vs reference (both bf16 or f32 host tensors, same shape, contiguous). The
// GEMM outputs reach 1.08e9 elements ([37810, 28672] for FC1), so the sums run on every host core in fixed
// chunks combined in chunk order (deterministic for a given core count).
Stats compare(const Tensor& ref, const Tensor& cand) {
  auto value = [](const Tensor& t, int64_t i) {
    return t.dtype() == DType::kBF16 ? static_cast<double>(f32_from_bf16_bits(t.data<uint16_t>()[i]))
                                     : static_cast<double>(t.data<float>()[i]);
  };
  struct Partial {
    double d2 = 0, r2 = 0, c2 = 0, rc = 0, max_abs = 0;
    int64_t nonfinite = 0;
  };
  const int64_t n = ref.numel();
  const int64_t workers =
      std::max<int64_t>(1, std::min<int64_t>(std::thread::hardware_concurrency(), n / (1 << 20) + 1));
  std::vector<Partial> parts(static_cast<size_t>(workers));
  std::vector<std::thread> pool;
  for (int64_t w = 0; w < workers; ++w) {
    pool.emplace_back([&, w] {
      Partial& p = parts[static_cast<size_t>(w)];
      const int64_t begin = n * w / workers, end = n * (w + 1) / workers;
      for (int64_t i = begin; i < end; ++i) {
        const double r = value(ref, i), c = value(cand, i);
        if (!std::isfinite(c)) {
          ++p.nonfinite;
          continue;
        }
        p.d2 += (c - r) * (c - r);
        p.r2 += r * r;
        p.c2 += c * c;
        p.rc += r * c;
        p.max_abs = std::max(p.max_abs, std::fabs(c - r));
      }
    });
  }
  for (auto& t : pool) t.join();
  Partial total;
  for (const Partial& p : parts) {
    total.d2 += p.d2;
    total.r2 += p.r2;
    total.c2 += p.c2;
    total.rc += p.rc;
    total.max_abs = std::max(total.max_abs, p.max_abs);
    total.nonfinite += p.nonfinite;
  }
  Stats s;
  s.max_abs = total.max_abs;
  s.nonfinite = total.nonfinite;
  s.rel_l2 = std::sqrt(total.d2 / std::max(total.r2, 1e-300));
  s.cosine = total.rc / std::max(std::sqrt(total.r2 * total.c2), 1e-300);
  s.ref_rms = std::sqrt(total.r2 / static_cast<double>(std::max<int64_t>(n, 1)));
  return s;
}

struct Probe {
  std::string name;                              // "block24.qkv"
  std::map<std::string, LinearWeight> variants;  // variant -> device weight
};

// Forwards every op to `inner`; linear() on a probed weight either also runs the variants and records their
// deviation from the BF16 output (kCompare) or runs the selected variant instead (kSubstitute).
class DeviationBackend final : public Backend {
 public:
  enum class Mode { kPassThrough, kCompare, kSubstitute };
  explicit DeviationBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}

  Backend& inner() { return *inner_; }
  std::map<const void*, Probe> probes;
  Mode mode = Mode::kPassThrough;
  std::string substitute;  // variant for kSubstitute
  std::vector<nlohmann::json> rows;
  nlohmann::json row_base;

  std::string_view name() const override { return inner_->name(); }
  Device device() const override { return inner_->device(); }
  Result<Tensor> alloc(const Shape& shape, DType dtype) override { return inner_->alloc(shape, dtype); }
  Result<Tensor> upload(const Tensor& host) override { return inner_->upload(host); }
  Status download(const Tensor& src, Tensor& host_dst) override { return inner_->download(src, host_dst); }
  Status copy(const Tensor& src, Tensor& dst) override { return inner_->copy(src, dst); }
  Status synchronize() override { return inner_->synchronize(); }
  Status fill_synthetic(Tensor& dst, uint64_t seed, float scale, float offset) override {
    return inner_->fill_synthetic(dst, seed, scale, offset);
  }
  void configure(const ExecOptions& opts) override { inner_->configure(opts); }
  ExecOptions default_options() const override { return inner_->default_options(); }
  Status rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) override {
    return inner_->rms_norm(x, weight, eps, out);
  }
  Status modulate(Tensor& x, const Tensor& table, int shift_chunk, int scale_chunk, const SegmentTable& seg) override {
    return inner_->modulate(x, table, shift_chunk, scale_chunk, seg);
  }
  Status rms_norm_modulate(const Tensor& x, const Tensor& weight, float eps, const Tensor& table, int shift_chunk,
                           int scale_chunk, const SegmentTable& seg, Tensor& out) override {
    return inner_->rms_norm_modulate(x, weight, eps, table, shift_chunk, scale_chunk, seg, out);
  }
  Status qk_norm_rope(Tensor& q, Tensor& k, const Tensor& q_weight, const Tensor& k_weight, float eps,
                      const RopeTables* rope, int num_heads, int head_dim) override {
    return inner_->qk_norm_rope(q, k, q_weight, k_weight, eps, rope, num_heads, head_dim);
  }
  Status attention(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads, int head_dim, Tensor& out,
                   const ExecOptions& opts) override {
    return inner_->attention(q, k, v, num_heads, head_dim, out, opts);
  }
  Status gate_add(Tensor& x, const Tensor& a, const Tensor* table, int gate_chunk, const SegmentTable& seg) override {
    return inner_->gate_add(x, a, table, gate_chunk, seg);
  }
  Status swiglu(const Tensor& u, Tensor& m) override { return inner_->swiglu(u, m); }
  Status cast(const Tensor& src, Tensor& dst) override { return inner_->cast(src, dst); }
  DeviceInfo device_info() const override { return inner_->device_info(); }
  size_t memory_in_use() const override { return inner_->memory_in_use(); }
  size_t memory_peak() const override { return inner_->memory_peak(); }

  Status linear(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out) override {
    auto it = w.weight.defined() ? probes.find(w.weight.raw_data()) : probes.end();
    if (it == probes.end() || mode == Mode::kPassThrough) return inner_->linear(x, w, bias, out);
    const Probe& p = it->second;
    if (mode == Mode::kSubstitute) {
      auto v = p.variants.find(substitute);
      if (v == p.variants.end()) return internal_error("no variant " + substitute + " for " + p.name);
      return inner_->linear(x, v->second, bias, out);
    }
    VORTEX_RETURN_IF_ERROR(inner_->linear(x, w, bias, out));
    Tensor ref_h = Tensor::empty(out.shape(), out.dtype());
    VORTEX_RETURN_IF_ERROR(inner_->download(out, ref_h));
    for (const auto& [variant, vw] : p.variants) {
      VORTEX_ASSIGN_OR_RETURN(Tensor tmp, inner_->alloc(out.shape(), out.dtype()));
      VORTEX_RETURN_IF_ERROR(inner_->linear(x, vw, bias, tmp));
      Tensor cand_h = Tensor::empty(out.shape(), out.dtype());
      VORTEX_RETURN_IF_ERROR(inner_->download(tmp, cand_h));
      const Stats s = compare(ref_h, cand_h);
      nlohmann::json row = row_base;
      row["op"] = p.name;
      row["variant"] = variant;
      row["scope"] = "op (same BF16-program input)";
      row["m"] = x.dim(0);
      row["n"] = out.dim(1);
      row["k"] = x.dim(1);
      row["rel_l2"] = s.rel_l2;
      row["cosine"] = s.cosine;
      row["max_abs"] = s.max_abs;
      row["ref_rms"] = s.ref_rms;
      row["nonfinite"] = s.nonfinite;
      std::printf("  %-14s %-18s rel-L2 %.4e  cos %.6f  max-abs %.4e  (ref rms %.3e, nonfinite %lld)\n", p.name.c_str(),
                  variant.c_str(), s.rel_l2, s.cosine, s.max_abs, s.ref_rms, static_cast<long long>(s.nonfinite));
      rows.push_back(std::move(row));
    }
    return Status::Ok();
  }

 private:
  std::unique_ptr<Backend> inner_;
};

// A whole decimal integer (the option's name for the error).
Result<int> parse_int(const std::string& text, const std::string& option) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0') return invalid_argument(option + " takes an integer, got '" + text + "'");
  return static_cast<int>(v);
}

Result<std::vector<int>> parse_blocks(const std::string& s) {
  std::vector<int> v;
  for (const std::string& item : split_list(s)) {
    VORTEX_ASSIGN_OR_RETURN(int b, parse_int(item, "--blocks"));
    v.push_back(b);
  }
  if (v.empty()) return invalid_argument("--blocks is empty (give block indices like 0,24,49)");
  return v;
}

Status run(int argc, char** argv) {
  std::string config = "h3", backend_name = "cuda", blocks_arg = "0,24,49", evidence;
  int width = 1344, height = 768, frames = 124, text_rows = 100;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) return "";
      return argv[++i];
    };
    if (a == "--config") config = next();
    else if (a == "--backend") backend_name = next();
    else if (a == "--blocks") blocks_arg = next();
    else if (a == "--evidence") evidence = next();
    else if (a == "--width") {
      VORTEX_ASSIGN_OR_RETURN(width, parse_int(next(), "--width"));
    } else if (a == "--height") {
      VORTEX_ASSIGN_OR_RETURN(height, parse_int(next(), "--height"));
    } else if (a == "--frames") {
      VORTEX_ASSIGN_OR_RETURN(frames, parse_int(next(), "--frames"));
    } else if (a == "--text") {
      VORTEX_ASSIGN_OR_RETURN(text_rows, parse_int(next(), "--text"));
    } else return invalid_argument("unknown argument '" + a + "' (see the header of bench/nvfp4_deviation.cpp)");
  }
  VORTEX_ASSIGN_OR_RETURN(const std::vector<int> blocks, parse_blocks(blocks_arg));
  VORTEX_ASSIGN_OR_RETURN(std::unique_ptr<Backend> inner, make_backend(backend_name, 0));
  const bool w4a4 = inner->device() == Device::kCuda;
  Workload w;
  VORTEX_ASSIGN_OR_RETURN(w.cfg, ModelConfig::by_name(config));
  for (int b : blocks)
    if (b < 0 || b >= w.cfg.num_layers)
      return invalid_argument("block " + std::to_string(b) + " outside [0, " + std::to_string(w.cfg.num_layers) + ")");
  auto* dev = new DeviationBackend(std::move(inner));
  std::unique_ptr<Backend> backend_owner(dev);  // outlives w, which only points at it
  w.backend = dev;
  const auto t0 = std::chrono::steady_clock::now();
  VORTEX_ASSIGN_OR_RETURN(H3Weights weights, synthesize_weights(w.cfg, *w.backend, 0));
  // Variants of the probed blocks' GEMM weights (host reference quantization, then upload).
  const char* op_names[4] = {"qkv", "out", "fc1", "fc2"};
  // Download every probed weight, quantize + expand them on the host cores (one weight per thread; the serial
  // loop took most of the 130 s the H200 run allowed), then upload.
  struct Job {
    int block = 0, op = 0;
    LinearWeight* weight = nullptr;
    Tensor host;  // [N, K] bf16
    Result<LinearWeight> q = Status::Ok();
    Result<Tensor> expanded = Status::Ok();
  };
  std::vector<Job> jobs;
  for (int b : blocks) {
    H3BlockWeights& bw = weights.blocks[static_cast<size_t>(b)];
    LinearWeight* ops[4] = {&bw.attn_qkv_proj, &bw.attn_out_proj, &bw.mlp_fc1, &bw.mlp_fc2};
    for (int o = 0; o < 4; ++o) {
      Job j;
      j.block = b;
      j.op = o;
      j.weight = ops[o];
      j.host = Tensor::empty(ops[o]->weight.shape(), ops[o]->weight.dtype());
      VORTEX_RETURN_IF_ERROR(dev->inner().download(ops[o]->weight, j.host));
      jobs.push_back(std::move(j));
    }
  }
  {
    std::vector<std::thread> pool;
    for (Job& j : jobs)
      pool.emplace_back([&j] {
        j.q = quantize_weight_nvfp4(j.host, true);
        if (j.q.ok()) j.expanded = dequantize_linear_bf16(*j.q);  // [N, K] bf16
      });
    for (auto& t : pool) t.join();
  }
  for (Job& j : jobs) {
    VORTEX_RETURN_IF_ERROR(j.q.status());
    VORTEX_RETURN_IF_ERROR(j.expanded.status());
    const LinearWeight& q = *j.q;
    Probe p;
    p.name = "block" + std::to_string(j.block) + "." + op_names[j.op];
    LinearWeight wo;
    VORTEX_ASSIGN_OR_RETURN(wo.weight, dev->inner().upload(*j.expanded));
    p.variants["nvfp4-weight-only"] = wo;
    if (w4a4) {
      LinearWeight qd = q;
      VORTEX_ASSIGN_OR_RETURN(qd.weight, dev->inner().upload(q.weight));
      VORTEX_ASSIGN_OR_RETURN(qd.weight_scale, dev->inner().upload(q.weight_scale));
      VORTEX_ASSIGN_OR_RETURN(qd.weight_scale_2, dev->inner().upload(q.weight_scale_2));
      p.variants["nvfp4"] = qd;
    }
    dev->probes[j.weight->weight.raw_data()] = std::move(p);
  }
  std::printf("weights ready in %.1f s (%s, %s; variants: %s)\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), w.cfg.name.c_str(),
              std::string(dev->name()).c_str(), w4a4 ? "nvfp4, nvfp4-weight-only" : "nvfp4-weight-only (cpu)");
  VORTEX_ASSIGN_OR_RETURN(RequestGeometry geo, make_geometry(w.cfg, width, height, frames, text_rows));
  VORTEX_ASSIGN_OR_RETURN(w.layout, pack_request(w.cfg, geo));
  Tensor text = Tensor::empty({geo.text_rows, w.cfg.hidden}, DType::kF32);  // [L, D] f32, as load_workload
  const uint64_t noise_seed = 42;
  gaussian_noise(noise_seed ^ 0x7465787400000000ull, 0, text.data<float>(), static_cast<size_t>(text.numel()));
  ExecOptions opts = w.backend->default_options();
  auto model_owner = std::make_unique<H3Model>(w.cfg, *w.backend, std::move(weights), opts);
  w.model = model_owner.get();
  VORTEX_RETURN_IF_ERROR(w.model->prepare(w.layout, text));
  const size_t video_n = static_cast<size_t>(w.cfg.in_channels) * geo.latent_frames * geo.latent_h * geo.latent_w;
  const size_t audio_n = static_cast<size_t>(2) * w.cfg.audio_in_channels * geo.audio_latents;
  w.noise.video.resize(video_n);
  w.noise.audio.resize(audio_n);
  gaussian_noise(noise_seed, 0, w.noise.video.data(), video_n);
  gaussian_noise(noise_seed, video_n, w.noise.audio.data(), audio_n);

  const Backend::DeviceInfo di = dev->device_info();
  dev->row_base = {{"schema", "vortex-nvfp4-deviation-1"},
                   {"time_utc", utc_now_iso8601()},
                   {"config", w.cfg.name},
                   {"backend", std::string(dev->name())},
                   {"device", di.name},
                   {"sm", di.sm},
                   {"rows", geo.total_rows()},
                   {"weights", "synthetic seed 0"},
                   {"reference", "bf16 program"}};
  for (int b : blocks) {
    std::printf("block %d (%lld rows)\n", b, static_cast<long long>(geo.total_rows()));
    dev->mode = DeviationBackend::Mode::kPassThrough;
    VORTEX_ASSIGN_OR_RETURN(BlockInput in, make_block_input(w, b, 12));
    VORTEX_ASSIGN_OR_RETURN(Tensor x, dev->alloc(in.x.shape(), in.x.dtype()));
    VORTEX_RETURN_IF_ERROR(dev->copy(in.x, x));
    dev->mode = DeviationBackend::Mode::kCompare;  // per op, BF16 program continues
    dev->row_base["block"] = b;
    VORTEX_RETURN_IF_ERROR(w.model->run_block(b, x, in.tables));
    Tensor ref_out = Tensor::empty(x.shape(), x.dtype());
    VORTEX_RETURN_IF_ERROR(dev->download(x, ref_out));
    std::vector<std::string> variants = {"nvfp4-weight-only"};
    if (w4a4) variants.insert(variants.begin(), "nvfp4");
    for (const std::string& v : variants) {
      dev->mode = DeviationBackend::Mode::kSubstitute;
      dev->substitute = v;
      VORTEX_RETURN_IF_ERROR(dev->copy(in.x, x));
      VORTEX_RETURN_IF_ERROR(w.model->run_block(b, x, in.tables));
      Tensor out = Tensor::empty(x.shape(), x.dtype());
      VORTEX_RETURN_IF_ERROR(dev->download(x, out));
      const Stats s = compare(ref_out, out);
      nlohmann::json row = dev->row_base;
      row["op"] = "block" + std::to_string(b) + ".output";
      row["variant"] = v;
      row["scope"] = "block output (same block input, all 4 GEMMs in the variant)";
      row["rel_l2"] = s.rel_l2;
      row["cosine"] = s.cosine;
      row["max_abs"] = s.max_abs;
      row["ref_rms"] = s.ref_rms;
      row["nonfinite"] = s.nonfinite;
      std::printf("  %-14s %-18s rel-L2 %.4e  cos %.6f  max-abs %.4e  (ref rms %.3e, nonfinite %lld)\n",
                  ("block" + std::to_string(b) + ".output").c_str(), v.c_str(), s.rel_l2, s.cosine, s.max_abs,
                  s.ref_rms, static_cast<long long>(s.nonfinite));
      dev->rows.push_back(std::move(row));
    }
    dev->mode = DeviationBackend::Mode::kPassThrough;
  }
  if (!evidence.empty()) {
    std::ofstream f(evidence, std::ios::app);
    if (!f) return io_error("cannot append to " + evidence);
    for (const auto& r : dev->rows) f << r.dump() << "\n";
    std::printf("%zu rows appended to %s\n", dev->rows.size(), evidence.c_str());
  }
  return Status::Ok();
}

}  // namespace
}  // namespace vortex

int main(int argc, char** argv) {
  // Line-buffered progress: with block-buffered stdout into a pipe, an H200 run stopped at a 130 s limit had
  // printed nothing. Expect several minutes at h3 scale: every probed GEMM output
  // (up to [37810, 28672]) is downloaded and compared on the host, twice per block.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  vortex::Status st = vortex::run(argc, argv);
  if (!st.ok()) {
    std::fprintf(stderr, "nvfp4_deviation: error: %s\n", st.to_string().c_str());
    return 1;
  }
  return 0;
}
