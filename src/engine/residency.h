// Residency plan (docs/memory.md): where each component of a pipeline lives between requests (device, page-locked
// host memory, disk), what moves per request and per step (streamed blocks), and the device budget it must fit
// (--max-vram, else the free device memory). Pipeline::load_weights builds and prints it before any weight is loaded
// and refuses a resident set larger than the budget; the CUDA allocator enforces the budget afterwards
// (CachingAllocator::set_limit); page-locked host memory has a budget too (apply_host_budget). Tested in
// tests/engine/residency_test.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vortex/config.h"
#include "vortex/status.h"

namespace vortex {

struct PipelineOptions;

struct ResidencyItem {
  std::string component;      // "transformer", "AdaLN projections", "text encoder", "VAE decoders"
  std::string place;          // "device" | "host (page-locked)" | "disk"
  uint64_t device_bytes = 0;  // held on the device between requests
  uint64_t host_bytes = 0;    // held in host memory between requests
  std::string moves;          // what is read, from where and how often ("" when nothing moves)
};

struct ResidencyPlan {
  std::vector<ResidencyItem> items;
  std::optional<uint64_t> budget;  // device bytes: --max-vram, or the free device memory; nullopt on the cpu backend
  bool budget_is_flag = false;     // budget from --max-vram
  uint64_t per_request_upload_bytes = 0;  // weights uploaded once per request (host-resident AdaLN projections)
  uint64_t per_step_upload_bytes = 0;     // weights uploaded every step (the streamed blocks')
  uint64_t reserve_bytes = 0;             // device memory kept for a request's activations
  // Main blocks 0..resident_blocks-1 keep their GEMM weights on the device, the rest stream (H3Model::stream_blocks)
  // through two slots of block_gemm_bytes each.
  int num_blocks = 0;
  int resident_blocks = 0;
  uint64_t block_gemm_bytes = 0;
  // Host memory (docs/memory.md "Streaming from disk"): what the plan keeps page-locked must fit `host_budget`
  // (--max-host-ram, else most of the available host memory); what does not is read from the checkpoint's files.
  std::optional<uint64_t> host_budget;
  bool host_budget_is_flag = false;
  bool adaln_from_disk = false;   // the AdaLN projections: read from disk once per request
  bool blocks_from_disk = false;  // the streamed blocks: read from disk every step
  uint64_t resident_device_bytes() const;
  uint64_t host_bytes() const;
  // One line per component, then the budget and the per-request / per-step traffic.
  std::vector<std::string> lines() const;
};

// The transformer's bytes in BF16 of `cfg` split as the plan needs them (h3_tensor_specs).
struct TransformerBytes {
  uint64_t adaln_projections = 0;  // blocks.{i}.adaln_proj.linear.weight
  uint64_t block_gemms = 0;        // blocks.{i}.{attn.qkv_proj, attn.out_proj, mlp.fc1, mlp.fc2}.weight
  uint64_t total = 0;              // every tensor
};
TransformerBytes transformer_bytes(const ModelConfig& cfg);

// Bytes of the first `layers` text-encoder layers' weights (BF16, embedding table excluded: it stays on the host).
Result<uint64_t> text_encoder_weight_bytes(const std::string& text_encoder_dir, int layers);

// The plan of `options` on `cfg`. `weights_bytes`: the transformer as loaded (the spec's BF16 bytes for synthetic
// weights, the file's for a checkpoint); `decoder_device_bytes`: what the loaded decoders hold on the device.
// `reserve_bytes`: device memory kept free for a request's activations. When the resident set and the reserve pass
// the budget, the last blocks stream: as many blocks stay resident as fit beside two streaming slots.
Result<ResidencyPlan> plan_residency(const ModelConfig& cfg, const PipelineOptions& options, uint64_t weights_bytes,
                                     uint64_t decoder_device_bytes, std::optional<uint64_t> budget, bool budget_is_flag,
                                     uint64_t reserve_bytes = 0);

// The device memory a request of the canonical shape (1344x768, 124 frames, 100 text rows; the config's own
// geometry rules) needs beside the weights: the reserve a pipeline keeps when no request is known yet (serve).
uint64_t canonical_activation_bytes(const ModelConfig& cfg, const PipelineOptions& options);

// The device memory a request's AdaLN tables take (H3Model::precompute_adaln): `steps` entries of two timestep rows
// for every block and the final layer, plus the buffer a host-resident projection is uploaded into.
uint64_t adaln_request_bytes(const ModelConfig& cfg, const PipelineOptions& options, int steps);

// The host-memory rule: when the plan's page-locked bytes (host AdaLN projections, streamed blocks) pass
// `host_budget`, the AdaLN projections are read from the checkpoint's files instead (once per request), and if that
// is not enough the streamed blocks too (every step), each through two page-locked staging buffers. `disk_refusal`
// is empty when the weights can stream from disk, else why not (then an over-budget plan is kInvalidArgument).
Status apply_host_budget(ResidencyPlan& plan, uint64_t host_budget, bool budget_is_flag,
                         const std::string& disk_refusal);

// kInvalidArgument naming the components when the resident set exceeds the budget (before any weight loads).
Status check_residency(const ResidencyPlan& plan);

}  // namespace vortex
