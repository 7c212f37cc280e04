// Flow samplers for the H3 audio-video latents: sigma schedules (ComfyUI `simple` over
// ModelSamplingDiscreteFlow, and diffusers' MiniMaxH3Scheduler), the ModelSamplingAV audio mapping,
// and Euler / res_multistep (eta 0) in the ComfyUI and diffusers modes (research §4.1-4.4, §7.4).
// Both schedules are float32 programs reproduced operation by operation; RES coefficients are FP64;
// latents and all per-element updates are FP32 (host built with -ffp-contract=off, so every a*b+c below
// rounds twice, as written, unless std::fma says otherwise). Tested in tests/sampler/sampler_test.cpp and,
// bit for bit against diffusers' own tables, in tests/parity/schedule_parity_test.cpp.
#include "sampler/sampler.h"

#include <cmath>
#include <limits>
#include <string>

namespace vortex {
namespace {

// Number of grid sigmas ComfyUI's ModelSamplingDiscreteFlow registers (timesteps = 1000).
constexpr int kComfyFlowGridSize = 1000;

Status validate_shift(double shift, const char* what) {
  if (!std::isfinite(shift) || shift <= 0.0) {
    return invalid_argument(std::string(what) + " must be a finite positive number (got " + std::to_string(shift) +
                            "); typical H3 values are 12 (video) and 3 (audio)");
  }
  return Status::Ok();
}

Status validate_steps(int steps) {
  if (steps < 1) {
    return invalid_argument("sampler steps must be >= 1 (got " + std::to_string(steps) + ")");
  }
  if (steps > kComfyFlowGridSize) {
    return invalid_argument("sampler steps must be <= " + std::to_string(kComfyFlowGridSize) +
                            " (the flow sigma grid has that many entries; got " + std::to_string(steps) + ")");
  }
  return Status::Ok();
}

// ComfyUI time_snr_shift evaluated on a float32 tensor t: alpha * t / (1 + (alpha - 1) * t). The Python
// scalars alpha and alpha - 1 are doubles that PyTorch casts to float32 (the op math type) before each
// float32 operation; every operation rounds to float32.
float flow_shift_f32(float t, double shift) {
  if (shift == 1.0) return t;
  const float alpha = static_cast<float>(shift);
  const float alpha_minus_one = static_cast<float>(shift - 1.0);
  const float num = alpha * t;
  const float den_term = alpha_minus_one * t;
  const float den = 1.0f + den_term;
  return num / den;
}

// phi1(z) = (e^z - 1)/z and phi2(z) = (phi1(z) - 1)/z = (e^z - 1 - z)/z^2, evaluated stably. For
// |z| < 0.1 both use their Taylor series (phi1 = sum z^k/(k+1)!, phi2 = sum z^k/(k+2)!) to 12 terms:
// the first omitted term is below 0.1^12/13! ~ 1.6e-22, far under FP64 resolution, and the series
// avoids the catastrophic cancellation of (e^z - 1 - z) for small z. Otherwise expm1 keeps phi1 exact
// to a few ulps and phi2 = (expm1(z) - z)/z^2 loses at most ~1/|z| <= 10 ulps of relative accuracy.
// At z = 0 the limits 1 and 1/2 are returned (ComfyUI would produce NaN there and zero the b's).
void phi_functions(double z, double* phi1, double* phi2) {
  if (std::fabs(z) < 0.1) {
    double term1 = 1.0;  // z^k / (k+1)!
    double term2 = 0.5;  // z^k / (k+2)!
    double s1 = 0.0, s2 = 0.0;
    for (int k = 0; k < 12; ++k) {
      s1 += term1;
      s2 += term2;
      term1 = term1 * z / static_cast<double>(k + 2);
      term2 = term2 * z / static_cast<double>(k + 3);
    }
    *phi1 = s1;
    *phi2 = s2;
    return;
  }
  const double em1 = std::expm1(z);
  *phi1 = em1 / z;
  *phi2 = (em1 - z) / (z * z);
}

double nan_to_zero(double v) { return std::isnan(v) ? 0.0 : v; }

Status check_velocity(const std::vector<float>& v, size_t expected, const char* stream, int step) {
  if (v.size() != expected) {
    return invalid_argument(std::string("denoiser returned a ") + stream + " velocity of " + std::to_string(v.size()) +
                            " values at step " + std::to_string(step) + ", expected " + std::to_string(expected) +
                            " (the velocity must have the latent's size)");
  }
  for (size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i])) {
      return internal_error(std::string("denoiser returned a non-finite ") + stream + " velocity (" +
                            std::to_string(v[i]) + " at index " + std::to_string(i) + ", step " + std::to_string(step) +
                            "); check the model weights / backend numerics");
    }
  }
  return Status::Ok();
}

// One stream's sampler state: current x, the previous step's denoised prediction.
struct StreamState {
  std::vector<float> x;
  std::vector<float> old_denoised;
  bool has_old = false;
};

// ComfyUI Euler (k_diffusion to_d form): d = (x - D)/sigma; x = x + d * (sigma_next - sigma), FP32.
void euler_comfy(std::vector<float>& x, const std::vector<float>& denoised, double sigma, double sigma_next) {
  const float s = static_cast<float>(sigma);
  const float dt = static_cast<float>(sigma_next) - s;  // 0-dim float32 tensor arithmetic in ComfyUI
  for (size_t i = 0; i < x.size(); ++i) {
    const float diff = x[i] - denoised[i];
    const float d = diff / s;
    const float step = d * dt;
    x[i] = x[i] + step;
  }
}

// diffusers MiniMaxH3Scheduler.step (eta 0): ratio = sigma_next / sigma and 1 - ratio as 0-dim float32
// tensors, x_next = ratio * x + (1 - ratio) * D, each operation a float32 rounding.
void euler_blend_f32(std::vector<float>& x, const std::vector<float>& denoised, double sigma, double sigma_next) {
  const float r = static_cast<float>(sigma_next) / static_cast<float>(sigma);
  const float one_minus_r = 1.0f - r;
  for (size_t i = 0; i < x.size(); ++i) {
    const float a = r * x[i];
    const float b = one_minus_r * denoised[i];
    x[i] = a + b;
  }
}

// x = e^{-h} x + h (b1 D + b2 D_old), coefficients FP64 rounded once to FP32, ComfyUI's operation order.
void res_update(std::vector<float>& x, const std::vector<float>& denoised, const std::vector<float>& old_denoised,
                const ResCoefficients& c) {
  const float decay = static_cast<float>(c.exp_neg_h);
  const float h = static_cast<float>(c.h);
  const float b1 = static_cast<float>(c.b1);
  const float b2 = static_cast<float>(c.b2);
  for (size_t i = 0; i < x.size(); ++i) {
    const float t1 = b1 * denoised[i];
    const float t2 = b2 * old_denoised[i];
    const float mix = t1 + t2;
    const float a = decay * x[i];
    const float b = h * mix;
    x[i] = a + b;
  }
}

// One step of `kind` on a stream over (sigma_prev, sigma, sigma_next); `comfy_euler` picks the
// Euler formula. Updates the history (old_denoised) the way ComfyUI's res_multistep does.
void step_stream(SamplerKind kind, bool comfy_euler, StreamState& st, std::vector<float>& denoised, double sigma_prev,
                 double sigma, double sigma_next) {
  const bool first_order = kind == SamplerKind::kEuler || !st.has_old || sigma_next == 0.0;
  if (first_order) {
    if (comfy_euler) {
      euler_comfy(st.x, denoised, sigma, sigma_next);
    } else {
      euler_blend_f32(st.x, denoised, sigma, sigma_next);
    }
  } else {
    const ResCoefficients c = res_multistep_coefficients(sigma_prev, sigma, sigma_next);
    res_update(st.x, denoised, st.old_denoised, c);
  }
  st.old_denoised.swap(denoised);
  st.has_old = true;
}

}  // namespace

double flow_shift(double sigma, double shift) { return shift * sigma / (1.0 + (shift - 1.0) * sigma); }

std::vector<double> sigmas_comfy_simple(int steps, double shift) {
  // ModelSamplingDiscreteFlow.set_parameters: ts = sigma((arange(1, 1001) / 1000) * 1000), with
  // sigma(ts) = time_snr_shift(shift, ts / 1000). arange is int64; the true division promotes to the
  // default dtype float32, so the whole grid is float32: t_k = f32(f32(f32(k/1000) * 1000) / 1000),
  // then shift(t_k) in float32. The scheduler returns torch.FloatTensor (float32) values; we return
  // those float32 values widened to double. (Checked against Comfy-Org/ComfyUI comfy/model_sampling.py
  // and comfy/samplers.py simple_scheduler.)
  std::vector<double> out;
  if (steps < 1) return out;
  out.reserve(static_cast<size_t>(steps) + 1);
  for (int i = 0; i < steps; ++i) {
    // Python: int(x * len(sigmas) / steps) (older) or (arange(steps) * len / steps).long() (newer):
    // identical for steps <= 1000 because x*1000/steps is never within float32 rounding of an integer
    // without being one.
    const int idx = static_cast<int>(static_cast<int64_t>(i) * kComfyFlowGridSize / steps);
    const int k = kComfyFlowGridSize - idx;  // sigmas[-(1 + idx)] = sigmas[999 - idx] -> k = 1000 - idx
    const float t0 = static_cast<float>(k) / 1000.0f;
    const float t1 = t0 * 1000.0f;
    const float t = t1 / 1000.0f;
    out.push_back(static_cast<double>(flow_shift_f32(t, shift)));
  }
  out.push_back(0.0);
  return out;
}

std::vector<float> torch_linspace_f32(float start, float end, int64_t n) {
  // ATen's CPU linspace kernel (RangeFactoriesKernel.cpp) for float32: step = (end - start) / (n - 1) in
  // float32; the first n/2 points are start + step * i, the rest end - step * (n - 1 - i), each one fused
  // multiply-add (the kernel is compiled with FMA contraction: tests/parity/fixtures/schedules.json, made by
  // torch 2.15 on AVX512, matches this for every table and differs from the two-rounding form from n = 10).
  std::vector<float> out;
  if (n <= 0) return out;
  out.resize(static_cast<size_t>(n));
  if (n == 1) {
    out[0] = start;
    return out;
  }
  const float step = (end - start) / static_cast<float>(n - 1);
  const int64_t halfway = n / 2;
  for (int64_t i = 0; i < n; ++i) {
    out[static_cast<size_t>(i)] = i < halfway ? std::fma(step, static_cast<float>(i), start)
                                              : std::fma(-step, static_cast<float>(n - 1 - i), end);
  }
  return out;
}

std::vector<double> sigmas_diffusers(int steps, double shift) {
  // MiniMaxH3Scheduler.set_timesteps(steps + 1): base = torch.linspace(1, 0, steps + 1) in float32,
  // sigmas = shift * base / (1 + (shift - 1) * base) as float32 tensor operations, then
  // torch.unique_consecutive. `steps` counts model evaluations; diffusers' num_inference_steps counts
  // grid points including the terminal 0, i.e. steps + 1.
  std::vector<double> out;
  if (steps < 1) return out;
  const std::vector<float> base = torch_linspace_f32(1.0f, 0.0f, static_cast<int64_t>(steps) + 1);
  for (float b : base) {
    const double s = static_cast<double>(flow_shift_f32(b, shift));
    if (out.empty() || out.back() != s) out.push_back(s);
  }
  return out;
}

std::vector<float> timesteps_from_sigmas_f32(const std::vector<double>& sigmas) {
  // diffusers: timesteps = 1.0 - sigmas[:-1] (float32); the model and ComfyUI use the same t = 1 - sigma.
  std::vector<float> t;
  for (size_t i = 0; i + 1 < sigmas.size(); ++i) t.push_back(1.0f - static_cast<float>(sigmas[i]));
  return t;
}

float audio_sigma_from_video_f32(float sigma_v, double shift_v, double shift_a) {
  // comfy/ldm/minimax/model.py time_shift_sigma on the sampler's float32 sigma tensor: every operation a
  // float32 tensor op, the Python scalars cast to float32 first.
  const float from = static_cast<float>(shift_v), to = static_cast<float>(shift_a);
  const float one_minus_from = static_cast<float>(1.0 - shift_v);
  const float to_minus_one = static_cast<float>(shift_a - 1.0);
  const float den = from + sigma_v * one_minus_from;
  const float base = sigma_v / den;
  const float num = to * base;
  const float den2 = 1.0f + to_minus_one * base;
  return num / den2;
}

double audio_sigma_from_video(double sigma_v, double shift_v, double shift_a) {
  // ComfyUI time_shift_sigma: base = sigma / (s_v + sigma (1 - s_v)) inverts sigma = s_v b/(1+(s_v-1)b);
  // then sigma_a = s_a base / (1 + (s_a - 1) base).
  const double base = sigma_v / (shift_v + sigma_v * (1.0 - shift_v));
  return shift_a * base / (1.0 + (shift_a - 1.0) * base);
}

ResCoefficients res_multistep_coefficients(double sigma_prev, double sigma, double sigma_next) {
  // lambda(sigma) = -log(sigma) (ComfyUI t_fn); with eta 0 old_sigma_down == sigma, so
  // c2 = (lambda(sigma_prev) - lambda(sigma)) / h.
  ResCoefficients c;
  const double lam = -std::log(sigma);
  const double lam_next = -std::log(sigma_next);
  const double lam_prev = -std::log(sigma_prev);
  c.h = lam_next - lam;
  c.c2 = (lam_prev - lam) / c.h;
  double phi1 = 0.0, phi2 = 0.0;
  phi_functions(-c.h, &phi1, &phi2);
  c.exp_neg_h = std::exp(-c.h);
  c.b1 = nan_to_zero(phi1 - phi2 / c.c2);
  c.b2 = nan_to_zero(phi2 / c.c2);
  return c;
}

// The 4-step Turbo LoRA's published reference settings (model cards of lightx2v's
// 4-step file was trained at video shift 6; its users run audio shift 3, `euler` + `simple`, strength 1).
SamplerSpec SamplerSpec::turbo4() {
  SamplerSpec s;
  s.kind = SamplerKind::kEuler;
  s.mode = AvScheduleMode::kComfyParity;
  s.steps = 4;
  s.video_shift = 6.0;
  s.audio_shift = 3.0;
  return s;
}

Result<SamplerKind> sampler_kind_from_name(const std::string& name) {
  if (name == "euler") return SamplerKind::kEuler;
  if (name == "res_multistep") return SamplerKind::kResMultistep;
  return invalid_argument("unknown sampler '" + name + "': use 'euler' or 'res_multistep'");
}

const char* sampler_kind_name(SamplerKind kind) {
  switch (kind) {
    case SamplerKind::kEuler:
      return "euler";
    case SamplerKind::kResMultistep:
      return "res_multistep";
  }
  return "unknown";
}

Result<AvScheduleMode> av_schedule_mode_from_name(const std::string& name) {
  if (name == "comfyui") return AvScheduleMode::kComfyParity;
  if (name == "diffusers") return AvScheduleMode::kDiffusers;
  return invalid_argument("unknown schedule '" + name +
                          "': use 'comfyui' (ComfyUI ModelSamplingAV + simple) or 'diffusers' (MiniMaxH3Scheduler)");
}

const char* av_schedule_mode_name(AvScheduleMode mode) {
  switch (mode) {
    case AvScheduleMode::kComfyParity:
      return "comfyui";
    case AvScheduleMode::kDiffusers:
      return "diffusers";
  }
  return "unknown";
}

Result<AvSchedule> make_av_schedule(const SamplerSpec& spec) {
  VORTEX_RETURN_IF_ERROR(validate_steps(spec.steps));
  VORTEX_RETURN_IF_ERROR(validate_shift(spec.video_shift, "video shift"));
  VORTEX_RETURN_IF_ERROR(validate_shift(spec.audio_shift, "audio shift"));
  AvSchedule sched;
  if (spec.mode == AvScheduleMode::kComfyParity) {
    sched.sigma_video = sigmas_comfy_simple(spec.steps, spec.video_shift);
    sched.sigma_audio.reserve(sched.sigma_video.size());
    for (double sv : sched.sigma_video) {
      sched.sigma_audio.push_back(
          static_cast<double>(audio_sigma_from_video_f32(static_cast<float>(sv), spec.video_shift, spec.audio_shift)));
    }
  } else {
    sched.sigma_video = sigmas_diffusers(spec.steps, spec.video_shift);
    sched.sigma_audio = sigmas_diffusers(spec.steps, spec.audio_shift);
    if (sched.sigma_video.size() != sched.sigma_audio.size()) {
      return invalid_argument(
          "diffusers schedules for video shift " + std::to_string(spec.video_shift) + " and audio shift " +
          std::to_string(spec.audio_shift) + " have " + std::to_string(sched.sigma_video.size()) + " vs " +
          std::to_string(sched.sigma_audio.size()) + " distinct sigmas (duplicates removed); use fewer steps");
    }
  }
  for (size_t i = 0; i + 1 < sched.sigma_video.size(); ++i) {
    if (!(sched.sigma_video[i] > 0.0) || !(sched.sigma_audio[i] > 0.0)) {
      return internal_error("sigma schedule reached 0 before its last entry (step " + std::to_string(i) + ")");
    }
  }
  return sched;
}

Result<AvLatents> sample_av(const SamplerSpec& spec, AvLatents noise, const DenoiseFn& denoise,
                            const StepCallback& on_step) {
  VORTEX_ASSIGN_OR_RETURN(const AvSchedule sched, make_av_schedule(spec));
  return sample_av(spec, sched, std::move(noise), denoise, on_step);
}

Result<AvLatents> sample_av(const SamplerSpec& spec, const AvSchedule& sched, AvLatents noise, const DenoiseFn& denoise,
                            const StepCallback& on_step) {
  if (!denoise) return invalid_argument("sample_av needs a denoise callback");
  if (sched.sigma_video.size() < 2 || sched.sigma_audio.size() != sched.sigma_video.size())
    return invalid_argument("sample_av: the schedule has " + std::to_string(sched.sigma_video.size()) + " video and " +
                            std::to_string(sched.sigma_audio.size()) + " audio sigmas (make it with make_av_schedule)");
  const int steps = static_cast<int>(sched.sigma_video.size()) - 1;
  const size_t n_video = noise.video.size();
  const size_t n_audio = noise.audio.size();
  const bool parity = spec.mode == AvScheduleMode::kComfyParity;

  // ComfyUI-parity mode (ModelSamplingAV): one recursion on the video grid over [x_v, y], where the
  // carried audio y = (sigma_v/sigma_a) x_a. Derivation (k = shift_v/shift_a; both shifts map the same
  // base b: sigma_v = s_v b/(1+(s_v-1)b), sigma_a = s_a b/(1+(s_a-1)b)):
  //   x_a = (1 - sigma_a) x0_a + sigma_a n   =>   y = (sigma_v/sigma_a)(1 - sigma_a) x0_a + sigma_v n,
  //   and (sigma_v/sigma_a)(1 - sigma_a) = k (1 - sigma_v) (substitute b), so
  //   y = (1 - sigma_v) (k x0_a) + sigma_v n: an ordinary flow state on the video grid with clean end
  //   point k x0_a. Its denoised prediction is therefore D_y = k (x_a + sigma_a v_a) with v_a the model's
  //   data-ward audio velocity at (x_a, sigma_a). This equals ComfyUI's y - sigma_v out_y with
  //   out_y = (1-k) x_a + (1 + (k-1) sigma_a) u_a, u_a = -v_a (comfy/ldm/minimax/model.py forward) for
  //   any v_a, because sigma_v (1 + (k-1) sigma_a) = k sigma_a and sigma_v/sigma_a - sigma_v (1-k) = k.
  //   At sigma_v = 1, sigma_a = 1 and y = x_a = noise; at sigma_v = 0, y = k x0_a, so audio = y_end / k.
  // diffusers mode (MiniMaxH3Scheduler, one instance per stream): each stream on its own table with its
  // own recursion, and D = x + (1 - t) v with t = 1 - sigma, both float32: the scheduler recovers sigma
  // from the timestep the model saw, which differs from the table's sigma in the last ulp below 0.5.
  const double audio_scale = spec.video_shift / spec.audio_shift;
  StreamState video{std::move(noise.video), {}, false};
  StreamState audio{std::move(noise.audio), {}, false};  // holds y in ComfyUI mode, x_a in diffusers mode

  AvLatents model_in;
  for (int i = 0; i < steps; ++i) {
    const double sv = sched.sigma_video[static_cast<size_t>(i)];
    const double sa = sched.sigma_audio[static_cast<size_t>(i)];
    const double sv_next = sched.sigma_video[static_cast<size_t>(i) + 1];
    const double sa_next = sched.sigma_audio[static_cast<size_t>(i) + 1];
    const double sv_prev = i > 0 ? sched.sigma_video[static_cast<size_t>(i) - 1] : sv;
    const double sa_prev = i > 0 ? sched.sigma_audio[static_cast<size_t>(i) - 1] : sa;

    model_in.video = video.x;
    if (parity) {
      const float carry = static_cast<float>(sa / sv);  // x_a = (sigma_a/sigma_v) y
      model_in.audio.resize(n_audio);
      for (size_t j = 0; j < n_audio; ++j) model_in.audio[j] = audio.x[j] * carry;
    } else {
      model_in.audio = audio.x;
    }
    Result<AvLatents> vel = denoise(model_in, sv, sa, i);
    if (!vel.ok()) return vel.status().with_context("denoise at step " + std::to_string(i));
    VORTEX_RETURN_IF_ERROR(check_velocity(vel->video, n_video, "video", i));
    VORTEX_RETURN_IF_ERROR(check_velocity(vel->audio, n_audio, "audio", i));

    // Denoised (x0) predictions, FP32: D = x + sigma * v (ComfyUI), D = x + (1 - t) * v (diffusers).
    std::vector<float> d_video(n_video), d_audio(n_audio);
    const float sv32 = parity ? static_cast<float>(sv) : 1.0f - (1.0f - static_cast<float>(sv));
    const float sa32 = parity ? static_cast<float>(sa) : 1.0f - (1.0f - static_cast<float>(sa));
    for (size_t j = 0; j < n_video; ++j) {
      const float sv_v = sv32 * vel->video[j];
      d_video[j] = model_in.video[j] + sv_v;
    }
    const float k32 = static_cast<float>(audio_scale);
    for (size_t j = 0; j < n_audio; ++j) {
      const float sa_v = sa32 * vel->audio[j];
      const float x0 = model_in.audio[j] + sa_v;
      d_audio[j] = parity ? k32 * x0 : x0;
    }

    step_stream(spec.kind, parity, video, d_video, sv_prev, sv, sv_next);
    if (parity) {
      step_stream(spec.kind, true, audio, d_audio, sv_prev, sv, sv_next);
    } else {
      step_stream(spec.kind, false, audio, d_audio, sa_prev, sa, sa_next);
    }
    if (on_step) on_step(i, steps);
  }

  AvLatents out;
  out.video = std::move(video.x);
  out.audio = std::move(audio.x);
  if (parity) {
    for (float& v : out.audio) v = v / static_cast<float>(audio_scale);
  }
  return out;
}

}  // namespace vortex
