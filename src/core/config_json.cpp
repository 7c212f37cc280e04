// ConfigJson (see config_json.h): parsing, the class-name table of the MiniMax-H3 release, and the typed getters
// every config reader of Vortex goes through. The class names are those of the release's files
// (tests/fixtures/release/, copied verbatim from MiniMax-AI/MiniMax-H3).
#include "core/config_json.h"

#include <cstdint>
#include <fstream>
#include <iterator>
#include <limits>
#include <utility>

namespace vortex {
namespace {

using Json = nlohmann::json;

// A value for a message: never throws on odd strings, and is cut short.
std::string show(const Json& v) {
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

struct ClassKind {
  const char* name;
  ConfigKind kind;
};

constexpr ClassKind kClasses[] = {
    {"MiniMaxH3DiTModel", ConfigKind::kTransformer},            // FL2VA/transformer, Ref2VA/transformer
    {"MiniMaxH3Transformer3DModel", ConfigKind::kTransformer},  // transformer/, transformer_ref/ (diffusers)
    {"AutoencoderKLMiniMaxH3", ConfigKind::kVideoVae},          // vae/
    {"MiniMaxH3VideoVAE", ConfigKind::kVideoVae},               // FL2VA/video_vae
    {"AutoencoderKLLegacy", ConfigKind::kVideoVae},             // FL2VA/video_vae/source
    {"AutoencoderKLMiniMaxH3Audio", ConfigKind::kAudioVae},     // audio_vae/
    {"MiniMaxH3AudioVAE", ConfigKind::kAudioVae},               // FL2VA/audio_vae
    {"Qwen3VLForConditionalGeneration", ConfigKind::kTextEncoder},
    {"MiniMaxH3Qwen3VLHFEncoder", ConfigKind::kTextEncoder},
    {"Qwen3VLModel", ConfigKind::kTextEncoder},
    {"MiniMaxH3ModularPipeline", ConfigKind::kPipeline},  // model_index.json, modular_model_index.json
    {"MiniMaxH3Pipeline", ConfigKind::kPipeline},         // FL2VA/model_index.json, Ref2VA/model_index.json
    {"MiniMaxH3Scheduler", ConfigKind::kScheduler},       // scheduler/, audio_scheduler/
};

}  // namespace

ConfigKind config_kind_of_class(std::string_view class_name) {
  for (const ClassKind& c : kClasses)
    if (class_name == c.name) return c.kind;
  return ConfigKind::kUnknown;
}

const char* config_kind_name(ConfigKind kind) {
  switch (kind) {
    case ConfigKind::kTransformer:
      return "the H3 transformer";
    case ConfigKind::kVideoVae:
      return "the video VAE";
    case ConfigKind::kAudioVae:
      return "the audio VAE";
    case ConfigKind::kTextEncoder:
      return "the text encoder (Qwen3-VL)";
    case ConfigKind::kPipeline:
      return "a pipeline index (the whole model folder)";
    case ConfigKind::kScheduler:
      return "a scheduler";
    case ConfigKind::kUnknown:
      break;
  }
  return "an unknown component";
}

const char* config_kind_location(ConfigKind kind) {
  switch (kind) {
    case ConfigKind::kTransformer:
      return "transformer/ (diffusers layout) or FL2VA/transformer/ (original layout) of the MiniMax-H3 snapshot";
    case ConfigKind::kVideoVae:
      return "vae/ of the MiniMax-H3 snapshot (FL2VA/video_vae/ in the original layout)";
    case ConfigKind::kAudioVae:
      return "audio_vae/ of the MiniMax-H3 snapshot (FL2VA/audio_vae/ in the original layout)";
    case ConfigKind::kTextEncoder:
      return "text_encoder/ of the MiniMax-H3 snapshot (or of FL2VA/)";
    case ConfigKind::kPipeline:
      return "the MiniMax-H3 snapshot root or its FL2VA/ folder (pass it as --model DIR)";
    case ConfigKind::kScheduler:
      return "scheduler/ of the MiniMax-H3 snapshot";
    case ConfigKind::kUnknown:
      break;
  }
  return "?";
}

Result<ConfigJson> ConfigJson::parse(std::string_view text, std::string label) {
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return format_error(label + " is not valid JSON");
  if (!j.is_object()) return format_error(label + " must be a JSON object, got " + std::string(j.type_name()));
  ConfigJson c;
  c.j_ = std::move(j);
  c.label_ = std::move(label);
  return c;
}

Result<ConfigJson> ConfigJson::from_object(Json object, std::string label) {
  if (!object.is_object())
    return format_error(label + " must be a JSON object, got " + std::string(object.type_name()));
  ConfigJson c;
  c.j_ = std::move(object);
  c.label_ = std::move(label);
  return c;
}

Result<ConfigJson> ConfigJson::read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path + " does not exist or cannot be read");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return io_error(path + ": read error");
  return parse(text, path);
}

Result<ConfigJson> ConfigJson::object(const char* key) const {
  auto it = j_.find(key);
  if (it == j_.end() || !it->is_object())
    return format_error(label_ + ": '" + key + "' must be an object" + (it == j_.end() ? " (it is missing)" : ""));
  ConfigJson c;
  c.j_ = *it;
  c.label_ = label_ + ":" + key;
  return c;
}

bool ConfigJson::has(const char* key) const {
  auto it = j_.find(key);
  return it != j_.end() && !it->is_null();
}

std::string ConfigJson::class_name() const {
  if (auto it = j_.find("_class_name"); it != j_.end() && it->is_string()) return it->get<std::string>();
  if (auto it = j_.find("architectures"); it != j_.end() && it->is_array() && !it->empty() && (*it)[0].is_string())
    return (*it)[0].get<std::string>();
  return "";
}

ConfigKind ConfigJson::kind() const {
  const ConfigKind k = config_kind_of_class(class_name());
  if (k == ConfigKind::kUnknown && has("_minimax_h3")) return ConfigKind::kPipeline;
  return k;
}

Status ConfigJson::expect_kind(ConfigKind want) const {
  const ConfigKind k = kind();
  if (k == ConfigKind::kUnknown || k == want) return Status::Ok();
  const std::string cls = class_name();
  return format_error(label_ + " holds " + config_kind_name(k) + (cls.empty() ? "" : " (" + cls + ")") + ", not " +
                      config_kind_name(want) + ": " + config_kind_name(want) + " is in " + config_kind_location(want));
}

Status ConfigJson::type_error(const char* key, const char* expected, const Json& got) const {
  return format_error(label_ + ": '" + key + "' must be " + expected + ", got " + show(got));
}

Result<const Json*> ConfigJson::one_of(std::initializer_list<const char*> spellings) const {
  const Json* found = nullptr;
  const char* found_key = nullptr;
  for (const char* key : spellings) {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) continue;
    if (found != nullptr && *found != *it)
      return format_error(label_ + ": '" + found_key + "' = " + show(*found) + " and '" + key + "' = " + show(*it) +
                          " name the same quantity and disagree; keep one of them");
    if (found == nullptr) {
      found = &*it;
      found_key = key;
    }
  }
  return found;
}

Result<int> ConfigJson::get_int(std::initializer_list<const char*> spellings, int fallback) const {
  VORTEX_ASSIGN_OR_RETURN(const Json* v, one_of(spellings));
  if (v == nullptr) return fallback;
  if (!v->is_number_integer()) return type_error(*spellings.begin(), "an integer", *v);
  const int64_t x = v->get<int64_t>();
  if (x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max())
    return format_error(label_ + ": '" + *spellings.begin() + "' out of range (a 32-bit integer), got " + show(*v));
  return static_cast<int>(x);
}

Result<double> ConfigJson::get_number(std::initializer_list<const char*> spellings, double fallback) const {
  VORTEX_ASSIGN_OR_RETURN(const Json* v, one_of(spellings));
  if (v == nullptr) return fallback;
  if (!v->is_number()) return type_error(*spellings.begin(), "a number", *v);
  return v->get<double>();
}

Result<std::string> ConfigJson::get_string(const char* key, const std::string& fallback) const {
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return fallback;
  if (!it->is_string()) return type_error(key, "a string", *it);
  return it->get<std::string>();
}

Result<bool> ConfigJson::get_bool(const char* key, bool fallback) const {
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return type_error(key, "true or false", *it);
  return it->get<bool>();
}

Result<std::vector<int>> ConfigJson::get_ints(const char* key, std::vector<int> fallback) const {
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return fallback;
  if (!it->is_array()) return type_error(key, "a list of integers", *it);
  std::vector<int> out;
  for (const Json& e : *it) {
    if (!e.is_number_integer() || e.get<int64_t>() < std::numeric_limits<int>::min() ||
        e.get<int64_t>() > std::numeric_limits<int>::max())
      return type_error(key, "a list of integers", *it);
    out.push_back(static_cast<int>(e.get<int64_t>()));
  }
  return out;
}

Result<std::vector<double>> ConfigJson::get_numbers(const char* key, std::vector<double> fallback) const {
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return fallback;
  if (!it->is_array()) return type_error(key, "a list of numbers", *it);
  std::vector<double> out;
  for (const Json& e : *it) {
    if (!e.is_number()) return type_error(key, "a list of numbers", *it);
    out.push_back(e.get<double>());
  }
  return out;
}

Result<int> ConfigJson::require_int(const char* key, int64_t min, int64_t max) const {
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return format_error(label_ + ": '" + key + "' is missing");
  if (!it->is_number_integer() || it->get<int64_t>() < min || it->get<int64_t>() > max)
    return type_error(key, ("an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]").c_str(), *it);
  return static_cast<int>(it->get<int64_t>());
}

}  // namespace vortex
