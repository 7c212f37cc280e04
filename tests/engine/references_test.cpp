// ref2va request checks (engine/references.h) on the committed reference media (tests/media/fixtures/reference/media,
// tests/media/fixtures/images): a valid set passes in packed order, each refusal names the field and the file or the
// rule (keyframes beside references, a transformer that is not Ref2VA's, a missing encoder, a wrong kind prefix, the
// set's limits), a request without references is refused on the Ref2VA transformer, and run.json's record carries
// each file's SHA-256 as sha256sum computes it.
#include "engine/references.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "engine/run_manifest.h"

#ifndef VORTEX_REFERENCE_MEDIA
#error "VORTEX_REFERENCE_MEDIA must name tests/media/fixtures/reference/media"
#endif
#ifndef VORTEX_IMAGE_FIXTURES
#error "VORTEX_IMAGE_FIXTURES must name tests/media/fixtures/images"
#endif

namespace vortex {
namespace {

namespace fs = std::filesystem;

const std::string kMedia = VORTEX_REFERENCE_MEDIA;
const std::string kImages = VORTEX_IMAGE_FIXTURES;
const ReferenceEncoders kEncoders{"/snap/vae", "/snap/audio_vae"};

// A Ref2VA transformer folder: a snapshot root's transformer_ref/ (refuse_reference_transformer goes by the name).
class RefRoot {
 public:
  RefRoot() {
    std::random_device rd;
    root_ =
        fs::temp_directory_path() / ("vortex_references_" + std::to_string(::getpid()) + "_" + std::to_string(rd()));
    fs::create_directories(root_ / "transformer_ref");
    fs::create_directories(root_ / "transformer");
  }
  ~RefRoot() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  std::string ref() const { return (root_ / "transformer_ref").string(); }
  std::string fl2va() const { return (root_ / "transformer").string(); }

 private:
  fs::path root_;
};

TEST(References, AValidSetPassesInPackedOrder) {
  RefRoot root;
  const std::vector<std::string> specs = {kImages + "/rgb.png", kMedia + "/clip_sound.mkv",
                                          "audio:" + kMedia + "/voice_mono.wav",
                                          "video:" + kMedia + "/clip_silent.mkv"};
  auto probes = check_references(specs, false, root.ref(), kEncoders, "--ref");
  ASSERT_TRUE(probes.ok()) << probes.status().to_string();
  ASSERT_EQ(probes->size(), 4u);
  EXPECT_EQ((*probes)[0].kind, ReferenceKind::kImage);
  EXPECT_EQ((*probes)[1].kind, ReferenceKind::kVideo);
  EXPECT_TRUE((*probes)[1].has_audio);
  EXPECT_EQ((*probes)[2].kind, ReferenceKind::kAudio);
  EXPECT_EQ((*probes)[3].kind, ReferenceKind::kVideo);
  EXPECT_FALSE((*probes)[3].has_audio);
  // The built-in synthetic configs (no checkpoint) stand in for the Ref2VA transformer.
  EXPECT_TRUE(check_references(specs, false, "", kEncoders, "--ref").ok());
  // No references: nothing to check.
  auto none = check_references({}, true, root.fl2va(), {}, "--ref");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(References, RefusalsNameTheFieldAndTheCause) {
  RefRoot root;
  const std::string image = kImages + "/rgb.png", voice = kMedia + "/voice_mono.wav";
  struct Case {
    std::vector<std::string> specs;
    bool keyframes;
    std::string checkpoint;
    ReferenceEncoders encoders;
    std::string want;
  };
  const std::vector<Case> cases = {
      {{image}, true, root.ref(), kEncoders, "keyframes (fl2va)"},
      {{image}, false, root.fl2va(), kEncoders, "Ref2VA transformer"},
      {{image}, false, root.ref(), {"", "/a"}, "video VAE's encoder"},
      {{image, voice}, false, root.ref(), {"/v", ""}, "audio VAE's encoder"},
      {{kMedia + "/clip_sound.mkv"}, false, root.ref(), {"/v", ""}, "audio VAE's encoder"},
      {{voice}, false, root.ref(), kEncoders, "paired with at least one image or video"},
      {{"video:" + image}, false, root.ref(), kEncoders, "given as video"},
      {{kMedia + "/voice_short.wav", image}, false, root.ref(), kEncoders, "voice_short.wav"},
      {{kMedia + "/no_such.mp4"}, false, root.ref(), kEncoders, "no_such.mp4"},
      {{"image:"}, false, root.ref(), kEncoders, "no file named"},
      {std::vector<std::string>(10, image), false, root.ref(), kEncoders, "at most 9 image"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.want);
    auto r = check_references(c.specs, c.keyframes, c.checkpoint, c.encoders, "--ref");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message().rfind("--ref", 0), 0u) << r.status().message();
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status().message();
  }
}

TEST(References, TheRef2vaTransformerTakesOnlyReferences) {
  RefRoot root;
  Status t2va = check_task_transformer(false, root.ref());
  ASSERT_FALSE(t2va.ok());
  EXPECT_NE(t2va.message().find(root.fl2va()), std::string::npos) << t2va.message();
  EXPECT_TRUE(check_task_transformer(true, root.ref()).ok());
  EXPECT_TRUE(check_task_transformer(false, root.fl2va()).ok());
  EXPECT_TRUE(check_task_transformer(false, "").ok());
}

TEST(References, RunJsonRecordsEveryFileWithItsSha256) {
  RefRoot root;
  const std::vector<std::string> specs = {kMedia + "/clip_sound.mkv", kImages + "/rgb.png", kMedia + "/voice_mono.wav"};
  auto probes = check_references(specs, false, root.ref(), kEncoders, "--ref");
  ASSERT_TRUE(probes.ok()) << probes.status().to_string();
  auto j = reference_inputs_json(*probes);
  ASSERT_TRUE(j.ok()) << j.status().to_string();
  ASSERT_EQ(j->size(), 3u);
  for (size_t i = 0; i < specs.size(); ++i) {
    const nlohmann::json& e = (*j)[i];
    std::ifstream in(specs[i], std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(e["index"], static_cast<int>(i));
    EXPECT_EQ(e["path"], specs[i]);
    EXPECT_EQ(e["bytes"], bytes.size());
    EXPECT_EQ(e["sha256"], sha256_hex(bytes.data(), bytes.size()));
  }
  EXPECT_EQ((*j)[0]["kind"], "video");
  EXPECT_EQ((*j)[0]["has_audio"], true);
  EXPECT_EQ((*j)[0]["fps"], 10.0);
  EXPECT_EQ((*j)[1]["kind"], "image");
  EXPECT_FALSE((*j)[1].contains("duration_s"));
  EXPECT_EQ((*j)[2]["kind"], "audio");
  EXPECT_EQ((*j)[2]["channels"], 1);
  EXPECT_EQ((*j)[2]["sample_rate"], 8000);
  // A file gone since it was probed fails the record.
  std::vector<ReferenceProbe> gone = *probes;
  gone[1].path = kImages + "/no_such.png";
  EXPECT_FALSE(reference_inputs_json(gone).ok());
}

}  // namespace
}  // namespace vortex
