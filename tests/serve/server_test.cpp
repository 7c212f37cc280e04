// API contract tests of `vortex serve` (src/serve/server.h), in process on 127.0.0.1 with an ephemeral
// port: the curl examples of docs/serve.md run as written (read from the doc), then every route and
// every error: bad fields, sizes, queue full, memory admission, an injected out-of-memory, auth, cancel
// of a running job, SSE, retention, shutdown, the files under --data.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <regex>
#include <sstream>

#include "serve_test_util.h"

#ifndef VORTEX_SOURCE_DIR
#error "VORTEX_SOURCE_DIR must name the source tree (docs/serve.md)"
#endif

namespace vortex_serve_test {
namespace {

// ---- the doc's curl examples ----

struct Curl {
  int expect = 0;
  std::string method = "GET", url, body, content_type, output;
  std::vector<std::pair<std::string, std::string>> form;  // name -> value ("@file" for a file)
  std::vector<std::string> headers;
};

// Shell words: 'single' and "double" quotes, backslash-newline continuations already joined.
std::vector<std::string> shell_words(const std::string& line) {
  std::vector<std::string> words;
  std::string cur;
  bool any = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '\'' || c == '"') {
      const size_t end = line.find(c, i + 1);
      cur += line.substr(i + 1, end - i - 1);
      any = true;
      i = end;
    } else if (c == ' ' || c == '\t') {
      if (any) words.push_back(cur);
      cur.clear();
      any = false;
    } else {
      cur += c;
      any = true;
    }
  }
  if (any) words.push_back(cur);
  return words;
}

std::vector<Curl> doc_examples() {
  std::ifstream f(std::string(VORTEX_SOURCE_DIR) + "/docs/serve.md");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  const size_t start = doc.find("## Examples");
  const size_t block = doc.find("```sh", start);
  const size_t end = doc.find("```", block + 5);
  std::istringstream lines(doc.substr(block + 5, end - block - 5));
  std::vector<Curl> out;
  std::string line, joined;
  int expect = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("# -> ", 0) == 0) {
      expect = std::stoi(line.substr(5));
      continue;
    }
    if (!line.empty() && line.back() == '\\') {
      joined += line.substr(0, line.size() - 1);
      continue;
    }
    joined += line;
    if (joined.rfind("curl", 0) == 0) {
      Curl c;
      c.expect = expect;
      std::vector<std::string> w = shell_words(joined);
      for (size_t i = 1; i < w.size(); ++i) {
        if (w[i] == "-X") {
          c.method = w[++i];
        } else if (w[i] == "-H") {
          c.headers.push_back(w[++i]);
        } else if (w[i] == "-d") {
          c.body = w[++i];
          if (c.method == "GET") c.method = "POST";
        } else if (w[i] == "-F") {
          const std::string kv = w[++i];
          c.form.emplace_back(kv.substr(0, kv.find('=')), kv.substr(kv.find('=') + 1));
        } else if (w[i] == "-o") {
          c.output = w[++i];
        } else if (w[i][0] != '-') {
          c.url = w[i];
        }
      }
      out.push_back(c);
      expect = 0;
    }
    joined.clear();
  }
  return out;
}

// A safetensors file with one F32 [rows, cols] tensor of small values.
std::string embeddings_file(int rows, int cols) {
  std::string header = R"({"text":{"dtype":"F32","shape":[)" + std::to_string(rows) + "," + std::to_string(cols) +
                       R"(],"data_offsets":[0,)" + std::to_string(rows * cols * 4) + "]}}";
  while (header.size() % 8 != 0) header += ' ';
  std::string bytes(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  bytes += header;
  for (int i = 0; i < rows * cols; ++i) {
    const float v = 0.01f * static_cast<float>((i % 17) - 8);
    bytes.append(reinterpret_cast<const char*>(&v), 4);
  }
  return bytes;
}

TEST(ServeDoc, CurlExamplesAnswerAsDocumented) {
  ScratchDir dir;
  vortex::serve::ServeOptions o = tiny_options(dir.path() / "data");
  o.pipeline.synthetic_vae = vortex::SyntheticVae::kTiny;  // the doc's server: --synthetic-vae tiny
  TestServer s(o);
  ASSERT_TRUE(s.server);
  auto c = s.client();
  const std::vector<Curl> examples = doc_examples();
  ASSERT_GE(examples.size(), 10u);
  std::string id;
  for (const Curl& ex : examples) {
    ASSERT_NE(ex.expect, 0) << "an example without '# -> STATUS': " << ex.url;
    std::string url = std::regex_replace(ex.url, std::regex("\\$ID"), id);
    const std::string base = "http://127.0.0.1:8000";
    ASSERT_EQ(url.rfind(base, 0), 0u) << url;
    const std::string path = url.substr(base.size());
    if (path.find("/content") != std::string::npos) wait_for(*c, id, is_terminal);
    auto send = [&]() -> httplib::Result {
      if (!ex.form.empty()) {
        httplib::MultipartFormDataItems items;
        for (const auto& [name, value] : ex.form) {
          if (!value.empty() && value[0] == '@') {
            items.push_back({name, embeddings_file(3, 128), value.substr(1), "application/octet-stream"});
          } else {
            items.push_back({name, value, "", "application/json"});
          }
        }
        return c->Post(path, items);
      }
      if (ex.method == "POST") return c->Post(path, ex.body, "application/json");
      if (ex.method == "DELETE") return c->Delete(path);
      return c->Get(path);
    };
    httplib::Result r = send();
    ASSERT_TRUE(r) << ex.method << " " << path;
    EXPECT_EQ(r->status, ex.expect) << ex.method << " " << path << ": " << r->body;
    if (r->status == 201) id = json::parse(r->body)["id"];
    if (path.find("/events") != std::string::npos) {
      EXPECT_NE(r->body.find("event: done"), std::string::npos) << r->body;
    }
  }
}

// ---- decoded media ----

// With decoders loaded a job's content is its MP4 (and WAV), the latents stay as variants, run.json records
// the decode; "media": false keeps a job to latents; media on a server without decoders is refused.
TEST(ServeMedia, DecodedJobsServeTheMp4AndKeepTheLatents) {
  ScratchDir dir;
  vortex::serve::ServeOptions o = tiny_options(dir.path() / "data");
  o.pipeline.synthetic_vae = vortex::SyntheticVae::kTiny;
  TestServer s(o);
  ASSERT_TRUE(s.server);
  auto c = s.client();
  auto h = c->Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(body_json(h)["content_kind"], "video");
  auto r = c->Post("/v1/videos", R"({"prompt": "x", "width": 64, "height": 64, "frames": 22, "steps": 2})",
                   "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  const std::string id = body_json(r)["id"];
  json done = wait_for(*c, id, is_terminal);
  ASSERT_EQ(done["status"], "succeeded") << done.dump();
  EXPECT_EQ(done["content"]["kind"], "video");
  EXPECT_EQ(done["request"]["media"], true);
  auto mp4 = c->Get("/v1/videos/" + id + "/content");
  ASSERT_TRUE(mp4);
  ASSERT_EQ(mp4->status, 200);
  EXPECT_EQ(mp4->get_header_value("Content-Type"), "video/mp4");
  EXPECT_EQ(mp4->get_header_value("X-Vortex-Content-Kind"), "video");
  ASSERT_GT(mp4->body.size(), 8u);
  EXPECT_EQ(mp4->body.substr(4, 4), "ftyp");
  auto wav = c->Get("/v1/videos/" + id + "/content?variant=audio");
  ASSERT_TRUE(wav);
  ASSERT_EQ(wav->status, 200);
  EXPECT_EQ(wav->body.substr(0, 4), "RIFF");
  auto lat = c->Get("/v1/videos/" + id + "/content?variant=video_latents");
  ASSERT_TRUE(lat);
  EXPECT_EQ(lat->status, 200);
  EXPECT_EQ(lat->get_header_value("X-Vortex-Content-Kind"), "latents");
  auto run = c->Get("/v1/videos/" + id + "/content?variant=run_json");
  ASSERT_TRUE(run);
  json manifest = body_json(run);
  EXPECT_EQ(manifest["decode"]["vae"], "synthetic-tiny");
  EXPECT_TRUE(manifest["outputs"].contains("video.mp4")) << manifest["outputs"].dump();
  EXPECT_GT(manifest["decode"]["tile_forwards"].get<int>(), 0);

  // Too few frames to decode: refused at submission, naming frames; "media": false runs it to latents.
  auto few = c->Post("/v1/videos", R"({"prompt": "x", "width": 64, "height": 64, "frames": 5, "steps": 2})",
                     "application/json");
  ASSERT_TRUE(few);
  EXPECT_EQ(few->status, 400);
  EXPECT_EQ(body_json(few)["error"]["field"], "frames") << few->body;
  auto lat_only =
      c->Post("/v1/videos", R"({"prompt": "x", "width": 64, "height": 64, "frames": 5, "steps": 2, "media": false})",
              "application/json");
  ASSERT_TRUE(lat_only);
  ASSERT_EQ(lat_only->status, 201) << lat_only->body;
  const std::string id2 = body_json(lat_only)["id"];
  json done2 = wait_for(*c, id2, is_terminal);
  ASSERT_EQ(done2["status"], "succeeded") << done2.dump();
  EXPECT_EQ(done2["content"]["kind"], "latents");
  auto none = c->Get("/v1/videos/" + id2 + "/content?variant=video");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 404);
  auto def = c->Get("/v1/videos/" + id2 + "/content");
  ASSERT_TRUE(def);
  EXPECT_EQ(def->status, 200);
  EXPECT_EQ(def->get_header_value("X-Vortex-Content-Kind"), "latents");
}

TEST(ServeMedia, MediaWithoutDecodersIsRefused) {
  ScratchDir dir;
  TestServer s(tiny_options(dir.path() / "data"));
  ASSERT_TRUE(s.server);
  auto c = s.client();
  auto r =
      c->Post("/v1/videos", R"({"prompt": "x", "width": 64, "height": 64, "frames": 22, "steps": 2, "media": true})",
              "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(body_json(r)["error"]["field"], "media") << r->body;
  auto bad = c->Post("/v1/videos", R"({"prompt": "x", "media": "yes"})", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(body_json(bad)["error"]["field"], "media") << bad->body;
}

// ---- routes and errors ----

class ServeApi : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<TestServer>(tiny_options(dir_.path() / "data"));
    ASSERT_TRUE(server_->server);
    c_ = server_->client();
  }
  json post(const std::string& body, int expect) {
    auto r = c_->Post("/v1/videos", body, "application/json");
    EXPECT_TRUE(r);
    if (!r) return json();
    EXPECT_EQ(r->status, expect) << body << " -> " << r->body;
    return json::parse(r->body, nullptr, false);
  }
  void expect_field(const std::string& body, const std::string& field) {
    json e = post(body, 400);
    ASSERT_TRUE(e.contains("error")) << e.dump();
    if (field.empty()) {
      EXPECT_TRUE(e["error"]["field"].is_null()) << e.dump();
    } else {
      EXPECT_EQ(e["error"]["field"], field) << body << " -> " << e.dump();
    }
    EXPECT_FALSE(e["error"]["message"].get<std::string>().empty());
  }
  ScratchDir dir_;
  std::unique_ptr<TestServer> server_;
  std::unique_ptr<httplib::Client> c_;
};

TEST_F(ServeApi, BadRequestsNameTheField) {
  expect_field("not json", "");
  expect_field("[1, 2]", "");
  expect_field(std::string(100, '[') + std::string(100, ']'), "");
  expect_field(R"({"prompt": "x", "colour": "red"})", "colour");
  expect_field(R"({"prompt": 5})", "prompt");
  expect_field(R"({"prompt": ""})", "prompt");
  expect_field(R"({"width": 64, "height": 64})", "prompt");
  expect_field(R"({"prompt": "x", "steps": 0})", "steps");
  expect_field(R"({"prompt": "x", "steps": 2.5})", "steps");
  expect_field(R"({"prompt": "x", "steps": "2"})", "steps");
  expect_field(R"({"prompt": "x", "width": 64})", "height");
  expect_field(R"({"prompt": "x", "width": 100, "height": 64})", "width");
  expect_field(R"({"prompt": "x", "width": 9000, "height": 64})", "width");
  expect_field(R"({"prompt": "x", "size": "64by64"})", "size");
  expect_field(R"({"prompt": "x", "size": "64x64", "width": 64, "height": 64})", "size");
  expect_field(R"({"prompt": "x", "aspect_ratio": "16:9"})", "short_edge");
  expect_field(R"({"prompt": "x", "aspect_ratio": "wide", "short_edge": 64})", "aspect_ratio");
  expect_field(R"({"prompt": "x", "frames": 0})", "frames");
  expect_field(R"({"prompt": "x", "frames": 5, "seconds": 1})", "seconds");
  expect_field(R"({"prompt": "x", "seconds": -1})", "seconds");
  expect_field(R"({"prompt": "x", "seed": -3})", "seed");
  expect_field(R"({"prompt": "x", "schedule": "karras"})", "schedule");
  expect_field(R"({"prompt": "x", "sampler": "dpm"})", "sampler");
  expect_field(R"({"prompt": "x", "attention": "flash"})", "attention");
  expect_field(R"({"prompt": "x", "attention": "sage2"})", "attention");  // CUDA only
  expect_field(R"({"prompt": "x", "precision": "fp8"})", "precision");    // not the loaded one
  expect_field(R"({"prompt": "x", "fail_alloc_after": -2})", "fail_alloc_after");
  // Too large a body: 413 with a JSON error.
  auto r = c_->Post("/v1/videos", R"({"prompt": ")" + std::string(2 << 20, 'a') + R"("})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_TRUE(json::parse(r->body, nullptr, false).contains("error")) << r->body.substr(0, 200);
  // None of them made a job or left a directory.
  auto list = body_json(c_->Get("/v1/videos"));
  EXPECT_TRUE(list["data"].empty()) << list.dump();
  EXPECT_TRUE(fs::is_empty(dir_.path() / "data" / "jobs"));
}

TEST_F(ServeApi, UnknownJobsRoutesAndPathsAre404) {
  for (const std::string p : {"/v1/videos/video_000000000000000000000000", "/v1/videos/..%2F..%2Fetc%2Fpasswd",
                              "/v1/videos/../../etc/passwd", "/v1/videos/x/content", "/nope"}) {
    auto r = c_->Get(p);
    ASSERT_TRUE(r) << p;
    EXPECT_EQ(r->status, 404) << p << ": " << r->body;
    EXPECT_TRUE(json::parse(r->body, nullptr, false).contains("error")) << p << ": " << r->body;
  }
  auto d = c_->Delete("/v1/videos/video_000000000000000000000000");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, 404);
  EXPECT_EQ(json::parse(d->body)["error"]["field"], "id");
}

TEST_F(ServeApi, JobRunsToSuccessWithTimingsAndContent) {
  json j = post(small_job(3), 201);
  const std::string id = j["id"];
  EXPECT_EQ(j["status"], "queued");
  EXPECT_EQ(j["object"], "video");
  auto early = c_->Get("/v1/videos/" + id + "/content");
  j = wait_for(*c_, id, is_terminal);
  ASSERT_EQ(j["status"], "succeeded") << j.dump();
  if (early && early->status != 200) {
    EXPECT_EQ(early->status, 409);
  }
  EXPECT_EQ(j["step"], 3);
  EXPECT_EQ(j["total_steps"], 3);
  EXPECT_EQ(j["progress"], 100);
  EXPECT_EQ(j["request"]["text_source"], "prompt");
  EXPECT_EQ(j["request"]["frames"], 5);
  EXPECT_EQ(j["timing"]["step_seconds"].size(), 3u);
  EXPECT_GT(j["timing"]["wall_seconds"].get<double>(), 0.0);
  EXPECT_GE(j["timing"]["wall_seconds"].get<double>(), j["timing"]["sampling_seconds"].get<double>());
  EXPECT_EQ(j["content"]["kind"], "latents");
  auto content = c_->Get("/v1/videos/" + id + "/content");
  ASSERT_TRUE(content);
  EXPECT_EQ(content->status, 200);
  EXPECT_EQ(content->get_header_value("X-Vortex-Content-Kind"), "latents");
  EXPECT_GT(content->body.size(), 8u);
  auto run = c_->Get("/v1/videos/" + id + "/content?variant=run_json");
  ASSERT_TRUE(run);
  json manifest = json::parse(run->body);
  EXPECT_EQ(manifest["schema"], "vortex.run/1");
  EXPECT_EQ(manifest["request"]["prompt"], "a lighthouse at dusk");
  auto bad = c_->Get("/v1/videos/" + id + "/content?variant=mp4");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  auto del = c_->Delete("/v1/videos/" + id);
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 409);
  // The same prompt and seed give the same latents (synthetic text rows seeded by the prompt).
  json k = post(small_job(3), 201);
  k = wait_for(*c_, k["id"], is_terminal);
  auto content2 = c_->Get("/v1/videos/" + k["id"].get<std::string>() + "/content");
  ASSERT_TRUE(content2);
  EXPECT_EQ(content2->body, content->body);
  // On disk: job.json and the published output directory, nothing staged.
  const fs::path jd = dir_.path() / "data" / "jobs" / id;
  EXPECT_TRUE(fs::exists(jd / "job.json"));
  EXPECT_TRUE(fs::exists(jd / "output" / "video_latents.safetensors"));
  EXPECT_FALSE(fs::exists(jd / "output.partial"));
  std::ifstream jf(jd / "job.json");
  EXPECT_EQ(json::parse(jf)["status"], "succeeded");
}

TEST_F(ServeApi, RunningJobIsCancelledWithinOneStep) {
  json j = post(small_job(1000), 201);
  const std::string id = j["id"];
  j = wait_for(*c_, id, [](const json& s) { return s["step"].get<int>() >= 2; });
  ASSERT_EQ(j["status"], "running") << j.dump();
  auto d = c_->Delete("/v1/videos/" + id);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, 202);
  EXPECT_TRUE(json::parse(d->body)["cancel_requested"].get<bool>());
  j = wait_for(*c_, id, is_terminal);
  ASSERT_EQ(j["status"], "cancelled") << j.dump();
  EXPECT_LE(j["step"].get<int>() - j["timing"]["cancel_at_step"].get<int>(), 1) << j.dump();
  EXPECT_GE(j["timing"]["cancel_latency_seconds"].get<double>(), 0.0);
  EXPECT_FALSE(fs::exists(dir_.path() / "data" / "jobs" / id / "output"));
  EXPECT_FALSE(fs::exists(dir_.path() / "data" / "jobs" / id / "output.partial"));
  auto m = c_->Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("vortex_cancel_latency_seconds_count 1"), std::string::npos) << m->body;
}

TEST_F(ServeApi, InjectedOutOfMemoryFailsTheJobAndTheServerGoesOn) {
  json j = post(R"({"prompt": "x", "width": 64, "height": 64, "frames": 5, "steps": 2, "fail_alloc_after": 3})", 201);
  j = wait_for(*c_, j["id"], is_terminal);
  ASSERT_EQ(j["status"], "failed") << j.dump();
  EXPECT_EQ(j["error"]["type"], "out_of_memory") << j.dump();
  EXPECT_NE(j["error"]["message"].get<std::string>().find("injected"), std::string::npos);
  json k = post(small_job(2), 201);
  k = wait_for(*c_, k["id"], is_terminal);
  EXPECT_EQ(k["status"], "succeeded") << k.dump();
}

TEST_F(ServeApi, EmbeddingsUploadAndBadUploads) {
  httplib::MultipartFormDataItems ok = {
      {"request", R"({"width": 64, "height": 64, "frames": 5, "steps": 2})", "", "application/json"},
      {"text_embeddings", embeddings_file(4, 128), "e.safetensors", "application/octet-stream"}};
  auto r = c_->Post("/v1/videos", ok);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  json j = wait_for(*c_, json::parse(r->body)["id"], is_terminal);
  EXPECT_EQ(j["status"], "succeeded") << j.dump();
  EXPECT_EQ(j["request"]["text_source"], "embeddings");
  EXPECT_EQ(j["request"]["text_rows"], 4);

  httplib::MultipartFormDataItems garbage = {{"text_embeddings", "not a safetensors file", "e.safetensors", ""}};
  r = c_->Post("/v1/videos", garbage);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["field"], "text_embeddings") << r->body;
  httplib::MultipartFormDataItems wide = {{"text_embeddings", embeddings_file(2, 100), "e.safetensors", ""}};
  r = c_->Post("/v1/videos", wide);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["field"], "text_embeddings") << r->body;
  httplib::MultipartFormDataItems both = {{"request", R"({"prompt": "x"})", "", ""},
                                          {"text_embeddings", embeddings_file(2, 128), "e.safetensors", ""}};
  r = c_->Post("/v1/videos", both);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["field"], "prompt") << r->body;
  httplib::MultipartFormDataItems stray = {{"file", "x", "x.bin", ""}};
  r = c_->Post("/v1/videos", stray);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["field"], "file") << r->body;
  // Refused uploads leave no job directory behind (the accepted one is there).
  size_t dirs = 0;
  for (const auto& e : fs::directory_iterator(dir_.path() / "data" / "jobs")) dirs += e.is_directory() ? 1 : 0;
  EXPECT_EQ(dirs, 1u);
}

TEST_F(ServeApi, EventsStreamProgressThenDone) {
  json j = post(small_job(4), 201);
  const std::string id = j["id"];
  std::string stream;
  auto r = c_->Get("/v1/videos/" + id + "/events", [&](const char* data, size_t n) {
    stream.append(data, n);
    return true;
  });
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  EXPECT_NE(stream.find("event: progress"), std::string::npos) << stream;
  const size_t done = stream.find("event: done\ndata: ");
  ASSERT_NE(done, std::string::npos) << stream;
  json last = json::parse(stream.substr(done + 18, stream.find('\n', done + 18) - done - 18));
  EXPECT_EQ(last["status"], "succeeded");
}

TEST_F(ServeApi, HealthListAndMetrics) {
  auto h = c_->Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  json hj = json::parse(h->body);
  EXPECT_EQ(hj["status"], "ok");
  EXPECT_EQ(hj["model"], "h3-tiny");
  EXPECT_EQ(hj["content_kind"], "latents");
  json a = post(small_job(2), 201);
  json b = post(small_job(2, 2), 201);
  wait_for(*c_, b["id"], is_terminal);
  json list = body_json(c_->Get("/v1/videos"));
  ASSERT_EQ(list["data"].size(), 2u);
  EXPECT_EQ(list["data"][0]["id"], a["id"]);
  auto m = c_->Get("/metrics");
  ASSERT_TRUE(m);
  for (const char* name : {"vortex_queue_length 0", "vortex_jobs{state=\"succeeded\"} 2", "vortex_step_seconds_count 4",
                           "vortex_job_wall_seconds_count 2", "vortex_job_sampling_seconds_sum",
                           "vortex_gpu_memory_bytes{kind=\"in_use\"}", "vortex_process_resident_bytes",
                           "vortex_requests_rejected_total{reason=\"queue_full\"} 0"}) {
    EXPECT_NE(m->body.find(name), std::string::npos) << name << "\n" << m->body;
  }
}

TEST(ServeLimits, FullQueueIs429WithRetryAfter) {
  ScratchDir dir;
  auto o = tiny_options(dir.path() / "data");
  o.queue_limit = 1;
  TestServer s(o);
  ASSERT_TRUE(s.server);
  auto c = s.client();
  auto first = c->Post("/v1/videos", small_job(1000), "application/json");  // runs
  ASSERT_TRUE(first && first->status == 201);
  const std::string running = json::parse(first->body)["id"];
  wait_for(*c, running, [](const json& j) { return j["status"] == "running"; });
  auto second = c->Post("/v1/videos", small_job(2), "application/json");  // waits
  ASSERT_TRUE(second && second->status == 201);
  auto third = c->Post("/v1/videos", small_job(2), "application/json");
  ASSERT_TRUE(third);
  EXPECT_EQ(third->status, 429) << third->body;
  EXPECT_FALSE(third->get_header_value("Retry-After").empty());
  EXPECT_EQ(json::parse(third->body)["error"]["type"], "queue_full");
  // Cancelling the queued one frees the place.
  auto del = c->Delete("/v1/videos/" + json::parse(second->body)["id"].get<std::string>());
  ASSERT_TRUE(del);
  EXPECT_EQ(json::parse(del->body)["status"], "cancelled");
  auto fourth = c->Post("/v1/videos", small_job(2), "application/json");
  ASSERT_TRUE(fourth);
  EXPECT_EQ(fourth->status, 201);
  c->Delete("/v1/videos/" + running);
}

TEST(ServeLimits, RequestBeyondTheMemoryBudgetIsRefused) {
  ScratchDir dir;
  auto o = tiny_options(dir.path() / "data");
  o.memory_limit_bytes = 2'000'000;
  TestServer s(o);
  ASSERT_TRUE(s.server);
  auto c = s.client();
  auto big = c->Post("/v1/videos", R"({"prompt": "x", "width": 1024, "height": 1024, "frames": 124, "steps": 1})",
                     "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 400) << big->body;
  EXPECT_EQ(json::parse(big->body)["error"]["type"], "insufficient_memory") << big->body;
  auto small = c->Post("/v1/videos", R"({"prompt": "x", "width": 32, "height": 32, "frames": 5, "steps": 1})",
                       "application/json");
  ASSERT_TRUE(small);
  EXPECT_EQ(small->status, 201) << small->body;
}

TEST(ServeLimits, BearerTokenIsRequiredExceptForHealth) {
  ScratchDir dir;
  auto o = tiny_options(dir.path() / "data");
  o.api_key = "s3cret-key";
  TestServer s(o);
  ASSERT_TRUE(s.server);
  auto c = s.client();
  auto h = c->Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  for (const httplib::Headers& hs :
       {httplib::Headers{}, httplib::Headers{{"Authorization", "Bearer wrong"}},
        httplib::Headers{{"Authorization", "s3cret-key"}}, httplib::Headers{{"Authorization", "Bearer s3cret-ke"}}}) {
    auto r = c->Get("/v1/videos", hs);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401);
    EXPECT_EQ(json::parse(r->body)["error"]["type"], "unauthorized");
  }
  auto ok = c->Get("/v1/videos", {{"Authorization", "Bearer s3cret-key"}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_TRUE(vortex::serve::constant_time_equals("abc", "abc"));
  EXPECT_FALSE(vortex::serve::constant_time_equals("abc", "abd"));
  EXPECT_FALSE(vortex::serve::constant_time_equals("abc", "abcd"));
  EXPECT_FALSE(vortex::serve::constant_time_equals("", "a"));
}

TEST(ServeLimits, RetentionForgetsTheOldestAndDeletesOnlyTheirDirectories) {
  ScratchDir dir;
  auto o = tiny_options(dir.path() / "data");
  o.keep_jobs = 2;
  // A file of the user's in --data survives retention.
  fs::create_directories(dir.path() / "data");
  std::ofstream(dir.path() / "data" / "mine.txt") << "keep me";
  TestServer s(o);
  ASSERT_TRUE(s.server);
  auto c = s.client();
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    auto r = c->Post("/v1/videos", small_job(1, static_cast<uint64_t>(i)), "application/json");
    ASSERT_TRUE(r && r->status == 201);
    ids.push_back(json::parse(r->body)["id"]);
    wait_for(*c, ids.back(), is_terminal);
  }
  for (int i = 0; i < 4; ++i) {
    auto r = c->Get("/v1/videos/" + ids[i]);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, i < 2 ? 404 : 200) << i;
    EXPECT_EQ(fs::exists(dir.path() / "data" / "jobs" / ids[i]), i >= 2) << i;
  }
  EXPECT_TRUE(fs::exists(dir.path() / "data" / "mine.txt"));
}

TEST(ServeShutdown, FinishModeCompletesTheRunningJobAndCancelsTheQueue) {
  ScratchDir dir;
  TestServer s(tiny_options(dir.path() / "data"));
  ASSERT_TRUE(s.server);
  auto c = s.client();
  auto a = c->Post("/v1/videos", small_job(40), "application/json");
  auto b = c->Post("/v1/videos", small_job(2), "application/json");
  ASSERT_TRUE(a && b && a->status == 201 && b->status == 201);
  const std::string ia = json::parse(a->body)["id"], ib = json::parse(b->body)["id"];
  wait_for(*c, ia, [](const json& j) { return j["status"] == "running"; });
  s.server->shutdown(vortex::serve::RunningJob::kFinish);
  auto state = [&](const std::string& id) {
    std::ifstream f(dir.path() / "data" / "jobs" / id / "job.json");
    return json::parse(f)["status"].get<std::string>();
  };
  EXPECT_EQ(state(ia), "succeeded");
  EXPECT_EQ(state(ib), "cancelled");
  EXPECT_FALSE(c->Get("/health"));  // no longer listening
}

TEST(ServeShutdown, CancelModeStopsTheRunningJob) {
  ScratchDir dir;
  TestServer s(tiny_options(dir.path() / "data"));
  ASSERT_TRUE(s.server);
  auto c = s.client();
  auto a = c->Post("/v1/videos", small_job(1000), "application/json");
  ASSERT_TRUE(a && a->status == 201);
  const std::string ia = json::parse(a->body)["id"];
  wait_for(*c, ia, [](const json& j) { return j["step"].get<int>() >= 1; });
  s.server->shutdown(vortex::serve::RunningJob::kCancel);
  std::ifstream f(dir.path() / "data" / "jobs" / ia / "job.json");
  EXPECT_EQ(json::parse(f)["status"], "cancelled");
}

}  // namespace
}  // namespace vortex_serve_test
