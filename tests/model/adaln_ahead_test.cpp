// AdaLN tables ahead of sampling (H3Model::precompute_adaln) on the CPU reference backend, h3-tiny with synthetic
// weights: a whole sampled trajectory gives the same latent bytes with the tables computed before step 1 as with
// every step computing its own; the steps really read the precomputed entries (corrupting one changes the output);
// entries are reused, pruned to the schedule and dropped when the weights change; a run-time LoRA branch on
// adaln_proj reaches the tables either way (and changes them); make_step_tables (the sequence-parallel and bench
// path) returns the same table bytes from an entry. Streamed blocks (H3Model::stream_blocks) give the resident
// blocks' trajectory bytes.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>

#include "model/h3_model.h"
#include "model/h3_spec.h"
#include "model/random_inputs.h"
#include "ref/cpu_backend.h"
#include "sampler/sampler.h"
#include "vortex/dtype.h"

namespace vortex {
namespace {

uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

struct Request {
  ModelConfig cfg = ModelConfig::h3_tiny();
  PackedLayout layout;
  Tensor text;  // host [L, text_dim] f32
  AvLatents noise;
  SamplerSpec spec;
  AvSchedule schedule;
};

Request make_request(uint64_t seed, int steps) {
  Request r;
  RequestGeometry g = make_geometry(r.cfg, 64, 64, 5, 6).value();
  r.layout = pack_request(r.cfg, g).value();
  testing::random_request_inputs(r.cfg, g, 6, seed, r.text, r.noise);
  r.spec.steps = steps;  // comfyui schedule, video shift 12 != audio shift 3: two timestep rows per step
  r.schedule = make_av_schedule(r.spec).value();
  return r;
}

std::vector<std::pair<double, double>> sigma_pairs(const Request& r) {
  std::vector<std::pair<double, double>> v;
  for (int i = 0; i < r.spec.steps; ++i) v.emplace_back(r.schedule.sigma_video[i], r.schedule.sigma_audio[i]);
  return v;
}

Result<AvLatents> sample(H3Model& model, const Request& r) {
  DenoiseFn denoise = [&model](const AvLatents& x, double sv, double sa, int) { return model.forward(x, sv, sa); };
  return sample_av(r.spec, r.noise, denoise);
}

bool same_bytes(const AvLatents& a, const AvLatents& b) {
  return a.video.size() == b.video.size() && a.audio.size() == b.audio.size() &&
         std::memcmp(a.video.data(), b.video.data(), a.video.size() * 4) == 0 &&
         std::memcmp(a.audio.data(), b.audio.data(), a.audio.size() * 4) == 0;
}

// A run-time LoRA branch on blocks.{block}.adaln_proj.linear: rank 4, random A [4, E] and B [18D, 4] (bf16 host).
std::shared_ptr<LoraBranch> random_adaln_branch(const ModelConfig& cfg, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  LoraBranchPart p;
  p.a = Tensor::empty({4, cfg.time_embed_dim}, DType::kBF16);
  p.b = Tensor::empty({18 * cfg.hidden, 4}, DType::kBF16);
  for (Tensor* t : {&p.a, &p.b})
    for (int64_t i = 0; i < t->numel(); ++i) t->data<uint16_t>()[i] = bf16_bits_from_f32(u(rng));
  p.scale = 0.75;
  auto br = std::make_shared<LoraBranch>();
  br->parts.push_back(std::move(p));
  return br;
}

class AdalnAhead : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = fresh_seed();
    r_ = make_request(seed_, 4);
  }
  std::unique_ptr<H3Model> make_model() {
    auto w = synthesize_weights(r_.cfg, be_, seed_);
    EXPECT_TRUE(w.ok()) << w.status().to_string();
    auto m = std::make_unique<H3Model>(r_.cfg, be_, std::move(*w), ExecOptions{});
    EXPECT_TRUE(m->prepare(r_.layout, r_.text).ok());
    return m;
  }
  uint64_t seed_ = 0;
  Request r_;
  CpuBackend be_{2};
};

TEST_F(AdalnAhead, TrajectoryBytesEqualThePerStepTables) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  auto per_step = make_model();
  auto ahead = make_model();
  ASSERT_TRUE(ahead->precompute_adaln(sigma_pairs(r_)).ok());
  const auto pairs = sigma_pairs(r_);
  const size_t entries = ahead->adaln_entries().size();
  const std::set<std::pair<double, double>> distinct(pairs.begin(), pairs.end());
  EXPECT_EQ(entries, distinct.size());
  for (const AdalnTableEntry& e : ahead->adaln_entries()) {
    EXPECT_EQ(e.blocks.size(), static_cast<size_t>(r_.cfg.num_layers));
    EXPECT_EQ(e.final_table.dim(0), static_cast<int64_t>(e.timesteps.size()));
  }
  auto a = sample(*per_step, r_);
  auto b = sample(*ahead, r_);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().to_string() << " / " << b.status().to_string();
  EXPECT_FALSE(per_step->step_workspace().tables_ahead);
  EXPECT_TRUE(ahead->step_workspace().tables_ahead);
  EXPECT_EQ(ahead->adaln_entries().size(), entries) << "a step computed an entry the schedule did not predict";
  EXPECT_TRUE(same_bytes(*a, *b));
}

TEST_F(AdalnAhead, StepsReadThePrecomputedEntries) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  auto model = make_model();
  const auto pairs = sigma_pairs(r_);
  ASSERT_TRUE(model->precompute_adaln({pairs[1]}).ok());
  auto clean = model->forward(r_.noise, pairs[1].first, pairs[1].second);
  ASSERT_TRUE(clean.ok());
  // Scale every shift/scale/gate of block 0 in the entry: a step that recomputed its tables would not notice.
  Tensor t = model->adaln_entries().at(0).blocks.at(0);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<uint16_t>()[i] = bf16_bits_from_f32(3.0f * f32_from_bf16_bits(t.data<uint16_t>()[i]) + 0.25f);
  auto corrupted = model->forward(r_.noise, pairs[1].first, pairs[1].second);
  ASSERT_TRUE(corrupted.ok());
  EXPECT_FALSE(same_bytes(*clean, *corrupted));
}

TEST_F(AdalnAhead, EntriesAreReusedPrunedAndDroppedWithTheWeights) {
  auto model = make_model();
  const auto pairs = sigma_pairs(r_);
  ASSERT_TRUE(model->precompute_adaln(pairs).ok());
  const void* first = model->adaln_entries().at(2).blocks.at(0).raw_data();
  ASSERT_TRUE(model->precompute_adaln(pairs).ok());  // held already: nothing recomputed
  ASSERT_EQ(model->adaln_entries().size(), pairs.size());
  EXPECT_EQ(model->adaln_entries().at(2).blocks.at(0).raw_data(), first);
  ASSERT_TRUE(model->precompute_adaln({pairs[2], pairs[3]}).ok());  // another schedule: the rest is dropped
  ASSERT_EQ(model->adaln_entries().size(), 2u);
  EXPECT_EQ(model->adaln_entries().at(0).blocks.at(0).raw_data(), first);
  (void)model->mutable_weights();  // adapters may change: no entry survives
  auto tables = model->make_step_tables(pairs[3].first, pairs[3].second);
  ASSERT_TRUE(tables.ok());
  EXPECT_TRUE(model->adaln_entries().empty());
  EXPECT_FALSE(model->precompute_adaln({{0.5, 1.5}}).ok()) << "a sigma outside [0, 1] must be refused";
}

TEST_F(AdalnAhead, RuntimeLoraOnAdalnProjReachesTheTables) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  auto plain = make_model();
  auto per_step = make_model();
  auto ahead = make_model();
  const auto pairs = sigma_pairs(r_);
  // The entries of the plain weights are computed first: attaching the adapters must drop them.
  ASSERT_TRUE(ahead->precompute_adaln(pairs).ok());
  for (H3Model* m : {per_step.get(), ahead.get()}) {
    H3Weights& w = m->mutable_weights();
    w.blocks[1].adaln_proj_lora = random_adaln_branch(r_.cfg, seed_ + 1);
    w.blocks[0].adaln_proj_lora = random_adaln_branch(r_.cfg, seed_ + 2);
  }
  ASSERT_TRUE(ahead->precompute_adaln(pairs).ok());
  auto a = sample(*per_step, r_);
  auto b = sample(*ahead, r_);
  auto c = sample(*plain, r_);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_TRUE(ahead->step_workspace().tables_ahead);
  EXPECT_TRUE(same_bytes(*a, *b)) << "the precomputed tables must carry the LoRA branch";
  EXPECT_FALSE(same_bytes(*a, *c)) << "the adapter changed nothing: the test cannot see it";
}

TEST_F(AdalnAhead, MakeStepTablesFromAnEntryHasTheSameBytes) {
  auto per_step = make_model();
  auto ahead = make_model();
  const auto pairs = sigma_pairs(r_);
  ASSERT_TRUE(ahead->precompute_adaln(pairs).ok());
  auto a = per_step->make_step_tables(pairs[2].first, pairs[2].second);
  auto b = ahead->make_step_tables(pairs[2].first, pairs[2].second);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->block_tables.size(), b->block_tables.size());
  for (size_t i = 0; i < a->block_tables.size(); ++i) {
    ASSERT_EQ(a->block_tables[i].shape(), b->block_tables[i].shape());
    EXPECT_EQ(std::memcmp(a->block_tables[i].raw_data(), b->block_tables[i].raw_data(), a->block_tables[i].nbytes()), 0)
        << "block " << i;
  }
  EXPECT_EQ(std::memcmp(a->final_table.raw_data(), b->final_table.raw_data(), a->final_table.nbytes()), 0);
  EXPECT_EQ(b->block_tables[0].raw_data(), ahead->adaln_entries().at(2).blocks.at(0).raw_data());
}

// Streamed blocks (H3Model::stream_blocks) on the CPU backend: the copies go through the same slot rotation as on a
// GPU (the backend's synchronous copy_async), so a block reading another block's slot changes the bytes.
TEST(StreamedBlocks, TrajectoryBytesEqualTheResidentBlocks) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Request r = make_request(seed, 3);
  r.cfg.num_layers = 5;  // three or more streamed blocks rotate through the two slots
  CpuBackend be(2);
  auto run = [&](int first_streamed) -> Result<AvLatents> {
    VORTEX_ASSIGN_OR_RETURN(H3Weights w, synthesize_weights(r.cfg, be, seed));
    H3Model model(r.cfg, be, std::move(w), ExecOptions{});
    VORTEX_RETURN_IF_ERROR(model.stream_blocks(first_streamed));
    EXPECT_EQ(model.streamed_from(), first_streamed);
    VORTEX_RETURN_IF_ERROR(model.prepare(r.layout, r.text));
    return sample(model, r);
  };
  auto resident = run(5);
  ASSERT_TRUE(resident.ok()) << resident.status().to_string();
  for (int first : {0, 2, 4}) {
    auto streamed = run(first);
    ASSERT_TRUE(streamed.ok()) << streamed.status().to_string();
    EXPECT_TRUE(same_bytes(*resident, *streamed)) << "streaming from block " << first;
  }
  // Arguments: outside [0, num_layers], or a second placement.
  auto w = synthesize_weights(r.cfg, be, seed);
  ASSERT_TRUE(w.ok());
  H3Model model(r.cfg, be, std::move(*w), ExecOptions{});
  EXPECT_EQ(model.stream_blocks(6).code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(model.stream_blocks(1).ok());
  EXPECT_GT(model.streamed_bytes_per_step(), 0u);
  EXPECT_EQ(model.stream_blocks(2).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace vortex
