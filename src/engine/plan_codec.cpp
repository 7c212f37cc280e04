// RunPlan <-> bytes (see plan_codec.h). nlohmann::json without exceptions for the parse; field access throws on a
// malformed header and is caught once, as rank 0's fault.
#include "engine/plan_codec.h"

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <utility>

#include <nlohmann/json.hpp>

namespace vortex {
namespace {

using json = nlohmann::json;

template <typename T>
json optional_name(const std::optional<T>& v, const char* (*name)(T)) {
  return v ? json(name(*v)) : json();
}

json encode_header(const RunPlan& plan) {
  const RunRequest& r = plan.request;
  json loras = json::array();
  for (const LoraSpec& l : r.loras)
    loras.push_back(
        {{"name", std::filesystem::path(l.path).filename().string()}, {"scale", l.scale ? json(*l.scale) : json()}});
  json memory = json::array();
  for (const MemoryEstimate::Item& i : plan.memory.items) memory.push_back({{"what", i.what}, {"bytes", i.bytes}});
  return {{"request",
           {{"width", r.width},
            {"height", r.height},
            {"frames", r.frames},
            {"seconds", r.seconds},
            {"steps", r.steps},
            {"schedule", av_schedule_mode_name(r.schedule)},
            {"sampler", optional_name(r.sampler, sampler_kind_name)},
            {"seed", r.seed},
            {"attention", optional_name(r.attention, attention_name)},
            {"precision", optional_name(r.precision, precision_name)},
            {"video_shift", r.video_shift},
            {"audio_shift", r.audio_shift},
            {"lora", loras}}},
          {"geometry",
           {{"width", plan.geo.width},
            {"height", plan.geo.height},
            {"frames", plan.geo.frames},
            {"frames_requested", plan.geo.frames_requested},
            {"text_rows", plan.geo.text_rows},
            {"total_rows", plan.geo.total_rows()}}},
          {"spec",
           {{"kind", sampler_kind_name(plan.spec.kind)},
            {"mode", av_schedule_mode_name(plan.spec.mode)},
            {"steps", plan.spec.steps},
            {"video_shift", plan.spec.video_shift},
            {"audio_shift", plan.spec.audio_shift}}},
          {"sigma_video", plan.schedule.sigma_video},
          {"sigma_audio", plan.schedule.sigma_audio},
          {"memory", memory},
          {"workers", plan.workers},
          {"text",
           {{"source", text_source_name(plan.text_source)},
            {"dtype", dtype_name(plan.text.dtype())},
            {"shape", plan.text.shape()}}}};
}

Result<RunRequest> decode_request(const json& j) {
  RunRequest r;
  r.width = j.at("width").get<int>();
  r.height = j.at("height").get<int>();
  r.frames = j.at("frames").get<int>();
  r.seconds = j.at("seconds").get<double>();
  r.steps = j.at("steps").get<int>();
  VORTEX_ASSIGN_OR_RETURN(r.schedule, parse_schedule_field(j.at("schedule").get<std::string>()));
  if (!j.at("sampler").is_null()) {
    VORTEX_ASSIGN_OR_RETURN(r.sampler, parse_sampler_field(j.at("sampler").get<std::string>()));
  }
  r.seed = j.at("seed").get<uint64_t>();
  if (!j.at("attention").is_null()) {
    VORTEX_ASSIGN_OR_RETURN(r.attention, parse_attention(j.at("attention").get<std::string>()));
  }
  if (!j.at("precision").is_null()) {
    VORTEX_ASSIGN_OR_RETURN(r.precision, parse_precision(j.at("precision").get<std::string>()));
  }
  r.video_shift = j.at("video_shift").get<double>();
  r.audio_shift = j.at("audio_shift").get<double>();
  for (const json& l : j.at("lora")) {
    LoraSpec spec;
    spec.path = l.at("name").get<std::string>();
    if (!l.at("scale").is_null()) spec.scale = l.at("scale").get<double>();
    r.loras.push_back(std::move(spec));
  }
  return r;
}

Result<RunPlan> decode_header(const json& j, Tensor text, const ModelConfig& cfg) {
  RunPlan plan;
  plan.cfg = cfg;
  VORTEX_ASSIGN_OR_RETURN(plan.request, decode_request(j.at("request")));
  const json& g = j.at("geometry");
  if (g.at("text_rows").get<int64_t>() != text.dim(0))
    return internal_error("the plan's text rows (" + std::to_string(text.dim(0)) + ") differ from its geometry's");
  VORTEX_ASSIGN_OR_RETURN(plan.geo, make_geometry(cfg, g.at("width").get<int>(), g.at("height").get<int>(),
                                                  g.at("frames").get<int>(), text.dim(0)));
  plan.geo.frames_requested = g.at("frames_requested").get<int>();
  if (plan.geo.total_rows() != g.at("total_rows").get<int64_t>())
    return internal_error("this rank's geometry has " + std::to_string(plan.geo.total_rows()) +
                          " packed rows for a plan of " + std::to_string(g.at("total_rows").get<int64_t>()));
  VORTEX_ASSIGN_OR_RETURN(plan.layout, pack_request(cfg, plan.geo));
  const json& s = j.at("spec");
  VORTEX_ASSIGN_OR_RETURN(plan.spec.kind, parse_sampler_field(s.at("kind").get<std::string>()));
  VORTEX_ASSIGN_OR_RETURN(plan.spec.mode, parse_schedule_field(s.at("mode").get<std::string>()));
  plan.spec.steps = s.at("steps").get<int>();
  plan.spec.video_shift = s.at("video_shift").get<double>();
  plan.spec.audio_shift = s.at("audio_shift").get<double>();
  plan.schedule.sigma_video = j.at("sigma_video").get<std::vector<double>>();
  plan.schedule.sigma_audio = j.at("sigma_audio").get<std::vector<double>>();
  if (plan.schedule.sigma_video.size() < 2 || plan.schedule.sigma_audio.size() != plan.schedule.sigma_video.size())
    return internal_error("the plan's schedule has " + std::to_string(plan.schedule.sigma_video.size()) +
                          " video and " + std::to_string(plan.schedule.sigma_audio.size()) + " audio sigmas");
  for (const json& i : j.at("memory"))
    plan.memory.items.push_back({i.at("what").get<std::string>(), i.at("bytes").get<uint64_t>()});
  plan.workers = j.at("workers").get<int>();
  plan.text = std::move(text);
  plan.text_source = TextSource::kRank0;
  return plan;
}

}  // namespace

Result<std::string> encode_plan(const RunPlan& plan) {
  if (!plan.text.defined()) return internal_error("encode_plan: the plan's text rows are not resolved yet");
  const Tensor& t = plan.text;  // host [L, text_dim] or [L, hidden], f32 or bf16
  if (!t.is_contiguous()) return internal_error("encode_plan: the plan's text rows are not contiguous");
  const std::string head = encode_header(plan).dump();
  const uint64_t head_bytes = head.size();
  std::string out;
  out.append(reinterpret_cast<const char*>(&head_bytes), sizeof(head_bytes));
  out += head;
  out.append(static_cast<const char*>(t.raw_data()), t.nbytes());
  return out;
}

Result<RunPlan> decode_plan(std::string_view bytes, const ModelConfig& cfg) {
  uint64_t head_bytes = 0;
  if (bytes.size() < sizeof(head_bytes)) return internal_error("the plan's bytes are truncated");
  std::memcpy(&head_bytes, bytes.data(), sizeof(head_bytes));
  if (head_bytes > bytes.size() - sizeof(head_bytes)) return internal_error("the plan's header is truncated");
  const json j = json::parse(bytes.substr(sizeof(head_bytes), head_bytes), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return internal_error("the plan's header is not a JSON object");
  try {
    const json& tj = j.at("text");
    VORTEX_ASSIGN_OR_RETURN(const DType dtype, dtype_from_name(tj.at("dtype").get<std::string>()));
    const Shape shape = tj.at("shape").get<Shape>();
    if (shape.size() != 2 || shape[0] < 1 || shape[1] < 1) return internal_error("the plan's text rows are not 2-D");
    Tensor text = Tensor::empty(shape, dtype);  // host [L, text_dim] or [L, hidden]
    if (text.nbytes() != bytes.size() - sizeof(head_bytes) - head_bytes)
      return internal_error("the plan's text rows have the wrong byte size");
    std::memcpy(text.raw_data(), bytes.data() + sizeof(head_bytes) + head_bytes, text.nbytes());
    return decode_header(j, std::move(text), cfg);
  } catch (const json::exception& e) {
    return internal_error(std::string("the plan's header: ") + e.what());
  }
}

}  // namespace vortex
