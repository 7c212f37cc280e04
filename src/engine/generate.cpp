// `generate` (see generate.h): validate -> memory estimate -> out dir -> backend -> weights -> text ->
// pack -> noise -> sample -> outputs. Every check that can fail cheaply (arguments, text finiteness,
// memory, whether --out may be written or replaced) runs before weights are loaded. Outputs go to a
// sibling directory `<out>.partial-<pid>`, created up front (it proves --out writable) and renamed onto
// `<out>` only when all four files are written, so a failed run never leaves half a result. --overwrite
// replaces only a directory that holds a Vortex run and nothing else. Tested end to end in
// tests/cli/cli_test.cpp.
#include "engine/generate.h"
#include "engine/precision.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>

#include "core/rng.h"
#include "engine/memory_estimate.h"
#include "engine/preview.h"
#include "engine/run_manifest.h"
#include "profiling/evidence.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/h3_model.h"
#include "model/h3_spec.h"

namespace vortex {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

constexpr int kMaxSteps = 1000;
constexpr int kMaxSyntheticTextRows = 4096;
// Packed rows per request: 50x the canonical 37,810 (the seeds' long shape is ~74K). Beyond this a
// request is a typo (e.g. --frames 100000) that would only end in an out-of-memory kill.
constexpr int64_t kMaxPackedRows = 2'000'000;
// Pixels per side: 6x the canonical 1344. Larger is a typo (--width 1048576) that would otherwise pass
// the row limit for a small config and then spend minutes before failing.
constexpr int kMaxSidePixels = 8192;
// A CPU run estimated above this many seconds gets a warning with the estimate.
constexpr double kSlowCpuRunSeconds = 3600.0;

// Removes a temp directory on scope exit unless released.
class TempDirGuard {
 public:
  explicit TempDirGuard(fs::path p) : path_(std::move(p)) {}
  ~TempDirGuard() {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  void release() { path_.clear(); }
  TempDirGuard(const TempDirGuard&) = delete;
  TempDirGuard& operator=(const TempDirGuard&) = delete;

 private:
  fs::path path_;
};

Status validate_request_fields(const GenerateRequest& r) {
  if (r.out_dir.empty()) return invalid_argument("--out is required: the directory the outputs are written to");
  if (r.checkpoint_path.empty() && !r.synthetic_weights) {
    return invalid_argument("no weights: pass --checkpoint FILE, or --synthetic for deterministic synthetic weights "
                            "of --config " + r.config_name);
  }
  if (!r.checkpoint_path.empty() && r.synthetic_weights) {
    return invalid_argument("--checkpoint and --synthetic exclude each other: synthetic weights come from --config");
  }
  if (r.steps < 1 || r.steps > kMaxSteps) {
    return invalid_argument("--steps must be in [1, " + std::to_string(kMaxSteps) + "], got " + std::to_string(r.steps));
  }
  if (r.threads < 0) return invalid_argument("--threads must be >= 0 (0 = all cores), got " + std::to_string(r.threads));
  if (r.threads > max_cpu_threads()) {
    return invalid_argument("--threads " + std::to_string(r.threads) + " is more than " +
                            std::to_string(kMaxThreadsPerCore) + "x this machine's " +
                            std::to_string(max_cpu_threads() / kMaxThreadsPerCore) + " cores; use at most " +
                            std::to_string(max_cpu_threads()) + " (0 = all cores)");
  }
  if (r.width <= 0 || r.height <= 0) {
    return invalid_argument("--width/--height must be positive multiples of 32, got " + std::to_string(r.width) + "x" +
                            std::to_string(r.height));
  }
  if (r.width > kMaxSidePixels || r.height > kMaxSidePixels) {
    return invalid_argument("--width/--height must be at most " + std::to_string(kMaxSidePixels) + " pixels, got " +
                            std::to_string(r.width) + "x" + std::to_string(r.height));
  }
  if (r.frames <= 0) return invalid_argument("--frames must be positive, got " + std::to_string(r.frames));
  if (r.text_embeddings_path.empty() && (r.synthetic_text_rows < 1 || r.synthetic_text_rows > kMaxSyntheticTextRows)) {
    return invalid_argument("--synthetic-text must be in [1, " + std::to_string(kMaxSyntheticTextRows) + "] rows, got " +
                            std::to_string(r.synthetic_text_rows));
  }
  if (r.backend != "cpu" && r.backend != "cuda") {
    return invalid_argument("--backend must be cpu or cuda, got '" + r.backend + "'");
  }
  if (!is_precision_name(r.exec.precision)) {
    return invalid_argument("--precision must be one of " + std::string(precision_names_help()) + ", got '" +
                            r.exec.precision + "'");
  }
  if (r.exec.attention != "sdpa" && r.exec.attention != "sage2") {
    return invalid_argument("--attention must be sdpa or sage2, got '" + r.exec.attention + "'");
  }
  if (r.backend == "cpu" && ((r.exec.precision != "bf16" && r.exec.precision != "nvfp4-weight-only") ||
                              r.exec.attention != "sdpa")) {
    return unsupported("the cpu backend runs BF16 GEMMs only: use --precision bf16 (or nvfp4-weight-only) --attention sdpa "
                       "(fp8/nvfp4/sage2 are approximate CUDA modes, --backend cuda)");
  }
  return Status::Ok();
}

// Absolute, normalized, without a trailing separator ("out/" -> "/abs/out"), so that the staging
// directory "<out>.partial-<pid>" is a sibling of out, never a child.
fs::path normalized_out_path(const std::string& out_dir) {
  fs::path out = fs::absolute(fs::path(out_dir)).lexically_normal();
  while (out.has_parent_path() && out.filename().empty() && out != out.root_path()) out = out.parent_path();
  return out;
}

bool is_same_or_ancestor(const fs::path& a, const fs::path& b) {  // a == b, or a is a parent of b
  auto ai = a.begin(), bi = b.begin();
  for (; ai != a.end(); ++ai, ++bi) {
    if (ai->empty()) continue;  // trailing separator
    if (bi == b.end() || *ai != *bi) return false;
  }
  return true;
}

fs::path resolved(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p : c;
}

// Places --out may never name, even with --overwrite: replacing one would take the caller's own files.
Status check_out_location(const fs::path& out, const std::string& shown) {
  const fs::path target = resolved(out);
  if (target == target.root_path()) return invalid_argument("--out " + shown + " is the root directory; choose a new directory");
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0' && target == resolved(home)) {
    return invalid_argument("--out " + shown + " is your home directory; choose a new directory");
  }
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  if (!ec && is_same_or_ancestor(target, resolved(cwd))) {
    return invalid_argument("--out " + shown + (target == resolved(cwd) ? " is the current directory"
                                                                        : " is an ancestor of the current directory") +
                            "; choose a new directory, e.g. --out out/run1");
  }
  return Status::Ok();
}

}  // namespace

Status check_replaceable_run_dir(const std::string& dir) {
  const fs::path d(dir);
  const fs::path manifest = d / "run.json";
  std::error_code ec;
  const auto manifest_status = fs::symlink_status(manifest, ec);
  const std::string refuse = "; --overwrite replaces only a directory written by vortex generate (a run.json and "
                             "the files it lists, nothing else). Move your files or choose another --out";
  if (!fs::is_regular_file(manifest_status)) {
    return invalid_argument("--out " + dir + " is not empty and has no run.json: Vortex did not write it" + refuse);
  }
  std::ifstream f(manifest, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const nlohmann::json run = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  const auto schema = run.is_object() ? run.find("schema") : run.end();
  if (!run.is_object() || schema == run.end() || !schema->is_string() ||
      schema->get<std::string>().rfind("vortex.run/", 0) != 0) {
    return invalid_argument("--out " + dir + "/run.json is not a Vortex run manifest (no \"schema\": \"vortex.run/...\")" +
                            refuse);
  }
  const auto outputs = run.find("outputs");
  for (const fs::directory_entry& e : fs::directory_iterator(d, ec)) {
    const std::string name = e.path().filename().string();
    const bool listed = name == "run.json" || (outputs != run.end() && outputs->is_object() && outputs->contains(name));
    if (!listed) return invalid_argument("--out " + dir + " holds '" + name + "', which its run.json does not list" + refuse);
    if (!fs::is_regular_file(e.symlink_status(ec))) {
      return invalid_argument("--out " + dir + ": '" + name + "' is not a regular file" + refuse);
    }
  }
  if (ec) return io_error("cannot list --out " + dir + ": " + ec.message());
  return Status::Ok();
}

namespace {

// The out directory may not exist, may be empty, or (with --overwrite) may hold a previous Vortex run.
Status check_out_dir(const GenerateRequest& r) {
  const fs::path out = normalized_out_path(r.out_dir);
  VORTEX_RETURN_IF_ERROR(check_out_location(out, r.out_dir));
  std::error_code ec;
  const auto st = fs::symlink_status(out, ec);
  if (fs::is_symlink(st)) {
    return invalid_argument("--out " + r.out_dir + " is a symbolic link; pass the directory itself or a new path");
  }
  if (fs::exists(st)) {
    if (!fs::is_directory(st)) {
      return invalid_argument("--out " + r.out_dir + " exists and is not a directory; choose another path");
    }
    if (!fs::is_empty(out, ec)) {
      if (!r.overwrite) {
        return invalid_argument("--out " + r.out_dir + " exists and is not empty; pass --overwrite to replace a "
                                "previous Vortex run there, or choose another directory");
      }
      VORTEX_RETURN_IF_ERROR(check_replaceable_run_dir(out.string()));
    }
  }
  const fs::path parent = out.parent_path();
  if (!parent.empty() && !fs::exists(parent, ec)) {
    fs::create_directories(parent, ec);
    if (ec) {
      return invalid_argument("--out " + r.out_dir + ": cannot create the parent directory " + parent.string() + " (" +
                              ec.message() + "); choose a writable location");
    }
  }
  return Status::Ok();
}

// Creates the staging directory `<out>.partial-<pid>[-n]` next to --out: this is also the check that
// --out's parent is writable, made before any weight is loaded. Never reuses an existing directory.
Result<fs::path> create_staging_dir(const fs::path& out, const std::string& shown) {
  for (int n = 0; n < 100; ++n) {
    std::string suffix = ".partial-";  // (appends: GCC 12 warns -Wrestrict on "-" + std::string)
    suffix.append(std::to_string(::getpid()));
    if (n > 0) suffix.append("-").append(std::to_string(n));
    fs::path p = out;
    p += suffix;
    std::error_code ec;
    if (fs::create_directory(p, ec)) return p;
    if (ec) {
      return invalid_argument("--out " + shown + " cannot be written: creating " + p.string() + " failed (" +
                              ec.message() + "); choose a writable location");
    }
  }
  return invalid_argument("--out " + shown + ": 100 staging directories " + out.string() +
                          ".partial-* already exist; remove the stale ones");
}

// Text conditioning from a safetensors file: exactly one 2-D tensor, width text_dim or hidden, f32/bf16.
Result<Tensor> load_text_embeddings(const std::string& path, const ModelConfig& cfg) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return not_found("--text-embeddings " + path + " does not exist (pass a safetensors file with one [L, " +
                     std::to_string(cfg.text_dim) + "] tensor, or use --synthetic-text N)");
  }
  VORTEX_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(path));
  if (file.entries().size() != 1) {
    return invalid_argument("--text-embeddings " + path + " holds " + std::to_string(file.entries().size()) +
                            " tensors; it must hold exactly one 2-D tensor [L, " + std::to_string(cfg.text_dim) +
                            "] (Qwen3-VL layer-50 states) or [L, " + std::to_string(cfg.hidden) + "] (refined)");
  }
  const std::string name = file.entries().front().name;
  VORTEX_ASSIGN_OR_RETURN(Tensor t, file.tensor(name));
  if (t.ndim() != 2) {
    return invalid_argument("--text-embeddings " + path + ": tensor '" + name + "' is " + t.describe() +
                            "; it must be 2-D [L, " + std::to_string(cfg.text_dim) + "] or [L, " +
                            std::to_string(cfg.hidden) + "]");
  }
  if (t.dim(1) != cfg.text_dim && t.dim(1) != cfg.hidden) {
    return invalid_argument("--text-embeddings " + path + ": tensor '" + name + "' has width " +
                            std::to_string(t.dim(1)) + "; config " + cfg.name + " expects text_dim " +
                            std::to_string(cfg.text_dim) + " (raw text-encoder states) or hidden " +
                            std::to_string(cfg.hidden) + " (already refined)");
  }
  if (t.dtype() != DType::kF32 && t.dtype() != DType::kBF16) {
    return invalid_argument("--text-embeddings " + path + ": tensor '" + name + "' is " + t.describe() +
                            "; only f32 and bf16 are accepted");
  }
  if (t.dim(0) < 1) return invalid_argument("--text-embeddings " + path + ": tensor '" + name + "' has no rows");
  if (!t.is_contiguous()) return internal_error("--text-embeddings " + path + ": non-contiguous mapping view");
  // A NaN/Inf here would surface only as a non-finite velocity after the first step.
  const int64_t n = t.numel(), cols = t.dim(1);
  int64_t bad = 0, first = -1;
  if (t.dtype() == DType::kF32) {
    const float* v = t.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(v[i]) && bad++ == 0) first = i;
    }
  } else {
    const uint16_t* v = static_cast<const uint16_t*>(t.raw_data());  // bf16 bits: exponent all ones = inf/NaN
    for (int64_t i = 0; i < n; ++i) {
      if ((v[i] & 0x7F80) == 0x7F80 && bad++ == 0) first = i;
    }
  }
  if (bad > 0) {
    return invalid_argument("--text-embeddings " + path + ": tensor '" + name + "' has " + std::to_string(bad) +
                            " non-finite (NaN/Inf) value" + (bad > 1 ? "s" : "") + ", the first at row " +
                            std::to_string(first / cols) + ", column " + std::to_string(first % cols) +
                            "; regenerate the embeddings");
  }
  return t;
}

Tensor latents_tensor(const std::vector<float>& values, Shape shape) {
  Tensor t = Tensor::empty(std::move(shape), DType::kF32);
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

// Removes a replaced run directory: only the files its check allowed (run.json and what it lists), then
// the directory itself if nothing else appeared in the meantime.
void remove_replaced_run(const fs::path& aside) {
  std::error_code ec;
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(aside, ec)) {
    if (fs::is_regular_file(e.symlink_status(ec))) files.push_back(e.path());
  }
  for (const fs::path& f : files) fs::remove(f, ec);
  fs::remove(aside, ec);  // fails, keeping it, if it is not empty
}

// Puts `staged` at `out`. An existing `out` is checked again (empty, or a Vortex run with --overwrite),
// moved aside, and deleted only once the new directory is in place; restored if the final rename fails.
Status publish_outputs(const fs::path& staged, const fs::path& out, bool overwrite) {
  std::error_code ec;
  fs::path aside;
  if (fs::exists(fs::symlink_status(out, ec))) {
    if (!fs::is_empty(out, ec)) {
      if (!overwrite) return invalid_argument(out.string() + " was filled by something else during the run; not replacing it");
      VORTEX_RETURN_IF_ERROR(check_replaceable_run_dir(out.string()));
    }
    aside = out;
    aside += ".old-" + std::to_string(::getpid());
    if (fs::exists(fs::symlink_status(aside, ec))) {
      return io_error("cannot move the existing " + out.string() + " aside: " + aside.string() + " exists");
    }
    fs::rename(out, aside, ec);
    if (ec) return io_error("cannot move the existing " + out.string() + " aside: " + ec.message());
  }
  fs::rename(staged, out, ec);
  if (ec) {
    std::error_code ec2;
    if (!aside.empty()) fs::rename(aside, out, ec2);
    return io_error("cannot rename " + staged.string() + " to " + out.string() + ": " + ec.message());
  }
  if (!aside.empty()) remove_replaced_run(aside);  // best effort: the new outputs are already in place
  return Status::Ok();
}

// Bytes the weights occupy once loaded: the config's spec (BF16 program) for synthetic weights, the
// file's tensors for a checkpoint (a quantized one stays small unless nvfp4-weight-only expands it).
Result<uint64_t> weights_bytes_as_loaded(const GenerateRequest& req, const ModelConfig& cfg) {
  const uint64_t spec = static_cast<uint64_t>(h3_total_bytes(cfg));
  if (req.checkpoint_path.empty() || req.exec.precision == "nvfp4-weight-only") return spec;
  VORTEX_ASSIGN_OR_RETURN(std::string file, resolve_checkpoint_path(req.checkpoint_path));  // a folder's index
  Result<SafetensorsSet> set = SafetensorsSet::open(file);
  if (!set.ok()) return with_checkpoint_advice(set.status(), req.checkpoint_path);
  uint64_t bytes = 0;
  for (const std::string& name : set->names()) bytes += set->entry(*set->find(name)).bytes();
  return bytes;
}

Status check_fits(const MemoryEstimate& need, std::optional<uint64_t> available, const std::string& what,
                  const GenerateRequest& req, const ModelConfig& cfg, const RequestGeometry& geo) {
  if (!available || need.total() <= *available) return Status::Ok();
  return invalid_argument("not enough memory: " + cfg.name + " at " + std::to_string(geo.width) + "x" +
                          std::to_string(geo.height) + ", " + std::to_string(geo.frames) + " frames needs about " +
                          format_gb(need.total()) + " (" + need.largest(3) + ") but only " + format_gb(*available) +
                          " of " + what + " is available; use a smaller config or request" +
                          (req.backend == "cpu" ? " (the h3 model needs a GPU: --backend cuda)" : ""));
}

}  // namespace

uint64_t synthetic_text_seed(uint64_t seed) { return seed ^ 0x7465787400000000ull; }

Status with_checkpoint_advice(const Status& status, const std::string& checkpoint_path) {
  // The loader's advice names --config, but with --checkpoint the config comes from the checkpoint.
  static const std::string kConfigAdvice = ". Check --config (or the config.json next to the checkpoint)";
  std::string m = status.message();
  const size_t at = m.find(kConfigAdvice);
  if (at == std::string::npos) return status;
  std::error_code ec;
  const fs::path abs = fs::absolute(checkpoint_path, ec);
  const fs::path config_json = (fs::is_directory(abs, ec) ? abs : abs.parent_path()) / "config.json";
  const std::string advice =
      fs::exists(config_json, ec)
          ? ". Check the checkpoint's config.json (" + config_json.string() + "): it does not describe these weights"
          : ". The config was inferred from the checkpoint's tensor shapes (no config.json beside it): put the "
            "model's config.json next to the checkpoint";
  m.replace(at, kConfigAdvice.size(), advice);
  return Status(status.code(), m);
}

Tensor synthetic_text_states(const ModelConfig& cfg, int rows, uint64_t seed) {
  Tensor text = Tensor::empty({rows, cfg.text_dim}, DType::kF32);  // [L, text_dim] f32
  gaussian_noise(synthetic_text_seed(seed), 0, text.data<float>(), static_cast<size_t>(text.numel()));
  return text;
}

AvLatents initial_noise(const ModelConfig& cfg, const RequestGeometry& geo, uint64_t seed) {
  const size_t video_n = static_cast<size_t>(cfg.in_channels) * geo.latent_frames * geo.latent_h * geo.latent_w;
  const size_t audio_n = static_cast<size_t>(2) * cfg.audio_in_channels * geo.audio_latents;
  AvLatents noise;
  noise.video.resize(video_n);  // [24, T, H/16, W/16] flattened
  noise.audio.resize(audio_n);  // [2, 32, Ta] flattened
  gaussian_noise(seed, 0, noise.video.data(), video_n);
  gaussian_noise(seed, video_n, noise.audio.data(), audio_n);
  return noise;
}

const char* default_sampler_for_schedule(AvScheduleMode mode) {
  return mode == AvScheduleMode::kDiffusers ? "euler" : "res_multistep";
}

Result<GenerateResult> generate(const GenerateRequest& req, ProgressSink& progress) {
  const auto t_start = Clock::now();
  // ---- 1. cheap validation: arguments, config, text, geometry, out dir, backend ----
  VORTEX_RETURN_IF_ERROR(validate_request_fields(req));
  VORTEX_ASSIGN_OR_RETURN(AvScheduleMode schedule_mode, av_schedule_mode_from_name(req.schedule));
  const std::string sampler_name = req.sampler.empty() ? default_sampler_for_schedule(schedule_mode) : req.sampler;
  VORTEX_ASSIGN_OR_RETURN(SamplerKind sampler_kind, sampler_kind_from_name(sampler_name));
  int frames = req.frames;
  if (req.seconds != 0.0) {
    VORTEX_ASSIGN_OR_RETURN(frames, frames_for_seconds(req.seconds));
  }

  ModelConfig cfg;
  if (!req.checkpoint_path.empty()) {
    std::error_code ec;
    if (!fs::exists(req.checkpoint_path, ec)) {
      return not_found("--checkpoint " + req.checkpoint_path + " does not exist");
    }
    Result<ModelConfig> from_checkpoint = config_for_checkpoint(req.checkpoint_path);
    if (!from_checkpoint.ok()) return with_checkpoint_advice(from_checkpoint.status(), req.checkpoint_path);
    cfg = *from_checkpoint;
  } else {
    VORTEX_ASSIGN_OR_RETURN(cfg, ModelConfig::by_name(req.config_name));
  }
  VORTEX_RETURN_IF_ERROR(cfg.validate());

  Tensor text;  // host [L, text_dim] or [L, hidden], f32 or bf16
  if (!req.text_embeddings_path.empty()) {
    VORTEX_ASSIGN_OR_RETURN(text, load_text_embeddings(req.text_embeddings_path, cfg));
  } else {
    text = synthetic_text_states(cfg, req.synthetic_text_rows, req.seed);
  }
  VORTEX_ASSIGN_OR_RETURN(RequestGeometry geo, make_geometry(cfg, req.width, req.height, frames, text.dim(0)));
  if (req.seconds != 0.0) {
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%g", req.seconds);
    progress.note(std::string(secs) + " s at 24 fps -> " + std::to_string(geo.frames) +
                  " frames (the next 17n + 5 at or above " + std::to_string(static_cast<int>(std::ceil(req.seconds * 24.0))) + ")");
  } else if (geo.frames != req.frames) {
    progress.note("frames " + std::to_string(req.frames) + " snapped up to " + std::to_string(geo.frames) +
                  ": the video VAE decodes 17n + 5 frames (as diffusers' align_num_frames)");
  }
  if (geo.total_rows() > kMaxPackedRows) {
    return invalid_argument("request too large: " + std::to_string(geo.total_rows()) + " packed rows (" +
                            std::to_string(geo.width) + "x" + std::to_string(geo.height) + ", " +
                            std::to_string(geo.frames) + " frames); the limit is " + std::to_string(kMaxPackedRows) +
                            ", reduce the size or the frame count");
  }
  const int workers = req.threads > 0 ? req.threads : max_cpu_threads() / kMaxThreadsPerCore;
  MemoryEstimateOptions mem_opt;
  mem_opt.cpu_backend = req.backend == "cpu";
  mem_opt.threads = workers;
  VORTEX_ASSIGN_OR_RETURN(mem_opt.weights_bytes, weights_bytes_as_loaded(req, cfg));
  const MemoryEstimate memory = estimate_memory(cfg, geo, mem_opt);
  if (req.backend == "cpu") {
    VORTEX_RETURN_IF_ERROR(check_fits(memory, available_host_memory(), "host memory", req, cfg, geo));
    const double cpu_seconds = estimate_cpu_seconds(cfg, geo, req.steps, workers);
    if (cpu_seconds > kSlowCpuRunSeconds) {
      char line[256];
      std::snprintf(line, sizeof line,
                    "this CPU run is estimated at %.1f hours (%.3g FLOP per step x %d steps on %d threads at %.2f "
                    "GFLOP/s each); --backend cuda or a smaller request is faster",
                    cpu_seconds / 3600.0, forward_flops(cfg, geo), req.steps, workers, kCpuFlopsPerThread / 1e9);
      progress.warning(line);
    }
  }
  VORTEX_ASSIGN_OR_RETURN(PackedLayout layout, pack_request(cfg, geo));
  VORTEX_RETURN_IF_ERROR(check_out_dir(req));

  SamplerSpec spec;
  spec.kind = sampler_kind;
  spec.mode = schedule_mode;
  spec.steps = req.steps;
  spec.video_shift = req.video_shift > 0.0 ? req.video_shift : cfg.video_shift;
  spec.audio_shift = req.audio_shift > 0.0 ? req.audio_shift : cfg.audio_shift;
  VORTEX_ASSIGN_OR_RETURN(AvSchedule schedule, make_av_schedule(spec));

  Result<std::unique_ptr<Backend>> made = make_backend(req.backend, req.threads);
  if (!made.ok()) {
    // No CUDA build or device is this machine's limitation, not bad input: a runtime failure.
    if (made.status().code() == ErrorCode::kUnsupported) return Status(ErrorCode::kCuda, made.status().message());
    return made.status();
  }
  std::unique_ptr<Backend> backend = std::move(*made);
  if (req.backend != "cpu") {
    VORTEX_RETURN_IF_ERROR(check_fits(memory, backend->free_device_memory(), "free GPU memory", req, cfg, geo));
  }

  // The staging directory, created now so an unwritable --out fails before the weights are loaded.
  const fs::path out = normalized_out_path(req.out_dir);
  VORTEX_ASSIGN_OR_RETURN(const fs::path staged, create_staging_dir(out, req.out_dir));
  TempDirGuard guard(staged);
  // Fusion switches follow the backend's policy table (on only where the gate passed on this arch).
  ExecOptions exec = req.exec;
  const ExecOptions policy = backend->default_options();
  exec.fused_norm_modulate = policy.fused_norm_modulate;
  exec.fused_gate_add = policy.fused_gate_add;
  exec.fused_nvfp4_producers = policy.fused_nvfp4_producers;  // precision nvfp4 only; off until gated

  // ---- 2. weights and per-request preparation ----
  progress.stage(req.synthetic_weights ? "synthesizing weights" : "loading weights");
  const auto t_load = Clock::now();
  H3Weights weights;
  if (req.synthetic_weights) {
    VORTEX_ASSIGN_OR_RETURN(weights, synthesize_weights(cfg, *backend, req.weights_seed));
  } else {
    std::vector<std::string> load_notes;  // dtype conversions of a diffusers folder
    Result<H3Weights> loaded = load_checkpoint(req.checkpoint_path, cfg, *backend, CheckpointLayout::kAuto, &load_notes);
    for (const std::string& n : load_notes) progress.note(n);
    if (!loaded.ok()) return with_checkpoint_advice(loaded.status(), req.checkpoint_path);
    weights = std::move(*loaded);
  }
  // LoRA adapters: merged into the BF16 weights (then quantized by apply_precision) or run-time branches.
  nlohmann::ordered_json lora_manifest = nlohmann::ordered_json::array();
  if (!req.loras.empty()) {
    progress.stage("applying LoRA adapters");
    LoraApplyOptions lora_options;
    lora_options.allow_unmatched = req.lora_allow_unmatched;
    lora_options.mode = req.lora_mode;
    lora_options.precision = exec.precision;
    VORTEX_RETURN_IF_ERROR(apply_lora_adapters(
        weights, req.loras, lora_options, cfg, *backend, [&](std::string_view m) { progress.note(m); },
        [&](std::string_view m) { progress.warning(m); }, &lora_manifest));
  }
  VORTEX_RETURN_IF_ERROR(backend->synchronize());
  const double load_seconds = seconds_since(t_load);

  progress.stage("preparing text and positions");
  const auto t_prepare = Clock::now();
  VORTEX_RETURN_IF_ERROR(apply_precision(weights, *backend, exec.precision));
  H3Model model(cfg, *backend, std::move(weights), exec);
  VORTEX_RETURN_IF_ERROR(model.prepare(layout, text));
  const double prepare_seconds = seconds_since(t_prepare);

  // ---- 3. sampling ----
  progress.stage("sampling");
  AvLatents noise = initial_noise(cfg, geo, req.seed);
  GenerateResult result;
  result.geometry = geo;
  const auto t_sample = Clock::now();
  auto t_mark = t_sample;
  DenoiseFn denoise = [&model](const AvLatents& x, double sigma_v, double sigma_a, int) {
    return model.forward(x, sigma_v, sigma_a);
  };
  StepCallback on_step = [&](int, int total) {
    const auto now = Clock::now();
    const double dt = std::chrono::duration<double>(now - t_mark).count();
    t_mark = now;
    result.step_seconds.push_back(dt);
    progress.step(static_cast<int>(result.step_seconds.size()), total, dt, seconds_since(t_sample));
  };
  VORTEX_ASSIGN_OR_RETURN(AvLatents final_latents, sample_av(spec, std::move(noise), denoise, on_step));
  result.sampling_seconds = seconds_since(t_sample);
  const size_t video_n = static_cast<size_t>(cfg.in_channels) * geo.latent_frames * geo.latent_h * geo.latent_w;
  const size_t audio_n = static_cast<size_t>(2) * cfg.audio_in_channels * geo.audio_latents;
  if (final_latents.video.size() != video_n || final_latents.audio.size() != audio_n) {
    return internal_error("sampler returned " + std::to_string(final_latents.video.size()) + " video / " +
                          std::to_string(final_latents.audio.size()) + " audio values, expected " +
                          std::to_string(video_n) + " / " + std::to_string(audio_n));
  }

  // ---- 4. outputs, staged in a sibling temp dir and renamed into place ----
  progress.stage("writing outputs");
  std::error_code ec;

  Tensor video = latents_tensor(final_latents.video,
                                {cfg.in_channels, geo.latent_frames, geo.latent_h, geo.latent_w});  // [24, T, H/16, W/16] f32
  Tensor audio = latents_tensor(final_latents.audio, {2, cfg.audio_in_channels, geo.audio_latents});  // [2, 32, Ta] f32
  const std::string video_file = "video_latents.safetensors";
  const std::string audio_file = "audio_latents.safetensors";
  const std::string preview_file = "preview.png";
  const std::string manifest_file = "run.json";
  VORTEX_RETURN_IF_ERROR(write_safetensors((staged / video_file).string(), {{"video_latents", video}}, {}));
  VORTEX_RETURN_IF_ERROR(write_safetensors((staged / audio_file).string(), {{"audio_latents", audio}}, {}));
  VORTEX_ASSIGN_OR_RETURN(PreviewImage preview, render_latent_preview(video));
  VORTEX_RETURN_IF_ERROR(write_png_rgb(preview, (staged / preview_file).string()));

  nlohmann::ordered_json outputs = nlohmann::ordered_json::object();
  auto describe_output = [&](const std::string& file, const nlohmann::ordered_json& extra) -> Status {
    VORTEX_ASSIGN_OR_RETURN(std::string sha, sha256_file((staged / file).string()));
    nlohmann::ordered_json entry = extra;
    entry["sha256"] = sha;
    entry["bytes"] = fs::file_size(staged / file, ec);
    outputs[file] = entry;
    return Status::Ok();
  };
  VORTEX_RETURN_IF_ERROR(describe_output(video_file, {{"tensor", "video_latents"}, {"dtype", "F32"},
                                                      {"shape", video.shape()}, {"layout", "[C, T, H/16, W/16]"}}));
  VORTEX_RETURN_IF_ERROR(describe_output(audio_file, {{"tensor", "audio_latents"}, {"dtype", "F32"},
                                                      {"shape", audio.shape()}, {"layout", "[2, C, Ta]"}}));
  VORTEX_RETURN_IF_ERROR(describe_output(preview_file, {{"width", preview.width}, {"height", preview.height},
                                                        {"frames_shown", preview_frame_indices(geo.latent_frames)},
                                                        {"note", "fixed linear latent->RGB map, NOT a VAE decode"}}));

  nlohmann::ordered_json text_sha = nullptr;
  if (!req.text_embeddings_path.empty()) {
    VORTEX_ASSIGN_OR_RETURN(std::string sha, sha256_file(req.text_embeddings_path));
    text_sha = sha;
  }
  nlohmann::ordered_json manifest;
  manifest["schema"] = "vortex.run/1";
  manifest["vortex"] = build_info_json();
  manifest["time_utc"] = utc_now_iso8601();
  manifest["host"] = host_name();
  manifest["request"] = {
      {"config", req.checkpoint_path.empty() ? req.config_name : cfg.name},
      {"checkpoint", req.checkpoint_path.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(req.checkpoint_path)},
      {"synthetic_weights", req.synthetic_weights},
      {"weights_seed", req.synthetic_weights ? nlohmann::ordered_json(req.weights_seed) : nlohmann::ordered_json(nullptr)},
      {"text_embeddings", req.text_embeddings_path.empty() ? nlohmann::ordered_json(nullptr)
                                                           : nlohmann::ordered_json(req.text_embeddings_path)},
      {"text_embeddings_sha256", text_sha},
      {"synthetic_text_rows", req.text_embeddings_path.empty() ? nlohmann::ordered_json(req.synthetic_text_rows)
                                                               : nlohmann::ordered_json(nullptr)},
      {"text_shape", text.shape()},
      {"text_dtype", dtype_name(text.dtype())},
      {"width", req.width},
      {"height", req.height},
      {"frames_requested", req.seconds != 0.0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(req.frames)},
      {"seconds_requested", req.seconds != 0.0 ? nlohmann::ordered_json(req.seconds) : nlohmann::ordered_json(nullptr)},
      {"steps", req.steps},
      {"sampler", sampler_kind_name(sampler_kind)},
      {"schedule", av_schedule_mode_name(schedule_mode)},
      {"seed", req.seed},
      {"backend", std::string(backend->name())},
      {"threads", req.threads},
      {"hardware_threads", std::thread::hardware_concurrency()},
      {"precision", req.exec.precision},
      {"attention", req.exec.attention},
      {"fused_norm_modulate", exec.fused_norm_modulate},
      {"fused_gate_add", exec.fused_gate_add}};
  manifest["noise"] = {{"contract", "gaussian_noise (src/core/rng.h): one stream of `seed`, video elements first, "
                                    "then audio"},
                       {"seed", req.seed},
                       {"video_offset", 0},
                       {"audio_offset", video_n},
                       {"synthetic_text_seed", req.text_embeddings_path.empty()
                                                   ? nlohmann::ordered_json(synthetic_text_seed(req.seed))
                                                   : nlohmann::ordered_json(nullptr)}};
  manifest["lora"] = lora_manifest;
  manifest["model_config"] = model_config_json(cfg);
  manifest["geometry"] = geometry_json(geo);
  manifest["schedule"] = {{"mode", av_schedule_mode_name(schedule_mode)},
                          {"video_shift", spec.video_shift},
                          {"audio_shift", spec.audio_shift},
                          {"sigma_video", schedule.sigma_video},
                          {"sigma_audio", schedule.sigma_audio},
                          {"timesteps_video", timesteps_from_sigmas_f32(schedule.sigma_video)},
                          {"timesteps_audio", timesteps_from_sigmas_f32(schedule.sigma_audio)}};
  manifest["outputs"] = outputs;
  result.total_seconds = seconds_since(t_start);
  manifest["timing"] = {{"load_weights_seconds", load_seconds},
                        {"prepare_seconds", prepare_seconds},
                        {"step_seconds", result.step_seconds},
                        {"sampling_seconds", result.sampling_seconds},
                        {"total_seconds", result.total_seconds}};
  VORTEX_RETURN_IF_ERROR(write_json_file(manifest, (staged / manifest_file).string()));

  VORTEX_RETURN_IF_ERROR(publish_outputs(staged, out, req.overwrite));
  guard.release();
  result.out_dir = out.string();
  result.files = {video_file, audio_file, preview_file, manifest_file};
  return result;
}

}  // namespace vortex
