// The POST /v1/videos body parser (src/serve/request.h): defaults, every field form (width/height, size,
// aspect_ratio + short_edge, frames or seconds), and the field named in each rejection.
#include "serve/request.h"

#include <gtest/gtest.h>

namespace vortex::serve {
namespace {

Result<RunRequest> parse(const std::string& body, std::string* field = nullptr, bool faults = false) {
  RequestLimits limits;
  limits.allow_fault_injection = faults;
  std::string f;
  Result<RunRequest> r = parse_video_request(body, limits, RunRequest{}, field ? field : &f);
  return r;
}

TEST(ServeRequest, DefaultsAndFields) {
  Result<RunRequest> r = parse(R"({"prompt": "a fox", "width": 64, "height": 96, "frames": 5, "steps": 3,
                                   "seed": 18446744073709551615, "schedule": "diffusers", "sampler": "euler",
                                   "attention": "sdpa", "precision": "bf16"})");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->prompt, "a fox");
  EXPECT_EQ(r->width, 64);
  EXPECT_EQ(r->height, 96);
  EXPECT_EQ(r->frames, 5);
  EXPECT_EQ(r->steps, 3);
  EXPECT_EQ(r->seed, 18446744073709551615ull);
  EXPECT_EQ(r->schedule, AvScheduleMode::kDiffusers);
  EXPECT_EQ(r->sampler, SamplerKind::kEuler);
  EXPECT_EQ(r->attention, AttentionKind::kSdpa);
  EXPECT_EQ(r->precision, Precision::kBf16);
  EXPECT_EQ(r->fail_alloc_after, -1);
  Result<RunRequest> d = parse(R"({"prompt": "x"})");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->media.has_value());  // unset: decoded whenever the server holds decoders
  Result<RunRequest> m = parse(R"({"prompt": "x", "media": false})");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->media, std::optional<bool>(false));
  std::string mf;
  EXPECT_FALSE(parse(R"({"prompt": "x", "media": 1})", &mf).ok());
  EXPECT_EQ(mf, "media");
  EXPECT_EQ(d->width, RunRequest{}.width);
  EXPECT_EQ(d->steps, RunRequest{}.steps);
}

TEST(ServeRequest, SizeForms) {
  Result<RunRequest> s = parse(R"({"prompt": "x", "size": "448x256"})");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->width, 448);
  EXPECT_EQ(s->height, 256);
  Result<RunRequest> a = parse(R"({"prompt": "x", "aspect_ratio": "16:9", "short_edge": 768})");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->width, 1376);  // 768 * 16 / 9 = 1365.3 -> the nearest multiple of 32
  EXPECT_EQ(a->height, 768);
  Result<RunRequest> p = parse(R"({"prompt": "x", "aspect_ratio": "9:16", "short_edge": 256})");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->width, 256);
  EXPECT_EQ(p->height, 448);
  Result<RunRequest> secs = parse(R"({"prompt": "x", "seconds": 2.5})");
  ASSERT_TRUE(secs.ok());
  EXPECT_DOUBLE_EQ(secs->seconds, 2.5);
}

TEST(ServeRequest, RejectionsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {"{", ""},
      {"3", ""},
      {R"({"prompt": "x", "extra": 1})", "extra"},
      {R"({"prompt": "x", "fail_alloc_after": 1})", "fail_alloc_after"},  // not allowed here
      {R"({"prompt": ["x"]})", "prompt"},
      {R"({"prompt": "x", "width": 64})", "height"},
      {R"({"prompt": "x", "height": 64})", "width"},
      {R"({"prompt": "x", "width": "64", "height": 64})", "width"},
      {R"({"prompt": "x", "short_edge": 64})", "aspect_ratio"},
      {R"({"prompt": "x", "aspect_ratio": "0:1", "short_edge": 64})", "aspect_ratio"},
      {R"({"prompt": "x", "steps": 1001})", "steps"},
      {R"({"prompt": "x", "seed": 1.5})", "seed"},
      {R"({"prompt": "x", "seconds": "1"})", "seconds"},
      {R"({"prompt": "x", "schedule": 1})", "schedule"},
      {R"({"prompt": "x", "lora": "a.safetensors"})", "lora"},
      {R"({"prompt": "x", "lora": ["../a.safetensors"]})", "lora"},
      {R"({"prompt": "x", "lora": ["dir/a.safetensors"]})", "lora"},
      {R"({"prompt": "x", "lora": [".a"]})", "lora"},
      {R"({"prompt": "x", "lora": [":0.5"]})", "lora"},
      {R"({"prompt": "x", "lora": [1]})", "lora"},
      {R"({"prompt": "x", "lora": ["a","b","c","d","e","f","g","h","i"]})", "lora"},
  };
  for (const auto& [body, field] : cases) {
    std::string f = "unset";
    Result<RunRequest> r = parse(body, &f);
    EXPECT_FALSE(r.ok()) << body;
    EXPECT_EQ(f, field) << body << ": " << r.status().message();
    EXPECT_FALSE(r.status().message().empty());
  }
  std::string f;
  EXPECT_TRUE(parse(R"({"prompt": "x", "fail_alloc_after": 1})", &f, /*faults=*/true).ok());
}

TEST(ServeRequest, LoraNamesAndScales) {
  Result<RunRequest> r = parse(R"({"prompt": "x", "lora": ["style.safetensors:0.8", "turbo.safetensors"]})");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->loras.size(), 2u);
  EXPECT_EQ(r->loras[0].path, "style.safetensors");
  EXPECT_EQ(*r->loras[0].scale, 0.8);
  EXPECT_EQ(r->loras[1].path, "turbo.safetensors");
  EXPECT_FALSE(r->loras[1].scale);
  EXPECT_TRUE(parse(R"({"prompt": "x"})")->loras.empty());
}

TEST(ServeRequest, DepthAndSizeLimitsComeBeforeParsing) {
  EXPECT_EQ(json_depth(R"({"a": "[[[[[["})", 16), 1);  // brackets inside strings do not count
  EXPECT_EQ(json_depth("[[[]]]", 16), 3);
  std::string f;
  EXPECT_FALSE(parse(std::string(100000, '[') + std::string(100000, ']'), &f).ok());
  RequestLimits small;
  small.max_body_bytes = 10;
  EXPECT_FALSE(parse_video_request(R"({"prompt": "a long one"})", small, RunRequest{}, &f).ok());
}

}  // namespace
}  // namespace vortex::serve
