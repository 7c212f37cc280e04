// Overlapped loading (docs/memory.md "Overlapped loading") on the CPU reference backend: a model whose weights arrive
// from a loader thread group by group gives the trajectory bytes of the model loaded first (with the AdaLN tables
// ahead and per step), starts step 1 while a delayed block is still arriving and uses no block before it arrives; a
// load that fails surfaces as the loader's error, not a hang; destroying the load stops and joins its thread; the
// one-shot generate gives the sequential order's latents on a ComfyUI checkpoint, on the tiny snapshot (prompt, text
// encoder beside the load) and with a request's run-time adapter (the run waits for the whole load), falls back to the
// sequential order with load-time adapters, and run.json records the order, why, and its timeline. The AdaLN
// projections bound for host memory arrive apart (a HostWeightFill beside the load): a block waits for both, a late
// projection delays only its block, a failed fill wakes the run with its error, the one-shot generate with
// --adaln-weights host overlaps and gives the sequential latents, and the decision overlaps with the GPU default.
#include "engine/load_overlap.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/generate.h"
#include "engine/host_weight_fill.h"
#include "engine/model_folder.h"
#include "engine/synthetic_snapshot.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "io/synth_checkpoint.h"
#include "io/test_files.h"
#include "model/h3_model.h"
#include "model/h3_spec.h"
#include "model/random_inputs.h"
#include "ref/cpu_backend.h"
#include "sampler/sampler.h"

namespace vortex {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

struct Request {
  PackedLayout layout;
  Tensor text;  // host [L, text_dim] f32
  AvLatents noise;
  SamplerSpec spec;
  AvSchedule schedule;
};

Request make_request(const ModelConfig& cfg, uint64_t seed, int steps) {
  Request r;
  RequestGeometry g = make_geometry(cfg, 64, 64, 5, 6).value();
  r.layout = pack_request(cfg, g).value();
  testing::random_request_inputs(cfg, g, 6, seed, r.text, r.noise);
  r.spec.steps = steps;  // comfyui schedule: two timestep rows per step
  r.schedule = make_av_schedule(r.spec).value();
  return r;
}

std::vector<std::pair<double, double>> sigma_pairs(const Request& r) {
  std::vector<std::pair<double, double>> v;
  for (int i = 0; i < r.spec.steps; ++i) v.emplace_back(r.schedule.sigma_video[i], r.schedule.sigma_audio[i]);
  return v;
}

// Samples `r`; `first_eval` (when given) gets the time of the first denoiser call.
Result<AvLatents> sample(H3Model& model, const Request& r, Clock::time_point* first_eval = nullptr) {
  DenoiseFn denoise = [&model, first_eval](const AvLatents& x, double sv, double sa, int) {
    if (first_eval != nullptr && *first_eval == Clock::time_point{}) *first_eval = Clock::now();
    return model.forward(x, sv, sa);
  };
  return sample_av(r.spec, r.noise, denoise);
}

bool same_bytes(const AvLatents& a, const AvLatents& b) {
  return a.video.size() == b.video.size() && a.audio.size() == b.audio.size() && !a.video.empty() &&
         std::memcmp(a.video.data(), b.video.data(), a.video.size() * 4) == 0 &&
         std::memcmp(a.audio.data(), b.audio.data(), a.audio.size() * 4) == 0;
}

// A loader body: `path` through load_checkpoint, each group published once its last tensor is in place.
BackgroundLoad::Body checkpoint_body(const std::string& path, const ModelConfig& cfg, Backend& backend) {
  return [path, cfg, &backend](BackgroundLoad& load) -> Result<H3Weights> {
    const std::vector<TensorSpec> specs = h3_tensor_specs(cfg);
    std::set<std::string> last;
    for (size_t i = 0; i < specs.size(); ++i)
      if (i + 1 == specs.size() ||
          weight_group_of(specs[i].name, cfg.num_layers) != weight_group_of(specs[i + 1].name, cfg.num_layers))
        last.insert(specs[i].name);
    CheckpointLoadHooks hooks;
    hooks.loaded = [&](const std::string& name, uint64_t done, uint64_t total) -> Status {
      if (load.stopping()) return cancelled("stopped");
      load.report(done, total);
      if (last.count(name) != 0 && hooks.placed != nullptr)
        load.publish(weight_group_of(name, cfg.num_layers), *hooks.placed);
      return Status::Ok();
    };
    return load_checkpoint(path, cfg, backend, CheckpointLayout::kAuto, nullptr, nullptr, &hooks);
  };
}

class LoadOverlap : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = fresh_seed();
    cfg_ = ModelConfig::h3_tiny();
    cfg_.num_layers = 5;
    dir_ = testing::make_temp_dir();
    SynthCheckpointOptions opt;
    opt.config = cfg_;
    opt.out = dir_ + "/model.safetensors";
    opt.seed = seed_;
    opt.layout = CheckpointLayout::kComfy;
    Result<std::vector<std::string>> written = write_synthetic_checkpoint(opt);
    ASSERT_TRUE(written.ok()) << written.status().to_string();
    path_ = opt.out;
  }
  void TearDown() override { testing::remove_tree(dir_); }
  uint64_t seed_ = 0;
  ModelConfig cfg_;
  std::string dir_, path_;
};

TEST_F(LoadOverlap, ArrivingWeightsGiveTheLoadedModelsBytesAndStepOneStartsBeforeTheLastBlock) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const Request r = make_request(cfg_, seed_ ^ 0x0ae1, 3);
  CpuBackend be(2);
  constexpr int kDelayed = 3;  // this block arrives late
  for (const bool ahead : {true, false}) {
    SCOPED_TRACE(ahead ? "AdaLN tables ahead" : "per-step AdaLN tables");
    ExecOptions opts;
    opts.adaln_ahead = ahead;
    Result<H3Weights> w = load_checkpoint(path_, cfg_, be);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    H3Model loaded(cfg_, be, std::move(*w), opts);
    ASSERT_TRUE(loaded.prepare(r.layout, r.text).ok());
    if (ahead) {
      ASSERT_TRUE(loaded.precompute_adaln(sigma_pairs(r)).ok());
    }
    Result<AvLatents> want = sample(loaded, r);
    ASSERT_TRUE(want.ok()) << want.status().to_string();

    std::mutex mu;
    std::vector<int> order;               // groups in the order published
    Clock::time_point delayed_published;  // when block kDelayed was published
    BackgroundLoad::Options lo;
    lo.num_layers = cfg_.num_layers;
    lo.before_publish = [&](int g) {
      if (g == kDelayed) std::this_thread::sleep_for(std::chrono::milliseconds(400));
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(g);
      if (g == kDelayed) delayed_published = Clock::now();
    };
    std::shared_ptr<BackgroundLoad> load = BackgroundLoad::start(lo, checkpoint_body(path_, cfg_, be));
    H3Model model(cfg_, be, make_empty_h3_weights(cfg_), opts);
    ASSERT_TRUE(model.set_arrivals(load).ok());
    EXPECT_TRUE(model.weights_arriving());
    ASSERT_TRUE(model.await_weights(-1).ok());
    ASSERT_TRUE(model.prepare(r.layout, r.text).ok());
    if (ahead) {
      ASSERT_TRUE(model.precompute_adaln(sigma_pairs(r)).ok());  // deferred: returns before the blocks arrive
      EXPECT_EQ(model.adaln_entries().size(), static_cast<size_t>(r.spec.steps));
    }
    Clock::time_point first_eval;
    Result<AvLatents> got = sample(model, r, &first_eval);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_TRUE(same_bytes(*got, *want)) << "overlapped loading changed the latents";
    EXPECT_FALSE(model.weights_arriving());
    ASSERT_TRUE(load->finish().ok());
    std::lock_guard<std::mutex> lock(mu);
    const std::vector<int> every = {-1, 0, 1, 2, 3, 4, 5};
    EXPECT_EQ(order, every);  // each group once, in order
    EXPECT_LT(first_eval, delayed_published) << "step 1 did not start while block " << kDelayed << " was arriving";
    // The tables the step computed per block as the weights arrived are the loaded model's.
    if (ahead) {
      ASSERT_EQ(model.adaln_entries().size(), loaded.adaln_entries().size());
      for (size_t e = 0; e < loaded.adaln_entries().size(); ++e)
        for (int b = 0; b < cfg_.num_layers; ++b) {
          const Tensor& x = model.adaln_entries()[e].blocks[static_cast<size_t>(b)];
          const Tensor& y = loaded.adaln_entries()[e].blocks[static_cast<size_t>(b)];
          ASSERT_TRUE(x.defined());
          EXPECT_EQ(std::memcmp(x.raw_data(), y.raw_data(), y.nbytes()), 0) << "entry " << e << " block " << b;
        }
    }
  }
}

TEST_F(LoadOverlap, AFailedLoadSurfacesItsErrorInsteadOfHanging) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const Request r = make_request(cfg_, seed_ ^ 0xfa11, 2);
  CpuBackend be(2);
  BackgroundLoad::Options lo;
  lo.num_layers = cfg_.num_layers;
  // Publishes up to block 1, then the "disk" fails.
  std::shared_ptr<BackgroundLoad> load = BackgroundLoad::start(lo, [&](BackgroundLoad& l) -> Result<H3Weights> {
    Result<H3Weights> w = load_checkpoint(path_, cfg_, be);
    if (!w.ok()) return w.status();
    l.publish(1, *w);
    return Status(ErrorCode::kIo, "read failed: the test's disk went away");
  });
  H3Model model(cfg_, be, make_empty_h3_weights(cfg_), ExecOptions{});
  ASSERT_TRUE(model.set_arrivals(load).ok());
  ASSERT_TRUE(model.await_weights(-1).ok());
  ASSERT_TRUE(model.prepare(r.layout, r.text).ok());
  ASSERT_TRUE(model.precompute_adaln(sigma_pairs(r)).ok());
  const auto t0 = Clock::now();
  Result<AvLatents> got = sample(model, r);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 30.0);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), ErrorCode::kIo) << got.status().to_string();
  EXPECT_NE(got.status().message().find("the test's disk went away"), std::string::npos) << got.status().to_string();
  EXPECT_NE(got.status().message().find("block 2"), std::string::npos) << got.status().to_string();
  EXPECT_EQ(load->finish().code(), ErrorCode::kIo);
  // The incomplete tables went with the error: a new precompute fails the same way, it does not use them.
  EXPECT_EQ(model.precompute_adaln(sigma_pairs(r)).code(), ErrorCode::kIo);
}

TEST(BackgroundLoad, DestroyingItStopsTheLoaderAndJoinsItsThread) {
  auto ended = std::make_shared<std::atomic<bool>>(false);
  {
    BackgroundLoad::Options lo;
    lo.num_layers = 2;
    std::shared_ptr<BackgroundLoad> load = BackgroundLoad::start(lo, [ended](BackgroundLoad& l) -> Result<H3Weights> {
      while (!l.stopping()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // still working when asked to stop
      ended->store(true);
      return cancelled("stopped");
    });
    EXPECT_FALSE(ended->load());
  }
  EXPECT_TRUE(ended->load()) << "the loader's thread outlived its BackgroundLoad";
}

TEST(BackgroundLoad, SwitchParsing) {
  std::string s = "fused,load_overlap=0,adaln_ahead=0";
  Result<bool> on = take_load_overlap_switch(s);
  ASSERT_TRUE(on.ok());
  EXPECT_FALSE(*on);
  EXPECT_EQ(s, "fused,adaln_ahead=0");
  std::string none = "fused";
  EXPECT_TRUE(*take_load_overlap_switch(none));
  EXPECT_EQ(none, "fused");
  std::string bad = "load_overlap=maybe";
  EXPECT_EQ(take_load_overlap_switch(bad).status().code(), ErrorCode::kInvalidArgument);
}

bool is_projection(const std::string& name) {
  return name.rfind("blocks.", 0) == 0 && name.find(".adaln_proj.linear.weight") != std::string::npos;
}

std::vector<std::string> projection_names(int layers) {
  std::vector<std::string> v;
  for (int i = 0; i < layers; ++i) v.push_back("blocks." + std::to_string(i) + ".adaln_proj.linear.weight");
  return v;
}

TEST_F(LoadOverlap, HostProjectionsArriveApartAndALateOneDelaysOnlyItsBlock) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const Request r = make_request(cfg_, seed_ ^ 0x4057, 3);
  CpuBackend be(2);
  ExecOptions opts;
  Result<H3Weights> w = load_checkpoint(path_, cfg_, be);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  H3Model loaded(cfg_, be, std::move(*w), opts);
  ASSERT_TRUE(loaded.prepare(r.layout, r.text).ok());
  ASSERT_TRUE(loaded.precompute_adaln(sigma_pairs(r)).ok());
  Result<AvLatents> want = sample(loaded, r);
  ASSERT_TRUE(want.ok()) << want.status().to_string();

  constexpr int kLate = 3;  // this block's projection arrives late
  const std::string late = "blocks." + std::to_string(kLate) + ".adaln_proj.linear.weight";
  std::mutex mu;
  std::vector<std::string> placed;  // host weights in the order placed
  Clock::time_point late_placed;
  BackgroundLoad::Options lo;
  lo.num_layers = cfg_.num_layers;
  lo.host_weights = projection_names(cfg_.num_layers);
  lo.before_place_host = [&](const std::string& name) {
    if (name == late) std::this_thread::sleep_for(std::chrono::milliseconds(400));
    std::lock_guard<std::mutex> lock(mu);
    placed.push_back(name);
    if (name == late) late_placed = Clock::now();
  };
  // The loader leaves the projections in the file; a HostWeightFill reads them on its own thread and places each.
  std::map<std::string, const void*> fill_data;  // where the fill put each projection
  std::shared_ptr<BackgroundLoad> load = BackgroundLoad::start(lo, [&](BackgroundLoad& l) -> Result<H3Weights> {
    HostWeightFill::Hooks fh;
    fh.filled = [&](const std::string& name, const Tensor& host) -> Status {
      {
        std::lock_guard<std::mutex> lock(mu);
        fill_data[name] = host.raw_data();
      }
      l.place_host(name, host);
      return Status::Ok();
    };
    fh.failed = [&l](const Status& e) { l.fail(e); };
    VORTEX_ASSIGN_OR_RETURN(std::unique_ptr<HostWeightFill> fill,
                            HostWeightFill::start(be, path_, cfg_, is_projection, true, std::move(fh)));
    DeferredWeights deferred;
    deferred.wanted = is_projection;
    CheckpointLoadHooks hooks;
    const std::vector<TensorSpec> specs = h3_tensor_specs(cfg_);
    hooks.loaded = [&](const std::string& name, uint64_t, uint64_t) -> Status {
      for (size_t i = 0; i + 1 < specs.size(); ++i)
        if (specs[i].name == name &&
            weight_group_of(name, cfg_.num_layers) != weight_group_of(specs[i + 1].name, cfg_.num_layers))
          l.publish(weight_group_of(name, cfg_.num_layers), *hooks.placed);
      return Status::Ok();
    };
    VORTEX_ASSIGN_OR_RETURN(H3Weights out,
                            load_checkpoint(path_, cfg_, be, CheckpointLayout::kAuto, nullptr, &deferred, &hooks));
    VORTEX_RETURN_IF_ERROR(fill->finish().status());
    return out;
  });
  H3Model model(cfg_, be, make_empty_h3_weights(cfg_), opts);
  ASSERT_TRUE(model.set_arrivals(load).ok());
  ASSERT_TRUE(model.await_weights(-1).ok());
  ASSERT_TRUE(model.prepare(r.layout, r.text).ok());
  ASSERT_TRUE(model.precompute_adaln(sigma_pairs(r)).ok());  // deferred: each block's tables once it has arrived
  Clock::time_point first_eval;
  Result<AvLatents> got = sample(model, r, &first_eval);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_TRUE(same_bytes(*got, *want)) << "projections arriving apart changed the latents";
  ASSERT_TRUE(load->finish().ok());
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(placed, projection_names(cfg_.num_layers)) << "the fill did not go in block order";
  EXPECT_LT(first_eval, late_placed) << "step 1 did not start while block " << kLate << "'s projection was arriving";
  // The model computes from the fill's host memory, not from the loader's placeholders (the file's mapping).
  for (int i = 0; i < cfg_.num_layers; ++i) {
    const std::string name = "blocks." + std::to_string(i) + ".adaln_proj.linear.weight";
    EXPECT_EQ(model.weights().blocks[static_cast<size_t>(i)].adaln_proj_linear_weight.raw_data(), fill_data[name])
        << name;
  }
}

TEST(BackgroundLoad, AGroupWaitsForItsHostWeightAndAFailedFillWakesTheWaiter) {
  ModelConfig cfg = ModelConfig::h3_tiny();
  cfg.num_layers = 2;
  CpuBackend be(1);
  Result<H3Weights> made = synthesize_weights(cfg, be, 7);
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  const H3Weights full = *made;
  BackgroundLoad::Options lo;
  lo.num_layers = cfg.num_layers;
  lo.host_weights = projection_names(cfg.num_layers);
  std::atomic<bool> release{false};
  std::shared_ptr<BackgroundLoad> load = BackgroundLoad::start(lo, [&](BackgroundLoad& l) -> Result<H3Weights> {
    l.publish(cfg.num_layers - 1, full);  // every block's device weights
    while (!release.load() && !l.stopping()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return full;
  });
  H3Weights got = make_empty_h3_weights(cfg);
  // Block 0 is published but its projection has not arrived: the wait lasts until it does.
  Tensor proj0 = Tensor::empty(full.blocks[0].adaln_proj_linear_weight.shape(), DType::kBF16);
  std::memcpy(proj0.raw_data(), full.blocks[0].adaln_proj_linear_weight.raw_data(), proj0.nbytes());
  std::thread placer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    load->place_host("blocks.0.adaln_proj.linear.weight", proj0);
  });
  const auto t0 = Clock::now();
  ASSERT_TRUE(load->await(-1, got).ok());
  ASSERT_TRUE(load->await(0, got).ok());
  EXPECT_GE(std::chrono::duration<double>(Clock::now() - t0).count(), 0.15) << "block 0 came without its projection";
  placer.join();
  EXPECT_EQ(got.blocks[0].adaln_proj_linear_weight.raw_data(), proj0.raw_data());
  EXPECT_TRUE(got.blocks[0].attn_qkv_proj.weight.defined());
  // Block 1's projection never comes: the fill fails on another thread and the waiter wakes with its error.
  std::thread failer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    load->fail(Status(ErrorCode::kIo, "the fill's disk went away"));
  });
  const auto t1 = Clock::now();
  Status s = load->await(1, got);
  failer.join();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t1).count(), 10.0);
  EXPECT_EQ(s.code(), ErrorCode::kIo) << s.to_string();
  EXPECT_NE(s.message().find("block 1"), std::string::npos) << s.to_string();
  release.store(true);
  EXPECT_EQ(load->finish().code(), ErrorCode::kIo) << "the loader's OK did not hide the fill's error";
}

// One-shot generate: the latents file's bytes and run.json.
struct Generated {
  std::string latents;
  nlohmann::json run;
};

// Notes of a run (the loader's and the plan's).
class NoteSink : public ProgressSink {
 public:
  void note(std::string_view what) override { notes.emplace_back(what); }
  bool has(std::string_view part) const {
    for (const std::string& n : notes)
      if (n.find(part) != std::string::npos) return true;
    return false;
  }
  std::vector<std::string> notes;
};

Result<Generated> run_generate(GenerateRequest r, const std::string& out, ProgressSink* sink = nullptr) {
  r.out_dir = out;
  ProgressSink quiet;
  VORTEX_RETURN_IF_ERROR(generate(r, sink != nullptr ? *sink : quiet).status());
  Generated g;
  for (const char* f : {"/video_latents.safetensors", "/audio_latents.safetensors"}) {
    std::ifstream in(out + f, std::ios::binary);
    g.latents += std::string(std::istreambuf_iterator<char>(in), {});
  }
  std::ifstream in(out + "/run.json");
  g.run = nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
  return g;
}

void expect_same_and_recorded(const Generated& seq, const Generated& ovl) {
  EXPECT_FALSE(seq.latents.empty());
  EXPECT_TRUE(seq.latents == ovl.latents) << "the overlapped order changed the latents";
  const nlohmann::json& a = seq.run["timing"]["load_overlap"];
  const nlohmann::json& b = ovl.run["timing"]["load_overlap"];
  EXPECT_EQ(a["mode"], "sequential") << a.dump();
  EXPECT_EQ(a["reason"], "--switches load_overlap=0") << a.dump();
  EXPECT_LE(a["load_end_seconds"].get<double>(), a["first_step_start_seconds"].get<double>()) << a.dump();
  EXPECT_EQ(b["mode"], "overlapped") << b.dump();
  EXPECT_TRUE(b["reason"].is_null()) << b.dump();
  EXPECT_LE(b["load_start_seconds"].get<double>(), b["load_end_seconds"].get<double>()) << b.dump();
  EXPECT_GE(b["first_step_start_seconds"].get<double>(), b["load_start_seconds"].get<double>()) << b.dump();
}

TEST_F(LoadOverlap, GenerateFromACheckpointGivesTheSequentialLatents) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  GenerateRequest r;
  r.pipeline.checkpoint_path = path_;
  r.pipeline.threads = 2;
  r.run.width = 64, r.run.height = 64, r.run.frames = 5, r.run.steps = 2, r.run.synthetic_text_rows = 4;
  r.run.seed = seed_ & 0xffff;
  GenerateRequest seq = r;
  seq.pipeline.switches = "load_overlap=0";
  Result<Generated> a = run_generate(seq, dir_ + "/seq");
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  Result<Generated> b = run_generate(r, dir_ + "/ovl");
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  expect_same_and_recorded(*a, *b);
  EXPECT_TRUE(b->run["timing"]["load_overlap"]["text_encoder"].is_null());  // synthetic text: no encoder
}

TEST_F(LoadOverlap, GenerateWithHostProjectionsOverlapsAndGivesTheSequentialLatents) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  GenerateRequest r;
  r.pipeline.checkpoint_path = path_;
  r.pipeline.threads = 2;
  r.pipeline.adaln_weights = AdalnPlacement::kHost;  // on the cpu backend: the GPU default's load path
  r.run.width = 64, r.run.height = 64, r.run.frames = 5, r.run.steps = 3, r.run.synthetic_text_rows = 4;
  r.run.seed = seed_ & 0xffff;
  GenerateRequest seq = r;
  seq.pipeline.switches = "load_overlap=0";
  NoteSink seq_notes, ovl_notes;
  Result<Generated> a = run_generate(seq, dir_ + "/seq", &seq_notes);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  Result<Generated> b = run_generate(r, dir_ + "/ovl", &ovl_notes);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  expect_same_and_recorded(*a, *b);
  const nlohmann::json& lo = b->run["timing"]["load_overlap"];
  EXPECT_EQ(lo["adaln_projections"], "host") << lo.dump();
  EXPECT_TRUE(a->run["timing"]["load_overlap"]["adaln_projections"].is_null());
  // Both orders read the projections on a thread of their own; the overlapped one hands each block's over as it lands.
  EXPECT_TRUE(seq_notes.has("AdaLN projections read into host memory beside the load (")) << "sequential: no fill";
  EXPECT_TRUE(ovl_notes.has("each block's handed to the run as it landed")) << "overlapped: no fill";
  EXPECT_TRUE(ovl_notes.has("the AdaLN projections are read into host memory beside it")) << "the plan's note";
  // And the same latents as the projections loaded with the blocks.
  GenerateRequest dev = r;
  dev.pipeline.adaln_weights = AdalnPlacement::kDevice;
  Result<Generated> c = run_generate(dev, dir_ + "/dev");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->latents == b->latents);
  EXPECT_EQ(c->run["timing"]["load_overlap"]["adaln_projections"], "device");
}

TEST_F(LoadOverlap, TheGpuDefaultOverlapsUnlessTheProjectionsCannotBeReadAsStored) {
  PipelineOptions o;
  o.backend = BackendKind::kCuda;  // the decision only: nothing opens a device
  o.checkpoint_path = path_;
  ASSERT_TRUE(o.adaln_weights_on_host()) << "the GPU default keeps the projections in host memory";
  ResidencyPlan plan;
  plan.num_blocks = plan.resident_blocks = cfg_.num_layers;
  EXPECT_TRUE(adaln_projections_beside_load(o, plan));
  EXPECT_EQ(load_overlap_refusal(o, cfg_, plan, true, false), "");
  EXPECT_EQ(load_overlap_refusal(o, cfg_, plan, false, false), "--switches load_overlap=0");
  // Projections read from disk per request, or merged with a load-time adapter: not beside the load.
  ResidencyPlan from_disk = plan;
  from_disk.adaln_from_disk = true;
  EXPECT_FALSE(adaln_projections_beside_load(o, from_disk));
  EXPECT_EQ(load_overlap_refusal(o, cfg_, from_disk, true, false), "weights stream from disk");
  // A diffusers file stores them renamed and split: the sequential order, saying why.
  PipelineOptions diffusers = o;
  diffusers.checkpoint_path = std::string(VORTEX_PARITY_FIXTURES) + "/model_diffusers";
  Result<ModelConfig> dcfg = config_for_checkpoint(diffusers.checkpoint_path);
  ASSERT_TRUE(dcfg.ok()) << dcfg.status().to_string();
  const std::string why = load_overlap_refusal(diffusers, *dcfg, plan, true, false);
  EXPECT_NE(why.find("cannot be read as stored"), std::string::npos) << why;
  diffusers.adaln_weights = AdalnPlacement::kDevice;
  EXPECT_EQ(load_overlap_refusal(diffusers, *dcfg, plan, true, false), "");
  // The device buffer a host-resident projection is uploaded into counts in each request's reserve.
  PipelineOptions device = o;
  device.adaln_weights = AdalnPlacement::kDevice;
  EXPECT_EQ(adaln_request_bytes(cfg_, o, 12) - adaln_request_bytes(cfg_, device, 12),
            uint64_t{18} * static_cast<uint64_t>(cfg_.hidden) * static_cast<uint64_t>(cfg_.time_embed_dim) * 2);
  // The cpu backend's default loads them with the blocks; an explicit host placement takes the GPU's path.
  PipelineOptions cpu = o;
  cpu.backend = BackendKind::kCpu;
  EXPECT_FALSE(adaln_projections_beside_load(cpu, plan));
  cpu.adaln_weights = AdalnPlacement::kHost;
  EXPECT_TRUE(adaln_projections_beside_load(cpu, plan));
}

// Threads of this process (/proc/self/task).
size_t thread_count() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

TEST_F(LoadOverlap, NoThreadOutlivesTheRunWhetherItEndsOrFails) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  GenerateRequest r;
  r.pipeline.checkpoint_path = path_;
  r.pipeline.threads = 2;
  r.run.width = 64, r.run.height = 64, r.run.frames = 5, r.run.steps = 2, r.run.synthetic_text_rows = 4;
  const size_t before = thread_count();
  ASSERT_TRUE(run_generate(r, dir_ + "/ok").ok());
  EXPECT_EQ(thread_count(), before);
  for (const int after : {0, 2, 8, 40}) {  // an allocation fails: in the loader's thread or in the run's
    SCOPED_TRACE("allocation failure after " + std::to_string(after));
    GenerateRequest failing = r;
    failing.run.fail_alloc_after = after;
    Result<Generated> g = run_generate(failing, dir_ + "/fail" + std::to_string(after));
    EXPECT_FALSE(g.ok());
    if (!g.ok()) {
      EXPECT_EQ(g.status().code(), ErrorCode::kOutOfMemory) << g.status().to_string();
    }
    EXPECT_EQ(thread_count(), before);
  }
}

TEST(LoadOverlapSnapshot, GenerateWithAPromptRunsTheTextEncoderBesideTheLoad) {
  const std::string dir = testing::make_temp_dir();
  SyntheticSnapshotOptions so;
  so.out = dir + "/snap";
  so.seed = fresh_seed() & 0xffffff;
  ASSERT_TRUE(write_synthetic_snapshot(so).ok());
  Result<ModelFolder> folder = open_model_folder(so.out);
  ASSERT_TRUE(folder.ok()) << folder.status().to_string();
  GenerateRequest r;
  r.pipeline.threads = 2;
  ASSERT_TRUE(apply_model_folder(*folder, -1, r.pipeline).ok());
  r.run.prompt = "a red kite over the sea";
  r.run.width = 64, r.run.height = 64, r.run.frames = 5, r.run.steps = 2;
  r.run.media = false;
  GenerateRequest seq = r;
  seq.pipeline.switches = "load_overlap=0";
  Result<Generated> a = run_generate(seq, dir + "/seq");
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  Result<Generated> b = run_generate(r, dir + "/ovl");
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  expect_same_and_recorded(*a, *b);
  const std::string te = b->run["timing"]["load_overlap"]["text_encoder"].get<std::string>();
  EXPECT_EQ(te.rfind("the text encoder runs beside the load", 0), 0u) << te;
  testing::remove_tree(dir);
}

TEST(LoadOverlapLora, LoadTimeAdaptersLoadFirstAndRequestAdaptersWaitForTheWholeLoad) {
  const std::string dir = testing::make_temp_dir();
  const std::string lora = std::string(VORTEX_LORA_FIXTURES) + "/native_comfy.safetensors";
  GenerateRequest r;
  r.pipeline.checkpoint_path = std::string(VORTEX_PARITY_FIXTURES) + "/model_diffusers";
  r.pipeline.threads = 2;
  r.run.width = 64, r.run.height = 64, r.run.frames = 5, r.run.steps = 2, r.run.synthetic_text_rows = 4;
  // A load-time adapter merges into the loaded weights: the sequential order, and run.json says why.
  GenerateRequest merged = r;
  merged.pipeline.loras = {{lora, std::nullopt}};
  Result<Generated> m = run_generate(merged, dir + "/merged");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const nlohmann::json& mo = m->run["timing"]["load_overlap"];
  EXPECT_EQ(mo["mode"], "sequential") << mo.dump();
  EXPECT_NE(mo["reason"].get<std::string>().find("--lora"), std::string::npos) << mo.dump();
  // A request's run-time adapter attaches to every block: the run waits for the whole load, same latents.
  GenerateRequest attached = r;
  attached.pipeline.lora_dir = VORTEX_LORA_FIXTURES;
  attached.run.loras = {{lora, 0.75}};
  GenerateRequest seq = attached;
  seq.pipeline.switches = "load_overlap=0";
  Result<Generated> a = run_generate(seq, dir + "/seq");
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  Result<Generated> b = run_generate(attached, dir + "/ovl");
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  expect_same_and_recorded(*a, *b);
  Result<Generated> base = run_generate(r, dir + "/base");
  ASSERT_TRUE(base.ok()) << base.status().to_string();
  EXPECT_FALSE(base->latents == b->latents) << "the request's adapter did not reach the latents";
  testing::remove_tree(dir);
}

}  // namespace
}  // namespace vortex
