// Every config file of the MiniMax-H3 release (tests/fixtures/release/, verbatim copies: their git blob ids are
// checked against MANIFEST.tsv) through every reader Vortex has: the transformer's four configs give the H3
// numbers (50 blocks, hidden 5376, 56 x 128 heads, FFN 14336, 24/32 latent channels, text 5120) in both key spellings
// and both class names; the video and audio VAE configs (diffusers and original layouts) give the same decoder; the
// three text encoder configs give Qwen3-VL-32B; the pipeline indexes give the layouts and text layer 50; each reader
// refuses the other components' files naming what they hold; the Ref2VA transformer folders are refused naming the
// FL2VA one.
#include <gtest/gtest.h>
#include <openssl/sha.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "core/config_json.h"
#include "engine/model_folder.h"
#include "io/checkpoint.h"
#include "text_encoder/text_encoder.h"
#include "text_encoder/text_encoder_config.h"
#include "vae/audio_vae.h"
#include "vae/video_vae.h"
#include "vortex/config.h"

#ifndef VORTEX_RELEASE_FIXTURES
#error "VORTEX_RELEASE_FIXTURES must name tests/fixtures/release"
#endif

namespace vortex {
namespace {

namespace fs = std::filesystem;
const fs::path kRelease = VORTEX_RELEASE_FIXTURES;

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

ConfigJson config(const std::string& path) {
  Result<ConfigJson> j = ConfigJson::read_file((kRelease / path).string());
  EXPECT_TRUE(j.ok()) << path << ": " << j.status().to_string();
  return j.ok() ? *j : ConfigJson();
}

// git's blob id: sha1("blob <size>\0" + bytes).
std::string git_blob_id(const std::string& bytes) {
  const std::string object = "blob " + std::to_string(bytes.size()) + std::string(1, '\0') + bytes;
  unsigned char d[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(object.data()), object.size(), d);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : d) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

TEST(ReleaseConfigs, FixturesAreTheReleasesBytes) {
  std::istringstream manifest(read(kRelease / "MANIFEST.tsv"));
  std::string line;
  int files = 0;
  while (std::getline(manifest, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream cols(line);
    std::string path, blob, last, from;
    cols >> path >> blob >> last >> from;
    ASSERT_TRUE(fs::is_regular_file(kRelease / path)) << path;
    EXPECT_EQ(git_blob_id(read(kRelease / path)), blob) << path << " is not the release's file";
    EXPECT_EQ(last.size(), 40u);
    EXPECT_EQ(from.size(), 40u);
    ++files;
  }
  EXPECT_EQ(files, 23);
}

void expect_h3(const ModelConfig& c, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(c.hidden, 5376);
  EXPECT_EQ(c.num_layers, 50);
  EXPECT_EQ(c.num_refiner_layers, 2);
  EXPECT_EQ(c.num_heads, 56);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.ffn, 14336);
  EXPECT_EQ(c.in_channels, 24);
  EXPECT_EQ(c.audio_in_channels, 32);
  EXPECT_EQ(c.patch_t, 1);
  EXPECT_EQ(c.patch_h, 2);
  EXPECT_EQ(c.patch_w, 2);
  EXPECT_EQ(c.text_dim, 5120);
  EXPECT_EQ(c.freq_dim, 256);
  EXPECT_EQ(c.time_embed_hidden, 5376);
  EXPECT_EQ(c.time_embed_dim, 2688);
  EXPECT_EQ(c.rope_inv_freq_len, 16);
  EXPECT_EQ(c.rope_dims(), 96);  // 3/4 of the 128-wide head
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.qk_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.final_norm_eps, 1e-5f);
  // The built-in preset is the release: a config from either file equals it field for field.
  const ModelConfig h3 = ModelConfig::h3();
  EXPECT_EQ(c.hidden, h3.hidden);
  EXPECT_EQ(c.num_refiner_layers, h3.num_refiner_layers);
  EXPECT_EQ(c.ffn, h3.ffn);
  EXPECT_EQ(c.time_embed_dim, h3.time_embed_dim);
}

TEST(ReleaseConfigs, EveryTransformerConfigGivesTheH3Numbers) {
  for (const char* path : {"FL2VA/transformer/config.json", "Ref2VA/transformer/config.json", "transformer/config.json",
                           "transformer_ref/config.json"}) {
    const ConfigJson j = config(path);
    EXPECT_EQ(j.kind(), ConfigKind::kTransformer) << path;
    Result<ModelConfig> c = ModelConfig::from_json_text(read(kRelease / path));
    ASSERT_TRUE(c.ok()) << path << ": " << c.status().to_string();
    expect_h3(*c, path);
    // config_for_checkpoint reads the folder's config.json (before any weight).
    Result<ModelConfig> folder = config_for_checkpoint((kRelease / fs::path(path).parent_path()).string());
    ASSERT_TRUE(folder.ok()) << path << ": " << folder.status().to_string();
    expect_h3(*folder, std::string("config_for_checkpoint ") + path);
  }
  // The two class names are the ones the release uses.
  EXPECT_EQ(config("FL2VA/transformer/config.json").class_name(), "MiniMaxH3DiTModel");
  EXPECT_EQ(config("transformer/config.json").class_name(), "MiniMaxH3Transformer3DModel");
}

TEST(ReleaseConfigs, BothSpellingsInOneFileAgreeOrAreRefused) {
  // The original file plus each diffusers spelling with the same value (what a file carrying both holds) reads
  // the same; a different value in the second spelling is refused naming both keys.
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(read(kRelease / "FL2VA/transformer/config.json"));
  const nlohmann::ordered_json diffusers = nlohmann::ordered_json::parse(read(kRelease / "transformer/config.json"));
  for (const auto& [key, value] : diffusers.items())
    if (!j.contains(key) && key != "_class_name" && key != "_diffusers_version") j[key] = value;
  ASSERT_TRUE(j.contains("num_refiner_layers") && j.contains("token_refiner_num_layers"));
  Result<ModelConfig> both = ModelConfig::from_json_text(j.dump(2));
  ASSERT_TRUE(both.ok()) << both.status().to_string();
  expect_h3(*both, "both spellings");
  for (const char* key : {"num_refiner_layers", "ffn_dim", "in_channels", "audio_in_channels", "freq_dim",
                          "time_embed_hidden_dim", "rope_freq_dim"}) {
    nlohmann::ordered_json bad = j;
    bad[key] = bad[key].get<int>() + 2;
    Result<ModelConfig> r = ModelConfig::from_json_text(bad.dump(2));
    ASSERT_FALSE(r.ok()) << key;
    EXPECT_EQ(r.status().code(), ErrorCode::kFormat);
    EXPECT_NE(r.status().message().find(std::string("'") + key + "'"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("disagree"), std::string::npos) << r.status().message();
  }
}

TEST(ReleaseConfigs, VideoVaeConfigsGiveOneDecoder) {
  EXPECT_EQ(config("vae/config.json").kind(), ConfigKind::kVideoVae);
  Result<VideoVaeConfig> d = VideoVaeConfig::from_json(config("vae/config.json"));
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->latent_channels, 24);
  EXPECT_EQ(d->out_channels, 3);
  EXPECT_EQ(d->patch, 16);
  EXPECT_EQ(d->patch_t, 4);
  EXPECT_EQ(d->num_layers, 36);
  EXPECT_EQ(d->heads, 32);
  EXPECT_EQ(d->head_dim, 64);
  EXPECT_EQ(d->registers, 4);
  EXPECT_EQ(d->ffn_mult, 4);
  EXPECT_FLOAT_EQ(d->rope_theta, 100.0f);
  EXPECT_FLOAT_EQ(d->rope_dim_ratio, 0.75f);
  EXPECT_EQ(d->clip_length, 17);
  EXPECT_EQ(d->token_drop, 3);
  ASSERT_EQ(d->latents_mean.size(), 24u);
  EXPECT_FLOAT_EQ(d->latents_mean[0], 0.858090341091156f);
  EXPECT_FLOAT_EQ(d->latents_std[23], 2.6127843856811523f);
  for (const char* partition : {"FL2VA", "Ref2VA"}) {
    SCOPED_TRACE(partition);
    const std::string dir = std::string(partition) + "/video_vae/";
    EXPECT_EQ(config(dir + "config.json").kind(), ConfigKind::kVideoVae);
    EXPECT_EQ(config(dir + "source/config.json").kind(), ConfigKind::kVideoVae);
    Result<VideoVaeConfig> o =
        VideoVaeConfig::from_original_json(config(dir + "config.json"), config(dir + "source/config.json"));
    ASSERT_TRUE(o.ok()) << o.status().to_string();
    EXPECT_EQ(o->latent_channels, d->latent_channels);
    EXPECT_EQ(o->patch, d->patch);
    EXPECT_EQ(o->patch_t, d->patch_t);
    EXPECT_EQ(o->num_layers, d->num_layers);
    EXPECT_EQ(o->heads, d->heads);
    EXPECT_EQ(o->head_dim, d->head_dim);
    EXPECT_EQ(o->clip_length, d->clip_length);
    EXPECT_EQ(o->token_drop, d->token_drop);
    EXPECT_EQ(o->tile, 256);
    EXPECT_EQ(o->tile_overlap, 64);
    // The wrapper prints some stds with two more digits than vae/config.json; as FP32 they are the same.
    EXPECT_EQ(o->latents_mean, d->latents_mean);
    EXPECT_EQ(o->latents_std, d->latents_std);
  }
}

TEST(ReleaseConfigs, AudioVaeConfigsGiveOneDecoder) {
  EXPECT_EQ(config("audio_vae/config.json").kind(), ConfigKind::kAudioVae);
  Result<AudioVaeConfig> d = AudioVaeConfig::from_json(config("audio_vae/config.json"));
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->latent_channels, 32);
  EXPECT_EQ(d->latent_dim, 2048);
  EXPECT_EQ(d->decoder_dim, 1024);
  EXPECT_EQ(d->decoder_rates, (std::vector<int>{5, 5, 2, 2, 2, 2, 2}));
  EXPECT_EQ(d->decoder_kernel_sizes, (std::vector<int>{9, 9, 4, 4, 4, 4, 4}));
  EXPECT_EQ(d->resblock_kernel_sizes, (std::vector<int>{3, 7, 11}));
  EXPECT_EQ(d->resblock_dilation_sizes, (std::vector<std::vector<int>>(3, {1, 3, 5})));
  EXPECT_EQ(d->sampling_rate, 32000);
  EXPECT_EQ(d->hop(), 800);  // 40 latents per second
  ASSERT_EQ(d->latents_mean.size(), 32u);
  EXPECT_FLOAT_EQ(d->latents_mean[1], 0.3876466479950502f);
  for (const char* partition : {"FL2VA", "Ref2VA"}) {
    SCOPED_TRACE(partition);
    const std::string dir = std::string(partition) + "/audio_vae/";
    EXPECT_EQ(config(dir + "config.json").kind(), ConfigKind::kAudioVae);
    Result<ConfigJson> kwargs = config(dir + "metadata.json").object("metadata");
    ASSERT_TRUE(kwargs.ok());
    kwargs = kwargs->object("kwargs");
    ASSERT_TRUE(kwargs.ok());
    Result<AudioVaeConfig> o = AudioVaeConfig::from_original_json(config(dir + "config.json"), *kwargs);
    ASSERT_TRUE(o.ok()) << o.status().to_string();
    EXPECT_EQ(o->latent_channels, d->latent_channels);
    EXPECT_EQ(o->latent_dim, d->latent_dim);
    EXPECT_EQ(o->decoder_dim, d->decoder_dim);
    EXPECT_EQ(o->decoder_rates, d->decoder_rates);
    EXPECT_EQ(o->decoder_kernel_sizes, d->decoder_kernel_sizes);  // derived from the rates: 2u or 2u - 1
    EXPECT_EQ(o->sampling_rate, d->sampling_rate);
    EXPECT_EQ(o->latents_mean, d->latents_mean);
    EXPECT_EQ(o->latents_std, d->latents_std);
  }
}

TEST(ReleaseConfigs, TextEncoderConfigsGiveQwen3Vl32b) {
  const TextEncoderConfig want = TextEncoderConfig::qwen3_vl_32b();
  for (const char* path :
       {"text_encoder/config.json", "FL2VA/text_encoder/config.json", "Ref2VA/text_encoder/config.json"}) {
    SCOPED_TRACE(path);
    EXPECT_EQ(config(path).kind(), ConfigKind::kTextEncoder);
    Result<TextEncoderConfig> c = TextEncoderConfig::from_file((kRelease / path).string());
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->hidden, want.hidden);
    EXPECT_EQ(c->num_layers, want.num_layers);
    EXPECT_EQ(c->num_heads, want.num_heads);
    EXPECT_EQ(c->num_kv_heads, want.num_kv_heads);
    EXPECT_EQ(c->head_dim, want.head_dim);
    EXPECT_EQ(c->ffn, want.ffn);
    EXPECT_EQ(c->vocab, want.vocab);
    EXPECT_FLOAT_EQ(c->rms_norm_eps, want.rms_norm_eps);
    EXPECT_DOUBLE_EQ(c->rope_theta, want.rope_theta);
    EXPECT_EQ(c->mrope_section, want.mrope_section);
    EXPECT_EQ(c->max_positions, 262144);
  }
  // text_encoder_folder() recognises the release's folder by its config.
  Result<std::string> folder = text_encoder_folder(kRelease.string());
  ASSERT_TRUE(folder.ok()) << folder.status().to_string();
  EXPECT_EQ(fs::path(*folder), kRelease / "text_encoder");
}

TEST(ReleaseConfigs, PipelineIndexesGiveTheLayoutsAndTextLayer50) {
  for (const char* path :
       {"model_index.json", "modular_model_index.json", "FL2VA/model_index.json", "Ref2VA/model_index.json"})
    EXPECT_EQ(config(path).kind(), ConfigKind::kPipeline) << path;
  for (const char* path : {"scheduler/scheduler_config.json", "audio_scheduler/scheduler_config.json"})
    EXPECT_EQ(config(path).kind(), ConfigKind::kScheduler) << path;
  for (const fs::path& dir : {kRelease, kRelease / "FL2VA"}) {
    Result<int> layer = pipeline_text_layer(dir.string());
    ASSERT_TRUE(layer.ok()) << dir << ": " << layer.status().to_string();
    EXPECT_EQ(*layer, 50) << dir;
  }
  // The fixture tree holds the configs without weights: the layouts are recognised and each weight is missing.
  Result<ModelFolder> root = open_model_folder(kRelease.string());
  ASSERT_TRUE(root.ok()) << root.status().to_string();
  EXPECT_EQ(root->layout, ModelFolderLayout::kDiffusers);
  EXPECT_EQ(root->pipeline_class, "MiniMaxH3ModularPipeline");
  EXPECT_EQ(root->text_layer, 50);
  Result<ModelFolder> fl2va = open_model_folder((kRelease / "FL2VA").string());
  ASSERT_TRUE(fl2va.ok()) << fl2va.status().to_string();
  EXPECT_EQ(fl2va->layout, ModelFolderLayout::kPartition);
  EXPECT_EQ(fl2va->partition, "fl2va");
  EXPECT_EQ(fl2va->pipeline_class, "MiniMaxH3Pipeline");
  Result<ModelFolder> ref = open_model_folder((kRelease / "Ref2VA").string());  // ref2va's partition opens
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  EXPECT_EQ(ref->layout, ModelFolderLayout::kPartition);
  EXPECT_EQ(ref->partition, "ref2va");
}

TEST(ReleaseConfigs, Ref2vaTransformerFoldersAreRefusedNamingTheFl2vaOne) {
  for (const char* dir : {"transformer", "FL2VA/transformer"})
    EXPECT_TRUE(refuse_reference_transformer((kRelease / dir).string()).ok()) << dir;
  Status s = refuse_reference_transformer((kRelease / "transformer_ref").string());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.message().find("Ref2VA transformer"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find((kRelease / "transformer").lexically_normal().string()), std::string::npos) << s.message();
  s = refuse_reference_transformer((kRelease / "Ref2VA" / "transformer" / "model.safetensors.index.json").string());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find((kRelease / "FL2VA" / "transformer").lexically_normal().string()), std::string::npos)
      << s.message();
}

TEST(ReleaseConfigs, EachReaderRefusesTheOtherComponentsNamingThem) {
  const char* not_transformers[] = {"vae/config.json",          "FL2VA/video_vae/config.json",
                                    "audio_vae/config.json",    "FL2VA/audio_vae/config.json",
                                    "text_encoder/config.json", "model_index.json",
                                    "FL2VA/model_index.json",   "scheduler/scheduler_config.json"};
  for (const char* path : not_transformers) {
    Result<ModelConfig> c = ModelConfig::from_json_text(read(kRelease / path));
    ASSERT_FALSE(c.ok()) << path << " was read as a transformer config";
    EXPECT_EQ(c.status().code(), ErrorCode::kFormat);
    const std::string cls = config(path).class_name();
    EXPECT_NE(c.status().message().find("holds " + std::string(config_kind_name(config(path).kind())) + " (" + cls),
              std::string::npos)
        << c.status().message();
    EXPECT_NE(c.status().message().find("FL2VA/transformer/"), std::string::npos) << c.status().message();
  }
  // --checkpoint on the release's VAE folder: the message names the folder's content and the transformer.
  Result<ModelConfig> vae = config_for_checkpoint((kRelease / "vae").string());
  ASSERT_FALSE(vae.ok());
  EXPECT_NE(vae.status().message().find("holds the video VAE (AutoencoderKLMiniMaxH3)"), std::string::npos)
      << vae.status().message();
  for (const char* path : {"transformer/config.json", "FL2VA/transformer/config.json", "vae/config.json"}) {
    Result<TextEncoderConfig> t = TextEncoderConfig::from_file((kRelease / path).string());
    ASSERT_FALSE(t.ok()) << path;
    EXPECT_NE(t.status().message().find("not the text encoder"), std::string::npos) << t.status().message();
  }
  // A VAE folder given the other VAE (or the transformer) is refused before any weight is looked for.
  Result<VaeFolder> f = open_vae_folder((kRelease / "audio_vae").string(), "video VAE (--vae)", "MiniMaxH3VideoVAE",
                                        ConfigKind::kVideoVae);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("holds the audio VAE (AutoencoderKLMiniMaxH3Audio), not the video VAE"),
            std::string::npos)
      << f.status().message();
  f = open_vae_folder((kRelease / "FL2VA" / "transformer").string(), "audio VAE (--audio-vae)", "MiniMaxH3AudioVAE",
                      ConfigKind::kAudioVae);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("holds the H3 transformer (MiniMaxH3DiTModel), not the audio VAE"),
            std::string::npos)
      << f.status().message();
}

}  // namespace
}  // namespace vortex
