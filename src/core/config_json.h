// ConfigJson: the one reader of the MiniMax-H3 release's JSON config files (a transformer's, a VAE's or the text
// encoder's config.json, a pipeline's model_index.json). It knows both key spellings of one quantity (the original
// release's and diffusers'), refuses a file giving two spellings different values, and classifies `_class_name`
// (or transformers' `architectures`) into the component it names, so every loader refuses another component's
// config with the same message. Tested in tests/core/config_json_test.cpp and, on the release's own files,
// tests/engine/release_configs_test.cpp.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "vortex/status.h"

namespace vortex {

// The component a config file describes, from its class name.
enum class ConfigKind { kUnknown, kTransformer, kVideoVae, kAudioVae, kTextEncoder, kPipeline, kScheduler };

// The kind a class name of the release (or of diffusers / transformers) means; kUnknown for any other name.
// Transformer: MiniMaxH3DiTModel (original layout), MiniMaxH3Transformer3DModel (diffusers).
ConfigKind config_kind_of_class(std::string_view class_name);
// "the H3 transformer", "the video VAE", ... for messages.
const char* config_kind_name(ConfigKind kind);
// Where the release keeps that component, e.g. "transformer/ (diffusers layout) or FL2VA/transformer/ (original
// layout) of the MiniMax-H3 snapshot".
const char* config_kind_location(ConfigKind kind);

class ConfigJson {
 public:
  // `label` names the file in every error (usually its path).
  static Result<ConfigJson> parse(std::string_view text, std::string label);
  // kNotFound when the file does not exist; kFormat when it is not a JSON object.
  static Result<ConfigJson> read_file(const std::string& path);
  // A config assembled in memory (e.g. the original layout's keys renamed to diffusers'); kFormat unless an object.
  static Result<ConfigJson> from_object(nlohmann::json object, std::string label);

  const nlohmann::json& json() const { return j_; }
  const std::string& label() const { return label_; }
  // The object under `key` (e.g. "text_config"), labelled LABEL:key; kFormat when it is missing or not an object.
  Result<ConfigJson> object(const char* key) const;
  // True when `key` is present and not null.
  bool has(const char* key) const;

  // `_class_name`, else the first of `architectures`, else "".
  std::string class_name() const;
  // The kind of class_name(); also kPipeline for an index without a known class but with `_minimax_h3`.
  ConfigKind kind() const;
  // Refuses a file that names another component than `want` (kFormat): "LABEL holds the video VAE
  // (AutoencoderKLMiniMaxH3), not the H3 transformer: the H3 transformer is in transformer/ ...". A file without a
  // class name, or with one this table does not know, is accepted: its numbers are checked by the caller.
  Status expect_kind(ConfigKind want) const;

  // An optional value under one key or under any of its spellings (the same quantity, original and diffusers
  // names). Absent or null everywhere: `fallback`. A value of the wrong type or range, or two spellings with
  // different values, is kFormat naming the keys.
  Result<int> get_int(std::initializer_list<const char*> spellings, int fallback) const;
  Result<double> get_number(std::initializer_list<const char*> spellings, double fallback) const;
  Result<std::string> get_string(const char* key, const std::string& fallback) const;
  Result<bool> get_bool(const char* key, bool fallback) const;
  Result<std::vector<int>> get_ints(const char* key, std::vector<int> fallback) const;
  Result<std::vector<double>> get_numbers(const char* key, std::vector<double> fallback) const;
  // A required integer in [min, max]: missing is kFormat "LABEL: KEY is missing".
  Result<int> require_int(const char* key, int64_t min, int64_t max) const;

 private:
  // The one value the spellings give, or nullptr when none is present; kFormat when two disagree.
  Result<const nlohmann::json*> one_of(std::initializer_list<const char*> spellings) const;
  Status type_error(const char* key, const char* expected, const nlohmann::json& got) const;

  nlohmann::json j_;
  std::string label_;
};

}  // namespace vortex
