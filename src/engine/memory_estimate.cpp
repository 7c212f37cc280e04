// Memory / time estimates of a generate request (see memory_estimate.h). Buffer sizes mirror
// H3Model (src/model/h3_model.cpp) and the CPU reference attention (src/ref/attention.cpp); they are
// lower bounds of the peak, so a refusal is never a false alarm by more than allocator overhead.
// Tested in tests/engine/memory_estimate_test.cpp.
#include "engine/memory_estimate.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "model/h3_spec.h"

namespace vortex {

// Measured: the h3-tiny demo request (448x256, 22 frames, 874 rows), --threads 1, 2 steps on the 2-core
// build host (shared, load ~3): forward_flops() 3.86e9 / 0.583 s per step = 6.6 GFLOP/s. Rounded down to
// 5: a slower CPU makes the estimate optimistic, a faster one only makes the warning early.
const double kCpuFlopsPerThread = 5e9;

uint64_t MemoryEstimate::total() const {
  uint64_t t = 0;
  for (const Item& i : items) t += i.bytes;
  return t;
}

std::string format_gb(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GB", static_cast<double>(bytes) / 1e9);
  return buf;
}

std::string MemoryEstimate::largest(size_t n) const {
  std::string s;
  for (size_t i = 0; i < items.size() && i < n; ++i) {
    if (i > 0 && items[i].bytes * 100 < total()) break;  // under 1% of the total says nothing
    if (i) s += ", ";
    s += items[i].what + " " + format_gb(items[i].bytes);
  }
  return s;
}

MemoryEstimate estimate_memory(const ModelConfig& cfg, const RequestGeometry& geo, const MemoryEstimateOptions& opt) {
  const uint64_t s = static_cast<uint64_t>(geo.total_rows());
  const uint64_t d = static_cast<uint64_t>(cfg.hidden), i = static_cast<uint64_t>(cfg.inner()),
                 f = static_cast<uint64_t>(cfg.ffn), hd = static_cast<uint64_t>(cfg.head_dim);
  constexpr uint64_t kBf16 = 2, kF32 = 4, kF64 = 8;
  MemoryEstimate e;
  auto add = [&e](std::string what, uint64_t bytes) { e.items.push_back({std::move(what), bytes}); };
  add("weights", opt.weights_bytes > 0 ? opt.weights_bytes : static_cast<uint64_t>(h3_total_bytes(cfg)));
  // BlockScratch: qkv [S, 3I], attn_out [S, I], proj_out [S, D], norm_out [S, D], fc1_out [S, 2F],
  // swiglu_out [S, F], all bf16.
  add("qkv [S, 3I]", s * 3 * i * kBf16);
  add("attn_out [S, I]", s * i * kBf16);
  add("proj_out + norm_out [S, D]", 2 * s * d * kBf16);
  add("fc1_out [S, 2F]", s * 2 * f * kBf16);
  add("swiglu_out [S, F]", s * f * kBf16);
  // x [S, D] bf16 plus the f32 input projections / final-layer rows [S, D].
  add("x [S, D] + f32 embed/final rows", s * d * (kBf16 + kF32));
  // RoPE cos/sin [S, rope_dims/2] bf16 each, positions [S, 3] f64, modality tags.
  add("rope tables + positions", s * static_cast<uint64_t>(cfg.rope_dims()) * kBf16 + s * (3 * kF64 + 4));
  // Sampler: noise, model input, velocity, denoised, history, output: ~6 host f32 latent vectors.
  const uint64_t latent_values =
      static_cast<uint64_t>(cfg.in_channels) * geo.latent_frames * geo.latent_h * geo.latent_w +
      2ull * static_cast<uint64_t>(cfg.audio_in_channels) * geo.audio_latents;
  add("sampler latents", 6 * latent_values * kF32);
  if (opt.cpu_backend) {
    // src/ref/attention.cpp: per head K, V and K^T as f32 [S, hd], and per worker f64 scores [S].
    add("cpu attention (per-head K, V, K^T; scores)",
        3 * s * hd * kF32 + static_cast<uint64_t>(std::max(1, opt.threads)) * s * kF64);
  }
  std::sort(e.items.begin(), e.items.end(),
            [](const MemoryEstimate::Item& a, const MemoryEstimate::Item& b) { return a.bytes > b.bytes; });
  return e;
}

namespace {

// First integer after `key` in /proc/meminfo ("MemAvailable:   22656276 kB").
std::optional<uint64_t> meminfo_kb(const std::string& key) {
  std::ifstream f("/proc/meminfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    std::istringstream is(line.substr(key.size()));
    uint64_t kb = 0;
    if (is >> kb) return kb;
  }
  return std::nullopt;
}

// A cgroup v2 file holding one number ("max" = no limit).
std::optional<uint64_t> cgroup_value(const char* path) {
  std::ifstream f(path);
  std::string v;
  if (!(f >> v) || v == "max") return std::nullopt;
  try {
    return std::stoull(v);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

std::optional<uint64_t> available_host_memory() {
  std::optional<uint64_t> avail;
  if (auto kb = meminfo_kb("MemAvailable:")) avail = *kb * 1024;
  if (auto limit = cgroup_value("/sys/fs/cgroup/memory.max")) {
    const uint64_t used = cgroup_value("/sys/fs/cgroup/memory.current").value_or(0);
    const uint64_t room = *limit > used ? *limit - used : 0;
    avail = avail ? std::min(*avail, room) : room;
  }
  return avail;
}

double forward_flops(const ModelConfig& cfg, const RequestGeometry& geo) {
  const double s = static_cast<double>(geo.total_rows()), d = cfg.hidden, i = cfg.inner(), f = cfg.ffn;
  const double per_block = 2 * s * d * (3 * i + i) + 2 * s * d * 2 * f + 2 * s * f * d + 4 * s * s * i;
  return per_block * cfg.num_layers;
}

double estimate_cpu_seconds(const ModelConfig& cfg, const RequestGeometry& geo, int steps, int threads) {
  return forward_flops(cfg, geo) * steps / (kCpuFlopsPerThread * std::max(1, threads));
}

}  // namespace vortex
