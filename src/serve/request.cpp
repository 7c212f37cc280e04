// POST /v1/videos body parsing (see request.h). nlohmann::json without exceptions; the depth is checked
// on the raw text first because the parser recurses once per nesting level.
#include "serve/request.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "media/keyframe_canvas.h"
#include "media/reference_media.h"

namespace vortex::serve {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

const char* const kKnownFields[] = {"prompt", "width", "height", "size", "aspect_ratio", "short_edge", "frames",
                                    "seconds", "steps", "seed", "schedule", "sampler", "attention", "precision",
                                    "media", "lora", "fail_alloc_after",
                                    // SGLang's minimax_h3 request dialect
                                    "model", "task", "conditions", "target", "num_inference_steps",
                                    "num_outputs_per_prompt", "flow_shift", "audio_flow_shift"};

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

// ---- SGLang's minimax_h3 dialect: task, conditions (fl2va keyframes), target and the sampling fields ----

// Strict base64 (RFC 4648, padding required, no whitespace); false on any other character or length.
bool decode_base64(std::string_view in, std::string& out) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  if (in.size() % 4 != 0) return false;
  out.clear();
  out.reserve(in.size() / 4 * 3);
  for (size_t i = 0; i < in.size(); i += 4) {
    const bool last = i + 4 == in.size();
    const int pad = last ? (in[i + 3] == '=') + (in[i + 2] == '=') : 0;
    if (pad == 1 && in[i + 2] == '=') return false;  // "x=y=" is no padding
    int v[4];
    for (int k = 0; k < 4 - pad; ++k)
      if ((v[k] = value(in[i + static_cast<size_t>(k)])) < 0) return false;
    for (int k = 4 - pad; k < 4; ++k) v[k] = 0;
    const uint32_t n = (static_cast<uint32_t>(v[0]) << 18) | (static_cast<uint32_t>(v[1]) << 12) |
                       (static_cast<uint32_t>(v[2]) << 6) | static_cast<uint32_t>(v[3]);
    out.push_back(static_cast<char>(n >> 16));
    if (pad < 2) out.push_back(static_cast<char>((n >> 8) & 0xff));
    if (pad < 1) out.push_back(static_cast<char>(n & 0xff));
  }
  return true;
}

size_t base64_length(size_t bytes) { return (bytes + 2) / 3 * 4; }

// A file:// URI's path, which must lie under `input_dir` once symbolic links and ".." are resolved. `noun` names the
// input in messages ("keyframe", "reference"); `data_form` is the data URL form the first message offers instead.
Result<std::string> local_input_path(const std::string& uri, const std::string& input_dir, const std::string& noun,
                                     const std::string& data_form) {
  constexpr std::string_view kScheme = "file://";
  if (uri.rfind(kScheme, 0) != 0 || uri.size() <= kScheme.size() || uri[kScheme.size()] != '/')
    return invalid_argument("a " + noun + " uri is \"file:///ABSOLUTE/PATH\" or a \"" + data_form + "\" URL");
  if (input_dir.empty())
    return invalid_argument("this server reads no local files (start it with --input-dir DIR); send the " +
                            std::string(noun == "keyframe" ? "image" : "file") + " as a data URL");
  std::error_code ec;
  const fs::path dir = fs::weakly_canonical(input_dir, ec);
  if (ec) return invalid_argument("the server's input folder cannot be resolved");
  const fs::path path = fs::weakly_canonical(fs::path(uri.substr(kScheme.size())), ec);
  if (ec) return invalid_argument("the " + noun + " uri cannot be resolved");
  const fs::path rel = path.lexically_relative(dir);
  if (rel.empty() || rel.is_absolute() || *rel.begin() == "..")
    return invalid_argument("a " + noun + " file must lie inside the server's input folder");
  return path.string();
}

Result<std::string> fl2va_local_path(const std::string& uri, const std::string& input_dir) {
  return local_input_path(uri, input_dir, "keyframe", "data:image/...;base64,...");
}

// conditions[] of an fl2va request: one or two {"type": "image", "uri": ..., "role": "keyframe", "frame_index": 0 or
// -1} entries (the frame-index sets [0], [-1] and [0, -1]). A file:// URI becomes the keyframe's path; a data URL
// (image/png, image/jpeg or image/webp, base64) goes to `uploads`.
Status parse_fl2va_conditions(const json& conditions, const RequestLimits& limits, RunRequest& r,
                              std::vector<KeyframeUpload>* uploads, std::string* field) {
  if (conditions.empty() || conditions.size() > 2)
    return bad(field, "conditions", "an fl2va request has one or two keyframe conditions (frame_index 0 and/or -1)");
  bool seen[2] = {false, false};
  for (size_t i = 0; i < conditions.size(); ++i) {
    const std::string at = "conditions[" + std::to_string(i) + "]";
    const json& c = conditions[i];
    if (!c.is_object()) return bad(field, at, at + " must be an object");
    for (auto it = c.begin(); it != c.end(); ++it)
      if (it.key() != "type" && it.key() != "uri" && it.key() != "role" && it.key() != "frame_index")
        return bad(field, at, at + ": unknown field (an fl2va condition has type, uri, role and frame_index)");
    if (!c.contains("type") || c["type"] != "image")
      return bad(field, at + ".type", at + ".type must be \"image\" for fl2va");
    if (c.contains("role") && c["role"] != "keyframe")
      return bad(field, at + ".role", at + ".role must be \"keyframe\" for fl2va");
    if (!c.contains("frame_index") || !c["frame_index"].is_number_integer() ||
        (c["frame_index"].get<int64_t>() != 0 && c["frame_index"].get<int64_t>() != -1))
      return bad(field, at + ".frame_index", at + ".frame_index must be 0 (first frame) or -1 (last frame)");
    const bool last = c["frame_index"].get<int64_t>() == -1;
    if (seen[last])
      return bad(field, at + ".frame_index", "two conditions with frame_index " + c["frame_index"].dump());
    seen[last] = true;
    if (!c.contains("uri") || !c["uri"].is_string() || c["uri"].get_ref<const std::string&>().empty())
      return bad(field, at + ".uri", at + ".uri must be a non-empty string");
    const std::string& uri = c["uri"].get_ref<const std::string&>();
    std::string& path = last ? r.keyframes.last : r.keyframes.first;
    if (uri.rfind("data:", 0) == 0) {
      const size_t comma = uri.find(',');
      const std::string head = uri.substr(0, std::min(comma, uri.size()));
      std::string ext;
      if (head == "data:image/png;base64") ext = "png";
      else if (head == "data:image/jpeg;base64") ext = "jpg";
      else if (head == "data:image/webp;base64") ext = "webp";
      else
        return bad(field, at + ".uri",
                   at + ".uri: a data URL must be data:image/png, image/jpeg or image/webp with ;base64");
      if (uploads == nullptr) return bad(field, at + ".uri", at + ".uri: data URLs are not accepted here");
      const std::string_view payload = std::string_view(uri).substr(comma + 1);
      if (payload.size() > base64_length(limits.max_keyframe_bytes))
        return bad(field, at + ".uri",
                   at + ".uri: the image is over " + std::to_string(limits.max_keyframe_bytes) + " bytes");
      KeyframeUpload up;
      if (!decode_base64(payload, up.bytes) || up.bytes.empty())
        return bad(field, at + ".uri", at + ".uri: the data URL's base64 payload is malformed or empty");
      if (up.bytes.size() > limits.max_keyframe_bytes)
        return bad(field, at + ".uri",
                   at + ".uri: the image is over " + std::to_string(limits.max_keyframe_bytes) + " bytes");
      up.anchor = last ? "last" : "first";
      up.ext = ext;
      uploads->push_back(std::move(up));
      path.clear();
    } else {
      Result<std::string> local = fl2va_local_path(uri, limits.input_dir);
      if (!local.ok()) return bad(field, at + ".uri", at + ".uri: " + local.status().message());
      path = *local;
    }
  }
  return Status::Ok();
}

// ---- ref2va: conditions of role "reference" (images, videos, audio clips) in packed order ----

struct ReferenceType {
  const char* name;  // conditions[].type
  ReferenceKind kind;
  bool soundtrack;  // "video_audio": the video's soundtrack must exist
};
constexpr ReferenceType kReferenceTypes[] = {{"image", ReferenceKind::kImage, false},
                                             {"video", ReferenceKind::kVideo, false},
                                             {"video_audio", ReferenceKind::kVideo, true},
                                             {"audio", ReferenceKind::kAudio, false}};

// The data URL media types a reference may have, with the file extension its upload gets.
struct ReferenceMedia {
  const char* type;
  ReferenceKind kind;
  const char* ext;
};
constexpr ReferenceMedia kReferenceMedia[] = {
    {"image/png", ReferenceKind::kImage, "png"},        {"image/jpeg", ReferenceKind::kImage, "jpg"},
    {"image/webp", ReferenceKind::kImage, "webp"},      {"video/mp4", ReferenceKind::kVideo, "mp4"},
    {"video/quicktime", ReferenceKind::kVideo, "mov"},  {"video/webm", ReferenceKind::kVideo, "webm"},
    {"video/x-matroska", ReferenceKind::kVideo, "mkv"}, {"audio/wav", ReferenceKind::kAudio, "wav"},
    {"audio/x-wav", ReferenceKind::kAudio, "wav"},      {"audio/wave", ReferenceKind::kAudio, "wav"},
    {"audio/mpeg", ReferenceKind::kAudio, "mp3"},       {"audio/flac", ReferenceKind::kAudio, "flac"},
    {"audio/x-flac", ReferenceKind::kAudio, "flac"},    {"audio/ogg", ReferenceKind::kAudio, "ogg"},
    {"audio/aac", ReferenceKind::kAudio, "aac"},        {"audio/mp4", ReferenceKind::kAudio, "m4a"}};

std::string reference_media_help(ReferenceKind kind) {
  std::string s;
  for (const ReferenceMedia& m : kReferenceMedia)
    if (m.kind == kind) s += (s.empty() ? "" : ", ") + std::string(m.type);
  return s;
}

// One condition's own fields (no file read): its type, role and start time. Returns the index into kReferenceTypes.
Result<size_t> parse_reference_fields(const json& c, const std::string& at, std::string* field) {
  if (!c.is_object()) return bad(field, at, at + " must be an object");
  for (auto it = c.begin(); it != c.end(); ++it) {
    if (it.key() == "frame_index")
      return bad(field, at + ".frame_index",
                 at + ".frame_index is an fl2va keyframe's field (task \"fl2va\"); a ref2va reference has none");
    if (it.key() != "type" && it.key() != "uri" && it.key() != "role" && it.key() != "start_time_seconds")
      return bad(field, at, at + ": unknown field (a ref2va condition has type, uri, role and start_time_seconds)");
  }
  if (!c.contains("type") || !c["type"].is_string())
    return bad(field, at + ".type", at + ".type must be \"image\", \"video\", \"video_audio\" or \"audio\"");
  const std::string& type = c["type"].get_ref<const std::string&>();
  size_t t = 0;
  while (t < std::size(kReferenceTypes) && type != kReferenceTypes[t].name) ++t;
  if (t == std::size(kReferenceTypes))
    return bad(
        field, at + ".type",
        at + ".type must be \"image\", \"video\", \"video_audio\" or \"audio\", got '" + type.substr(0, 32) + "'");
  if (c.contains("role") && c["role"] != "reference") {
    const bool keyframe = c["role"] == "keyframe";
    return bad(field, at + ".role",
               at + ".role must be \"reference\" for ref2va" +
                   std::string(keyframe ? " (role \"keyframe\" is fl2va's: task \"fl2va\")" : ""));
  }
  if (c.contains("start_time_seconds")) {
    const json& st = c["start_time_seconds"];
    const std::string name = at + ".start_time_seconds";
    if (kReferenceTypes[t].kind != ReferenceKind::kVideo)
      return bad(field, name, name + " applies to a video reference (type \"video\" or \"video_audio\")");
    if (!st.is_number() || !std::isfinite(st.get<double>()) || st.get<double>() < 0.0)
      return bad(field, name, name + " must be a non-negative number of seconds");
    if (st.get<double>() != 0.0)
      return bad(field, name,
                 name +
                     ": this server reads a video reference from its start (start_time_seconds 0); cut the clip "
                     "first (e.g. ffmpeg -ss " +
                     st.dump() + " -i IN -c copy OUT) and send that file");
  }
  return t;
}

// A reference's uri: a file:// URI under the server's input folder (RunRequest::references gets "KIND:PATH"), or a
// data URL of the condition's kind (an upload; RunRequest::references gets "KIND:" for the caller to complete).
// Remote URIs are refused: this server fetches nothing.
Status parse_reference_uri(const json& c, const std::string& at, size_t index, ReferenceKind kind,
                           const RequestLimits& limits, RunRequest& r, ReferenceInputs* refs, std::string* field) {
  const std::string name = at + ".uri";
  if (!c.contains("uri") || !c["uri"].is_string() || c["uri"].get_ref<const std::string&>().empty())
    return bad(field, name, name + " must be a non-empty string");
  const std::string& uri = c["uri"].get_ref<const std::string&>();
  const std::string kind_name = reference_kind_name(kind);
  if (uri.rfind("http://", 0) == 0 || uri.rfind("https://", 0) == 0)
    return bad(field, name,
               name +
                   ": this server fetches no remote files; put the file in the server's --input-dir and send "
                   "\"file:///PATH\", or send it inline as a data URL");
  if (uri.rfind("data:", 0) == 0) {
    const size_t comma = uri.find(',');
    const std::string head = uri.substr(0, std::min(comma, uri.size()));
    const ReferenceMedia* media = nullptr;
    for (const ReferenceMedia& m : kReferenceMedia)
      if (head == "data:" + std::string(m.type) + ";base64") media = &m;
    if (media == nullptr || media->kind != kind)
      return bad(field, name,
                 name + ": a data URL of a " + kind_name + " reference is data:TYPE;base64,... with TYPE one of " +
                     reference_media_help(kind));
    if (refs == nullptr) return bad(field, name, name + ": data URLs are not accepted here");
    // The body limit bounds a data URL; an image also has the CLI's image file limit.
    const size_t max_bytes = kind == ReferenceKind::kImage
                                 ? limits.max_keyframe_bytes
                                 : static_cast<size_t>(ReferenceLimits{}.max_media_file_bytes);
    const std::string_view payload = std::string_view(uri).substr(comma + 1);
    if (payload.size() > base64_length(max_bytes))
      return bad(field, name, name + ": the file is over " + std::to_string(max_bytes) + " bytes");
    ReferenceUpload up;
    if (!decode_base64(payload, up.bytes) || up.bytes.empty())
      return bad(field, name, name + ": the data URL's base64 payload is malformed or empty");
    up.index = index;
    up.kind = kind_name;
    up.ext = media->ext;
    refs->uploads.push_back(std::move(up));
    r.references.push_back(kind_name + ":");
    return Status::Ok();
  }
  Result<std::string> local = local_input_path(uri, limits.input_dir, "reference", "data:TYPE;base64,...");
  if (!local.ok()) return bad(field, name, name + ": " + local.status().message());
  r.references.push_back(kind_name + ":" + *local);
  return Status::Ok();
}

// conditions[] of a ref2va request, in packed order (the prompt's <Picture i>, <Video k>, <Audio j> count per kind in
// this order). Every condition's fields first, then the release's limits on the declared kinds (the engine's
// check_reference_set: per kind, in total, audio never alone), then the URIs. The files' own checks (headers,
// durations, the Ref2VA transformer, the encoders) come at admission, through the engine.
Status parse_ref2va_conditions(const json& conditions, const RequestLimits& limits, RunRequest& r,
                               ReferenceInputs* refs, std::string* field) {
  if (conditions.empty())
    return bad(field, "conditions",
               "a ref2va request needs at least one reference (conditions of type image, video, video_audio or "
               "audio with role reference); use task t2va for text alone");
  // More than the release's total cannot pass; refused before each entry is read.
  const ReferenceLimits release;
  if (conditions.size() > static_cast<size_t>(release.max_references))
    return bad(field, "conditions",
               "conditions: the Ref2VA checkpoint accepts at most " + std::to_string(release.max_references) +
                   " references in total, got " + std::to_string(conditions.size()));
  std::vector<size_t> types;
  std::vector<ReferenceProbe> declared;
  for (size_t i = 0; i < conditions.size(); ++i) {
    Result<size_t> t = parse_reference_fields(conditions[i], "conditions[" + std::to_string(i) + "]", field);
    if (!t.ok()) return t.status();
    types.push_back(*t);
    ReferenceProbe p;
    p.kind = kReferenceTypes[*t].kind;
    declared.push_back(p);
  }
  if (Status s = check_reference_set(declared, release); !s.ok())
    return bad(field, "conditions", "conditions: " + s.message());
  for (size_t i = 0; i < conditions.size(); ++i) {
    const std::string at = "conditions[" + std::to_string(i) + "]";
    const ReferenceType& type = kReferenceTypes[types[i]];
    VORTEX_RETURN_IF_ERROR(parse_reference_uri(conditions[i], at, i, type.kind, limits, r, refs, field));
    if (type.soundtrack) {
      if (refs == nullptr)
        return bad(field, at + ".type", at + ".type \"video_audio\" is not accepted here (send \"video\")");
      refs->with_soundtrack.push_back(i);
    }
  }
  return Status::Ok();
}

// task and conditions: "t2va" takes no condition; "fl2va" takes keyframes (parse_fl2va_conditions); "ref2va"
// references (parse_ref2va_conditions).
Status parse_task_conditions(const json& body, const RequestLimits& limits, RunRequest& r,
                             std::vector<KeyframeUpload>* uploads, ReferenceInputs* refs, std::string* field) {
  std::string task = "t2va";
  if (body.contains("task")) {
    if (!body["task"].is_string()) return bad(field, "task", "task must be a string");
    task = body["task"].get<std::string>();
  }
  const json empty = json::array();
  const json& conditions = body.contains("conditions") ? body["conditions"] : empty;
  if (!conditions.is_array()) return bad(field, "conditions", "conditions must be an array");
  if (task == "t2va") {
    if (!conditions.empty())
      return bad(field, "conditions", "a t2va request takes no conditions (fl2va takes keyframes, ref2va references)");
    return Status::Ok();
  }
  if (task == "fl2va") return parse_fl2va_conditions(conditions, limits, r, uploads, field);
  if (task == "ref2va") return parse_ref2va_conditions(conditions, limits, r, refs, field);
  return bad(field, "task", "task must be \"t2va\", \"fl2va\" or \"ref2va\", got '" + task.substr(0, 32) + "'");
}

// target: {"short_edge": N, "aspect_ratio": "W:H" | "auto", "duration_seconds": S}. The canvas is H3's rule
// (resolve_canvas_size: short edge N, area at most N^2 * 1344 / 768, both sides multiples of 32); "auto" takes it
// from the first keyframe, as diffusers does without a height and width, and is 16:9 for ref2va (SGLang's cookbook:
// the model's fallback, not a reference's geometry).
Status parse_target(const json& t, bool keyframes, RunRequest& r, std::string* field) {
  if (!t.is_object()) return bad(field, "target", "target must be an object");
  for (auto it = t.begin(); it != t.end(); ++it)
    if (it.key() != "short_edge" && it.key() != "aspect_ratio" && it.key() != "duration_seconds")
      return bad(field, "target." + it.key().substr(0, 32),
                 "unknown target field (known: short_edge, aspect_ratio, duration_seconds)");
  int64_t short_edge = 768;
  if (t.contains("short_edge")) {
    if (Status s = get_int(t, "short_edge", 32, 8192, short_edge, field); !s.ok())
      return bad(field, "target.short_edge", "target." + s.message());
  }
  std::string ratio = t.contains("aspect_ratio") && t["aspect_ratio"].is_string()
                          ? t["aspect_ratio"].get<std::string>()
                          : std::string(t.contains("aspect_ratio") ? "?" : "16:9");
  if (ratio == "auto" && !keyframes && !r.references.empty()) ratio = "16:9";
  if (ratio == "auto") {
    if (!keyframes)
      return bad(field, "target.aspect_ratio", "aspect_ratio \"auto\" follows a keyframe: it needs an fl2va condition");
    r.canvas_from_keyframe = true;
  } else {
    int a = 0, b = 0;
    if (!parse_ratio(ratio, a, b))
      return bad(field, "target.aspect_ratio", "target.aspect_ratio must be \"W:H\" (e.g. \"16:9\") or \"auto\"");
    CanvasRule rule;
    rule.short_edge = static_cast<int>(short_edge);
    rule.max_pixels = short_edge * short_edge * 1344 / 768;
    Result<CanvasSize> canvas = resolve_canvas_size(a, b, rule);
    if (!canvas.ok()) return bad(field, "target.aspect_ratio", canvas.status().message());
    r.width = canvas->width;
    r.height = canvas->height;
  }
  if (t.contains("duration_seconds")) {
    const json& d = t["duration_seconds"];
    if (!d.is_number() || !std::isfinite(d.get<double>()) || d.get<double>() <= 0.0)
      return bad(field, "target.duration_seconds", "target.duration_seconds must be a positive number");
    if (r.seconds != 0.0 && r.seconds != d.get<double>())
      return bad(field, "target.duration_seconds", "target.duration_seconds and seconds differ");
    r.seconds = d.get<double>();
  }
  return Status::Ok();
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
                                       const RunRequest& defaults, std::string* field,
                                       std::vector<KeyframeUpload>* uploads, ReferenceInputs* references) {
  if (field != nullptr) field->clear();
  if (uploads != nullptr) uploads->clear();
  if (references != nullptr) *references = {};
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
  const int size_forms = (wh ? 1 : 0) + (has("size") ? 1 : 0) + ((has("aspect_ratio") || has("short_edge")) ? 1 : 0) +
                         (has("target") ? 1 : 0);
  if (size_forms > 1) {
    return bad(field,
               has("target") ? "target"
               : has("size") ? "size"
                             : "aspect_ratio",
               "give the size one way: width and height, size \"WxH\", aspect_ratio with short_edge, or target");
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
  VORTEX_RETURN_IF_ERROR(parse_task_conditions(body, limits, r, uploads, references, field));
  const bool keyframes = r.keyframes.any() || (uploads != nullptr && !uploads->empty());
  if (has("target")) VORTEX_RETURN_IF_ERROR(parse_target(body.at("target"), keyframes, r, field));
  // fl2va without a size: the canvas follows the first keyframe (diffusers' MiniMaxH3ResizeStep).
  if (keyframes && size_forms == 0) r.canvas_from_keyframe = true;
  if (has("model") && !body.at("model").is_string()) return bad(field, "model", "model must be a string");
  if (has("num_inference_steps")) {
    // SGLang counts the sigma grid's points, the terminal zero included: one model evaluation fewer.
    if (has("steps")) return bad(field, "num_inference_steps", "num_inference_steps and steps exclude each other");
    VORTEX_RETURN_IF_ERROR(get_int(body, "num_inference_steps", 2, 1001, v, field));
    r.steps = static_cast<int>(v) - 1;
  }
  if (has("num_outputs_per_prompt")) {
    VORTEX_RETURN_IF_ERROR(get_int(body, "num_outputs_per_prompt", 1, 10, v, field));
    if (v != 1)
      return bad(field, "num_outputs_per_prompt",
                 "this server makes one output per request (num_outputs_per_prompt 1)");
  }
  for (const auto& [key, dst] : {std::pair<const char*, double*>{"flow_shift", &r.video_shift},
                                 std::pair<const char*, double*>{"audio_flow_shift", &r.audio_shift}}) {
    if (!has(key)) continue;
    const json& f = body.at(key);
    if (!f.is_number() || !std::isfinite(f.get<double>()) || f.get<double>() <= 0.0)
      return bad(field, key, std::string(key) + " must be a positive number");
    *dst = f.get<double>();
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
