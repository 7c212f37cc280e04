// The residency plan (engine/residency.h) on the CPU: component sizes of h3 from its tensor specs (the AdaLN
// projections are 13.0 B parameters), where each lives under --adaln-weights and --precision, the budget check that
// refuses a resident set larger than --max-vram before any weight loads, the plan's lines, and the option checks
// (--max-vram needs a GPU backend, --adaln-weights names). Pipeline-level: h3-tiny's plan on the cpu backend, and a
// checkpoint's load shows the transformer's progress to the last layer and says how the weights were read.
#include <gtest/gtest.h>

#include <string>

#include "engine/pipeline.h"
#include "engine/residency.h"
#include "io/synth_checkpoint.h"
#include "io/test_files.h"
#include "seed.h"

namespace vortex {
namespace {

PipelineOptions cuda_h3(const std::string& precision, const std::string& adaln) {
  PipelineOptions o;
  o.config_name = "h3";
  o.synthetic_weights = true;
  o.backend = BackendKind::kCuda;
  o.precision = parse_precision(precision).value();
  o.adaln_weights = parse_adaln_placement(adaln).value();
  return o;
}

TEST(Residency, H3ComponentSizes) {
  const ModelConfig cfg = ModelConfig::by_name("h3").value();
  const TransformerBytes t = transformer_bytes(cfg);
  EXPECT_EQ(t.adaln_projections, uint64_t{50} * 96768 * 2688 * 2);  // [96768, 2688] bf16 in each of 50 blocks
  EXPECT_GT(t.block_gemms, uint64_t{30'000'000'000});
  EXPECT_LT(t.adaln_projections + t.block_gemms, t.total);
  const ModelConfig tiny = ModelConfig::h3_tiny();
  const TransformerBytes tt = transformer_bytes(tiny);
  EXPECT_EQ(tt.adaln_projections, static_cast<uint64_t>(tiny.num_layers) * 18 * tiny.hidden * tiny.time_embed_dim * 2);
}

TEST(Residency, PlacesAndTheBudget) {
  const ModelConfig cfg = ModelConfig::by_name("h3").value();
  const TransformerBytes t = transformer_bytes(cfg);
  const uint64_t gb = 1'000'000'000, reserve = 4 * gb;
  // Host AdaLN projections: the device keeps the rest; one upload of them per request, nothing per step.
  auto host = plan_residency(cfg, cuda_h3("bf16", "auto"), t.total, 0, 48 * gb, true, reserve);
  ASSERT_TRUE(host.ok()) << host.status().to_string();
  EXPECT_EQ(host->resident_device_bytes(), t.total - t.adaln_projections);
  EXPECT_EQ(host->resident_blocks, 50);
  EXPECT_EQ(host->per_request_upload_bytes, t.adaln_projections);
  EXPECT_EQ(host->per_step_upload_bytes, 0u);
  EXPECT_TRUE(check_residency(*host).ok());
  // 24 GB: the last blocks stream through two slots; what stays fits beside the reserve.
  auto streamed = plan_residency(cfg, cuda_h3("bf16", "auto"), t.total, 0, 24 * gb, true, reserve);
  ASSERT_TRUE(streamed.ok());
  EXPECT_GT(streamed->resident_blocks, 0);
  EXPECT_LT(streamed->resident_blocks, 50);
  EXPECT_EQ(streamed->block_gemm_bytes, t.block_gemms / 50);
  EXPECT_EQ(streamed->per_step_upload_bytes,
            static_cast<uint64_t>(50 - streamed->resident_blocks) * (t.block_gemms / 50));
  EXPECT_LE(streamed->resident_device_bytes() + reserve, 24 * gb);
  EXPECT_GT(streamed->resident_device_bytes() + reserve + streamed->block_gemm_bytes, 24 * gb)
      << "one more resident block would still have fitted";
  EXPECT_TRUE(check_residency(*streamed).ok());
  // fp8 halves the block GEMM weights, but synthetic weights load in BF16 before the conversion: the resident blocks
  // must fit in BF16 while loading, so only the smaller slots leave room for one more resident block.
  auto fp8 = plan_residency(cfg, cuda_h3("fp8", "auto"), t.total, 0, 24 * gb, true, reserve);
  ASSERT_TRUE(fp8.ok());
  EXPECT_EQ(fp8->block_gemm_bytes, t.block_gemms / 2 / 50);
  EXPECT_EQ(fp8->resident_blocks, streamed->resident_blocks + 1);
  // On the device the projections (26 GB) alone pass 24 GB: refused, naming the budget and the components.
  auto device = plan_residency(cfg, cuda_h3("bf16", "device"), t.total, 0, 24 * gb, true, reserve);
  ASSERT_TRUE(device.ok());
  EXPECT_EQ(device->resident_blocks, 0);
  const Status refused = check_residency(*device);
  EXPECT_EQ(refused.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("--max-vram"), std::string::npos) << refused.message();
  EXPECT_NE(refused.message().find("AdaLN"), std::string::npos) << refused.message();
  // Decoders on the device count too; the lines name every component, the budget and the per-step traffic.
  PipelineOptions with_vae_options = cuda_h3("bf16", "auto");
  with_vae_options.synthetic_vae = SyntheticVae::kFull;
  auto with_vae = plan_residency(cfg, with_vae_options, t.total, gb, 24 * gb, true, reserve);
  ASSERT_TRUE(with_vae.ok());
  EXPECT_LT(with_vae->resident_blocks, streamed->resident_blocks);
  std::string all;
  for (const std::string& l : with_vae->lines()) all += l + "\n";
  for (const char* want : {"transformer", "AdaLN projections", "host (page-locked)", "VAE decoders", "--max-vram",
                           "stream their GEMM weights", "per step"})
    EXPECT_NE(all.find(want), std::string::npos) << want << " missing from:\n" << all;
  EXPECT_GT(canonical_activation_bytes(cfg, cuda_h3("bf16", "auto")), gb);
}

// The host-memory rule (apply_host_budget): page-locked bytes within the budget stay; past it the AdaLN projections
// are read from disk first (once per request), then the streamed blocks (every step), each through two staging
// buffers; a plan that cannot stream from disk is refused with the reason.
TEST(Residency, HostBudgetSendsWeightsToDisk) {
  const ModelConfig cfg = ModelConfig::by_name("h3").value();
  const TransformerBytes t = transformer_bytes(cfg);
  const uint64_t gb = 1'000'000'000, reserve = 4 * gb;
  auto plan = [&](uint64_t host_budget, const std::string& refusal) -> Result<ResidencyPlan> {
    VORTEX_ASSIGN_OR_RETURN(ResidencyPlan p,
                            plan_residency(cfg, cuda_h3("bf16", "auto"), t.total, 0, 24 * gb, true, reserve));
    VORTEX_RETURN_IF_ERROR(apply_host_budget(p, host_budget, true, refusal));
    return p;
  };
  auto roomy = plan(200 * gb, "");
  ASSERT_TRUE(roomy.ok()) << roomy.status().to_string();
  EXPECT_FALSE(roomy->adaln_from_disk || roomy->blocks_from_disk);
  const uint64_t streamed = roomy->per_step_upload_bytes;
  EXPECT_EQ(roomy->host_bytes(), t.adaln_projections + streamed);
  // Room for the streamed blocks but not the projections too: only the projections go to disk.
  auto adaln_only = plan(streamed + 4 * gb, "");
  ASSERT_TRUE(adaln_only.ok()) << adaln_only.status().to_string();
  EXPECT_TRUE(adaln_only->adaln_from_disk);
  EXPECT_FALSE(adaln_only->blocks_from_disk);
  EXPECT_EQ(adaln_only->host_bytes(), streamed + 2 * (t.adaln_projections / 50));
  // 16 GB: both stream from disk; host memory holds two staging buffers of each.
  auto both = plan(16 * gb, "");
  ASSERT_TRUE(both.ok()) << both.status().to_string();
  EXPECT_TRUE(both->adaln_from_disk && both->blocks_from_disk);
  EXPECT_EQ(both->host_bytes(), 2 * (t.adaln_projections / 50) + 2 * both->block_gemm_bytes);
  EXPECT_LE(both->host_bytes(), 16 * gb);
  EXPECT_EQ(both->per_step_upload_bytes, streamed);  // the same bytes still reach the device every step
  std::string all;
  for (const std::string& l : both->lines()) all += l + "\n";
  for (const char* want : {"disk (the checkpoint's files)", "--max-host-ram", "direct reads"})
    EXPECT_NE(all.find(want), std::string::npos) << want << " missing from:\n" << all;
  // Over the budget and unable to stream from disk: refused with the reason; under it the reason does not matter.
  const Status refused = plan(16 * gb, "synthetic weights have no file").status();
  EXPECT_EQ(refused.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("synthetic weights have no file"), std::string::npos) << refused.message();
  EXPECT_NE(refused.message().find("--max-host-ram"), std::string::npos) << refused.message();
  EXPECT_TRUE(plan(200 * gb, "synthetic weights have no file").ok());
  // Smaller than even the staging buffers: refused.
  EXPECT_EQ(plan(gb, "").status().code(), ErrorCode::kInvalidArgument);
}

TEST(Residency, OptionChecks) {
  PipelineOptions o;
  o.synthetic_weights = true;
  o.max_vram_gb = 24;
  EXPECT_EQ(validate_pipeline_options(o).code(), ErrorCode::kInvalidArgument);  // cpu backend
  o.backend = BackendKind::kCuda;
  EXPECT_TRUE(validate_pipeline_options(o).ok());
  o.max_vram_gb = -1;
  EXPECT_EQ(validate_pipeline_options(o).code(), ErrorCode::kInvalidArgument);
  o.max_vram_gb = 0;
  EXPECT_EQ(parse_adaln_placement("gpu").status().code(), ErrorCode::kInvalidArgument);
  o.adaln_weights = AdalnPlacement::kHost;
  EXPECT_TRUE(o.adaln_weights_on_host());
  o.backend = BackendKind::kCpu;
  EXPECT_FALSE(o.adaln_weights_on_host()) << "on the cpu backend the device is the host";
}

class Notes : public ProgressSink {
 public:
  void note(std::string_view what) override { notes += std::string(what) + "\n"; }
  std::string notes;
};

// On the cpu backend the plan exists (everything in host memory) but load_weights prints nothing: no note.
TEST(Residency, TheCpuPipelinesPlanIsQuiet) {
  PipelineOptions o;
  o.synthetic_weights = true;
  o.threads = 2;
  Notes progress;
  auto p = Pipeline::load(o, progress);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(progress.notes.find("residency:"), std::string::npos) << progress.notes;
  auto plan = (*p)->residency_plan();
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->budget.has_value());
  EXPECT_EQ(plan->resident_device_bytes(), 0u);
  EXPECT_EQ(plan->resident_blocks, plan->num_blocks);
  EXPECT_NE(plan->lines().front().find("transformer"), std::string::npos);
}

// Records the load progress reports besides the notes.
class LoadLog : public Notes {
 public:
  void loading(std::string_view w, uint64_t d, uint64_t t, int ld, int lt, double) override {
    ++calls;
    what = w;
    done = d;
    total = t;
    layers_done = ld;
    layers_total = lt;
  }
  int calls = 0, layers_done = 0, layers_total = 0;
  uint64_t done = 0, total = 0;
  std::string what;
};

TEST(Residency, ACheckpointsLoadShowsProgressAndHowItRead) {
  const std::string dir = testing::make_temp_dir();
  SynthCheckpointOptions synth;
  synth.config = ModelConfig::h3_tiny();
  synth.out = dir + "/model.safetensors";
  synth.seed = testing::fresh_seed();
  synth.layout = CheckpointLayout::kComfy;
  ASSERT_TRUE(write_synthetic_checkpoint(synth).ok());
  PipelineOptions o;
  o.checkpoint_path = synth.out;
  o.threads = 2;
  LoadLog progress;
  auto p = Pipeline::load(o, progress);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_GT(progress.calls, 0);
  EXPECT_EQ(progress.what, "transformer");
  EXPECT_GT(progress.total, 0u);
  EXPECT_EQ(progress.done, progress.total);
  EXPECT_EQ(progress.layers_total, synth.config.num_layers);
  EXPECT_EQ(progress.layers_done, progress.layers_total);
  EXPECT_NE(progress.notes.find("resident weights: "), std::string::npos) << progress.notes;
  EXPECT_NE(progress.notes.find(" with direct reads"), std::string::npos) << progress.notes;
  testing::remove_tree(dir);
}

}  // namespace
}  // namespace vortex
