// `vortex quantize` engine: BF16 H3 checkpoint -> ComfyUI nvfp4 / fp8_scaled checkpoint, streamed tensor by
// tensor through SafetensorsStreamWriter (atomic temp + rename). Only the block GEMM weights are quantized;
// everything else is copied byte for byte, QKV rows keep the input's order. Keys written per layer P:
// P.weight, P.weight_scale, [P.weight_scale_2,] P.comfy_quant (ComfyUI's layout).
// Tested in tests/io/quantize_roundtrip_test.cpp (round trip through read_quantized_linear, untouched bytes).
#include "io/quantize.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <system_error>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/checkpoint.h"
#include "io/publish.h"
#include "io/quantized_layers.h"
#include "io/safetensors.h"

namespace vortex {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

bool parse_block_index(std::string_view& s) {
  size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
  if (digits == 0 || digits >= s.size() || s[digits] != '.') return false;
  s.remove_prefix(digits + 1);
  return true;
}

std::string fmt_float(float v) {
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}

// Exact max |w| of a BF16 buffer, as BF16 bits; fails on inf / NaN (a weight must be finite to quantize).
Result<uint16_t> bf16_amax_finite(const std::string& name, const uint16_t* w, int64_t count) {
  uint16_t amax = 0;
  for (int64_t i = 0; i < count; ++i) {
    const uint16_t m = static_cast<uint16_t>(w[i] & 0x7FFF);
    if (m >= 0x7F80)
      return format_error(name + ": element " + std::to_string(i) + " is " + (m == 0x7F80 ? "inf" : "NaN") +
                          "; refusing to quantize a non-finite weight");
    if (m > amax) amax = m;  // finite BF16 magnitudes order like their bit patterns
  }
  return amax;
}

std::string canonical_path(const std::string& p) {
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::weakly_canonical(std::filesystem::absolute(p, ec), ec);
  return ec ? p : abs.string();
}

// Runs fn(slab) for slab in [0, slabs) on `threads` workers (0: hardware concurrency); first error wins.
Status parallel_slabs(int64_t slabs, int threads, const std::function<Status(int64_t)>& fn) {
  int workers = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  workers = static_cast<int>(std::min<int64_t>(workers, slabs));
  std::vector<Status> status(static_cast<size_t>(slabs));
  std::atomic<int64_t> next{0};
  auto work = [&]() {
    for (int64_t s = next++; s < slabs; s = next++) status[static_cast<size_t>(s)] = fn(s);
  };
  std::vector<std::thread> pool;
  Status started = Status::Ok();
  try {
    for (int t = 1; t < workers; ++t) pool.emplace_back(work);
  } catch (const std::system_error& e) {
    // The OS refused a thread: finish on the ones running, then report instead of terminating.
    started = Status(ErrorCode::kInternal, std::string("cannot start ") + std::to_string(workers) +
                                               " encode threads (" + e.what() + "); use fewer --threads");
  }
  work();
  for (std::thread& t : pool) t.join();
  VORTEX_RETURN_IF_ERROR(started);
  for (const Status& st : status) VORTEX_RETURN_IF_ERROR(st);
  return Status::Ok();
}

// Encodes 128-row slabs on worker threads. A slab of 128 rows owns whole 128x4 scale tiles (one tile row),
// which are contiguous: its scales start at (r0 / 128) * 128 * scale_cols and its data at r0 * data_row_bytes,
// so the slabs' outputs are exactly the bytes of one whole-tensor call (tested against one call, E0).
Status encode_nvfp4_parallel(const Nvfp4WeightEncoder& enc, const uint16_t* w, int64_t n, int64_t k, float g,
                             uint8_t* data, uint8_t* scales, int threads) {
  const Shape ds = nvfp4_weight_shape(n, k), ss = nvfp4_weight_scale_shape(n, k);
  return parallel_slabs((n + 127) / 128, threads, [&](int64_t s) {
    const int64_t r0 = s * 128, rows = std::min<int64_t>(128, n - r0);
    return enc.encode(w + r0 * k, rows, k, g, data + r0 * ds[1], scales + r0 * ss[1]);
  });
}

}  // namespace

Result<QuantizeLayerSet> quantize_layer_set_from_name(std::string_view name) {
  if (name == "blocks") return QuantizeLayerSet::kBlocks;
  if (name == "blocks+refiner") return QuantizeLayerSet::kBlocksAndRefiner;
  return invalid_argument("--layers must be 'blocks' or 'blocks+refiner', got '" + std::string(name) + "'");
}

const char* quantize_layer_set_name(QuantizeLayerSet set) {
  return set == QuantizeLayerSet::kBlocks ? "blocks" : "blocks+refiner";
}

Result<QuantFormat> quantize_format_from_name(std::string_view name) {
  if (name == "nvfp4") return QuantFormat::kNvfp4;
  if (name == "fp8_scaled") return QuantFormat::kFp8Scaled;
  return invalid_argument("--format must be 'nvfp4' or 'fp8_scaled', got '" + std::string(name) + "'");
}

bool is_quantize_target(std::string_view s, QuantizeLayerSet set) {
  if (starts_with(s, "token_refiner.blocks.")) {
    if (set != QuantizeLayerSet::kBlocksAndRefiner) return false;
    s.remove_prefix(std::strlen("token_refiner.blocks."));
  } else if (starts_with(s, "blocks.")) {
    s.remove_prefix(std::strlen("blocks."));
  } else {
    return false;
  }
  if (!parse_block_index(s)) return false;
  return s == "attn.qkv_proj.weight" || s == "attn.out_proj.weight" || s == "mlp.fc1.weight" || s == "mlp.fc2.weight";
}

float fp8_scaled_weight_scale(uint16_t amax_bf16_bits) {
  const float amax = f32_from_bf16_bits(amax_bf16_bits);
  return amax == 0.0f ? 1.0f : amax / 448.0f;
}

void fp8_scaled_quantize(const uint16_t* w, int64_t count, float scale, uint8_t* q) {
  for (int64_t i = 0; i < count; ++i) q[i] = e4m3_from_f32(f32_from_bf16_bits(w[i]) / scale);
}

Result<QuantizeSummary> quantize_checkpoint(const QuantizeOptions& opt,
                                            const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  if (opt.in.empty() || opt.out.empty()) return invalid_argument("quantize: --in and --out are required");
  if (opt.format == QuantFormat::kNone) return invalid_argument("quantize: choose --format nvfp4 or fp8_scaled");
  if (opt.format == QuantFormat::kNvfp4 && (!opt.nvfp4.global_scale || !opt.nvfp4.encode))
    return internal_error("quantize: nvfp4 requested but no NVFP4 weight encoder was provided");
  if (is_safetensors_index_path(opt.out))
    return unsupported("quantize: --out " + opt.out +
                       " is an index; write a single .safetensors file (the "
                       "quantized h3 checkpoint is ~4x smaller than the BF16 one)");

  VORTEX_ASSIGN_OR_RETURN(CheckpointInfo info, inspect_checkpoint(opt.in));
  if (!info.quantized_layers.empty()) {
    std::string some;
    for (size_t i = 0; i < info.quantized_layers.size() && i < 4; ++i)
      some += (i ? ", " : "") + info.quantized_layers[i].layer + " (" + info.quantized_layers[i].format_name + ", " +
              info.quantized_layers[i].source + ")";
    return invalid_argument(opt.in + " is already quantized (" + std::to_string(info.quantized_layers.size()) +
                            " quantized layers: " + some + (info.quantized_layers.size() > 4 ? ", ..." : "") +
                            "). Quantize the BF16 original instead; requantizing would compound the error");
  }
  VORTEX_ASSIGN_OR_RETURN(SafetensorsSet set, SafetensorsSet::open(opt.in));
  const std::string out_canon = canonical_path(opt.out);
  for (const SafetensorsFile& f : set.files())
    if (canonical_path(f.path()) == out_canon)
      return invalid_argument("quantize: --out " + opt.out + " is one of the input files; choose another path");
  VORTEX_RETURN_IF_ERROR(check_output_replaceable(opt.out, OutputKind::kSafetensors, opt.overwrite));

  // Plan: the output tensor list in input order, targets expanded to their quantized tensors.
  struct Item {
    std::string in_name;  // key in the input ("" for tensors produced by quantization)
    bool quantize = false;
    int64_t n = 0, k = 0;
  };
  std::vector<Item> items;
  std::vector<SafetensorsTensorInfo> out_infos;
  size_t targets = 0;
  for (const std::string& name : set.names()) {
    const SafetensorsEntry& e = set.entry(*set.find(name));
    const std::string canonical = starts_with(name, info.key_prefix) ? name.substr(info.key_prefix.size()) : name;
    if (!is_quantize_target(canonical, opt.layers)) {
      items.push_back({name, false, 0, 0});
      out_infos.push_back({name, e.dtype, e.shape});
      continue;
    }
    if (e.dtype != DType::kBF16 || e.shape.size() != 2)
      return invalid_argument(opt.in + ": " + name + " is " + shape_to_string(e.shape) + " " + dtype_name(e.dtype) +
                              "; vortex quantize expects 2-D BF16 block GEMM weights");
    const std::string layer = name.substr(0, name.size() - std::strlen(".weight"));
    for (const char* aux : {".weight_scale", ".weight_scale_2", ".input_scale", ".comfy_quant", ".pre_quant_scale"})
      if (set.find(layer + aux))
        return invalid_argument(opt.in + ": " + layer + aux + " already exists; the input looks partly quantized");
    const int64_t n = e.shape[0], k = e.shape[1];
    items.push_back({name, true, n, k});
    ++targets;
    const std::string cq = comfy_quant_json(opt.format);
    if (opt.format == QuantFormat::kNvfp4) {
      out_infos.push_back({name, DType::kU8, nvfp4_weight_shape(n, k)});
      out_infos.push_back({layer + ".weight_scale", DType::kF8E4M3, nvfp4_weight_scale_shape(n, k)});
      out_infos.push_back({layer + ".weight_scale_2", DType::kF32, {}});
    } else {
      out_infos.push_back({name, DType::kF8E4M3, {n, k}});
      out_infos.push_back({layer + ".weight_scale", DType::kF32, {}});
    }
    out_infos.push_back({layer + ".comfy_quant", DType::kU8, {static_cast<int64_t>(cq.size())}});
  }
  if (targets == 0)
    return invalid_argument(opt.in + " has no block GEMM weights to quantize (expected keys like " + info.key_prefix +
                            "blocks.0.attn.qkv_proj.weight); is it an H3 checkpoint?");

  std::map<std::string, std::string> metadata = set.metadata();
  metadata[kQkvLayoutMetadataKey] =
      info.layout == CheckpointLayout::kOriginal ? kQkvInterleavedValue : kQkvBlockedValue;
  nlohmann::ordered_json qmeta;
  qmeta["format"] = opt.format == QuantFormat::kNvfp4 ? "nvfp4" : "fp8_scaled";
  qmeta["layers"] = quantize_layer_set_name(opt.layers);
  qmeta["recipe"] = opt.format == QuantFormat::kNvfp4
                        ? "per-tensor g = dynamic amax/2688 (weight_scale_2); " + opt.nvfp4.description
                        : std::string("scale = fp32(amax)/448 (IEEE); q = e4m3_rn_satfinite(fp32(w)/scale)");
  metadata["vortex.quantize"] = qmeta.dump();

  QuantizeSummary summary;
  summary.out = opt.out;
  summary.tensors_in = set.names().size();
  summary.tensors_out = out_infos.size();
  for (const SafetensorsTensorInfo& t : out_infos) summary.bytes_out += t.bytes();
  for (const std::string& name : set.names()) summary.bytes_in += set.entry(*set.find(name)).bytes();

  VORTEX_RETURN_IF_ERROR(check_free_space(opt.out, summary.bytes_out, "--out " + opt.out));
  say("writing " + opt.out + ": " + format_size(summary.bytes_out) + " (from " + format_size(summary.bytes_in) + ")");
  VORTEX_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsStreamWriter> writer,
                          SafetensorsStreamWriter::create(opt.out, out_infos, metadata));
  const std::string total = std::to_string(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    const std::string tag = "[" + std::to_string(i + 1) + "/" + total + "] " + it.in_name;
    VORTEX_ASSIGN_OR_RETURN(Tensor src, set.tensor(it.in_name));
    if (!it.quantize) {
      VORTEX_RETURN_IF_ERROR(writer->write_next(src));
      say(tag + ": copied " + src.describe());
      continue;
    }
    if (!src.is_contiguous()) return internal_error(it.in_name + ": non-contiguous mapping view");
    const uint16_t* w = static_cast<const uint16_t*>(src.raw_data());  // [N, K] bf16
    VORTEX_ASSIGN_OR_RETURN(uint16_t amax_bits, bf16_amax_finite(it.in_name, w, it.n * it.k));
    const std::string layer = it.in_name.substr(0, it.in_name.size() - std::strlen(".weight"));
    const std::string cq = comfy_quant_json(opt.format);
    if (opt.format == QuantFormat::kNvfp4) {
      const Shape ds = nvfp4_weight_shape(it.n, it.k), ss = nvfp4_weight_scale_shape(it.n, it.k);
      const float g = opt.nvfp4.global_scale(w, it.n, it.k);
      if (!std::isfinite(g) || g < 0.0f)
        return internal_error(it.in_name + ": NVFP4 global scale " + fmt_float(g) + " is not a finite non-negative");
      Tensor data = Tensor::empty(ds, DType::kU8);        // [N16, K16/2] u8, hi-first E2M1 pairs
      Tensor scales = Tensor::empty(ss, DType::kF8E4M3);  // [N128, C4] e4m3, 128x4 tiles
      std::memset(data.raw_data(), 0xA5, data.nbytes());  // poison: the encoder must write every byte
      std::memset(scales.raw_data(), 0xA5, scales.nbytes());
      VORTEX_RETURN_IF_ERROR(encode_nvfp4_parallel(opt.nvfp4, w, it.n, it.k, g, static_cast<uint8_t*>(data.raw_data()),
                                                   static_cast<uint8_t*>(scales.raw_data()), opt.threads));
      Tensor g_t = Tensor::empty({}, DType::kF32);
      std::memcpy(g_t.raw_data(), &g, 4);
      VORTEX_RETURN_IF_ERROR(writer->write_next(data));
      VORTEX_RETURN_IF_ERROR(writer->write_next(scales));
      VORTEX_RETURN_IF_ERROR(writer->write_next(g_t));
      say(tag + ": quantized nvfp4 " + src.describe() + " -> " + data.describe() + " + scales " + shape_to_string(ss) +
          ", amax " + fmt_float(f32_from_bf16_bits(amax_bits)) + ", weight_scale_2 " + fmt_float(g));
    } else {
      const float scale = fp8_scaled_weight_scale(amax_bits);
      Tensor q = Tensor::empty({it.n, it.k}, DType::kF8E4M3);  // [N, K] e4m3
      uint8_t* qd = static_cast<uint8_t*>(q.raw_data());
      constexpr int64_t kChunk = 1 << 20;  // elements per task
      VORTEX_RETURN_IF_ERROR(parallel_slabs((it.n * it.k + kChunk - 1) / kChunk, opt.threads, [&](int64_t c) {
        fp8_scaled_quantize(w + c * kChunk, std::min(kChunk, it.n * it.k - c * kChunk), scale, qd + c * kChunk);
        return Status::Ok();
      }));
      Tensor s_t = Tensor::empty({}, DType::kF32);
      std::memcpy(s_t.raw_data(), &scale, 4);
      VORTEX_RETURN_IF_ERROR(writer->write_next(q));
      VORTEX_RETURN_IF_ERROR(writer->write_next(s_t));
      say(tag + ": quantized fp8_scaled " + src.describe() + ", amax " + fmt_float(f32_from_bf16_bits(amax_bits)) +
          ", weight_scale " + fmt_float(scale));
    }
    VORTEX_RETURN_IF_ERROR(writer->write_bytes(cq.data(), cq.size()));
    ++summary.layers_quantized;
  }
  VORTEX_RETURN_IF_ERROR(writer->finish());
  say("wrote " + opt.out + ": " + std::to_string(summary.layers_quantized) + " layers quantized, " +
      std::to_string(summary.tensors_out) + " tensors");

  // config.json travels with the weights (shape inference cannot see through packed NVFP4 weights).
  namespace fs = std::filesystem;
  const fs::path in_dir = fs::absolute(opt.in).parent_path(), out_dir = fs::absolute(opt.out).parent_path();
  std::error_code ec;
  if (fs::exists(in_dir / "config.json") && !fs::equivalent(in_dir, out_dir, ec) &&
      !fs::exists(out_dir / "config.json")) {
    fs::copy_file(in_dir / "config.json", out_dir / "config.json", ec);
    if (ec) return io_error("quantize: wrote " + opt.out + " but could not copy config.json: " + ec.message());
    summary.copied_config_json = true;
    say("copied " + (in_dir / "config.json").string() + " -> " + (out_dir / "config.json").string());
  }
  return summary;
}

}  // namespace vortex
