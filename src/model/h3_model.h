// H3Model: the H3 denoiser written once against the Backend interface (CPU reference or CUDA).
// Per request: text refinement (condition_proj -> refiner blocks -> final_norm) or already-refined
// states, RoPE tables, segment tables. Per step: FP32 time MLP on the host for the distinct timesteps,
// AdaLN tables (adaln_proj per block), input projections, 50 blocks, final layer and FP32 heads.
// Block order and BF16 boundaries: docs/numerics.md "The BF16 program".
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "dist/communicator.h"
#include "model/h3_weights.h"
#include "model/packing.h"
#include "model/step_graph.h"
#include "sampler/sampler.h"
#include "vortex/config.h"

namespace vortex {

// Per-step conditioning shared by all blocks of one forward.
struct StepTables {
  std::vector<float> timesteps;  // distinct t values, sorted ascending (t = 1 - sigma)
  int video_slot = 0, audio_slot = 0;
  int condition_slot = 0;        // visual conditioning rows (keyframes, image/video references): max(t_video, 0.999)
  int reference_audio_slot = 0;  // ref2va reference audio rows: t = 1.0; else the audio slot
  SegmentTable block_segments;   // row -> slot * 3 + modality
  SegmentTable final_segments;   // row -> slot
  SegmentTable shard_segments;   // sequence parallel: block_segments of this rank's rows, from 0
  std::vector<Tensor> block_tables;  // per block [slots * 3, 6 * D] bf16, on the backend
  Tensor final_table;                // [slots, 2 * D] bf16, on the backend
};

// Scratch activations of one transformer block, allocated once for the largest row count and narrowed
// (row views, no copies) for smaller sequences such as the refiner's L text rows.
struct BlockScratch {
  Tensor qkv;         // [S, 3I] bf16, rows [q | k | v]
  Tensor attn_out;    // [S, I] bf16, token-major
  Tensor proj_out;    // [S, D] bf16 (out_proj and fc2 outputs)
  Tensor norm_out;    // [S, D] bf16 (normed + modulated rows)
  Tensor fc1_out;     // [S, 2F] bf16, columns [gate | value]
  Tensor swiglu_out;  // [S, F] bf16
  static Result<BlockScratch> allocate(Backend& backend, const ModelConfig& cfg, int64_t rows);
  // The first `rows` rows of every buffer.
  Result<BlockScratch> first_rows(int64_t rows) const;
};

// Ulysses sequence parallelism of one request (docs/multi_gpu.md): rank r holds packed rows rows[r]
// of x for every GEMM and elementwise op; around attention an all-to-all trades rows for heads, so rank
// r sees all S rows of heads heads[r] (an uneven split when U does not divide the head count).
struct UlyssesPlan {
  Communicator* comm = nullptr;
  std::vector<Span> rows;   // [U] packed-row ranges, even_split(S, U, r)
  std::vector<Span> heads;  // [U] head ranges, even_split(num_heads, U, r)
  Tensor send;              // [rows[r] * 3I] bf16 flat: chunk j = [rows[r], 3 * I_j] = [q_j | k_j | v_j] of my rows
  Tensor qkv_heads;         // [S, 3 * I_r] bf16: every row, my heads, [q | k | v]
  Tensor attn_heads;        // [S, I_r] bf16: attention output of my heads
  Tensor recv;              // [rows[r] * I] bf16 flat: chunk j = [rows[r], I_j] (heads j of my rows)
  int rank() const { return comm->rank(); }
  int world() const { return comm->size(); }
  const Span& my_rows() const { return rows[static_cast<size_t>(rank())]; }
  const Span& my_heads() const { return heads[static_cast<size_t>(rank())]; }
};
// Checks that a world of `world` ranks can split `rows` packed rows (>= 1 row per rank); kInvalidArgument
// with the numbers otherwise. Any head count splits: a rank may hold no heads (h3-tiny's 4 over 7).
Status check_sequence_parallel(const ModelConfig& cfg, int world, int64_t rows);

// One H3 transformer block (docs/numerics.md) on x [S, D] bf16 in place.
// Main blocks: `table` [slots * 3, 6D] bf16 with `segments` (row -> table row) and `rope` (may be null).
// Refiner blocks: table == nullptr and segments == nullptr (no AdaLN: plain RMSNorm and residual adds)
// and rope == nullptr. ExecOptions choose the fused or composed norm+modulate (E0 either way).
Status run_transformer_block(Backend& backend, const ModelConfig& cfg, const ExecOptions& opts,
                             const H3BlockWeights& block, Tensor& x, const Tensor* table, const SegmentTable* segments,
                             const RopeTables* rope, BlockScratch& scratch, UlyssesPlan* sp = nullptr);
// With `sp`: x [rows[r], D] holds this rank's rows and `segments` their table (SegmentTable::slice);
// `rope` covers all S rows (attention runs over the full sequence for this rank's heads).

// Host FP32 time embedding pieces (computed identically for every backend):
// sinusoid [freq_dim] of t: freq_k = fp32(exp(-ln(10000) * k / half)) evaluated in FP64, arg = fp32(t * freq_k),
// emb = [fp32(cos_fp64(arg)) | fp32(sin_fp64(arg))] (cos first).
std::vector<float> timestep_sinusoid(int freq_dim, float t);
// Host copies of the FP32 time-embedder weights.
struct TimeEmbedderHost {
  Tensor proj_in_weight, proj_in_bias, proj_out_weight, proj_out_bias;  // host f32
};
// silu(time_mlp(sinusoid(t))) for each t, rounded to BF16: [M, E] bf16 host. Linear layers accumulate in
// FP64 (ascending k) and round once to FP32 after the bias; SiLU is FP64 then FP32; the final cast is RNE.
Result<Tensor> adaln_input_host(const ModelConfig& cfg, const TimeEmbedderHost& te,
                                const std::vector<float>& timesteps);

// Device buffers of a single-GPU denoiser step's inputs and outputs besides the residual stream.
struct StepIo {
  Tensor video_in, audio_in;    // [Nv, 4C] / [Na, Ca] f32: patchified latents
  Tensor video_f32, audio_f32;  // [N, D] f32: the input projection, later the normed rows for the FP32 heads
  Tensor video_out, audio_out;  // [N, Cout] f32: head outputs (the velocity rows)
  // `f32_rows` (optional): a buffer free before the blocks and after them (the FC1 scratch) to carve the
  // [N, D] f32 rows from when it is large enough, so the step holds no extra activation-sized buffer.
  static Result<StepIo> allocate(Backend& backend, const ModelConfig& cfg, const RequestGeometry& geo,
                                 const H3Weights& weights, const Tensor* f32_rows = nullptr);
};

// AdaLN tables of a whole schedule, computed before sampling (H3Model::precompute_adaln): per distinct set of a
// step's timesteps, every block's adaln_proj output and the final layer's, the same GEMMs (shape [M, E] x [N, E]^T,
// kernel, LoRA branch) as a step computing them itself, so the bytes are the same.
struct AdalnTableEntry {
  std::vector<float> timesteps;  // distinct t values, sorted ascending (StepTables::timesteps)
  std::vector<Tensor> blocks;    // per block [M, 18D] bf16 on the backend
  Tensor final_table;            // [M, 2D] bf16 on the backend
};

// A copy of device tensor `t` in the backend's host memory (Backend::alloc_host); `t` itself is untouched (its
// device memory is freed when its last reference goes).
Result<Tensor> move_to_host(Backend& backend, const Tensor& t);

// Where the blocks' adaln_proj weights live between requests (H3Model::adaln_weights_on_host). kDisk: in the
// checkpoint's files, read once per request through a WeightFileReader into two page-locked staging buffers.
enum class AdalnWeightPlace : uint8_t { kDevice, kHost, kDisk };
const char* adaln_weight_place_name(AdalnWeightPlace place);  // "device" | "host" | "disk"

// A weight's bytes where a checkpoint stores them, for weights H3Model does not keep in memory (docs/memory.md
// "Streaming from disk"). src/io/direct_reader.h reads safetensors files with direct I/O.
class WeightFileReader {
 public:
  virtual ~WeightFileReader() = default;
  // Fills `dst` (host, contiguous, the weight's exact shape and dtype) with the bytes of weight `name` (an
  // h3_tensor_specs name such as "blocks.7.mlp.fc1.weight").
  virtual Status read(const std::string& name, Tensor& dst) = 0;
};

// Weights still arriving while the model already runs (overlapped loading, docs/memory.md "Overlapped loading"): a
// loader on another thread places them group by group, in order: group -1 holds every weight before the main
// blocks (embeddings, time embedder, rope, text refiner), group i in [0, num_layers) block i, group num_layers the
// final layer. H3Model waits for a group before its first use (H3Model::await_weights).
class WeightArrivals {
 public:
  virtual ~WeightArrivals() = default;
  // Blocks until group `group` is in place, then copies its tensors into `weights` (the other groups untouched).
  // The load's error when it failed before that group: never waits for a group that cannot come.
  virtual Status await(int group, H3Weights& weights) = 0;
};

// Everything forward() writes on the device, allocated by prepare() and rewritten every step: a step
// allocates nothing after prepare(), and a captured step graph replays on exactly these buffers.
struct StepWorkspace {
  Tensor silu_temb;  // [3, E] bf16: silu(time MLP(t)) of the staged step's timesteps
  // Per block [slots, 18D] bf16: one row per distinct timestep (video, audio, visual conditioning, and reference
  // audio when the layout has any: 3 or 4 slots).
  std::vector<Tensor> block_table_store;
  Tensor final_table_store;             // [slots, 2D] bf16
  std::vector<Tensor> block_adaln_out;  // per block: [M, 18D] view of the store (the adaln_proj output)
  StepTables tables;                    // the staged step: segments and [3M, 6D] / [M, 2D] table views
  Tensor packed;                        // [S, D] bf16: packed input rows, then the residual stream
  StepIo io;
  bool staged = false;  // stage_step ran since the last prepare()
  // The staged step's tables come from a precomputed AdalnTableEntry (copied into the stores by stage_step), so the
  // step runs no adaln_proj GEMM.
  bool tables_ahead = false;
  // Blocks whose precomputed tables are not computed yet (their weights still arriving): from this block on, and the
  // final layer's table when tables_final_pending, run_step_device computes each block's tables for the whole
  // schedule once the block has arrived and copies the staged step's entry (entry_index) in before the block runs.
  int tables_pending_from = 0;
  bool tables_final_pending = false;
  size_t entry_index = 0;
};

class H3Model {
 public:
  H3Model(ModelConfig cfg, Backend& backend, H3Weights weights, ExecOptions opts);

  const ModelConfig& config() const { return cfg_; }
  Backend& backend() { return backend_; }
  const H3Weights& weights() const { return weights_; }
  // For switching run-time LoRA branches between requests (src/lora attach/detach); the base tensors stay.
  // Any call drops a captured step graph (the weights it baked in may change).
  H3Weights& mutable_weights() {
    ++weights_generation_;
    return weights_;
  }
  ExecOptions& options() { return opts_; }
  // Ulysses sequence parallelism over `comm` (nullptr: off; a world of 1 runs the same path, exchanging
  // with itself, which is how one GPU checks it). Takes effect at the next
  // prepare(); every rank must call it with its own communicator of the same world and then run the
  // same requests. forward() returns the same bytes on every rank, equal to one rank's.
  void set_communicator(Communicator* comm) { comm_ = comm; }
  bool sequence_parallel() const { return comm_ != nullptr; }
  Communicator* communicator() const { return comm_; }

  // Once per request. `text` is host [L, text_dim] (Qwen3-VL layer-50 states, refined here) or
  // [L, hidden] (already refined), f32 or bf16. L must equal layout.geo.text_rows.
  // fl2va (layout.geo.keyframes not empty): `condition_rows` is host [Nc, 4C] f32, the patchified noised keyframe
  // latents (noise_condition_latents + patchify_video, Nc = geo.condition_rows()). They are projected once here and
  // held through every step at max(t_video, kKeyframeNoiseAug): diffusers' denoise loop never writes them
  // (MiniMaxH3LoopSchedulerStep steps only the generated rows), and their velocity rows are not computed.
  // ref2va (layout.geo.references not empty): `condition_rows` is the image and video references' noised,
  // patchified latents [Nvc, 4C] f32 concatenated in packed order (MiniMaxH3PrepareConditionLatentsStep), and
  // `reference_audio_rows` the audio-bearing references' rows [Nac, Ca] f32 in packed order (clean: diffusers never
  // noises them). Visual rows go through video_patch_proj at max(t_video, 0.999), audio rows through
  // audio_patch_proj at t = 1.0 (MiniMaxH3SetTimestepsStep), each into its place of the reference blocks.
  Status prepare(const PackedLayout& layout, const Tensor& text, const Tensor& condition_rows = Tensor(),
                 const Tensor& reference_audio_rows = Tensor());

  // One denoiser evaluation: host latents (flattened [C, T, H, W] video and [2, C, Ta] audio, FP32)
  // at (sigma_v, sigma_a) -> data-ward velocity, same sizes (host FP32). When `cancel` is set and becomes
  // true, returns kCancelled at the next block boundary (a block is the unit of work that cannot stop).
  Result<AvLatents> forward(const AvLatents& x, double sigma_v, double sigma_a,
                            const std::atomic<bool>* cancel = nullptr);

  // forward() without sequence parallelism, in three pieces (benchmarks and tests time or poison between
  // them). stage_step: the host time MLP, patchify and uploads into the step workspace. run_step: the
  // device work (AdaLN tables, input projections, blocks, final layer and heads), eager or as a replayed
  // CUDA graph per ExecOptions::cuda_graph (StepGraphPlanner); `cancel` is checked between blocks when
  // eager, before the launch when replayed. finish_step: downloads the velocity.
  Status stage_step(const AvLatents& x, double sigma_v, double sigma_a);
  Status run_step(const std::atomic<bool>* cancel = nullptr);
  Result<AvLatents> finish_step();
  const StepWorkspace& step_workspace() const { return ws_; }
  const StepGraphStats& step_graph_stats() const { return planner_.stats(); }
  StepGraphAction last_step_action() const { return last_action_; }

  // AdaLN tables ahead of sampling. For each (sigma_v, sigma_a) of `sigmas` (a schedule's model evaluations), the
  // tables of its distinct timesteps, unless held already; entries no pair needs are dropped. Block by block: each
  // adaln_proj weight is read (from host memory: uploaded) once for all the entries it computes. Steps whose
  // timesteps have an entry copy it instead of running the adaln GEMMs (E0: the same GEMM calls, done earlier).
  // Entries follow the weights: any mutable_weights() call drops them.
  Status precompute_adaln(const std::vector<std::pair<double, double>>& sigmas);
  const std::vector<AdalnTableEntry>& adaln_entries() const { return adaln_entries_; }
  // Moves every block's adaln_proj.linear weight to the backend's host memory (Backend::alloc_host) and frees its
  // device copy; or back. With the weights on the host a step without a precomputed entry computes one first
  // (uploading each weight once). No-op on a backend whose device is the host.
  // kDisk (`from_disk` required): every projection is read from `from_disk` once per request into one of two
  // page-locked staging buffers (the next block's read overlaps this block's upload and GEMMs); the weights the
  // model held are dropped. Works on every backend (on the cpu backend the GEMMs read the staging buffer itself).
  Status place_adaln_weights(AdalnWeightPlace place, std::shared_ptr<WeightFileReader> from_disk = nullptr);
  bool adaln_weights_on_host() const;
  // Where the projections are read from now: kDisk once placed there (on every backend), kHost when they live in a
  // device backend's host memory, else kDevice (run.json's request.adaln_weights).
  AdalnWeightPlace adaln_weight_place() const;
  // adaln_proj.linear weight bytes of all blocks (where they live is place_adaln_weights').
  uint64_t adaln_weight_bytes() const;

  // Overlapped loading: the model starts without the weights of `arrivals`' groups (made with make_empty_h3_weights;
  // the step's head buffers take the spec's shapes until the heads arrive) and waits for each group before its
  // first use: prepare() callers await group -1 (await_weights), precompute_adaln defers each block's tables until
  // the block has arrived (its tables are computed then, before its first use, with the same GEMMs), and a step
  // awaits block i before running it and the final layer before the head. Steps run eagerly (no CUDA graph) until
  // every group has arrived. The AdaLN projections may arrive on the device or in host memory (a block's tables are
  // then computed from its projection uploaded into one reused device buffer, the same GEMMs). Single-GPU steps
  // only, no streamed blocks.
  Status set_arrivals(std::shared_ptr<WeightArrivals> arrivals);
  // Waits for every group up to `group` (in order) and places their tensors; no-op once they are in place.
  Status await_weights(int group);
  bool weights_arriving() const { return arrivals_ != nullptr; }

  // Streamed blocks (docs/memory.md "Streamed blocks"): blocks [first, num_layers) keep their four GEMM weights (qkv,
  // out, fc1, fc2, with any quantization scales) in the backend's host memory (Backend::alloc_host); every step
  // uploads them, two blocks ahead, into two device slots on the backend's copy engine (Backend::copy_async) while
  // the blocks before compute, so each block waits only for its own copy. The blocks run the same GEMMs on the same
  // bytes as resident ones (E0). first = num_layers: every block resident (the default). Single-GPU steps only; a
  // streaming step runs eagerly (no CUDA graph). Weights already in host memory stay there.
  // With `from_disk`, the streamed blocks' weights are not held at all: each upload first reads the block's four
  // BF16 GEMM weights from `from_disk` into one of two page-locked staging sets (the set of the block's slot, once
  // that set's previous upload has passed: Backend::wait_host), so host memory holds two blocks, not all of them.
  // The weights the model held for those blocks are dropped (they may be placeholders that were never read).
  Status stream_blocks(int first, std::shared_ptr<WeightFileReader> from_disk = nullptr);
  bool streams_from_disk() const { return blocks_disk_ != nullptr; }
  int streamed_from() const { return stream_from_ < 0 ? cfg_.num_layers : stream_from_; }
  // Bytes one step uploads (the streamed blocks' GEMM weights).
  uint64_t streamed_bytes_per_step() const;

  // Pieces of forward, public for `vortex bench` / `vortex gate` and tests (fresh buffers per call).
  Result<StepTables> make_step_tables(double sigma_v, double sigma_a);
  // x [S, D] bf16 on the backend, updated in place by block `index`.
  Status run_block(int index, Tensor& x, const StepTables& tables);
  // Packed input rows [S, D] bf16: projected video/audio rows + refined text.
  Result<Tensor> embed_inputs(const AvLatents& x);
  // Final layer + heads: x [S, D] bf16 -> velocity latents (host FP32).
  Result<AvLatents> final_layer(const Tensor& x, const StepTables& tables);
  // Sequence parallel only: x_shard [rows[r], D] updated in place by block `index`.
  Status run_block_shard(int index, Tensor& x_shard, const StepTables& tables);

 private:
  ModelConfig cfg_;
  Backend& backend_;
  H3Weights weights_;
  ExecOptions opts_;
  PackedLayout layout_;
  RopeTables rope_;      // on the backend
  Tensor text_refined_;  // [L, D] bf16 on the backend
  // [Nc, D] bf16 on the backend: every conditioning row in packed order, projected (fl2va keyframes; ref2va
  // reference blocks, visual rows by video_patch_proj and audio rows by audio_patch_proj).
  Tensor condition_embedded_;
  // Scratch buffers reused by every block (allocated in prepare()).
  BlockScratch scratch_;
  TimeEmbedderHost time_host_;  // downloaded once (first prepare())
  Communicator* comm_ = nullptr;
  UlyssesPlan sp_;     // built by prepare() when sequence_parallel()
  Tensor x_shard_;     // [rows[r], D] bf16: this rank's rows of the residual stream
  Tensor final_norm_;  // [S, D] bf16: the final layer's normed rows (the shard scratch is smaller)
  bool prepared_ = false;
  // Single-GPU step (stage_step / run_step / finish_step).
  StepWorkspace ws_;
  StepGraphPlanner planner_;
  std::unique_ptr<Backend::Graph> graph_;
  StepGraphAction last_action_ = StepGraphAction::kEager;
  uint64_t workspace_generation_ = 0;  // prepare() count
  uint64_t weights_generation_ = 0;    // mutable_weights() count
  // Streamed blocks: the first streamed block (-1: none) and the two device slots the steps upload into.
  struct StreamSlot {
    std::vector<Tensor> device;             // the slot's tensors, in streamed_tensors() order of a block
    std::shared_ptr<Backend::Fence> ready;  // the upload of the block it holds
    std::shared_ptr<Backend::Fence> done;   // the compute work that last read it
    int held = -1;                          // the block whose weights it holds (or is receiving)
  };
  int stream_from_ = -1;
  StreamSlot stream_slots_[2];
  // Streaming from disk: the reader and the page-locked staging set of each slot (streamed_tensors() order).
  std::shared_ptr<WeightFileReader> blocks_disk_;
  std::vector<Tensor> disk_staging_[2];
  // AdaLN projections from disk: the reader, two page-locked staging buffers and the uploads that last read them.
  std::shared_ptr<WeightFileReader> adaln_disk_;
  Tensor adaln_staging_[2];
  std::shared_ptr<Backend::Fence> adaln_staging_read_[2];
  // A step without a precomputed entry must compute one first: the projections are not on the device.
  bool adaln_off_device() const { return adaln_disk_ != nullptr || adaln_weights_on_host(); }
  // Starts the upload of block `b` into slot (b - stream_from_) % 2 once that slot's last reader is done.
  Status prefetch_block(int b);
  // Block `index`'s weights for this step: resident, or a streamed block's slot (after waiting for its upload).
  Result<H3BlockWeights> block_weights_for_step(int index);
  // Overlapped loading: the groups still to arrive (arrived_ is the last group in place).
  std::shared_ptr<WeightArrivals> arrivals_;
  int arrived_ = -2;
  // Entries begun by compute_adaln_entries whose blocks [adaln_next_block_, num_layers) and final table are not
  // computed yet (weights still arriving): their indices in adaln_entries_ and their [M, E] bf16 inputs.
  std::vector<size_t> adaln_pending_;
  std::vector<Tensor> adaln_pending_silu_;
  int adaln_next_block_ = 0;
  // [18D, E] bf16: the device buffer a host-resident projection is uploaded into (Backend::upload_async, on the
  // compute stream, ordered after the previous block's GEMMs), reused block after block while entries are pending
  // and freed once every block's tables are computed (release_adaln_upload: after a synchronize).
  Tensor adaln_upload_;
  Status release_adaln_upload();
  // compute_adaln_entries' pieces: block `i`'s tables of every pending entry (a host-resident projection uploaded into
  // `staged` first), then the final layer's.
  Status compute_adaln_block(int i, Tensor& staged);
  Status finish_adaln_pending();  // every pending block (awaiting each) and the final tables
  void drop_adaln_pending();      // after an error: the incomplete entries go
  Status compute_adaln_final();
  // Block `i`'s (i = num_layers: the final layer's) tables of the staged step, computed and copied into the step's
  // stores when still pending (ws_.tables_pending_from / tables_final_pending).
  Status fill_pending_tables(int i);
  // Precomputed AdaLN tables (precompute_adaln) and the weights generation they were computed under.
  std::vector<AdalnTableEntry> adaln_entries_;
  uint64_t adaln_entries_generation_ = 0;
  // The entry for `timesteps`, or null; entries of an older weights generation are dropped first.
  const AdalnTableEntry* find_adaln_entry(const std::vector<float>& timesteps);
  // Computes entries for each timestep set of `sets` (all new), block by block.
  Status compute_adaln_entries(const std::vector<std::vector<float>>& sets);
  Status step_conditioning(double sigma_v, double sigma_a, StepTables& st) const;
  // Whether the prepared layout has visual conditioning rows (keyframes or image/video references) and reference
  // audio rows (ref2va soundtracks and audio clips).
  bool has_reference_audio() const {
    for (const ReferenceBlock& r : layout_.geo.references)
      if (r.audio_rows() > 0) return true;
    return false;
  }
  bool has_visual_conditioning() const {
    if (!layout_.geo.keyframes.empty()) return true;
    for (const ReferenceBlock& r : layout_.geo.references)
      if (r.video_rows() > 0) return true;
    return false;
  }
  // The step's distinct timesteps t = 1 - sigma, sorted (with the keyframe rows' timestep when the layout has any).
  Result<std::vector<float>> step_timesteps(double sigma_v, double sigma_a) const;
  Status run_step_device(const std::atomic<bool>* cancel);
  Status project_inputs(const StepIo& io, Tensor& packed);
  Status final_layer_device(const Tensor& x, const StepTables& tables, StepIo& io);
  Result<AvLatents> download_heads(const StepIo& io);
  Status upload_inputs(const AvLatents& x, StepIo& io);
};

}  // namespace vortex
