// Synthetic checkpoint writer (see synth_checkpoint.h). Each tensor is filled on the host with
// fill_spec_host (same bytes as Backend::fill_synthetic), QKV rows are permuted to the per-head
// interleaved order for the original layout (split into to_q/to_k/to_v, with fc1's halves swapped, for
// diffusers), and tensors are streamed into shards in spec order. Tested in tests/io/checkpoint_test.cpp
// and tests/io/diffusers_checkpoint_test.cpp (load back in every layout, compare with synthesize_weights).
#include "io/synth_checkpoint.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include <nlohmann/json.hpp>

#include "io/publish.h"
#include "model/h3_spec.h"

namespace vortex {

namespace {

bool ends_with(const std::string& s, const std::string& x) {
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

std::string dir_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

Result<std::vector<std::string>> write_synthetic_checkpoint(const SynthCheckpointOptions& opt,
                                                            const std::function<void(const std::string&)>& progress) {
  const ModelConfig& c = opt.config;
  VORTEX_RETURN_IF_ERROR(c.validate());
  if (opt.layout == CheckpointLayout::kAuto)
    return invalid_argument("synth: choose a layout (original, comfy or diffusers), not auto");
  if (opt.out.empty()) return invalid_argument("synth: --out is required");
  if (opt.shard_size_gb < 0) return invalid_argument("synth: --shard-size-gb must be positive");
  {
    std::error_code ec;
    std::filesystem::create_directories(dir_of(opt.out), ec);
    if (ec) return io_error("synth: cannot create directory " + dir_of(opt.out) + " (" + ec.message() + ")");
  }
  const bool comfy = opt.layout == CheckpointLayout::kComfy;
  const bool diffusers = opt.layout == CheckpointLayout::kDiffusers;
  const std::string prefix = comfy ? "diffusion_model." : "";

  const std::vector<TensorSpec> spec_list = h3_tensor_specs(c);
  // The tensors of the file: one per spec tensor, except for diffusers (rope.inv_freq dropped, QKV as
  // three thirds). `part` is the third of the spec tensor's rows a tensor holds (-1: all of it).
  struct FileTensor {
    std::string name;
    size_t spec;
    int part;
    DType dtype;
    Shape shape;
    int64_t bytes() const { return shape_numel(shape) * static_cast<int64_t>(dtype_size(dtype)); }
  };
  std::vector<FileTensor> specs;
  for (size_t i = 0; i < spec_list.size(); ++i) {
    const TensorSpec& sp = spec_list[i];
    if (!diffusers) {
      specs.push_back({sp.name, i, -1, sp.dtype, sp.shape});
    } else if (is_qkv_weight_name(sp.name)) {
      const std::vector<std::string> keys = diffusers_qkv_keys(sp.name);
      for (int p = 0; p < 3; ++p) specs.push_back({keys[p], i, p, sp.dtype, {sp.shape[0] / 3, sp.shape[1]}});
    } else if (sp.init != SynthInit::kRopeInvFreq) {
      specs.push_back({diffusers_key_for(sp.name), i, -1, sp.dtype, sp.shape});
    }
  }
  const bool sharded = opt.shard_size_gb > 0 || ends_with(opt.out, ".index.json");
  const uint64_t shard_bytes =
      opt.shard_size_gb > 0 ? static_cast<uint64_t>(opt.shard_size_gb * (1ull << 30)) : (5ull << 30);

  // Plan shards greedily in spec order (a tensor larger than a shard gets a shard of its own).
  std::vector<std::vector<size_t>> shards(1);
  uint64_t fill = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    uint64_t b = static_cast<uint64_t>(specs[i].bytes());
    if (sharded && fill > 0 && fill + b > shard_bytes) {
      shards.emplace_back();
      fill = 0;
    }
    shards.back().push_back(i);
    fill += b;
  }
  std::string stem = opt.out;
  for (const char* suffix : {".safetensors.index.json", ".index.json", ".safetensors"})
    if (ends_with(stem, suffix)) {
      stem = stem.substr(0, stem.size() - std::string(suffix).size());
      break;
    }
  const std::string index_path = ends_with(opt.out, ".index.json") ? opt.out : stem + ".safetensors.index.json";
  std::vector<std::string> shard_paths;
  for (size_t s = 0; s < shards.size(); ++s) {
    if (!sharded) {
      shard_paths.push_back(opt.out);
      break;
    }
    char name[64];
    std::snprintf(name, sizeof name, "-%05zu-of-%05zu.safetensors", s + 1, shards.size());
    shard_paths.push_back(stem + name);
  }

  // Every file this run writes is checked before the first byte is written.
  for (const std::string& p : shard_paths)
    VORTEX_RETURN_IF_ERROR(check_output_replaceable(p, OutputKind::kSafetensors, opt.overwrite));
  if (sharded) VORTEX_RETURN_IF_ERROR(check_output_replaceable(index_path, OutputKind::kIndex, opt.overwrite));
  const std::string config_path = dir_of(opt.out) + "/config.json";
  nlohmann::ordered_json config_json =
      nlohmann::ordered_json::parse(diffusers ? model_config_to_diffusers_json(c) : model_config_to_json(c));
  config_json[kConfigWrittenByKey] = "vortex synth";
  const std::string config_text = config_json.dump(2) + "\n";
  bool config_up_to_date = false;
  {
    std::error_code ec;
    const std::string main_out = sharded ? index_path : opt.out;
    // Past the checks above, an existing checkpoint here is Vortex's, so is the config.json beside it.
    const bool replacing_vortex_checkpoint = std::filesystem::exists(main_out, ec);
    std::ifstream existing(config_path, std::ios::binary);
    if (existing) {
      const std::string text((std::istreambuf_iterator<char>(existing)), std::istreambuf_iterator<char>());
      config_up_to_date = text == config_text;  // same config: nothing to replace
    }
    if (!config_up_to_date)
      VORTEX_RETURN_IF_ERROR(
          check_output_replaceable(config_path, OutputKind::kConfigJson, opt.overwrite, replacing_vortex_checkpoint));
  }

  std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"vortex.synthetic_seed", std::to_string(opt.seed)},
      {"vortex.config", c.name},
  };
  if (!diffusers) metadata[kQkvLayoutMetadataKey] = comfy ? kQkvBlockedValue : kQkvInterleavedValue;
  uint64_t total = 0;
  for (const FileTensor& t : specs) total += static_cast<uint64_t>(t.bytes());
  VORTEX_RETURN_IF_ERROR(check_free_space(opt.out, total, "synth --out " + opt.out));
  if (progress)
    progress("synth: writing " + format_size(total) + " (" + std::to_string(shard_paths.size()) + " file" +
             (shard_paths.size() > 1 ? "s" : "") + ")");
  uint64_t done = 0, last_report = 0;
  SafetensorsIndex index;
  index.metadata["total_size"] = std::to_string(total);
  std::vector<std::string> written;

  for (size_t s = 0; s < shards.size(); ++s) {
    std::vector<SafetensorsTensorInfo> infos;
    uint64_t bytes = 0;
    for (size_t i : shards[s]) {
      infos.push_back({prefix + specs[i].name, specs[i].dtype, specs[i].shape});
      bytes += static_cast<uint64_t>(specs[i].bytes());
      index.weight_map[prefix + specs[i].name] = base_of(shard_paths[s]);
    }
    if (progress)
      progress("writing " + shard_paths[s] + " (" + std::to_string(infos.size()) + " tensors, " +
               std::to_string(bytes) + " bytes)");
    VORTEX_ASSIGN_OR_RETURN(auto writer, SafetensorsStreamWriter::create(shard_paths[s], infos, metadata));
    for (size_t i : shards[s]) {
      const FileTensor& spec = specs[i];
      const TensorSpec& full = spec_list[spec.spec];
      Tensor host = Tensor::empty(full.shape, full.dtype);
      VORTEX_RETURN_IF_ERROR(fill_spec_host(full, c, opt.seed, host));
      if (opt.layout == CheckpointLayout::kOriginal && is_qkv_weight_name(full.name)) {
        Tensor interleaved = Tensor::empty(full.shape, full.dtype);
        VORTEX_RETURN_IF_ERROR(qkv_blocked_to_interleaved(host, interleaved, c.num_heads, c.head_dim));
        host = std::move(interleaved);
      }
      if (spec.part >= 0) {  // one third of the [q|k|v] rows
        Tensor third = Tensor::empty(spec.shape, spec.dtype);
        std::memcpy(third.raw_data(), static_cast<const char*>(host.raw_data()) + spec.part * third.nbytes(),
                    third.nbytes());
        host = std::move(third);
      }
      if (diffusers && spec.name.find(".ff.net.0.proj.") != std::string::npos) {
        // [gate; value] -> diffusers' [value; gate]
        Tensor swapped = Tensor::empty(spec.shape, spec.dtype);
        const size_t half = host.nbytes() / 2;
        std::memcpy(swapped.raw_data(), static_cast<const char*>(host.raw_data()) + half, half);
        std::memcpy(static_cast<char*>(swapped.raw_data()) + half, host.raw_data(), half);
        host = std::move(swapped);
      }
      VORTEX_RETURN_IF_ERROR(writer->write_next(host));
      done += static_cast<uint64_t>(spec.bytes());
      if (progress && total > 0 && (done - last_report) * 50 >= total) {
        last_report = done;
        char line[160];
        std::snprintf(line, sizeof line, "  %5.1f%%  %s",
                      100.0 * static_cast<double>(done) / static_cast<double>(total), spec.name.c_str());
        progress(line);
      }
    }
    VORTEX_RETURN_IF_ERROR(writer->finish());
    written.push_back(shard_paths[s]);
  }
  if (sharded) {
    VORTEX_RETURN_IF_ERROR(write_safetensors_index(index_path, index));
    written.push_back(index_path);
  }
  if (!config_up_to_date) VORTEX_RETURN_IF_ERROR(write_text_atomic(config_path, config_text));
  written.push_back(config_path);
  if (progress) progress("done: " + std::to_string(total) + " bytes of weights, config " + config_path);
  return written;
}

}  // namespace vortex
