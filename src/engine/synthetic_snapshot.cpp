// The tiny synthetic snapshot writer (see synthetic_snapshot.h).
#include "engine/synthetic_snapshot.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "io/synth_checkpoint.h"
#include "text/tokenizer.h"
#include "text_encoder/text_encoder_weights.h"
#include "vortex/config.h"

namespace vortex {
namespace fs = std::filesystem;

TextEncoderConfig tiny_text_encoder_config(int vocab) {
  TextEncoderConfig c;
  c.hidden = 128;  // ModelConfig::h3_tiny().text_dim
  c.num_layers = 4;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 32;
  c.ffn = 192;
  c.vocab = (vocab + 63) / 64 * 64;
  c.rms_norm_eps = 1e-6f;
  c.rope_theta = 5e6;
  c.mrope_section = {6, 5, 5};
  c.max_positions = 4096;
  return c;
}

namespace {

Status copy_folder(const fs::path& from, const fs::path& to, std::vector<std::string>& written) {
  std::error_code ec;
  if (!fs::is_directory(from, ec)) return not_found(from.string() + " is not a folder");
  fs::create_directories(to, ec);
  for (const fs::directory_entry& e : fs::directory_iterator(from, ec)) {
    if (!e.is_regular_file(ec)) continue;
    fs::copy_file(e.path(), to / e.path().filename(), ec);
    if (ec) return io_error("cannot copy " + e.path().string() + " to " + to.string() + ": " + ec.message());
    written.push_back((to / e.path().filename()).string());
  }
  if (ec) return io_error("cannot list " + from.string() + ": " + ec.message());
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::string>> write_synthetic_snapshot(const SyntheticSnapshotOptions& o) {
  if (o.out.empty()) return invalid_argument("--out DIR is required");
  if (o.tokenizer_json.empty()) return invalid_argument("--tokenizer FILE is required (the snapshot's tokenizer.json)");
  if (o.vae_dir.empty() != o.audio_vae_dir.empty())
    return invalid_argument("pass both --vae DIR and --audio-vae DIR, or neither");
  const fs::path out(o.out);
  std::error_code ec;
  if (fs::exists(out, ec) && !(fs::is_directory(out, ec) && fs::is_empty(out, ec)))
    return invalid_argument("--out " + o.out +
                            " exists and is not an empty folder; the snapshot is written only into a new one");
  // Checked before anything is written: the vocabulary sizes the text encoder.
  VORTEX_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::from_json_file(o.tokenizer_json));
  fs::create_directories(out, ec);
  if (ec) return io_error("cannot create " + o.out + ": " + ec.message());
  std::vector<std::string> written;

  const TextEncoderConfig te = tiny_text_encoder_config(tok.vocab_size());
  nlohmann::ordered_json index = {{"_class_name", "MiniMaxH3ModularPipeline"},
                                  {"_blocks_class_name", "MiniMaxH3Blocks"},
                                  {"text_encoder_layer", kTinyTextLayer},
                                  {"text_encoder", {"transformers", "Qwen3VLForConditionalGeneration"}},
                                  {"tokenizer", {"transformers", "Qwen2TokenizerFast"}},
                                  {"transformer", {"diffusers", "MiniMaxH3Transformer3DModel"}},
                                  {"vortex.written_by", "vortex synth --snapshot tiny"},
                                  {"vortex.synthetic_seed", o.seed}};
  if (!o.vae_dir.empty()) {
    index["vae"] = {"diffusers", "AutoencoderKLMiniMaxH3"};
    index["audio_vae"] = {"diffusers", "AutoencoderKLMiniMaxH3Audio"};
  }
  {
    std::ofstream f(out / "model_index.json", std::ios::binary);
    f << index.dump(2) << "\n";
    if (!f) return io_error("cannot write " + (out / "model_index.json").string());
    written.push_back((out / "model_index.json").string());
  }

  SynthCheckpointOptions ck;
  ck.config = ModelConfig::h3_tiny();
  ck.out = (out / "transformer" / "diffusion_pytorch_model.safetensors").string();
  ck.seed = o.seed;
  ck.layout = CheckpointLayout::kDiffusers;
  fs::create_directories(out / "transformer", ec);
  VORTEX_ASSIGN_OR_RETURN(std::vector<std::string> transformer, write_synthetic_checkpoint(ck));
  written.insert(written.end(), transformer.begin(), transformer.end());

  VORTEX_RETURN_IF_ERROR(write_synthetic_text_encoder((out / "text_encoder").string(), te, o.seed));
  written.push_back((out / "text_encoder" / "config.json").string());
  written.push_back((out / "text_encoder" / "model.safetensors").string());

  fs::create_directories(out / "tokenizer", ec);
  fs::copy_file(o.tokenizer_json, out / "tokenizer" / "tokenizer.json", ec);
  if (ec) return io_error("cannot copy " + o.tokenizer_json + ": " + ec.message());
  written.push_back((out / "tokenizer" / "tokenizer.json").string());

  if (!o.vae_dir.empty()) {
    VORTEX_RETURN_IF_ERROR(copy_folder(o.vae_dir, out / "vae", written));
    VORTEX_RETURN_IF_ERROR(copy_folder(o.audio_vae_dir, out / "audio_vae", written));
  }
  return written;
}

}  // namespace vortex
