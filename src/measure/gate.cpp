// `vortex gate` implementation. See gate.h.
#include "measure/gate.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "engine/run_manifest.h"
#include "measure/bench.h"

namespace vortex {

namespace {

std::string latents_sha(const AvLatents& x) {
  return sha256_hex(x.video.data(), x.video.size() * sizeof(float)) + ":" +
         sha256_hex(x.audio.data(), x.audio.size() * sizeof(float));
}

nlohmann::json check(const std::string& name, const std::string& sha_a, const std::string& sha_b,
                     const nlohmann::json& extra = nlohmann::json::object()) {
  nlohmann::json j = {{"check", name}, {"identical", sha_a == sha_b}, {"sha256_a", sha_a}, {"sha256_b", sha_b}};
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  std::printf("  %-28s %s\n", name.c_str(), sha_a == sha_b ? "identical" : "DIFFERENT");
  std::fflush(stdout);
  return j;
}

// Number of differing 16-bit elements between two bf16 host tensors.
int64_t count_bf16_diffs(const Tensor& a, const Tensor& b) {
  const uint16_t* pa = a.data<uint16_t>();
  const uint16_t* pb = b.data<uint16_t>();
  int64_t n = 0;
  for (int64_t i = 0; i < a.numel(); ++i) n += pa[i] != pb[i];
  return n;
}

Result<AvLatents> trajectory(Workload& w, const ExecOptions& opts, int steps) {
  w.model->options() = opts;
  const SamplerSpec spec = workload_sampler(w, steps);
  DenoiseFn fn = [&](const AvLatents& x, double sv, double sa, int) { return w.model->forward(x, sv, sa); };
  return sample_av(spec, w.noise, fn);
}

}  // namespace

Result<nlohmann::json> run_gate(Workload& w, const GateOptions& o) {
  Backend& be = *w.backend;
  ExecOptions base = w.model->options();
  ExecOptions a = base, b = base;
  VORTEX_RETURN_IF_ERROR(apply_switches(o.a, a));
  VORTEX_RETURN_IF_ERROR(apply_switches(o.b, b));
  nlohmann::json checks = nlohmann::json::array();
  std::printf("gate: A [%s] vs B [%s]\n", describe_switches(a).c_str(), describe_switches(b).c_str());

  // Gate blocks: inputs propagated with A; block i run with A and with B from the same input.
  int last = w.cfg.num_layers - 1;
  std::vector<int> gate_blocks = {0, w.cfg.num_layers == 50 ? 24 : last / 2, last};
  gate_blocks.erase(std::unique(gate_blocks.begin(), gate_blocks.end()), gate_blocks.end());
  w.model->options() = a;
  VORTEX_ASSIGN_OR_RETURN(BlockInput in, make_block_input(w, 0, o.steps));
  int done = 0;  // blocks already applied to in.x
  for (int blk : gate_blocks) {
    w.model->options() = a;
    for (; done < blk; ++done) VORTEX_RETURN_IF_ERROR(w.model->run_block(done, in.x, in.tables));
    Tensor out[2];
    for (int k = 0; k < 2; ++k) {
      w.model->options() = k == 0 ? a : b;
      VORTEX_ASSIGN_OR_RETURN(Tensor x, be.alloc(in.x.shape(), in.x.dtype()));
      VORTEX_RETURN_IF_ERROR(be.copy(in.x, x));
      VORTEX_RETURN_IF_ERROR(w.model->run_block(blk, x, in.tables));
      out[k] = Tensor::empty(x.shape(), x.dtype());
      VORTEX_RETURN_IF_ERROR(be.download(x, out[k]));
    }
    int64_t diffs = count_bf16_diffs(out[0], out[1]);
    checks.push_back(check("block " + std::to_string(blk), sha256_hex(out[0].raw_data(), out[0].nbytes()),
                           sha256_hex(out[1].raw_data(), out[1].nbytes()), {{"differing_elements", diffs}}));
  }

  // One full forward at the step-1 sigmas.
  VORTEX_ASSIGN_OR_RETURN(auto sigmas, second_step_sigmas(w, o.steps));
  std::string fsha[2];
  for (int k = 0; k < 2; ++k) {
    w.model->options() = k == 0 ? a : b;
    VORTEX_ASSIGN_OR_RETURN(AvLatents v, w.model->forward(w.noise, sigmas.first, sigmas.second));
    fsha[k] = latents_sha(v);
  }
  checks.push_back(check("one full step (velocity)", fsha[0], fsha[1]));

  std::vector<int> trajectories = {2};
  if (!o.skip_full_trajectory && o.steps != 2) trajectories.push_back(o.steps);
  for (int steps : trajectories) {
    std::string tsha[2];
    for (int k = 0; k < 2; ++k) {
      VORTEX_ASSIGN_OR_RETURN(AvLatents lat, trajectory(w, k == 0 ? a : b, steps));
      tsha[k] = latents_sha(lat);
    }
    checks.push_back(check(std::to_string(steps) + "-step trajectory (video:audio)", tsha[0], tsha[1]));
  }
  w.model->options() = base;

  bool pass = true;
  for (const auto& c : checks) pass = pass && c["identical"].get<bool>();
  std::printf("gate verdict: %s\n", pass ? "PASS (all identical)" : "FAIL");
  return nlohmann::json{{"a", describe_switches(a)}, {"b", describe_switches(b)}, {"checks", checks}, {"pass", pass}};
}

}  // namespace vortex
