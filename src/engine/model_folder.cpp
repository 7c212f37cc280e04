// Model folder detection and part resolution (see model_folder.h). The snapshot layout is the one of the
// MiniMax-H3 repository (model_index.json, transformer/ with 14 diffusers shards, text_encoder/ with 14
// transformers shards, tokenizer/, vae/, audio_vae/, FL2VA/ and Ref2VA/ partitions): docs/checkpoints.md.
#include "engine/model_folder.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "core/config_json.h"
#include "engine/memory_estimate.h"
#include "io/safetensors.h"
#include "text/tokenizer.h"
#include "text_encoder/text_encoder.h"

namespace vortex {
namespace fs = std::filesystem;
namespace {

std::optional<ConfigJson> read_json_object(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return std::nullopt;
  Result<ConfigJson> j = ConfigJson::read_file(p.string());
  if (!j.ok()) return std::nullopt;
  return std::move(*j);
}

// The MiniMaxH3 pipeline config of `d`: model_index.json, else modular_model_index.json.
std::optional<ConfigJson> pipeline_index(const fs::path& d) {
  for (const char* name : {"model_index.json", "modular_model_index.json"}) {
    std::optional<ConfigJson> j = read_json_object(d / name);
    if (j && j->kind() == ConfigKind::kPipeline) return j;
  }
  return std::nullopt;
}

uint64_t file_bytes(const fs::path& p) {
  std::error_code ec;
  const uintmax_t n = fs::file_size(p, ec);
  return ec ? 0 : static_cast<uint64_t>(n);
}

// A weights folder: config.json and one of `index_names` (every shard it names present) or `file_names`.
ModelPart weights_part(const std::string& name, const fs::path& dir, const std::vector<std::string>& index_names,
                       const std::vector<std::string>& file_names) {
  ModelPart part;
  part.name = name;
  part.path = dir.string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    part.problem = "folder " + dir.string() + " is missing";
    return part;
  }
  std::vector<std::string> problems;
  if (!fs::is_regular_file(dir / "config.json", ec)) problems.push_back((dir / "config.json").string() + " is missing");
  bool weights = false;
  for (const std::string& index_name : index_names) {
    const fs::path index = dir / index_name;
    if (!fs::is_regular_file(index, ec)) continue;
    weights = true;
    std::optional<ConfigJson> j = read_json_object(index);
    if (!j || !j->json().contains("weight_map") || !j->json()["weight_map"].is_object()) {
      problems.push_back(index.string() + " has no weight_map");
      break;
    }
    std::set<std::string> shards;
    for (const auto& [tensor, shard] : j->json()["weight_map"].items())
      if (shard.is_string()) shards.insert(shard.get<std::string>());
    int missing = 0;
    std::string first;
    for (const std::string& s : shards) {
      if (fs::is_regular_file(dir / s, ec)) {
        part.bytes += file_bytes(dir / s);
      } else if (missing++ == 0) {
        first = (dir / s).string();
      }
    }
    if (missing > 0)
      problems.push_back(std::to_string(missing) + " of the " + std::to_string(shards.size()) + " shards " +
                         index_name + " names are missing (first: " + first + ")");
    break;
  }
  if (!weights) {
    for (const std::string& file_name : file_names) {
      if (fs::is_regular_file(dir / file_name, ec)) {
        weights = true;
        part.bytes = file_bytes(dir / file_name);
        break;
      }
    }
  }
  if (!weights) {
    std::string expected;
    for (const std::string& n : index_names) expected += (expected.empty() ? "" : " or ") + n;
    for (const std::string& n : file_names) expected += " or " + n;
    problems.push_back("no weights in " + dir.string() + " (expected " + expected + ")");
  }
  part.present = problems.empty();
  for (size_t i = 0; i < problems.size(); ++i) part.problem += (i ? "; " : "") + problems[i];
  return part;
}

ModelPart tokenizer_part(const std::vector<fs::path>& candidates) {
  std::error_code ec;
  for (const fs::path& p : candidates) {
    if (fs::is_regular_file(p, ec)) return ModelPart{"tokenizer", p.string(), true, "", file_bytes(p), false};
  }
  std::string tried;
  for (const fs::path& p : candidates) tried += (tried.empty() ? "" : ", ") + p.string();
  return ModelPart{"tokenizer", candidates.front().string(), false, "no tokenizer.json (tried " + tried + ")", 0,
                   false};
}

std::string format_bytes(uint64_t bytes) {
  if (bytes >= 1000000000ull) return format_gb(bytes);
  char b[32];
  if (bytes >= 1000000ull) {
    std::snprintf(b, sizeof b, "%.1f MB", static_cast<double>(bytes) / 1e6);
  } else if (bytes >= 1000ull) {
    std::snprintf(b, sizeof b, "%.1f kB", static_cast<double>(bytes) / 1e3);
  } else {
    std::snprintf(b, sizeof b, "%llu bytes", static_cast<unsigned long long>(bytes));
  }
  return b;
}

const std::vector<std::string> kDiffusersIndex = {"diffusion_pytorch_model.safetensors.index.json"};
const std::vector<std::string> kDiffusersFile = {"diffusion_pytorch_model.safetensors"};
const std::vector<std::string> kTransformersIndex = {"model.safetensors.index.json"};
const std::vector<std::string> kTransformersFile = {"model.safetensors"};

}  // namespace

const char* model_folder_layout_name(ModelFolderLayout layout) {
  switch (layout) {
    case ModelFolderLayout::kDiffusers:
      return "diffusers";
    case ModelFolderLayout::kPartition:
      return "partition";
    case ModelFolderLayout::kTransformers:
      return "transformers";
  }
  return "?";
}

const ModelPart* ModelFolder::part(const std::string& name) const {
  for (const ModelPart& p : parts)
    if (p.name == name) return &p;
  return nullptr;
}

std::string ModelFolder::path_of(const std::string& name) const {
  const ModelPart* p = part(name);
  return p != nullptr && p->present ? p->path : std::string();
}

bool is_model_folder(const std::string& dir) {
  const fs::path d(dir);
  std::error_code ec;
  if (!fs::is_directory(d, ec)) return false;
  return pipeline_index(d).has_value() || is_qwen3_vl_config((d / "config.json").string());
}

Result<ModelFolder> open_model_folder(const std::string& dir) {
  const fs::path d(dir);
  std::error_code ec;
  if (!fs::exists(d, ec)) return not_found("--model " + dir + " does not exist");
  if (!fs::is_directory(d, ec))
    return invalid_argument("--model " + dir +
                            " is not a folder: pass the model snapshot folder (the one holding "
                            "model_index.json), or --checkpoint FILE for a transformer file alone");
  ModelFolder f;
  f.dir = dir;
  if (std::optional<ConfigJson> index = pipeline_index(d)) {
    f.pipeline_class = index->class_name();
    if (index->has("_minimax_h3")) {
      VORTEX_ASSIGN_OR_RETURN(const ConfigJson h3, index->object("_minimax_h3"));
      VORTEX_ASSIGN_OR_RETURN(f.partition, h3.get_string("partition", ""));
      f.layout = ModelFolderLayout::kPartition;
      std::transform(f.partition.begin(), f.partition.end(), f.partition.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (f.partition != "fl2va" && f.partition != "ref2va")
        return invalid_argument("--model " + dir + " is the '" + f.partition +
                                "' partition, which MiniMax-H3 does not release (FL2VA/ and Ref2VA/ are its "
                                "partitions)");
      const nlohmann::json& tasks = h3.json().contains("tasks") ? h3.json()["tasks"] : nlohmann::json();
      if (tasks.is_array()) {
        for (const nlohmann::json& t : tasks)
          if (t.is_string()) f.tasks.push_back(t.get<std::string>());
      } else {
        f.tasks =
            f.partition == "ref2va" ? std::vector<std::string>{"ref2va"} : std::vector<std::string>{"t2va", "fl2va"};
      }
      f.parts.push_back(weights_part("transformer", d / "transformer", kTransformersIndex, kTransformersFile));
      f.parts.push_back(weights_part("text_encoder", d / "text_encoder", kTransformersIndex, kTransformersFile));
      f.parts.push_back(tokenizer_part({d / "tokenizer" / "tokenizer.json", d / "text_encoder" / "tokenizer.json",
                                        d / "processor" / "tokenizer.json"}));
      // The partition's own video_vae/ and audio_vae/ are the release's format; the root's are diffusers'.
      fs::path self = fs::absolute(d, ec).lexically_normal();
      if (self.filename().empty()) self = self.parent_path();  // "FL2VA/"
      const fs::path root = self.parent_path();
      ModelPart vae = weights_part("vae", root / "vae", kDiffusersIndex, kDiffusersFile);
      ModelPart audio = weights_part("audio_vae", root / "audio_vae", kDiffusersIndex, kDiffusersFile);
      if (vae.present || audio.present)
        f.notes.push_back("VAEs from the snapshot root (" + root.string() +
                          "): the partition's video_vae/ and "
                          "audio_vae/ are in the release's own format, which Vortex does not read");
      for (ModelPart* p : {&vae, &audio})
        if (!p->present)
          p->problem += " (the partition's own " + std::string(p == &vae ? "video_vae/" : "audio_vae/") +
                        " is in the release's format, which Vortex does not read)";
      f.parts.push_back(vae);
      f.parts.push_back(audio);
    } else {
      f.layout = ModelFolderLayout::kDiffusers;
      f.tasks = {"t2va", "fl2va"};
      f.parts.push_back(weights_part("transformer", d / "transformer", kDiffusersIndex, kDiffusersFile));
      if (fs::is_directory(d / "transformer_ref", ec)) {
        f.tasks.push_back("ref2va");
        f.parts.push_back(weights_part("transformer_ref", d / "transformer_ref", kDiffusersIndex, kDiffusersFile));
      }
      f.parts.push_back(weights_part("text_encoder", d / "text_encoder", kTransformersIndex, kTransformersFile));
      f.parts.push_back(tokenizer_part({d / "tokenizer" / "tokenizer.json", d / "text_encoder" / "tokenizer.json",
                                        d / "processor" / "tokenizer.json"}));
      f.parts.push_back(weights_part("vae", d / "vae", kDiffusersIndex, kDiffusersFile));
      f.parts.push_back(weights_part("audio_vae", d / "audio_vae", kDiffusersIndex, kDiffusersFile));
    }
    Result<int> layer = pipeline_text_layer(d.string());
    if (!layer.ok()) return layer.status();
    f.text_layer = *layer;
    return f;
  }
  if (is_qwen3_vl_config((d / "config.json").string())) {
    f.layout = ModelFolderLayout::kTransformers;
    ModelPart te = weights_part("text_encoder", d, kTransformersIndex, kTransformersFile);
    f.parts.push_back(te);
    f.parts.push_back(tokenizer_part({d / "tokenizer.json"}));
    Result<int> layer = pipeline_text_layer(d.string());
    f.text_layer = layer.ok() ? *layer : -1;
    return f;
  }
  std::string hint;
  if (fs::is_directory(d / "FL2VA", ec)) hint = "; the FL2VA partition is " + (d / "FL2VA").string();
  return invalid_argument("--model " + dir +
                          " is not a model folder: expected the MiniMax-H3 snapshot (model_index.json "
                          "of a MiniMaxH3 pipeline, with transformer/, text_encoder/, tokenizer/, vae/, audio_vae/), "
                          "its FL2VA/ partition, or a transformers Qwen3-VL folder (config.json with text_config)" +
                          hint);
}

Status require_parts(const ModelFolder& folder, const std::vector<std::string>& needed, const std::string& purpose) {
  std::vector<std::string> lines;
  for (const std::string& name : needed) {
    const ModelPart* p = folder.part(name);
    if (p == nullptr) {
      lines.push_back(name + ": a " + model_folder_layout_name(folder.layout) + " folder has none");
    } else if (!p->present) {
      lines.push_back(name + ": " + p->problem);
    }
  }
  if (lines.empty()) return Status::Ok();
  std::string m = "--model " + folder.dir + " (" + model_folder_layout_name(folder.layout) + " layout) lacks " +
                  std::to_string(lines.size()) + " part" + (lines.size() > 1 ? "s" : "") + " " + purpose + ":";
  for (const std::string& l : lines) m += "\n  " + l;
  return not_found(m);
}

std::vector<std::string> generate_parts() { return {"transformer", "text_encoder", "tokenizer"}; }

namespace {

// The snapshot root and the folder a partition's sibling would be in ("<root>/FL2VA", "<root>/Ref2VA").
fs::path sibling_partition(const ModelFolder& folder, const char* name) {
  std::error_code ec;
  fs::path self = fs::absolute(fs::path(folder.dir), ec).lexically_normal();
  if (self.filename().empty()) self = self.parent_path();
  return self.parent_path() / name;
}

}  // namespace

Result<std::string> task_transformer_part(const ModelFolder& folder, const std::string& task) {
  const bool ref2va = task == "ref2va";
  if (!ref2va && task != "t2va" && task != "fl2va") return invalid_argument("unknown H3 task '" + task + "'");
  if (folder.layout == ModelFolderLayout::kTransformers)
    return invalid_argument("--model " + folder.dir + " is a text encoder folder: " + task +
                            " needs the MiniMax-H3 snapshot (or one of its partitions)");
  if (folder.layout == ModelFolderLayout::kPartition) {
    if (ref2va && folder.partition != "ref2va")
      return invalid_argument("--model " + folder.dir + " is the '" + folder.partition +
                              "' partition; references (ref2va) run on the Ref2VA transformer: pass " +
                              sibling_partition(folder, "Ref2VA").string() + " or the snapshot root " +
                              sibling_partition(folder, "Ref2VA").parent_path().string());
    if (!ref2va && folder.partition == "ref2va")
      return invalid_argument("--model " + folder.dir + " is the 'ref2va' partition (reference-to-video: pass --ref " +
                              "FILE); " + task + " runs on the FL2VA transformer: pass " +
                              sibling_partition(folder, "FL2VA").string() + " or the snapshot root " +
                              sibling_partition(folder, "FL2VA").parent_path().string());
    return std::string("transformer");
  }
  if (ref2va && folder.part("transformer_ref") == nullptr)
    return not_found("--model " + folder.dir +
                     " has no transformer_ref/ (H3's Ref2VA transformer), which references (ref2va) run on");
  return std::string(ref2va ? "transformer_ref" : "transformer");
}

std::vector<std::string> task_parts(const ModelFolder& folder, const std::string& task) {
  Result<std::string> transformer = task_transformer_part(folder, task);
  std::vector<std::string> parts = {transformer.ok() ? *transformer : std::string("transformer"), "text_encoder",
                                    "tokenizer"};
  if (task == "fl2va") parts.push_back("vae");
  if (task == "ref2va") {
    parts.push_back("vae");
    parts.push_back("audio_vae");
  }
  return parts;
}

Status apply_model_folder(const ModelFolder& folder, int text_layer_override, PipelineOptions& options,
                          const std::string& task) {
  VORTEX_ASSIGN_OR_RETURN(const std::string transformer, task_transformer_part(folder, task));
  std::vector<std::string> needed = generate_parts();
  needed[0] = transformer;
  VORTEX_RETURN_IF_ERROR(require_parts(folder, needed, "needed to generate from a prompt"));
  options.model_dir = folder.dir;
  options.checkpoint_path = folder.path_of(transformer);
  options.text_encoder_dir = folder.path_of("text_encoder");
  options.tokenizer_path = folder.path_of("tokenizer");
  options.text_layer = text_layer_override >= 0 ? text_layer_override : folder.text_layer;
  if (options.text_layer < 0)
    return not_found("--model " + folder.dir + " has no pipeline config naming the text layer; pass --text-layer K");
  return Status::Ok();
}

DecoderPaths decoder_paths(const ModelFolder& folder) {
  DecoderPaths d{folder.path_of("vae"), folder.path_of("audio_vae")};
  if (!d.present()) return {};
  return d;
}

std::vector<std::string> runnable_tasks(const ModelFolder& folder) {
  std::vector<std::string> out;
  const bool t2va = !folder.path_of("transformer").empty() && !folder.path_of("text_encoder").empty() &&
                    !folder.path_of("tokenizer").empty();
  for (const std::string& t : folder.tasks) {
    if (t == "t2va" && t2va) out.push_back(t);
    if (t == "fl2va" && t2va && !folder.path_of("vae").empty()) out.push_back(t);
    // ref2va: the Ref2VA transformer (transformer_ref/, or a Ref2VA partition's transformer/), the conditioner and
    // both VAEs (the references' encoders).
    const std::string ref_transformer = folder.partition == "ref2va" ? "transformer" : "transformer_ref";
    if (t == "ref2va" && !folder.path_of(ref_transformer).empty() && !folder.path_of("text_encoder").empty() &&
        !folder.path_of("tokenizer").empty() && !folder.path_of("vae").empty() && !folder.path_of("audio_vae").empty())
      out.push_back(t);
  }
  return out;
}

std::string describe_model_folder(const ModelFolder& folder) {
  std::ostringstream o;
  o << "model folder: " << folder.dir << "\n";
  o << "layout: " << model_folder_layout_name(folder.layout);
  if (!folder.pipeline_class.empty()) o << " (" << folder.pipeline_class << ")";
  if (!folder.partition.empty()) o << ", partition " << folder.partition;
  o << "\n";
  int missing = 0;
  for (const ModelPart& p : folder.parts) {
    char line[64];
    std::snprintf(line, sizeof line, "  %-13s", p.name.c_str());
    o << line << (p.present ? "ok       " : p.damaged ? "DAMAGED  " : "MISSING  ") << p.path;
    if (p.present && p.bytes > 0) o << "  (" << format_bytes(p.bytes) << ")";
    if (!p.present) {
      o << "\n                 " << p.problem;
      ++missing;
    }
    o << "\n";
  }
  if (folder.text_layer >= 0) {
    o << "text layer: hidden_states[" << folder.text_layer << "]";
    if (folder.text_layer == kH3TextEncoderLayer) o << " (MiniMax-H3: the pre-norm output of decoder layer 49)";
    o << "\n";
  } else {
    o << "text layer: not named by a pipeline config (pass --text-layer K)\n";
  }
  if (!folder.tasks.empty()) {
    auto join = [](const std::vector<std::string>& v) {
      std::string j;
      for (const std::string& t : v) j += (j.empty() ? "" : ", ") + t;
      return j.empty() ? std::string("none") : j;
    };
    const std::vector<std::string> runnable = runnable_tasks(folder);
    o << "tasks: " << join(folder.tasks) << "; Vortex runs here: " << join(runnable);
    for (const std::string& t : folder.tasks)
      if (std::find(runnable.begin(), runnable.end(), t) == runnable.end())
        o << (t == "ref2va"  ? " (ref2va needs the Ref2VA transformer, the conditioner, vae/ and audio_vae/: the "
                               "references' encoders)"
              : t == "fl2va" ? " (fl2va needs vae/: the keyframes' encoder)"
                             : " (" + t + " needs the transformer, text encoder and tokenizer)");
    o << "\n";
  }
  for (const std::string& n : folder.notes) o << "note: " << n << "\n";
  if (missing == 0 && folder.partition == "ref2va") {
    o << "complete: generate --model " << folder.dir << " --prompt \"...\" --ref FILE can run\n";
  } else if (missing == 0) {
    o << "complete: generate --model " << folder.dir << " --prompt \"...\" can run"
      << (folder.layout == ModelFolderLayout::kTransformers ? " (a text encoder folder: encode-text only)" : "")
      << "\n";
  } else {
    const bool t2v = folder.path_of("transformer").size() && folder.path_of("text_encoder").size() &&
                     folder.path_of("tokenizer").size();
    o << missing << " part" << (missing > 1 ? "s" : "") << " missing or damaged"
      << (t2v ? " (prompt -> latents can run; decoding needs vae/ and audio_vae/)" : "") << "\n";
  }
  return o.str();
}

int verify_model_folder_files(ModelFolder& folder) {
  int damaged = 0;
  for (ModelPart& p : folder.parts) {
    if (!p.present) continue;
    Status bad = Status::Ok();
    std::error_code ec;
    if (p.name == "tokenizer") {
      if (Result<Tokenizer> t = Tokenizer::from_json_file(p.path); !t.ok()) bad = t.status();
    } else {
      std::vector<fs::path> files;
      for (const fs::directory_entry& e : fs::directory_iterator(p.path, ec))
        if (e.path().extension() == ".safetensors" && e.is_regular_file(ec)) files.push_back(e.path());
      std::sort(files.begin(), files.end());
      for (const fs::path& f : files) {
        if (Result<SafetensorsFile> st = SafetensorsFile::open(f.string()); !st.ok()) {
          bad = st.status();
          break;
        }
      }
    }
    if (!bad.ok()) {
      p.present = false;
      p.damaged = true;
      p.problem = bad.message();
      ++damaged;
    }
  }
  return damaged;
}

}  // namespace vortex
