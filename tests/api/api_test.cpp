// The public API as a user sees it: this file includes only <vortex/vortex.h> (its build target gets include/ alone
// and links libvortex.so by file, tests/api/tests.cmake), and runs on the tiny synthetic snapshot the quick start
// uses (`vortex synth --snapshot tiny`, made once per run in a scratch folder):
// * a prompt request end to end, with progress and frame callbacks counted against the outputs;
// * a cancel from the progress callback: kCancelled, and nothing published;
// * bad requests refused with their field id before any weight loads (Engine::loaded stays false), in both spellings;
// * one Engine serving two requests on weights loaded once, and Engine::cancel from another thread.
#include <vortex/vortex.h>

#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;

class Api : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string tmpl = (fs::temp_directory_path() / "vortex_api_test.XXXXXX").string();  // honours TMPDIR
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = new fs::path(tmpl);
    const std::string cmd = std::string(VORTEX_CLI_PATH) + " synth --snapshot tiny --seed 3 --out " +
                            (*root_ / "snap").string() + " > " + (*root_ / "synth.log").string() + " 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    if (root_ != nullptr) fs::remove_all(*root_, ec);
    delete root_;
    root_ = nullptr;
  }
  static fs::path root() { return *root_; }
  static vortex::LoadOptions snapshot() {
    vortex::LoadOptions o;
    o.model_dir = (root() / "snap").string();
    o.threads = 2;
    return o;
  }
  // A small request: 64 x 64, 22 frames (the tiny video VAE decodes one clip of 22), 2 steps.
  static vortex::Request small(const std::string& out) {
    vortex::Request r;
    r.prompt = "a cat walks along a wall";
    r.width = 64;
    r.height = 64;
    r.frames = 22;
    r.steps = 2;
    r.seed = 7;
    r.out_dir = (root() / out).string();
    return r;
  }

 private:
  static fs::path* root_;
};

fs::path* Api::root_ = nullptr;

struct Counts {
  int steps = 0, stages = 0, frames = 0, last_step_total = 0;
  int frame_width = 0, frame_height = 0, frame_count = 0;
  bool frames_in_order = true;
  uint64_t rgb_sum = 0;
};

vortex::Callbacks counting(Counts& c) {
  vortex::Callbacks cb;
  cb.on_progress = [&c](const vortex::ProgressEvent& e) {
    if (e.kind == vortex::ProgressEvent::Kind::kStep) {
      ++c.steps;
      c.last_step_total = static_cast<int>(e.total);
      EXPECT_EQ(e.done, c.steps);
    }
    if (e.kind == vortex::ProgressEvent::Kind::kStage) ++c.stages;
    return true;
  };
  cb.on_frame = [&c](const vortex::Frame& f) {
    if (f.index != c.frames) c.frames_in_order = false;
    ++c.frames;
    c.frame_width = f.width;
    c.frame_height = f.height;
    c.frame_count = f.count;
    for (int i = 0; i < f.width * f.height * 3; ++i) c.rgb_sum += f.rgb[i];
    return true;
  };
  return cb;
}

TEST_F(Api, GenerateCountsProgressAndFrames) {
  Counts c;
  vortex::Outcome<vortex::Outputs> out = vortex::generate(snapshot(), small("run"), counting(c));
  ASSERT_TRUE(out.ok()) << out.status().to_string() << " field " << out.field();
  EXPECT_EQ(c.steps, 2);
  EXPECT_EQ(c.last_step_total, 2);
  EXPECT_GT(c.stages, 0);
  EXPECT_EQ(out->step_seconds.size(), 2u);
  EXPECT_EQ(out->seed, 7u);
  // The snapshot's decoders decode the run: every frame is delivered once, in order, at the request's size.
  EXPECT_EQ(out->frames, 22);
  EXPECT_EQ(c.frames, out->frames);
  EXPECT_EQ(c.frame_count, out->frames);
  EXPECT_TRUE(c.frames_in_order);
  EXPECT_EQ(c.frame_width, 64);
  EXPECT_EQ(c.frame_height, 64);
  EXPECT_GT(c.rgb_sum, 0u);  // decoded pixels, not a blank buffer
  const fs::path dir = out->out_dir;
  for (const char* f : {"video_latents.safetensors", "audio_latents.safetensors", "video.mp4", "audio.wav", "run.json"})
    EXPECT_TRUE(fs::is_regular_file(dir / f)) << f;
  EXPECT_EQ(out->files.back(), "run.json");
}

TEST_F(Api, CancelFromProgressPublishesNothing) {
  Counts c;
  vortex::Callbacks cb = counting(c);
  cb.on_progress = [&c](const vortex::ProgressEvent& e) {
    if (e.kind != vortex::ProgressEvent::Kind::kStep) return true;
    ++c.steps;
    return false;  // stop after the first step
  };
  const vortex::Request r = small("cancelled");
  vortex::Outcome<vortex::Outputs> out = vortex::generate(snapshot(), r, cb);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), vortex::ErrorCode::kCancelled) << out.status().to_string();
  EXPECT_EQ(c.steps, 1);
  EXPECT_EQ(c.frames, 0);
  EXPECT_FALSE(fs::exists(r.out_dir));
  // No staging folder is left beside it either.
  for (const fs::directory_entry& e : fs::directory_iterator(root()))
    EXPECT_EQ(e.path().filename().string().find("cancelled"), std::string::npos) << e.path();
}

TEST_F(Api, CancelFromFrameCallbackPublishesNothing) {
  vortex::Callbacks cb;
  int frames = 0;
  cb.on_frame = [&frames](const vortex::Frame&) { return ++frames < 2; };
  const vortex::Request r = small("cancelled_frames");
  vortex::Outcome<vortex::Outputs> out = vortex::generate(snapshot(), r, cb);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), vortex::ErrorCode::kCancelled) << out.status().to_string();
  EXPECT_EQ(frames, 2);
  EXPECT_FALSE(fs::exists(r.out_dir));
}

TEST_F(Api, BadRequestsNameTheirFieldBeforeLoading) {
  vortex::Outcome<std::unique_ptr<vortex::Engine>> engine = vortex::Engine::open(snapshot());
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  vortex::Engine& e = *engine.value();
  struct Case {
    const char* field;
    const char* flag;
    vortex::Request request;
  };
  std::vector<Case> cases;
  {
    vortex::Request r = small("bad");
    r.width = 100;  // not a multiple of 32
    cases.push_back({"width", "--width", r});
    r = small("bad");
    r.steps = 5000;
    cases.push_back({"steps", "--steps", r});
    r = small("bad");
    r.height = -64;
    cases.push_back({"height", "--height", r});
    r = small("bad");
    r.set = {{"seconds", "abc"}};
    cases.push_back({"seconds", "--seconds", r});
    r = small("bad");
    r.set = {{"schedule", "karras"}};
    cases.push_back({"schedule", "--schedule", r});
    r = small("bad");
    r.set = {{"--attention", "flash"}};
    cases.push_back({"attention", "--attention", r});
    r = small("bad");
    r.out_dir.clear();
    cases.push_back({"out", "--out", r});
    r = small("bad");
    r.prompt = "   ";
    cases.push_back({"prompt", "--prompt", r});
  }
  for (const Case& c : cases) {
    vortex::Outcome<vortex::Outputs> out = e.generate(c.request);
    ASSERT_FALSE(out.ok()) << c.field;
    EXPECT_EQ(out.field(), c.field) << out.status().message();
    EXPECT_EQ(out.failure().flag, c.flag) << out.status().message();
    EXPECT_EQ(out.status().code(), vortex::ErrorCode::kInvalidArgument) << out.status().message();
    EXPECT_FALSE(e.loaded()) << c.field;  // refused before any weight loaded
    EXPECT_FALSE(fs::exists(root() / "bad")) << c.field;
  }
  // Messages spell the field as the options ask: by id here, as a flag for the CLI.
  vortex::Request steps = small("bad");
  steps.steps = 5000;
  EXPECT_EQ(e.check(steps).status().message().rfind("steps must be in [1, 1000]", 0), 0u)
      << e.check(steps).status().message();
  vortex::LoadOptions flags = snapshot();
  flags.names = vortex::LoadOptions::Names::kFlags;
  vortex::Outcome<vortex::Outputs> cli = vortex::generate(flags, steps);
  EXPECT_EQ(cli.field(), "steps");
  EXPECT_EQ(cli.status().message().rfind("--steps must be in [1, 1000]", 0), 0u) << cli.status().message();
  // A key that is no option, and an option in the wrong struct.
  vortex::Request unknown = small("bad");
  unknown.set = {{"stepz", "4"}};
  EXPECT_NE(e.generate(unknown).status().message().find("unknown option 'stepz'"), std::string::npos);
  vortex::Request misplaced = small("bad");
  misplaced.set = {{"precision", "fp8"}};
  vortex::Outcome<vortex::Outputs> m = e.generate(misplaced);
  EXPECT_EQ(m.field(), "precision");
  EXPECT_NE(m.status().message().find("is fixed at load"), std::string::npos) << m.status().message();
  EXPECT_FALSE(e.loaded());
}

TEST_F(Api, BadLoadOptionsNameTheirField) {
  vortex::LoadOptions o = snapshot();
  o.backend = "tpu";
  vortex::Outcome<std::unique_ptr<vortex::Engine>> e = vortex::Engine::open(o);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.field(), "backend");
  EXPECT_EQ(e.status().message(), "backend must be cpu or cuda, got 'tpu'");
  o = snapshot();
  o.set = {{"max_vram", "-3"}};
  e = vortex::Engine::open(o);
  EXPECT_EQ(e.field(), "max_vram");
  o = snapshot();
  o.config = "h3";  // a model folder brings its own config
  e = vortex::Engine::open(o);
  EXPECT_EQ(e.field(), "model");
  EXPECT_NE(e.status().message().find("exclude each other"), std::string::npos) << e.status().message();
}

TEST_F(Api, OneEngineTwoRequestsAndCancelFromAnotherThread) {
  vortex::Outcome<std::unique_ptr<vortex::Engine>> engine = vortex::Engine::open(snapshot());
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  vortex::Engine& e = *engine.value();
  Counts first;
  vortex::Outcome<vortex::Outputs> a = e.generate(small("engine_a"), counting(first));
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_TRUE(e.loaded());
  EXPECT_EQ(first.frames, 22);
  // The same request again on the loaded weights: the same latents.
  vortex::Outcome<vortex::Outputs> b = e.generate(small("engine_b"));
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  const auto bytes = [](const fs::path& p) {
    std::string s;
    FILE* f = std::fopen(p.c_str(), "rb");
    if (f == nullptr) return s;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
    std::fclose(f);
    return s;
  };
  EXPECT_EQ(bytes(fs::path(a->out_dir) / "video_latents.safetensors"),
            bytes(fs::path(b->out_dir) / "video_latents.safetensors"));
  // Engine::cancel from another thread, once sampling has begun.
  std::atomic<bool> sampling{false};
  vortex::Callbacks cb;
  cb.on_progress = [&sampling](const vortex::ProgressEvent& ev) {
    if (ev.kind == vortex::ProgressEvent::Kind::kStep && ev.done == 1) {
      sampling = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the other thread cancels meanwhile
    }
    return true;
  };
  std::thread canceller([&] {
    while (!sampling) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    e.cancel();
  });
  vortex::Request r = small("engine_cancelled");
  r.steps = 6;
  vortex::Outcome<vortex::Outputs> c = e.generate(r, cb);
  canceller.join();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), vortex::ErrorCode::kCancelled) << c.status().to_string();
  EXPECT_FALSE(fs::exists(r.out_dir));
}

}  // namespace
