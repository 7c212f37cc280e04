// Model folder detection (engine/model_folder.h) on folders laid out as the official MiniMax-H3 snapshot is
// (file names from the repository's tree: model_index.json, transformer/ with 14 diffusers shards, text_encoder/
// with 14 transformers shards, tokenizer/, vae/ with 3 shards, audio_vae/, FL2VA/ with its own layout): the
// parts are found, every missing part is named in one message, the FL2VA partition borrows the root's VAEs,
// each task picks its transformer (Ref2VA's for ref2va) and a task on the other partition is refused, foreign folders
// are refused, and the text layer comes from the pipeline config.
// Weight files here are empty placeholders: only existence is this module's job (the loaders read contents).
#include "engine/model_folder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

namespace vortex {
namespace {

namespace fs = std::filesystem;

class Scratch {
 public:
  Scratch() {
    std::random_device rd;
    path_ =
        fs::temp_directory_path() / ("vortex_model_folder_" + std::to_string(::getpid()) + "_" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// An index naming `n` shards `<stem>-0000i-of-0000n.safetensors`, and (when `shards`) the shards themselves.
void sharded(const fs::path& dir, const std::string& index_name, const std::string& stem, int n, bool shards = true) {
  nlohmann::json map = nlohmann::json::object();
  for (int i = 1; i <= n; ++i) {
    char shard[96];
    std::snprintf(shard, sizeof shard, "%s-%05d-of-%05d.safetensors", stem.c_str(), i, n);
    map["tensor_" + std::to_string(i)] = shard;
    if (shards) write(dir / shard, "x");
  }
  write(dir / index_name, nlohmann::json({{"metadata", {{"total_size", n}}}, {"weight_map", map}}).dump());
  write(dir / "config.json", "{}");
}

// The snapshot root in the repository's layout.
void official_root(const fs::path& root) {
  write(root / "model_index.json",
        R"({"_class_name": "MiniMaxH3ModularPipeline", "_blocks_class_name": "MiniMaxH3Blocks"})");
  write(root / "modular_model_index.json", R"({"_class_name": "MiniMaxH3ModularPipeline"})");
  sharded(root / "transformer", "diffusion_pytorch_model.safetensors.index.json", "diffusion_pytorch_model", 14);
  sharded(root / "transformer_ref", "diffusion_pytorch_model.safetensors.index.json", "diffusion_pytorch_model", 14);
  sharded(root / "text_encoder", "model.safetensors.index.json", "model", 14);
  write(root / "text_encoder" / "config.json", R"({"model_type": "qwen3_vl", "text_config": {}})");
  write(root / "tokenizer" / "tokenizer.json", "{}");
  sharded(root / "vae", "diffusion_pytorch_model.safetensors.index.json", "diffusion_pytorch_model", 3);
  write(root / "audio_vae" / "config.json", "{}");
  write(root / "audio_vae" / "diffusion_pytorch_model.safetensors", "x");
}

void fl2va_partition(const fs::path& p, const std::string& partition = "fl2va") {
  write(p / "model_index.json", nlohmann::json({{"_class_name", "MiniMaxH3Pipeline"},
                                                {"_minimax_h3", {{"schema_version", 1}, {"partition", partition}}}})
                                    .dump());
  sharded(p / "transformer", "model.safetensors.index.json", "model", 13);
  sharded(p / "text_encoder", "model.safetensors.index.json", "model", 14);
  write(p / "tokenizer" / "tokenizer.json", "{}");
  write(p / "video_vae" / "config.json", "{}");
  write(p / "audio_vae" / "config.json", "{}");
}

TEST(ModelFolder, OfficialSnapshotRootHasEveryPart) {
  Scratch s;
  official_root(s.path());
  Result<ModelFolder> f = open_model_folder(s.path().string());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->layout, ModelFolderLayout::kDiffusers);
  EXPECT_EQ(f->pipeline_class, "MiniMaxH3ModularPipeline");
  EXPECT_EQ(f->text_layer, 50);  // MiniMaxH3 pipeline: hidden_states[50]
  EXPECT_TRUE(require_parts(*f, {"transformer", "text_encoder", "tokenizer", "vae", "audio_vae"}, "for t2va").ok());
  EXPECT_EQ(fs::path(f->path_of("transformer")), s.path() / "transformer");  // FL2VA's, not transformer_ref/
  EXPECT_EQ(fs::path(f->path_of("tokenizer")), s.path() / "tokenizer" / "tokenizer.json");
  EXPECT_EQ(f->part("transformer")->bytes, 14u);  // every shard counted
  const DecoderPaths d = decoder_paths(*f);
  EXPECT_EQ(fs::path(d.vae_dir), s.path() / "vae");
  EXPECT_EQ(fs::path(d.audio_vae_dir), s.path() / "audio_vae");

  PipelineOptions o;
  ASSERT_TRUE(apply_model_folder(*f, -1, o).ok());
  EXPECT_EQ(fs::path(o.checkpoint_path), s.path() / "transformer");
  EXPECT_EQ(fs::path(o.text_encoder_dir), s.path() / "text_encoder");
  EXPECT_EQ(o.text_layer, 50);
  ASSERT_TRUE(apply_model_folder(*f, 7, o).ok());
  EXPECT_EQ(o.text_layer, 7);  // --text-layer K overrides the pipeline config
}

TEST(ModelFolder, EveryMissingPartIsNamedInOneMessage) {
  Scratch s;
  official_root(s.path());
  fs::remove(s.path() / "transformer" / "diffusion_pytorch_model-00003-of-00014.safetensors");
  fs::remove(s.path() / "transformer" / "diffusion_pytorch_model-00011-of-00014.safetensors");
  fs::remove_all(s.path() / "tokenizer");
  fs::remove(s.path() / "text_encoder" / "model.safetensors.index.json");
  fs::remove_all(s.path() / "audio_vae");
  Result<ModelFolder> f = open_model_folder(s.path().string());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  Status st = require_parts(*f, {"transformer", "text_encoder", "tokenizer", "vae", "audio_vae"}, "to generate");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), ErrorCode::kNotFound);
  const std::string& m = st.message();
  EXPECT_NE(m.find("lacks 4 parts"), std::string::npos) << m;
  EXPECT_NE(m.find("2 of the 14 shards"), std::string::npos) << m;
  EXPECT_NE(m.find("diffusion_pytorch_model-00003-of-00014.safetensors"), std::string::npos) << m;
  EXPECT_NE(m.find("text_encoder: no weights"), std::string::npos) << m;
  EXPECT_NE(m.find("tokenizer: no tokenizer.json"), std::string::npos) << m;
  EXPECT_NE(m.find("audio_vae: folder"), std::string::npos) << m;
  EXPECT_EQ(m.find("vae: folder " + (s.path() / "vae").string()), std::string::npos) << m;  // vae/ is complete
  // generate needs only three of them; the message lists exactly those missing.
  Status gen = require_parts(*f, generate_parts(), "to generate");
  EXPECT_NE(gen.message().find("lacks 3 parts"), std::string::npos) << gen.message();
  PipelineOptions o;
  EXPECT_FALSE(apply_model_folder(*f, -1, o).ok());
  EXPECT_TRUE(o.checkpoint_path.empty());
  // The inspect report marks them too.
  const std::string report = describe_model_folder(*f);
  EXPECT_NE(report.find("MISSING"), std::string::npos) << report;
  EXPECT_NE(report.find("4 parts missing"), std::string::npos) << report;
}

TEST(ModelFolder, Fl2vaPartitionBorrowsTheRootsVaes) {
  Scratch s;
  official_root(s.path());
  fl2va_partition(s.path() / "FL2VA");
  Result<ModelFolder> f = open_model_folder((s.path() / "FL2VA").string());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->layout, ModelFolderLayout::kPartition);
  EXPECT_EQ(f->partition, "fl2va");
  EXPECT_EQ(f->text_layer, 50);
  EXPECT_EQ(fs::path(f->path_of("transformer")), s.path() / "FL2VA" / "transformer");
  EXPECT_EQ(fs::path(f->path_of("vae")).lexically_normal(), (s.path() / "vae").lexically_normal());
  ASSERT_FALSE(f->notes.empty());
  // Without the root's diffusers VAEs the partition's own video_vae/ is named as unreadable.
  fs::remove_all(s.path() / "vae");
  Result<ModelFolder> g = open_model_folder((s.path() / "FL2VA").string());
  ASSERT_TRUE(g.ok());
  Status st = require_parts(*g, {"vae"}, "to decode");
  EXPECT_NE(st.message().find("release's format"), std::string::npos) << st.message();
}

TEST(ModelFolder, EachTaskPicksItsTransformer) {
  Scratch s;
  official_root(s.path());
  fl2va_partition(s.path() / "FL2VA");
  fl2va_partition(s.path() / "Ref2VA", "ref2va");
  Result<ModelFolder> root = open_model_folder(s.path().string());
  ASSERT_TRUE(root.ok()) << root.status().to_string();
  EXPECT_EQ(root->tasks, (std::vector<std::string>{"t2va", "fl2va", "ref2va"}));
  PipelineOptions o;
  ASSERT_TRUE(apply_model_folder(*root, -1, o, "ref2va").ok());
  EXPECT_EQ(fs::path(o.checkpoint_path), s.path() / "transformer_ref");
  ASSERT_TRUE(apply_model_folder(*root, -1, o, "fl2va").ok());
  EXPECT_EQ(fs::path(o.checkpoint_path), s.path() / "transformer");
  EXPECT_EQ(task_parts(*root, "ref2va"),
            (std::vector<std::string>{"transformer_ref", "text_encoder", "tokenizer", "vae", "audio_vae"}));
  EXPECT_EQ(task_parts(*root, "t2va"), (std::vector<std::string>{"transformer", "text_encoder", "tokenizer"}));
  EXPECT_EQ(task_parts(*root, "fl2va"), (std::vector<std::string>{"transformer", "text_encoder", "tokenizer", "vae"}));

  // The Ref2VA partition runs ref2va alone; t2va and fl2va on it name FL2VA/.
  Result<ModelFolder> ref = open_model_folder((s.path() / "Ref2VA").string());
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  EXPECT_EQ(ref->partition, "ref2va");
  EXPECT_EQ(ref->tasks, (std::vector<std::string>{"ref2va"}));
  ASSERT_TRUE(apply_model_folder(*ref, -1, o, "ref2va").ok());
  EXPECT_EQ(fs::path(o.checkpoint_path), s.path() / "Ref2VA" / "transformer");
  EXPECT_EQ(fs::path(ref->path_of("audio_vae")).lexically_normal(), (s.path() / "audio_vae").lexically_normal());
  for (const char* task : {"t2va", "fl2va"}) {
    Status st = apply_model_folder(*ref, -1, o, task);
    ASSERT_FALSE(st.ok()) << task;
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(st.message().find("'ref2va' partition"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find((s.path() / "FL2VA").string()), std::string::npos) << st.message();
  }
  // ref2va on FL2VA/ names Ref2VA/; on a root without transformer_ref/ it is missing.
  Result<ModelFolder> fl = open_model_folder((s.path() / "FL2VA").string());
  ASSERT_TRUE(fl.ok());
  Status st = apply_model_folder(*fl, -1, o, "ref2va");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find((s.path() / "Ref2VA").string()), std::string::npos) << st.message();
  fs::remove_all(s.path() / "transformer_ref");
  Result<ModelFolder> bare = open_model_folder(s.path().string());
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->part("transformer_ref"), nullptr);
  st = apply_model_folder(*bare, -1, o, "ref2va");
  EXPECT_EQ(st.code(), ErrorCode::kNotFound) << st.to_string();
  EXPECT_NE(st.message().find("transformer_ref/"), std::string::npos) << st.message();
  EXPECT_EQ(apply_model_folder(*bare, -1, o, "i2v").code(), ErrorCode::kInvalidArgument);
}

TEST(ModelFolder, ForeignFoldersAreRefused) {
  Scratch s;
  write(s.path() / "Other" / "model_index.json",
        nlohmann::json({{"_class_name", "MiniMaxH3Pipeline"}, {"_minimax_h3", {{"partition", "i2v"}}}}).dump());
  Result<ModelFolder> unknown = open_model_folder((s.path() / "Other").string());
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("'i2v' partition"), std::string::npos) << unknown.status().message();

  write(s.path() / "other" / "config.json", R"({"_class_name": "MiniMaxH3Transformer3DModel"})");
  Result<ModelFolder> other = open_model_folder((s.path() / "other").string());
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(is_model_folder((s.path() / "other").string()));

  Result<ModelFolder> none = open_model_folder((s.path() / "nowhere").string());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), ErrorCode::kNotFound);

  // A root holding only the original partitions points at FL2VA/.
  fl2va_partition(s.path() / "orig" / "FL2VA");
  Result<ModelFolder> orig = open_model_folder((s.path() / "orig").string());
  ASSERT_FALSE(orig.ok());
  EXPECT_NE(orig.status().message().find("FL2VA"), std::string::npos) << orig.status().message();
}

TEST(ModelFolder, PlainTransformersFolderIsATextEncoder) {
  Scratch s;
  const fs::path d = s.path() / "qwen";
  write(d / "config.json", R"({"model_type": "qwen3_vl", "text_config": {}})");
  write(d / "model.safetensors", "x");
  Result<ModelFolder> f = open_model_folder(d.string());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->layout, ModelFolderLayout::kTransformers);
  EXPECT_EQ(f->text_layer, -1);  // no pipeline config: --text-layer K is needed
  EXPECT_TRUE(require_parts(*f, {"text_encoder"}, "to encode").ok());
  Status tok = require_parts(*f, {"text_encoder", "tokenizer"}, "to encode a prompt");
  EXPECT_NE(tok.message().find("tokenizer.json"), std::string::npos) << tok.message();
  write(d / "tokenizer.json", "{}");
  Result<ModelFolder> g = open_model_folder(d.string());
  EXPECT_TRUE(require_parts(*g, {"text_encoder", "tokenizer"}, "to encode a prompt").ok());
  Status gen = require_parts(*g, generate_parts(), "to generate");
  EXPECT_NE(gen.message().find("transformer: a transformers folder has none"), std::string::npos) << gen.message();
}

}  // namespace
}  // namespace vortex
