// POST /v1/videos body parsing (see request.h). nlohmann::json without exceptions; the depth is checked
// on the raw text first because the parser recurses once per nesting level.
#include "serve/request.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

namespace vortex::serve {
namespace {

using json = nlohmann::json;

const char* const kKnownFields[] = {"prompt",    "width",     "height", "size", "aspect_ratio",    "short_edge",
                                    "frames",    "seconds",   "steps",  "seed", "schedule",        "sampler",
                                    "attention", "precision", "media",  "lora", "fail_alloc_after"};

constexpr size_t kMaxLoras = 8;

std::string known_fields_help() {
  std::string s;
  for (const char* f : kKnownFields) {
    if (std::string_view(f) == "fail_alloc_after") continue;  // debug only, not advertised
    s += (s.empty() ? "" : ", ") + std::string(f);
  }
  return s;
}

Status bad(std::string* field, const std::string& name, const std::string& message) {
  if (field != nullptr) *field = name;
  return invalid_argument(message);
}

// An integer field within [lo, hi].
Status get_int(const json& body, const char* name, int64_t lo, int64_t hi, int64_t& out, std::string* field) {
  const json& v = body.at(name);
  if (!v.is_number_integer()) return bad(field, name, std::string(name) + " must be an integer");
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) {
      return bad(field, name,
                 std::string(name) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    out = static_cast<int64_t>(u);
  } else {
    out = v.get<int64_t>();
  }
  if (out < lo || out > hi) {
    return bad(field, name,
               std::string(name) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                   std::to_string(out));
  }
  return Status::Ok();
}

Status get_string(const json& body, const char* name, size_t max_bytes, std::string& out, std::string* field) {
  const json& v = body.at(name);
  if (!v.is_string()) return bad(field, name, std::string(name) + " must be a string");
  out = v.get<std::string>();
  if (out.empty()) return bad(field, name, std::string(name) + " must not be empty");
  if (out.size() > max_bytes) {
    return bad(
        field, name,
        std::string(name) + " is " + std::to_string(out.size()) + " bytes; the limit is " + std::to_string(max_bytes));
  }
  return Status::Ok();
}

// "16:9" -> (16, 9), both in [1, 100].
bool parse_ratio(const std::string& s, int& a, int& b) {
  const size_t colon = s.find(':');
  if (colon == std::string::npos) return false;
  const char* p = s.data();
  auto r1 = std::from_chars(p, p + colon, a);
  auto r2 = std::from_chars(p + colon + 1, p + s.size(), b);
  return r1.ec == std::errc() && r1.ptr == p + colon && r2.ec == std::errc() && r2.ptr == p + s.size() && a >= 1 &&
         a <= 100 && b >= 1 && b <= 100;
}

// "448x256" -> (448, 256).
bool parse_size(const std::string& s, int& w, int& h) {
  const size_t x = s.find('x');
  if (x == std::string::npos) return false;
  const char* p = s.data();
  auto r1 = std::from_chars(p, p + x, w);
  auto r2 = std::from_chars(p + x + 1, p + s.size(), h);
  return r1.ec == std::errc() && r1.ptr == p + x && r2.ec == std::errc() && r2.ptr == p + s.size();
}

}  // namespace

int json_depth(std::string_view text, int limit) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      max_depth = std::max(max_depth, ++depth);
      if (max_depth > limit) return max_depth;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return max_depth;
}

Result<RunRequest> parse_video_request(std::string_view body_text, const RequestLimits& limits,
                                       const RunRequest& defaults, std::string* field) {
  if (field != nullptr) field->clear();
  if (body_text.size() > limits.max_body_bytes) {
    return bad(field, "",
               "the body is " + std::to_string(body_text.size()) + " bytes; the limit is " +
                   std::to_string(limits.max_body_bytes));
  }
  if (json_depth(body_text, limits.max_json_depth) > limits.max_json_depth) {
    return bad(field, "", "the body nests deeper than " + std::to_string(limits.max_json_depth) + " levels");
  }
  const json body = json::parse(body_text.begin(), body_text.end(), nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return bad(field, "", "the body is not valid JSON");
  if (!body.is_object()) return bad(field, "", "the body must be a JSON object");

  const std::set<std::string> known(std::begin(kKnownFields), std::end(kKnownFields));
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (!known.count(it.key()) || (it.key() == "fail_alloc_after" && !limits.allow_fault_injection)) {
      std::string shown = it.key().substr(0, 64);
      for (char& c : shown) {
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
      }
      return bad(field, shown, "unknown field '" + shown + "' (known: " + known_fields_help() + ")");
    }
  }

  RunRequest r = defaults;
  auto has = [&body](const char* name) { return body.contains(name); };
  int64_t v = 0;
  if (has("prompt")) VORTEX_RETURN_IF_ERROR(get_string(body, "prompt", limits.max_prompt_bytes, r.prompt, field));

  const bool wh = has("width") || has("height");
  const int size_forms = (wh ? 1 : 0) + (has("size") ? 1 : 0) + ((has("aspect_ratio") || has("short_edge")) ? 1 : 0);
  if (size_forms > 1) {
    return bad(field, has("size") ? "size" : "aspect_ratio",
               "give the size one way: width and height, size \"WxH\", or aspect_ratio with short_edge");
  }
  if (wh) {
    if (!has("width") || !has("height")) {
      return bad(field, has("width") ? "height" : "width", "width and height go together");
    }
    VORTEX_RETURN_IF_ERROR(get_int(body, "width", 1, 1 << 16, v, field));
    r.width = static_cast<int>(v);
    VORTEX_RETURN_IF_ERROR(get_int(body, "height", 1, 1 << 16, v, field));
    r.height = static_cast<int>(v);
  }
  if (has("size")) {
    std::string s;
    VORTEX_RETURN_IF_ERROR(get_string(body, "size", 32, s, field));
    int w = 0, h = 0;
    if (!parse_size(s, w, h) || w < 1 || h < 1)
      return bad(field, "size", "size must be \"WIDTHxHEIGHT\", e.g. \"448x256\"");
    r.width = w;
    r.height = h;
  }
  if (has("aspect_ratio") || has("short_edge")) {
    if (!has("aspect_ratio") || !has("short_edge")) {
      return bad(field, has("aspect_ratio") ? "short_edge" : "aspect_ratio", "aspect_ratio and short_edge go together");
    }
    std::string ratio;
    VORTEX_RETURN_IF_ERROR(get_string(body, "aspect_ratio", 16, ratio, field));
    int a = 0, b = 0;
    if (!parse_ratio(ratio, a, b)) return bad(field, "aspect_ratio", "aspect_ratio must be \"W:H\", e.g. \"16:9\"");
    VORTEX_RETURN_IF_ERROR(get_int(body, "short_edge", 32, 8192, v, field));
    // The long edge rounds to the nearest multiple of 32 (the model's pixel granularity).
    const int short_edge = static_cast<int>(v);
    const int long_edge =
        static_cast<int>(std::lround(static_cast<double>(short_edge) * std::max(a, b) / std::min(a, b) / 32.0)) * 32;
    r.width = a >= b ? long_edge : short_edge;
    r.height = a >= b ? short_edge : long_edge;
  }

  if (has("frames") && has("seconds")) return bad(field, "seconds", "frames and seconds exclude each other");
  if (has("frames")) {
    VORTEX_RETURN_IF_ERROR(get_int(body, "frames", 1, 100000, v, field));
    r.frames = static_cast<int>(v);
  }
  if (has("seconds")) {
    const json& s = body.at("seconds");
    if (!s.is_number()) return bad(field, "seconds", "seconds must be a number");
    const double secs = s.get<double>();
    if (!std::isfinite(secs) || secs <= 0.0) return bad(field, "seconds", "seconds must be a positive number");
    r.seconds = secs;
  }
  if (has("steps")) {
    VORTEX_RETURN_IF_ERROR(get_int(body, "steps", 1, 1000, v, field));
    r.steps = static_cast<int>(v);
  }
  if (has("seed")) {
    const json& s = body.at("seed");
    if (!s.is_number_integer() || (!s.is_number_unsigned() && s.get<int64_t>() < 0)) {
      return bad(field, "seed", "seed must be a non-negative integer");
    }
    r.seed = s.get<uint64_t>();
  }
  // Choices by name, through the converters the CLI uses (engine/request.h).
  std::string name;
  if (has("schedule")) {
    VORTEX_RETURN_IF_ERROR(get_string(body, "schedule", 32, name, field));
    Result<AvScheduleMode> mode = parse_schedule_field(name);
    if (!mode.ok()) return bad(field, "schedule", mode.status().message());
    r.schedule = *mode;
  }
  if (has("sampler")) {
    VORTEX_RETURN_IF_ERROR(get_string(body, "sampler", 32, name, field));
    Result<SamplerKind> kind = parse_sampler_field(name);
    if (!kind.ok()) return bad(field, "sampler", kind.status().message());
    r.sampler = *kind;
  }
  if (has("attention")) {
    VORTEX_RETURN_IF_ERROR(get_string(body, "attention", 32, name, field));
    Result<AttentionKind> attention = parse_attention_field(name, FieldStyle::kJson);
    if (!attention.ok()) return bad(field, "attention", attention.status().message());
    r.attention = *attention;
  }
  if (has("precision")) {
    VORTEX_RETURN_IF_ERROR(get_string(body, "precision", 32, name, field));
    Result<Precision> precision = parse_precision_field(name, FieldStyle::kJson);
    if (!precision.ok()) return bad(field, "precision", precision.status().message());
    r.precision = *precision;
  }
  if (has("media")) {
    if (!body.at("media").is_boolean()) return bad(field, "media", "media must be true or false");
    r.media = body.at("media").get<bool>();
  }
  if (has("lora")) {
    // ["NAME[:SCALE]", ...]: adapters by file name in the server's --lora-dir (resolved there; never a path).
    const json& l = body.at("lora");
    if (!l.is_array()) return bad(field, "lora", "lora must be an array of \"NAME[:SCALE]\" strings");
    if (l.size() > kMaxLoras)
      return bad(field, "lora", "at most " + std::to_string(kMaxLoras) + " adapters per request");
    for (const json& e : l) {
      if (!e.is_string() || e.get<std::string>().size() > 256)
        return bad(field, "lora", "each lora entry must be a \"NAME[:SCALE]\" string of at most 256 bytes");
      Result<LoraSpec> spec = parse_lora_spec(e.get<std::string>());
      if (!spec.ok()) return bad(field, "lora", spec.status().message());
      const std::string& name = spec->path;
      const bool plain = !name.empty() && name.find_first_of("/\\") == std::string::npos && name.front() != '.' &&
                         std::all_of(name.begin(), name.end(), [](char c) {
                           return static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f;
                         });
      if (!plain)
        return bad(field, "lora",
                   "a lora name is a file name in the server's --lora-dir (no directories, no leading '.')");
      r.loras.push_back(*spec);
    }
  }
  if (has("fail_alloc_after")) {
    VORTEX_RETURN_IF_ERROR(get_int(body, "fail_alloc_after", 0, std::numeric_limits<int>::max(), v, field));
    r.fail_alloc_after = static_cast<int>(v);
  }
  return r;
}

}  // namespace vortex::serve
