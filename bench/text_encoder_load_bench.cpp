// text_encoder_load_bench: load bandwidth of the conditioner's weights from local disk, against the disk's raw
// sequential read bandwidth measured on the same file in the same run.
//   1. writes --layers (16: 15.6 GB of layer weights + the 1.6 GB embedding, within a 20 GB disk budget) of
//      Qwen3-VL-32B's text model as one model.safetensors with deterministic synthetic values (the real names and
//      shapes) plus its config.json into --dir (which must not exist; the bench removes only what it wrote unless
//      --keep), fsyncs it and evicts its pages (posix_fadvise DONTNEED);
//   2. cold: TextEncoder::load(dir, cuda, layers), Vortex's loader (mmap, every tensor uploaded from its view
//      through the backend's pinned staging); page-cache residency (mincore) recorded before it;
//   3. raw: the same file read sequentially with O_DIRECT in 64 MB blocks (the disk's own bandwidth);
//   4. warm: TextEncoder::load again with the file now in the page cache.
// GB/s counts the bytes uploaded (layer tensors; the embedding stays a host mapping). The 50-layer model is 48.8 GB
// of layer tensors: its load time is that over the cold GB/s when the disk bound holds.
//   text_encoder_load_bench --dir DIR --out OUTDIR [--layers 16] [--keep]
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "core/clock.h"
#include "core/synthetic.h"
#include "io/safetensors.h"
#include "profiling/evidence.h"
#include "text_encoder/text_encoder.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using vortex::seconds_since;

int fail(const std::string& m) {
  std::fprintf(stderr, "text_encoder_load_bench: %s\n", m.c_str());
  return 1;
}

// Fraction of the file's pages in the page cache.
double residency(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return -1;
  struct stat st {};
  ::fstat(fd, &st);
  const size_t len = static_cast<size_t>(st.st_size);
  void* m = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
  double frac = -1;
  if (m != MAP_FAILED) {
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE)), pages = (len + page - 1) / page;
    std::vector<unsigned char> v(pages);
    if (::mincore(m, len, v.data()) == 0) {
      size_t in = 0;
      for (unsigned char c : v) in += c & 1;
      frac = static_cast<double>(in) / static_cast<double>(pages);
    }
    ::munmap(m, len);
  }
  ::close(fd);
  return frac;
}

bool evict(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  const bool ok = ::fdatasync(fd) == 0 && ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
  ::close(fd);
  return ok;
}

// Sequential O_DIRECT read of the whole file; returns GB/s (0 on failure, with the reason in *why).
double direct_read_gbps(const std::string& path, std::string* why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT);
  if (fd < 0) {
    *why = std::string("O_DIRECT open: ") + std::strerror(errno);
    return 0;
  }
  constexpr size_t kBlock = size_t{64} << 20;
  void* buf = nullptr;
  if (::posix_memalign(&buf, 4096, kBlock) != 0) {
    ::close(fd);
    *why = "posix_memalign failed";
    return 0;
  }
  const auto t0 = Clock::now();
  size_t total = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buf, kBlock);
    if (n < 0) {
      *why = std::string("O_DIRECT read: ") + std::strerror(errno);
      break;
    }
    if (n == 0) break;
    total += static_cast<size_t>(n);
  }
  const double s = seconds_since(t0);
  std::free(buf);
  ::close(fd);
  return why->empty() && s > 0 ? static_cast<double>(total) / s / 1e9 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, out_dir;
  int layers = 16;
  bool keep = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--keep") {
      keep = true;
      continue;
    }
    if (i + 1 >= argc) return fail("missing value after " + a);
    const std::string v = argv[++i];
    if (a == "--dir") dir = v;
    else if (a == "--out") out_dir = v;
    else if (a == "--layers") layers = std::atoi(v.c_str());
    else return fail("unknown option " + a);
  }
  if (dir.empty() || out_dir.empty())
    return fail("usage: text_encoder_load_bench --dir DIR --out OUTDIR [--layers 16] [--keep]");
  vortex::TextEncoderConfig cfg = vortex::TextEncoderConfig::qwen3_vl_32b();
  if (layers < 1 || layers > cfg.num_layers) return fail("--layers must be in [1, 64]");
  std::error_code ec;
  if (fs::exists(dir, ec))
    return fail(dir + " exists; pass a new folder (the bench writes and removes only its own files)");
  auto specs = vortex::text_encoder_tensor_specs(cfg, layers);
  if (!specs.ok()) return fail(specs.status().to_string());
  int64_t layer_bytes = 0, file_bytes = 0;
  for (const auto& s : *specs) {
    const int64_t b = vortex::shape_numel(s.shape) * 2;
    file_bytes += b;
    if (s.name.find(".layers.") != std::string::npos) layer_bytes += b;
  }
  if (file_bytes > int64_t{20000000000}) return fail("the file would exceed the 20 GB disk budget; lower --layers");
  const fs::space_info sp =
      fs::space(fs::path(dir).parent_path().empty() ? fs::path(".") : fs::path(dir).parent_path(), ec);
  if (!ec && sp.available < static_cast<uintmax_t>(file_bytes) + (uintmax_t{2} << 30))
    return fail("not enough free disk for " + std::to_string(file_bytes / 1e9) + " GB");
  fs::create_directories(dir, ec);
  if (ec) return fail("cannot create " + dir + ": " + ec.message());
  const std::string st_path = dir + "/model.safetensors", cfg_path = dir + "/config.json";
  auto cleanup = [&] {
    if (keep) return;
    fs::remove(st_path, ec);
    fs::remove(cfg_path, ec);
    fs::remove(dir, ec);
  };

  // 1. write
  std::fprintf(stderr, "text_encoder_load_bench: writing %d layers (%.2f GB) to %s...\n", layers, file_bytes / 1e9,
               st_path.c_str());
  auto t0 = Clock::now();
  {
    std::vector<std::pair<std::string, vortex::Tensor>> tensors;
    for (const auto& s : *specs) {
      vortex::Tensor t = vortex::Tensor::empty(s.shape, vortex::DType::kBF16);
      if (vortex::Status st = vortex::fill_synthetic_host(t, vortex::synthetic_seed(3, s.name), s.scale, s.offset);
          !st.ok())
        return cleanup(), fail(st.to_string());
      tensors.emplace_back(s.name, std::move(t));
    }
    if (vortex::Status st = vortex::write_safetensors(st_path, tensors); !st.ok())
      return cleanup(), fail(st.to_string());
  }
  nlohmann::json text = {{"model_type", "qwen3_vl_text"},
                         {"hidden_size", cfg.hidden},
                         {"num_hidden_layers", cfg.num_layers},
                         {"num_attention_heads", cfg.num_heads},
                         {"num_key_value_heads", cfg.num_kv_heads},
                         {"head_dim", cfg.head_dim},
                         {"intermediate_size", cfg.ffn},
                         {"vocab_size", cfg.vocab},
                         {"rms_norm_eps", cfg.rms_norm_eps},
                         {"rope_parameters",
                          {{"rope_type", "default"},
                           {"rope_theta", cfg.rope_theta},
                           {"mrope_section", cfg.mrope_section},
                           {"mrope_interleaved", true}}}};
  {
    std::ofstream f(cfg_path);
    f << nlohmann::json{{"architectures", {"Qwen3VLForConditionalGeneration"}},
                        {"model_type", "qwen3_vl"},
                        {"text_config", text}}
             .dump(1);
    if (!f) return cleanup(), fail("cannot write " + cfg_path);
  }
  const double write_s = seconds_since(t0);
  if (!evict(st_path)) std::fprintf(stderr, "text_encoder_load_bench: warning: could not evict the file's pages\n");
  const double resident_before_cold = residency(st_path);

  auto backend = vortex::make_backend("cuda", 0);
  if (!backend.ok()) return cleanup(), fail(backend.status().to_string());
  // 2. cold load
  t0 = Clock::now();
  double cold_s = 0, warm_s = 0;
  {
    auto enc = vortex::TextEncoder::load(dir, **backend, layers);
    if (!enc.ok()) return cleanup(), fail(enc.status().to_string());
    if (vortex::Status st = (*backend)->synchronize(); !st.ok()) return cleanup(), fail(st.to_string());
    cold_s = seconds_since(t0);
  }
  // 3. raw disk bandwidth on the same file
  std::string why;
  const double raw_gbps = direct_read_gbps(st_path, &why);
  // 4. warm load (the cold load left the file in the page cache)
  const double resident_before_warm = residency(st_path);
  t0 = Clock::now();
  {
    auto enc = vortex::TextEncoder::load(dir, **backend, layers);
    if (!enc.ok()) return cleanup(), fail(enc.status().to_string());
    if (vortex::Status st = (*backend)->synchronize(); !st.ok()) return cleanup(), fail(st.to_string());
    warm_s = seconds_since(t0);
  }
  cleanup();

  const double cold_gbps = layer_bytes / cold_s / 1e9, warm_gbps = layer_bytes / warm_s / 1e9;
  const double full50_gb = 0.0 + layer_bytes / static_cast<double>(layers) * vortex::kH3TextEncoderLayer / 1e9;
  const vortex::Backend::DeviceInfo di = (*backend)->device_info();
  vortex::RunEnvironment env = vortex::collect_environment(di.name, di.sm, di.runtime);
  vortex::Percentiles p;  // one cold load: p10 = p50 = p90
  p.p10 = p.p50 = p.p90 = p.p95 = p.mean = p.min = p.max = cold_s * 1e3;
  p.n = 1;
  nlohmann::json extra = {{"layers", layers},
                          {"layer_gb", layer_bytes / 1e9},
                          {"file_gb", file_bytes / 1e9},
                          {"write_s", write_s},
                          {"page_cache_resident_before_cold", resident_before_cold},
                          {"page_cache_resident_before_warm", resident_before_warm},
                          {"cold_load_s", cold_s},
                          {"cold_gbps", cold_gbps},
                          {"warm_load_s", warm_s},
                          {"warm_gbps", warm_gbps},
                          {"baseline", "O_DIRECT sequential read of the same file, 64 MB blocks"},
                          {"raw_disk_gbps", raw_gbps},
                          {"raw_disk_error", why},
                          {"ratio_cold_vs_raw", raw_gbps > 0 ? cold_gbps / raw_gbps : 0.0},
                          {"projected_50_layer_gb", full50_gb},
                          {"projected_50_layer_cold_s", full50_gb / cold_gbps}};
  const nlohmann::json row = vortex::evidence_row(env, "text_encoder_load", "vortex_textencoder_load",
                                                  std::to_string(layers) + " layers", p, {}, extra);
  const std::string path = vortex::evidence_path(out_dir, env, "text-encoder-load");
  if (vortex::Status st = vortex::append_jsonl(path, {row}); !st.ok()) return fail(st.to_string());
  std::printf("%-34s %8s %8s\n", "conditioner load", "seconds", "GB/s");
  std::printf("%-34s %8.2f %8.2f  (%.0f%% of the file cached before)\n", "vortex cold (fadvise-evicted)", cold_s,
              cold_gbps, resident_before_cold * 100);
  std::printf("%-34s %8s %8.2f  %s\n", "disk raw O_DIRECT sequential", "", raw_gbps, why.c_str());
  std::printf("%-34s %8.2f %8.2f  (%.0f%% cached)\n", "vortex warm (page cache)", warm_s, warm_gbps,
              resident_before_warm * 100);
  std::printf("cold / raw = %.2f; 50 layers = %.1f GB -> %.1f s at the cold rate\nevidence: %s\n",
              raw_gbps > 0 ? cold_gbps / raw_gbps : 0.0, full50_gb, full50_gb / cold_gbps, path.c_str());
  return 0;
}
