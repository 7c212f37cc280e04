// Residency plan (see residency.h): component sizes from the config's tensor specs, places from the pipeline's
// options, the budget from --max-vram or the free device memory.
#include "engine/residency.h"

#include <filesystem>

#include "engine/memory_estimate.h"
#include "engine/pipeline.h"
#include "model/h3_spec.h"
#include "text_encoder/text_encoder.h"
#include "text_encoder/text_encoder_weights.h"

namespace vortex {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

TransformerBytes transformer_bytes(const ModelConfig& cfg) {
  TransformerBytes b;
  for (const TensorSpec& spec : h3_tensor_specs(cfg)) {
    const uint64_t n = static_cast<uint64_t>(spec.bytes());
    b.total += n;
    if (spec.name.rfind("blocks.", 0) != 0) continue;
    if (ends_with(spec.name, ".adaln_proj.linear.weight")) b.adaln_projections += n;
    for (const char* gemm : {".attn.qkv_proj.weight", ".attn.out_proj.weight", ".mlp.fc1.weight", ".mlp.fc2.weight"})
      if (ends_with(spec.name, gemm)) b.block_gemms += n;
  }
  return b;
}

Result<uint64_t> text_encoder_weight_bytes(const std::string& text_encoder_dir, int layers) {
  VORTEX_ASSIGN_OR_RETURN(
      TextEncoderConfig te,
      TextEncoderConfig::from_file((std::filesystem::path(text_encoder_dir) / "config.json").string()));
  VORTEX_ASSIGN_OR_RETURN(std::vector<TextEncoderTensorSpec> specs, text_encoder_tensor_specs(te, std::max(layers, 0)));
  uint64_t bytes = 0;
  for (const TextEncoderTensorSpec& spec : specs)
    if (spec.name.find("embed_tokens") == std::string::npos)
      bytes += static_cast<uint64_t>(shape_numel(spec.shape)) * 2;
  return bytes;
}

uint64_t ResidencyPlan::resident_device_bytes() const {
  uint64_t n = 0;
  for (const ResidencyItem& i : items) n += i.device_bytes;
  return n;
}

uint64_t ResidencyPlan::host_bytes() const {
  uint64_t n = 0;
  for (const ResidencyItem& i : items) n += i.host_bytes;
  return n;
}

std::vector<std::string> ResidencyPlan::lines() const {
  std::vector<std::string> out;
  for (const ResidencyItem& i : items) {
    std::string l = i.component + ": " + i.place;
    if (i.device_bytes > 0) l += ", " + format_gb(i.device_bytes) + " on the device";
    if (i.host_bytes > 0) l += ", " + format_gb(i.host_bytes) + " in host memory";
    if (!i.moves.empty()) l += "; " + i.moves;
    out.push_back(l);
  }
  std::string b = "resident on the device: " + format_gb(resident_device_bytes());
  if (budget) {
    b += " of a budget of " + format_gb(*budget) + (budget_is_flag ? " (--max-vram)" : " (the free device memory)");
    b += ", " + format_gb(reserve_bytes) +
         " kept for a request's activations (each request's own estimate is "
         "checked before its first step)";
  }
  out.push_back(b);
  if (host_budget) {
    out.push_back("page-locked host memory: " + format_gb(host_bytes()) + " of a budget of " + format_gb(*host_budget) +
                  (host_budget_is_flag ? " (--max-host-ram)" : " (90% of the available host memory)"));
  }
  out.push_back("weights uploaded per request: " + format_gb(per_request_upload_bytes) +
                "; per step: " + format_gb(per_step_upload_bytes) +
                (per_step_upload_bytes == 0 ? " (every step runs on resident weights)"
                 : blocks_from_disk
                     ? " (direct reads from the checkpoint's files into page-locked staging, then the copy engine; "
                       "a step waits on the disk)"
                     : " (page-locked host memory -> device, overlapped with the blocks "
                       "before; a step waits only where a copy outlasts them)"));
  return out;
}

uint64_t canonical_activation_bytes(const ModelConfig& cfg, const PipelineOptions& o) {
  Result<RequestGeometry> g = make_geometry(cfg, 1344, 768, 124, 100);
  if (!g.ok()) return 0;
  MemoryEstimateOptions mo;
  mo.cpu_backend = o.backend == BackendKind::kCpu;
  mo.weights_bytes = 1;  // left out below
  uint64_t n = 0;
  for (const MemoryEstimate::Item& i : estimate_memory(cfg, *g, mo).items)
    if (i.what != "weights") n += i.bytes;
  return n + adaln_request_bytes(cfg, o, 12);  // the canonical 12 steps
}

uint64_t adaln_request_bytes(const ModelConfig& cfg, const PipelineOptions& o, int steps) {
  const uint64_t d = static_cast<uint64_t>(cfg.hidden);
  const uint64_t tables = static_cast<uint64_t>(std::max(steps, 0)) * 2 * (cfg.num_layers * 18 * d + 2 * d) * 2;
  const uint64_t staging = o.adaln_weights_on_host() ? 18 * d * static_cast<uint64_t>(cfg.time_embed_dim) * 2 : 0;
  return tables + staging;
}

Result<ResidencyPlan> plan_residency(const ModelConfig& cfg, const PipelineOptions& o, uint64_t weights_bytes,
                                     uint64_t decoder_device_bytes, std::optional<uint64_t> budget, bool budget_is_flag,
                                     uint64_t reserve_bytes) {
  ResidencyPlan plan;
  plan.budget = budget;
  plan.budget_is_flag = budget_is_flag;
  plan.reserve_bytes = reserve_bytes;
  const TransformerBytes t = transformer_bytes(cfg);
  const bool cpu = o.backend == BackendKind::kCpu;
  const std::string device = cpu ? "host (the cpu backend's device)" : "device";
  // The four GEMM weights of each block after the precision conversion (synthetic BF16 weights; a checkpoint's
  // own bytes are what it loads, quantized or not).
  uint64_t dit = weights_bytes;
  if (o.checkpoint_path.empty()) {
    if (o.precision == Precision::kFp8) dit -= t.block_gemms / 2;  // 2 -> 1 byte per weight
    if (o.precision == Precision::kNvfp4)
      dit -= t.block_gemms / 2 + t.block_gemms / 4 - t.block_gemms / 32;  // 2 -> 9/16
  }
  const bool adaln_host = o.adaln_weights_on_host();
  const uint64_t adaln = std::min(t.adaln_projections, dit);
  // The main blocks' GEMM weights as converted, per block.
  uint64_t gemms = t.block_gemms;
  if (o.checkpoint_path.empty() && o.precision == Precision::kFp8) gemms = t.block_gemms / 2;
  if (o.checkpoint_path.empty() && o.precision == Precision::kNvfp4)
    gemms = t.block_gemms - (t.block_gemms / 2 + t.block_gemms / 4 - t.block_gemms / 32);
  gemms = std::min(gemms, dit - adaln);
  plan.num_blocks = cfg.num_layers;
  plan.resident_blocks = cfg.num_layers;
  plan.block_gemm_bytes = cfg.num_layers > 0 ? gemms / static_cast<uint64_t>(cfg.num_layers) : 0;
  const uint64_t decoders = o.wants_decoders() ? decoder_device_bytes : 0;
  const uint64_t fixed = dit - adaln - gemms + (adaln_host ? 0 : adaln) + decoders;  // never streams
  // Synthetic weights are made in BF16 and converted after loading, so the resident blocks must fit in BF16 while
  // the weights load (the converted ones then leave room unused).
  const bool converted_after_load =
      o.checkpoint_path.empty() && (o.precision == Precision::kFp8 || o.precision == Precision::kNvfp4);
  const uint64_t load_block_bytes = converted_after_load && cfg.num_layers > 0
                                        ? t.block_gemms / static_cast<uint64_t>(cfg.num_layers)
                                        : plan.block_gemm_bytes;
  if (!cpu && budget && fixed + gemms + reserve_bytes > *budget && plan.block_gemm_bytes > 0) {
    // The last blocks stream; the rest of the budget holds the first ones and two slots.
    const uint64_t room = *budget > fixed + reserve_bytes + 2 * plan.block_gemm_bytes
                              ? *budget - fixed - reserve_bytes - 2 * plan.block_gemm_bytes
                              : 0;
    plan.resident_blocks = static_cast<int>(std::min<uint64_t>(room / load_block_bytes, cfg.num_layers));
  }
  const int streamed = plan.num_blocks - plan.resident_blocks;
  const uint64_t streamed_bytes = static_cast<uint64_t>(streamed) * plan.block_gemm_bytes;
  const uint64_t slots = streamed > 0 ? 2 * plan.block_gemm_bytes : 0;
  ResidencyItem dit_item{"transformer (blocks, refiner, embeddings, heads)", device,
                         dit - adaln - streamed_bytes + slots, streamed_bytes, ""};
  if (streamed > 0) {
    dit_item.place = device + " + host (page-locked)";
    dit_item.moves = "blocks " + std::to_string(plan.resident_blocks) + ".." + std::to_string(plan.num_blocks - 1) +
                     " stream their GEMM weights from host memory every step, two blocks ahead on the copy engine (" +
                     format_gb(streamed_bytes) + " per step through two device slots of " +
                     format_gb(plan.block_gemm_bytes) + ")";
    if (streamed > 2) plan.per_step_upload_bytes = streamed_bytes;
  }
  if (cpu) std::swap(dit_item.device_bytes, dit_item.host_bytes);
  plan.items.push_back(dit_item);
  ResidencyItem adaln_item{"AdaLN projections (blocks.*.adaln_proj.linear)", adaln_host ? "host (page-locked)" : device,
                           adaln_host ? 0 : adaln, adaln_host ? adaln : 0, ""};
  if (cpu) std::swap(adaln_item.device_bytes, adaln_item.host_bytes);
  if (adaln_host) {
    adaln_item.moves = "each uploaded once per request, before step 1, to compute every step's tables";
    plan.per_request_upload_bytes += adaln;
  } else {
    adaln_item.moves = "read once per request, before step 1, to compute every step's tables";
  }
  plan.items.push_back(adaln_item);
  if (!o.text_encoder_dir.empty()) {
    VORTEX_ASSIGN_OR_RETURN(const uint64_t te, text_encoder_weight_bytes(o.text_encoder_dir, o.text_layer));
    plan.items.push_back({"text encoder (" + std::to_string(std::max(o.text_layer, 0)) + " layers)", "disk", 0, 0,
                          format_gb(te) + " loaded from disk for a new prompt; freed before the transformer loads "
                                          "(generate), kept beside it while the memory allows (serve)"});
  }
  if (o.wants_decoders()) {
    ResidencyItem vae{"VAE decoders", device, decoder_device_bytes, 0, ""};
    if (cpu) std::swap(vae.device_bytes, vae.host_bytes);
    plan.items.push_back(vae);
  }
  return plan;
}

Status apply_host_budget(ResidencyPlan& plan, uint64_t host_budget, bool budget_is_flag,
                         const std::string& disk_refusal) {
  plan.host_budget = host_budget;
  plan.host_budget_is_flag = budget_is_flag;
  if (plan.host_bytes() <= host_budget) return Status::Ok();
  const uint64_t wanted = plan.host_bytes();
  if (!disk_refusal.empty()) {
    return invalid_argument("not enough host memory: the plan keeps " + format_gb(wanted) +
                            " of weights in page-locked host memory but the budget is " + format_gb(host_budget) +
                            (budget_is_flag ? " (--max-host-ram)" : " (90% of the available host memory)") +
                            ", and they cannot stream from disk: " + disk_refusal);
  }
  const uint64_t slot = plan.block_gemm_bytes;
  for (ResidencyItem& i : plan.items) {
    if (i.host_bytes == 0) continue;
    const bool adaln = i.component.rfind("AdaLN", 0) == 0;
    if (adaln) {  // cheaper to read from disk than the blocks: once per request, not every step
      const uint64_t per_block = plan.num_blocks > 0 ? i.host_bytes / static_cast<uint64_t>(plan.num_blocks) : 0;
      i.place = "disk (the checkpoint's files)";
      i.moves = "each read once per request with direct reads into two page-locked staging buffers (" +
                format_gb(2 * per_block) + "), then uploaded, before step 1, to compute every step's tables";
      i.host_bytes = std::min(i.host_bytes, 2 * per_block);
      plan.adaln_from_disk = true;
      if (plan.host_bytes() <= host_budget) return Status::Ok();
    }
  }
  for (ResidencyItem& i : plan.items) {
    if (i.host_bytes == 0 || i.component.rfind("transformer", 0) != 0) continue;
    i.place = "device + disk (the checkpoint's files)";
    i.moves = "blocks " + std::to_string(plan.resident_blocks) + ".." + std::to_string(plan.num_blocks - 1) +
              " read their GEMM weights from disk every step (direct reads into two page-locked staging sets of " +
              format_gb(slot) + "), two blocks ahead through two device slots";
    i.host_bytes = std::min(i.host_bytes, 2 * slot);
    plan.blocks_from_disk = true;
  }
  if (plan.host_bytes() <= host_budget) return Status::Ok();
  return invalid_argument("not enough host memory: even streaming from disk, the plan keeps " +
                          format_gb(plan.host_bytes()) +
                          " in page-locked host memory (staging buffers) but the budget "
                          "is " +
                          format_gb(host_budget) + (budget_is_flag ? " (--max-host-ram)" : ""));
}

Status check_residency(const ResidencyPlan& plan) {
  if (!plan.budget || plan.resident_device_bytes() + plan.reserve_bytes <= *plan.budget) return Status::Ok();
  std::string parts;
  for (const ResidencyItem& i : plan.items)
    if (i.device_bytes > 0) parts += (parts.empty() ? "" : ", ") + i.component + " " + format_gb(i.device_bytes);
  return invalid_argument(
      "not enough memory: the weights that must stay on the device need " + format_gb(plan.resident_device_bytes()) +
      " (" + parts + ") and a request's activations about " + format_gb(plan.reserve_bytes) + ", but the budget is " +
      format_gb(*plan.budget) + (plan.budget_is_flag ? " (--max-vram)" : " (the free device memory)") +
      " even with every block streamed; keep the AdaLN projections in host memory "
      "(--adaln-weights host), use --precision fp8, or raise the budget");
}

}  // namespace vortex
