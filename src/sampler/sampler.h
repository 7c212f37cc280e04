// Samplers: host-only pure functions over a denoise callback (stable-diffusion.cpp style).
// The H3 model predicts a data-ward velocity v (x0 = x + sigma * v, research §2.8). Latents and all
// sampler state are FP32. Video and audio run on two flow schedules (shift 12 / 3), in one of two modes,
// each reproducing its reference's own float32 arithmetic:
//   comfyui:   ComfyUI's ModelSamplingAV + `simple` scheduler: one recursion on the video grid, audio
//              carried as y = (sigma_v/sigma_a) x_a (research §4.3-4.4);
//   diffusers: diffusers' MiniMaxH3Scheduler, one per stream, each on its own linspace grid.
// Tested in tests/sampler/* and tests/parity/schedule_parity_test.cpp (bitwise against diffusers' tables).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "vortex/status.h"

namespace vortex {

// shift(t) = s t / (1 + (s - 1) t)
double flow_shift(double sigma, double shift);

// ComfyUI ModelSamplingDiscreteFlow(shift) + `simple` scheduler: 1000 grid sigmas shift(k/1000),
// k = 1..1000, pick index -(1 + int(i * 1000 / steps)) for i < steps, then append 0. steps + 1 values.
std::vector<double> sigmas_comfy_simple(int steps, double shift);
// torch.linspace(start, end, n) for float32 on the CPU, bit for bit (see sampler.cpp).
std::vector<float> torch_linspace_f32(float start, float end, int64_t n);
// diffusers MiniMaxH3Scheduler.set_timesteps(steps + 1) (shift as its `shift`): float32
// linspace(1, 0, steps + 1) through the float32 shift, consecutive duplicates removed; float32 values
// widened to double. `steps` = model evaluations (diffusers' num_inference_steps - 1).
std::vector<double> sigmas_diffusers(int steps, double shift);
// The model timesteps of a table: t_i = 1 - sigma_i in float32, one per evaluation (the terminal 0 has none).
std::vector<float> timesteps_from_sigmas_f32(const std::vector<double>& sigmas);
// ComfyUI ModelSamplingAV: audio sigma for a video sigma (invert shift_v to the base grid, apply shift_a).
double audio_sigma_from_video(double sigma_v, double shift_v, double shift_a);
// The same map as ComfyUI evaluates it (float32 tensor operations); the comfyui mode's audio table.
float audio_sigma_from_video_f32(float sigma_v, double shift_v, double shift_a);

// res_multistep (eta 0) coefficients for the step sigma -> sigma_next with history at sigma_prev
// (research §4.1): lambda = -log(sigma), h = lambda(sigma_next) - lambda(sigma),
// c2 = (lambda(sigma_prev) - lambda(sigma)) / h, b1 = phi1(-h) - phi2(-h)/c2, b2 = phi2(-h)/c2 (NaN -> 0);
// the update is x <- exp_neg_h x + h (b1 D + b2 D_prev). Exposed for tests.
struct ResCoefficients {
  double h = 0, c2 = 0, exp_neg_h = 0, b1 = 0, b2 = 0;
};
ResCoefficients res_multistep_coefficients(double sigma_prev, double sigma, double sigma_next);

enum class SamplerKind { kEuler, kResMultistep };
enum class AvScheduleMode { kComfyParity, kDiffusers };

struct SamplerSpec {
  SamplerKind kind = SamplerKind::kResMultistep;
  AvScheduleMode mode = AvScheduleMode::kComfyParity;
  int steps = 12;
  double video_shift = 12.0;
  double audio_shift = 3.0;
  static SamplerSpec turbo4();  // shift_v 6, shift_a 3, 4 steps, euler, comfyui simple (the Turbo LoRA's settings)
};
Result<SamplerKind> sampler_kind_from_name(const std::string& name);  // "euler", "res_multistep"
const char* sampler_kind_name(SamplerKind kind);
Result<AvScheduleMode> av_schedule_mode_from_name(const std::string& name);  // "comfyui", "diffusers"
const char* av_schedule_mode_name(AvScheduleMode mode);

// The pair of FP32 latent vectors the sampler carries (flattened [24,T,h,w] and [2,32,Ta]).
struct AvLatents {
  std::vector<float> video;
  std::vector<float> audio;
};

// One model evaluation: x at (sigma_v, sigma_a) -> data-ward velocity v (same sizes as x).
// The model's timesteps are t = 1 - sigma. `step` is the 0-based evaluation index.
using DenoiseFn = std::function<Result<AvLatents>(const AvLatents& x, double sigma_v, double sigma_a, int step)>;
// Called after each step with (step index, steps total).
using StepCallback = std::function<void(int step, int steps)>;

// The per-step (sigma_v, sigma_a) pairs the model is evaluated at, plus the terminal 0.
struct AvSchedule {
  std::vector<double> sigma_video;  // steps + 1 values, last 0
  std::vector<double> sigma_audio;  // steps + 1 values, last 0
};
Result<AvSchedule> make_av_schedule(const SamplerSpec& spec);

// Runs the full trajectory from pure noise (x = noise at sigma 1). Returns the final latents.
Result<AvLatents> sample_av(const SamplerSpec& spec, AvLatents noise, const DenoiseFn& denoise,
                            const StepCallback& on_step = {});
// The same on `schedule`, which the caller made from `spec` with make_av_schedule (a planned run has it already).
Result<AvLatents> sample_av(const SamplerSpec& spec, const AvSchedule& schedule, AvLatents noise,
                            const DenoiseFn& denoise, const StepCallback& on_step = {});

}  // namespace vortex
