// `vortex serve --lora-dir`: per-request adapters through the run-time branch, the base weights loaded once. On the
// tiny H3 checkpoint of tests/parity with the LoRA fixtures of tests/lora (CPU backend), requests naming different
// adapters, none, and the first again must give byte for byte the latents of separate `generate` runs
// (engine/generate.h, --lora FILE[:SCALE] --lora-mode runtime; no adapter: the plain model), and run.json records
// each request's adapters. Bad names (a path, a missing file) and adapters on a server without --lora-dir are 400s
// naming the field "lora"; a symbolic link is refused at admission and when swapped in after it. Built twice:
// serve_lora_test (cpu, CI) and, with VORTEX_SERVE_LORA_BACKEND="cuda", serve_lora_cuda_test (label gpu: the same
// comparison through CudaBackend::linear_lora; skips without a device).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "backend/backend.h"
#include "engine/generate.h"
#include "engine/pipeline.h"
#include "gpu_test.h"
#include "io/safetensors.h"
#include "lora/lora.h"
#include "serve_test_util.h"

#ifndef VORTEX_SERVE_LORA_BACKEND
#define VORTEX_SERVE_LORA_BACKEND "cpu"
#define VORTEX_SERVE_LORA_SUITE ServeLora
#else
#define VORTEX_SERVE_LORA_SUITE ServeLoraCuda  // distinct ctest names, so the cpu tests keep their label
#endif

namespace vortex_serve_test {
namespace {

const std::string kModel = std::string(VORTEX_PARITY_FIXTURES) + "/model_diffusers";
std::string lora_fixture(const std::string& name) {
  return std::string(VORTEX_LORA_FIXTURES) + "/" + name + ".safetensors";
}

// An F32 [rows, cols] text-embeddings safetensors file (refined width 128 of the tiny model).
std::string embeddings_bytes(int rows, int cols) {
  std::string header = R"({"text":{"dtype":"F32","shape":[)" + std::to_string(rows) + "," + std::to_string(cols) +
                       R"(],"data_offsets":[0,)" + std::to_string(rows * cols * 4) + "]}}";
  while (header.size() % 8 != 0) header += ' ';
  std::string bytes(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  bytes += header;
  for (int i = 0; i < rows * cols; ++i) {
    const float v = 0.02f * static_cast<float>((i * 7 % 23) - 11);
    bytes.append(reinterpret_cast<const char*>(&v), 4);
  }
  return bytes;
}

std::vector<float> latents_of(const std::string& path, const std::string& name) {
  auto f = vortex::SafetensorsFile::open(path);
  EXPECT_TRUE(f.ok()) << f.status().to_string();
  if (!f.ok()) return {};
  auto t = f->tensor(name);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  if (!t.ok()) return {};
  return std::vector<float>(t->data<float>(), t->data<float>() + t->numel());
}

// The same request through `generate` (its own pipeline, loaded fresh): the expected latents.
std::pair<std::vector<float>, std::vector<float>> generate_latents(const fs::path& out, const std::string& embeddings,
                                                                   std::vector<vortex::LoraSpec> loras) {
  vortex::GenerateRequest r;
  r.pipeline.checkpoint_path = kModel;
  r.pipeline.backend = vortex::parse_backend_kind(VORTEX_SERVE_LORA_BACKEND).value();
  r.pipeline.threads = 2;
  r.pipeline.loras = std::move(loras);
  r.pipeline.lora_mode = vortex::LoraMode::kRuntime;
  r.run.text_embeddings_path = embeddings;
  r.run.width = 64, r.run.height = 64, r.run.frames = 5, r.run.steps = 2, r.run.seed = 3;
  r.out_dir = out.string();
  vortex::ProgressSink quiet;
  auto g = vortex::generate(r, quiet);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return {latents_of((out / "video_latents.safetensors").string(), "video_latents"),
          latents_of((out / "audio_latents.safetensors").string(), "audio_latents")};
}

class VORTEX_SERVE_LORA_SUITE : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(VORTEX_SERVE_LORA_BACKEND) == "cuda") {
      auto be = vortex::make_backend("cuda", 0, 0);
      VORTEX_SKIP_NO_GPU_OR_FAIL(be.status());
    }
    fs::create_directories(dir_.path() / "loras");
    fs::copy_file(lora_fixture("native_comfy"), dir_.path() / "loras" / "native_comfy.safetensors");
    fs::copy_file(lora_fixture("peft_split"), dir_.path() / "loras" / "peft_split.safetensors");
    embeddings_ = (dir_.path() / "embeddings.safetensors").string();
    std::ofstream(embeddings_, std::ios::binary) << embeddings_bytes(4, 128);
  }
  vortex::serve::ServeOptions options(bool with_lora_dir) {
    vortex::serve::ServeOptions o = tiny_options(dir_.path() / (with_lora_dir ? "data" : "data_plain"));
    o.pipeline.config_name.clear();
    o.pipeline.synthetic_weights = false;
    o.pipeline.checkpoint_path = kModel;
    o.pipeline.backend = vortex::parse_backend_kind(VORTEX_SERVE_LORA_BACKEND).value();
    if (with_lora_dir) o.pipeline.lora_dir = (dir_.path() / "loras").string();
    return o;
  }
  httplib::Result submit(httplib::Client& c, const json& lora) {
    json req = {{"width", 64}, {"height", 64}, {"frames", 5}, {"steps", 2}, {"seed", 3}, {"media", false}};
    if (!lora.is_null()) req["lora"] = lora;
    std::ifstream in(embeddings_, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    httplib::MultipartFormDataItems items = {{"request", req.dump(), "", "application/json"},
                                             {"text_embeddings", bytes, "e.safetensors", "application/octet-stream"}};
    return c.Post("/v1/videos", items);
  }
  ScratchDir dir_;
  std::string embeddings_;
};

TEST_F(VORTEX_SERVE_LORA_SUITE, PerRequestAdaptersMatchSeparateGenerateRuns) {
  TestServer s(options(true));
  ASSERT_TRUE(s.server);
  auto c = s.client();
  struct Job {
    json lora;
    std::vector<vortex::LoraSpec> generate_loras;
    std::string id;
  };
  std::vector<Job> jobs = {
      {json::array({"native_comfy.safetensors"}), {{lora_fixture("native_comfy"), std::nullopt}}, ""},
      {json::array({"peft_split.safetensors:0.5"}), {{lora_fixture("peft_split"), 0.5}}, ""},
      {json(), {}, ""},
      {json::array({"native_comfy.safetensors"}), {{lora_fixture("native_comfy"), std::nullopt}}, ""},
  };
  for (Job& j : jobs) {  // all queued at once: the worker switches adapters between consecutive jobs
    auto r = submit(*c, j.lora);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 201) << r->body;
    j.id = json::parse(r->body)["id"];
  }
  std::vector<std::vector<float>> served_video;
  for (size_t i = 0; i < jobs.size(); ++i) {
    SCOPED_TRACE("job " + std::to_string(i) + " lora " + jobs[i].lora.dump());
    json st = wait_for(*c, jobs[i].id, is_terminal, 120.0);
    ASSERT_EQ(st["status"], "succeeded") << st.dump();
    auto fetch = [&](const std::string& variant) {
      auto r = c->Get("/v1/videos/" + jobs[i].id + "/content?variant=" + variant);
      EXPECT_TRUE(r && r->status == 200);
      const fs::path p = dir_.path() / (jobs[i].id + "_" + variant + ".safetensors");
      std::ofstream(p, std::ios::binary) << (r ? r->body : std::string());
      return p.string();
    };
    const std::vector<float> video = latents_of(fetch("video_latents"), "video_latents");
    const std::vector<float> audio = latents_of(fetch("audio_latents"), "audio_latents");
    auto expect =
        generate_latents(dir_.path() / ("generate_" + std::to_string(i)), embeddings_, jobs[i].generate_loras);
    ASSERT_FALSE(video.empty());
    ASSERT_EQ(video.size(), expect.first.size());
    ASSERT_EQ(audio.size(), expect.second.size());
    EXPECT_EQ(std::memcmp(video.data(), expect.first.data(), video.size() * 4), 0) << "video latents differ";
    EXPECT_EQ(std::memcmp(audio.data(), expect.second.data(), audio.size() * 4), 0) << "audio latents differ";
    auto rj = c->Get("/v1/videos/" + jobs[i].id + "/content?variant=run_json");
    ASSERT_TRUE(rj && rj->status == 200);
    const json run = json::parse(rj->body);
    ASSERT_EQ(run["lora"].size(), jobs[i].generate_loras.size()) << run["lora"].dump();
    for (const json& e : run["lora"]) EXPECT_EQ(e["mode"], "runtime");
    EXPECT_EQ(st["request"]["lora"].size(), jobs[i].generate_loras.size());
    served_video.push_back(video);
  }
  // The adapters change the result (else the comparison above proves nothing about switching).
  EXPECT_NE(std::memcmp(served_video[0].data(), served_video[2].data(), served_video[0].size() * 4), 0);
  EXPECT_NE(std::memcmp(served_video[0].data(), served_video[1].data(), served_video[0].size() * 4), 0);
}

TEST_F(VORTEX_SERVE_LORA_SUITE, BadAdapterNamesAndServersWithoutLoraDirAreRefused) {
  {
    TestServer s(options(true));
    ASSERT_TRUE(s.server);
    auto c = s.client();
    for (const json& bad : {json::array({"../native_comfy.safetensors"}), json::array({"missing.safetensors"}),
                            json::array({".hidden"}), json("native_comfy.safetensors"), json::array({1})}) {
      auto r = submit(*c, bad);
      ASSERT_TRUE(r);
      EXPECT_EQ(r->status, 400) << bad.dump() << ": " << r->body;
      EXPECT_EQ(json::parse(r->body)["error"]["field"], "lora") << r->body;
    }
  }
  TestServer plain(options(false));
  ASSERT_TRUE(plain.server);
  auto c = plain.client();
  auto r = submit(*c, json::array({"native_comfy.safetensors"}));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(json::parse(r->body)["error"]["message"].get<std::string>().find("--lora-dir"), std::string::npos);
}

// A symbolic link is refused when the adapter is opened (O_NOFOLLOW), not only when it is named: one named at
// admission is a 400, and one swapped in after admission (the file checked, then replaced by a link to a valid
// adapter elsewhere) fails the run when the worker opens it, with no output.
TEST_F(VORTEX_SERVE_LORA_SUITE, ASymbolicLinkIsRefusedAtAdmissionAndWhenSwappedInLater) {
  fs::create_directories(dir_.path() / "outside");
  const fs::path target = dir_.path() / "outside" / "native_comfy.safetensors";
  fs::copy_file(lora_fixture("native_comfy"), target);
  fs::create_symlink(target, dir_.path() / "loras" / "link.safetensors");
  {
    TestServer s(options(true));
    ASSERT_TRUE(s.server);
    auto c = s.client();
    auto r = submit(*c, json::array({"link.safetensors"}));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_EQ(json::parse(r->body)["error"]["field"], "lora") << r->body;
    EXPECT_NE(r->body.find("symbolic link"), std::string::npos) << r->body;
  }
  // The worker's side, step by step on the pipeline the server runs: admitted, then swapped, then run.
  vortex::serve::ServeOptions o = options(true);
  auto p = vortex::Pipeline::open(o.pipeline);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  vortex::ProgressSink quiet;
  ASSERT_TRUE((*p)->load_weights(quiet).ok());
  const fs::path swapped = dir_.path() / "loras" / "swap.safetensors";
  fs::copy_file(lora_fixture("native_comfy"), swapped);
  vortex::RunRequest req;
  req.text_embeddings_path = embeddings_;
  req.width = 64, req.height = 64, req.frames = 5, req.steps = 1, req.seed = 3;
  req.loras = {{swapped.string(), std::nullopt}};
  ASSERT_TRUE(vortex::check_request_loras(req.loras, (*p)->config(), false).ok());  // admission
  auto plan = (*p)->plan(req, quiet, vortex::FieldStyle::kJson);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  fs::remove(swapped);
  fs::create_symlink(target, swapped);
  const fs::path out = dir_.path() / "swap_out";
  fs::create_directories(out);
  const vortex::CancelToken never;
  auto run = (*p)->run(*plan, quiet, never, out.string());
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), vortex::ErrorCode::kInvalidArgument) << run.status().to_string();
  EXPECT_NE(run.status().message().find("symbolic link"), std::string::npos) << run.status().message();
  EXPECT_TRUE(fs::is_empty(out));
  // The same file back as a regular file runs.
  fs::remove(swapped);
  fs::copy_file(target, swapped);
  auto again = (*p)->run(*plan, quiet, never, out.string());
  EXPECT_TRUE(again.ok()) << again.status().to_string();
}

}  // namespace
}  // namespace vortex_serve_test
