// LoRA files -> canonical parts, alpha resolution, merge / unmerge and run-time branches (lora.h).
// Key styles are recognised by module name, the prefix being optional, as diffusers'
// _convert_non_diffusers_minimax_h3_lora_to_diffusers does; the diffusers names of each layer come from
// io/checkpoint.h's diffusers_key_for, so the checkpoint loader and the LoRA loader share one mapping.
// Tested in tests/lora/lora_test.cpp (PEFT/diffusers fixtures included).
#include "lora/lora.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "core/config_json.h"
#include "core/file_no_follow.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/h3_spec.h"
#include "ref/ref_ops.h"

namespace vortex {
namespace {

using nlohmann::json;

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view x) {
  return s.size() >= x.size() && s.substr(s.size() - x.size()) == x;
}

std::string strip_weight(const std::string& key) { return key.substr(0, key.size() - std::strlen(".weight")); }

// Where a file module lands: its layer, the rows it covers, and the row reorder its B needs.
struct Target {
  std::string layer;
  int64_t row_offset = 0, rows = 0, in = 0;
  bool swap_halves = false;  // diffusers ff.net.0.proj: [value; gate] -> [gate; value]
  bool qkv = false;          // a fused qkv_proj module (de-interleaved when the file is DiffSynth's)
};

struct LayerDims {
  std::string layer;
  int64_t out = 0, in = 0;
};

std::vector<LayerDims> target_dims(const ModelConfig& c) {
  std::vector<LayerDims> v;
  auto block = [&](const std::string& p, bool adaln) {
    v.push_back({p + ".attn.qkv_proj", 3LL * c.inner(), c.hidden});
    v.push_back({p + ".attn.out_proj", c.hidden, c.inner()});
    v.push_back({p + ".mlp.fc1", 2LL * c.ffn, c.hidden});
    v.push_back({p + ".mlp.fc2", c.hidden, c.ffn});
    if (adaln) v.push_back({p + ".adaln_proj.linear", c.adaln_features(), c.time_embed_dim});
  };
  for (int i = 0; i < c.num_refiner_layers; ++i) block("token_refiner.blocks." + std::to_string(i), false);
  for (int i = 0; i < c.num_layers; ++i) block("blocks." + std::to_string(i), true);
  v.push_back({"final_layer.adaln_proj.linear", c.final_adaln_features(), c.time_embed_dim});
  return v;
}

// module name (native or diffusers) -> target; `diffusers` tells which vocabulary matched.
struct ModuleMap {
  std::map<std::string, Target> native, diffusers;
};

ModuleMap module_map(const ModelConfig& c) {
  ModuleMap m;
  for (const LayerDims& d : target_dims(c)) {
    Target whole{d.layer, 0, d.out, d.in, false, ends_with(d.layer, ".attn.qkv_proj")};
    m.native[d.layer] = whole;
    const std::string w = d.layer + ".weight";
    if (whole.qkv) {
      const std::vector<std::string> parts = diffusers_qkv_keys(w);  // to_q, to_k, to_v
      for (size_t p = 0; p < parts.size(); ++p)
        m.diffusers[strip_weight(parts[p])] =
            Target{d.layer, static_cast<int64_t>(p) * (d.out / 3), d.out / 3, d.in, false, false};
    } else {
      Target t = whole;
      t.swap_halves = ends_with(d.layer, ".mlp.fc1");
      m.diffusers[strip_weight(diffusers_key_for(w))] = t;
    }
  }
  return m;
}

// musubi-tuner / kohya flatten every '.' to '_' under `lora_unet_`; H3 names contain '_' themselves, so the
// dotted path is recovered by matching the whole module against the vocabulary (as diffusers does).
std::optional<std::string> unflatten_kohya(const std::string& flat) {
  static const std::vector<std::pair<std::regex, std::string>> kPatterns = {
      {std::regex(R"(blocks_(\d+)_attn_(qkv|out)_proj)"), "blocks.$1.attn.$2_proj"},
      {std::regex(R"(blocks_(\d+)_mlp_fc([12]))"), "blocks.$1.mlp.fc$2"},
      {std::regex(R"(blocks_(\d+)_adaln_proj_linear)"), "blocks.$1.adaln_proj.linear"},
      {std::regex(R"(token_refiner_blocks_(\d+)_attn_(qkv|out)_proj)"), "token_refiner.blocks.$1.attn.$2_proj"},
      {std::regex(R"(token_refiner_blocks_(\d+)_mlp_fc([12]))"), "token_refiner.blocks.$1.mlp.fc$2"},
      {std::regex(R"(final_layer_adaln_proj_linear)"), "final_layer.adaln_proj.linear"},
  };
  for (const auto& [re, repl] : kPatterns)
    if (std::regex_match(flat, re)) return std::regex_replace(flat, re, repl);
  return std::nullopt;
}

enum class Factor { kA, kB, kAlpha };

struct ParsedKey {
  std::string module;
  Factor factor = Factor::kA;
  std::string prefix;
  std::string names;  // "lora_A/lora_B" | "lora_down/lora_up" ("" for alpha)
  bool default_infix = false;
};

std::optional<ParsedKey> parse_key(const std::string& key) {
  ParsedKey p;
  std::string k = key;
  for (const char* prefix : {"base_model.model.", "model.diffusion_model.", "diffusion_model.", "transformer."}) {
    if (starts_with(k, prefix)) {
      p.prefix = prefix;
      k = k.substr(std::strlen(prefix));
      break;
    }
  }
  struct Suffix {
    const char* text;
    Factor factor;
    const char* names;
    bool default_infix;
  };
  static const Suffix kSuffixes[] = {
      {".lora_A.default.weight", Factor::kA, "lora_A/lora_B", true},
      {".lora_B.default.weight", Factor::kB, "lora_A/lora_B", true},
      {".lora_A.weight", Factor::kA, "lora_A/lora_B", false},
      {".lora_B.weight", Factor::kB, "lora_A/lora_B", false},
      {".lora_down.weight", Factor::kA, "lora_down/lora_up", false},
      {".lora_up.weight", Factor::kB, "lora_down/lora_up", false},
      {".alpha", Factor::kAlpha, "", false},
  };
  const Suffix* found = nullptr;
  for (const Suffix& s : kSuffixes)
    if (ends_with(k, s.text)) {
      found = &s;
      break;
    }
  if (!found) return std::nullopt;
  p.module = k.substr(0, k.size() - std::strlen(found->text));
  p.factor = found->factor;
  p.names = found->names;
  p.default_infix = found->default_infix;
  if (starts_with(p.module, "lora_unet_")) {
    std::optional<std::string> dotted = unflatten_kohya(p.module.substr(std::strlen("lora_unet_")));
    if (!dotted) return std::nullopt;
    p.prefix = "lora_unet_";
    p.module = *dotted;
  }
  return p;
}

float f32_from_f16_bits(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  float v;
  if (exp == 0) v = std::ldexp(static_cast<float>(man), -24);
  else if (exp == 31) v = man ? std::nanf("") : INFINITY;
  else v = std::ldexp(static_cast<float>(man | 0x400u), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

// Host f32 copy of a bf16 / f16 / f32 tensor (all exact).
Result<Tensor> to_f32(const Tensor& t, const std::string& key) {
  Tensor out = Tensor::empty(t.shape(), DType::kF32);
  float* o = out.data<float>();
  const int64_t n = t.numel();
  switch (t.dtype()) {
    case DType::kF32:
      std::memcpy(o, t.raw_data(), static_cast<size_t>(n) * 4);
      break;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) o[i] = f32_from_bf16_bits(t.data<uint16_t>()[i]);
      break;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) o[i] = f32_from_f16_bits(t.data<uint16_t>()[i]);
      break;
    default:
      return format_error(key + ": LoRA factors must be BF16, F16 or F32, got " + dtype_name(t.dtype()));
  }
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(o[i]))
      return format_error(key + ": holds a non-finite value (NaN or Inf) at element " + std::to_string(i) +
                          "; the file is broken");
  return out;
}

std::string join(const std::vector<std::string>& v, size_t limit = 40) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < limit; ++i) s += "\n  " + v[i];
  if (v.size() > limit) s += "\n  ... (" + std::to_string(v.size() - limit) + " more)";
  return s;
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::optional<double> parse_number(std::string_view s) {
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || s.empty() || !std::isfinite(v)) return std::nullopt;
  return v;
}

// interleaved row h*3*Dh + p*Dh + d -> blocked row p*H*Dh + h*Dh + d, for a B [3 H Dh, r] f32.
Tensor deinterleave_qkv_rows(const Tensor& b, int heads, int head_dim) {
  Tensor out = Tensor::empty(b.shape(), DType::kF32);
  const int64_t r = b.dim(1);
  for (int h = 0; h < heads; ++h)
    for (int p = 0; p < 3; ++p)
      for (int d = 0; d < head_dim; ++d) {
        const int64_t src = (static_cast<int64_t>(h) * 3 + p) * head_dim + d;
        const int64_t dst = (static_cast<int64_t>(p) * heads + h) * head_dim + d;
        std::memcpy(out.data<float>() + dst * r, b.data<float>() + src * r, static_cast<size_t>(r) * 4);
      }
  return out;
}

Tensor swap_row_halves(const Tensor& b) {
  Tensor out = Tensor::empty(b.shape(), DType::kF32);
  const size_t half = static_cast<size_t>(b.numel() / 2) * 4;
  std::memcpy(out.raw_data(), static_cast<const char*>(b.raw_data()) + half, half);
  std::memcpy(static_cast<char*>(out.raw_data()) + half, b.raw_data(), half);
  return out;
}

// Weight slots a LoRA may touch.
struct Slot {
  Tensor* weight = nullptr;
  LinearWeight* linear = nullptr;                       // null for the AdaLN projections
  std::shared_ptr<const LoraBranch>* branch = nullptr;  // where a run-time branch attaches
};

std::map<std::string, Slot> weight_slots(H3Weights& w) {
  std::map<std::string, Slot> m;
  for (auto& [name, lw] : h3_linear_slots(w)) m[name] = Slot{&lw->weight, lw, &lw->lora};
  for (size_t i = 0; i < w.blocks.size(); ++i)
    m["blocks." + std::to_string(i) + ".adaln_proj.linear"] =
        Slot{&w.blocks[i].adaln_proj_linear_weight, nullptr, &w.blocks[i].adaln_proj_lora};
  m["final_layer.adaln_proj.linear"] =
      Slot{&w.final_layer_adaln_proj_linear_weight, nullptr, &w.final_layer_adaln_proj_lora};
  return m;
}

Result<Tensor> host_copy(Backend& backend, const Tensor& t) {
  Tensor h = Tensor::empty(t.shape(), t.dtype());
  VORTEX_RETURN_IF_ERROR(backend.download(t, h));
  return h;
}

Tensor bf16_copy(const Tensor& f32) {
  Tensor out = Tensor::empty(f32.shape(), DType::kBF16);
  for (int64_t i = 0; i < f32.numel(); ++i) out.data<uint16_t>()[i] = bf16_bits_from_f32(f32.data<float>()[i]);
  return out;
}

}  // namespace

Result<LoraSpec> parse_lora_spec(std::string_view arg) {
  LoraSpec spec;
  const std::string whole(arg);
  const size_t colon = arg.rfind(':');
  std::error_code ec;
  if (colon != std::string_view::npos && !std::filesystem::exists(whole, ec)) {
    const std::string_view tail = arg.substr(colon + 1);
    const std::string head(arg.substr(0, colon));
    double v = 0;
    auto [ptr, err] = std::from_chars(tail.data(), tail.data() + tail.size(), v);
    if (err == std::errc() && ptr == tail.data() + tail.size() && !tail.empty()) {
      if (!std::isfinite(v) || std::fabs(v) > kMaxLoraScale)
        return invalid_argument("--lora " + whole + ": SCALE must be a finite number in [-100, 100], got " +
                                std::string(tail));
      spec.path = head;
      spec.scale = v;
    } else if (err == std::errc::result_out_of_range) {
      return invalid_argument("--lora " + whole + ": SCALE " + std::string(tail) + " is out of range [-100, 100]");
    } else if (!head.empty() && std::filesystem::exists(head, ec)) {
      return invalid_argument("--lora " + whole + ": SCALE '" + std::string(tail) +
                              "' is not a number (FILE[:SCALE], e.g. " + head + ":0.8)");
    }
  }
  if (!spec.scale) spec.path = whole;
  if (spec.path.empty()) return invalid_argument("--lora expects FILE[:SCALE], got '" + whole + "'");
  return spec;
}

Status check_request_loras(const std::vector<LoraSpec>& specs, const ModelConfig& config, bool allow_unmatched) {
  for (const LoraSpec& spec : specs) {
    LoraLoadOptions o;
    o.allow_unmatched = allow_unmatched;
    o.explicit_scale = spec.scale.has_value();
    o.request_dialect = true;
    o.refuse_symlinks = true;  // opened again by the worker with O_NOFOLLOW (Pipeline::switch_request_loras)
    Result<LoraAdapter> ad = load_lora(spec.path, config, o);
    if (!ad.ok() && ad.status().code() == ErrorCode::kInvalidArgument) return ad.status();
  }
  return Status::Ok();
}

std::vector<std::string> lora_target_layers(const ModelConfig& config) {
  std::vector<std::string> v;
  for (const LayerDims& d : target_dims(config)) v.push_back(d.layer);
  return v;
}

namespace {

// adapter_config.json; with `no_follow` read through one descriptor opened with O_NOFOLLOW, so a symbolic link
// swapped in after a check is refused too (kInvalidArgument).
Result<ConfigJson> read_adapter_config(const std::string& path, bool no_follow) {
  if (!no_follow) return ConfigJson::read_file(path);
  VORTEX_ASSIGN_OR_RETURN(const std::string text, read_file_no_follow(path, 1u << 20));
  return ConfigJson::parse(text, path);
}

}  // namespace

Result<LoraAdapter> load_lora(const std::string& path, const ModelConfig& config, const LoraLoadOptions& options) {
  VORTEX_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(path, !options.refuse_symlinks));
  LoraAdapter ad;
  ad.path = path;
  ad.tensors = static_cast<int64_t>(file.entries().size());
  if (file.entries().empty()) return format_error(path + ": holds no tensors, not a LoRA file");

  struct Group {
    std::string a_key, b_key, alpha_key;
    std::vector<std::string> keys;
  };
  std::map<std::string, Group> groups;  // by module
  std::vector<std::string> unparsed, duplicates;
  std::set<std::string> prefixes, names;
  bool default_infix = false;
  for (const SafetensorsEntry& e : file.entries()) {
    std::optional<ParsedKey> p = parse_key(e.name);
    if (!p) {
      unparsed.push_back(e.name);
      continue;
    }
    prefixes.insert(p->prefix);
    if (!p->names.empty()) names.insert(p->names);
    default_infix |= p->default_infix;
    Group& g = groups[p->module];
    g.keys.push_back(e.name);
    std::string& slot = p->factor == Factor::kA ? g.a_key : p->factor == Factor::kB ? g.b_key : g.alpha_key;
    if (!slot.empty()) duplicates.push_back(e.name + " (and " + slot + ")");
    slot = e.name;
  }
  if (!duplicates.empty())
    return format_error(path + ": more than one tensor for the same LoRA factor:" + join(duplicates));
  if (names.size() > 1)
    return format_error(path + ": mixes lora_A/lora_B and lora_down/lora_up names; not one adapter");
  ad.factor_names = names.empty() ? "" : *names.begin();
  for (const std::string& p : prefixes) {
    if (!ad.prefix.empty()) ad.prefix += ",";
    ad.prefix += p.empty() ? std::string("(none)") : p;
  }

  const ModuleMap mm = module_map(config);
  std::vector<std::string> unmatched = unparsed, missing, shape_errors;
  bool any_native = false, any_diffusers = false;
  struct Matched {
    std::string module;
    Target target;
    const Group* group;
  };
  std::vector<Matched> matched;
  for (const auto& [module, g] : groups) {
    auto n = mm.native.find(module);
    auto d = mm.diffusers.find(module);
    if (n == mm.native.end() && d == mm.diffusers.end()) {
      unmatched.insert(unmatched.end(), g.keys.begin(), g.keys.end());
      continue;
    }
    const bool native = n != mm.native.end();
    (native ? any_native : any_diffusers) = true;
    if (g.a_key.empty() || g.b_key.empty()) {
      missing.push_back(module + ": has " + (g.a_key.empty() ? g.b_key : g.a_key) + " but no " +
                        (g.a_key.empty() ? "lora_A / lora_down (A, [r, in])" : "lora_B / lora_up (B, [out, r])") +
                        " half");
      continue;
    }
    matched.push_back({module, native ? n->second : d->second, &g});
  }
  std::sort(unmatched.begin(), unmatched.end());
  if (matched.empty() && missing.empty())
    return format_error(path + ": no key matches an H3 layer of " + config.name + " (" + std::to_string(ad.tensors) +
                        " tensors); is it a LoRA for another model? First keys:" + join(unmatched, 6));
  if (!unmatched.empty() && !options.allow_unmatched)
    return format_error(path + ": " + std::to_string(unmatched.size()) + " keys match no layer of " + config.name +
                        " (pass --lora-allow-unmatched to skip them):" + join(unmatched));
  ad.unmatched_keys = unmatched;
  if (!missing.empty()) return format_error(path + ": LoRA modules missing a half:" + join(missing));
  ad.key_style = any_native && any_diffusers ? "mixed" : any_native ? "native" : "diffusers";
  // DiffSynth-Studio writes peft's `.default.` infix over the release names and trains on the raw
  // per-head-interleaved QKV (diffusers' loader uses the same rule).
  ad.qkv_interleaved = any_native && default_infix;

  // ---- factors and shapes ----
  std::map<std::string, int> order;
  {
    int i = 0;
    for (const LayerDims& d : target_dims(config)) order[d.layer] = i++;
  }
  std::sort(matched.begin(), matched.end(), [&](const Matched& x, const Matched& y) {
    const int ox = order[x.target.layer], oy = order[y.target.layer];
    return ox != oy ? ox < oy : x.target.row_offset < y.target.row_offset;
  });
  std::vector<double> alphas;  // per part, NaN when absent
  for (const Matched& m : matched) {
    VORTEX_ASSIGN_OR_RETURN(Tensor a_raw, file.tensor(m.group->a_key));
    VORTEX_ASSIGN_OR_RETURN(Tensor b_raw, file.tensor(m.group->b_key));
    const std::string where =
        m.target.layer + (m.target.rows != 0 && m.module != m.target.layer ? " (from " + m.module + ")" : "");
    if (a_raw.ndim() != 2 || b_raw.ndim() != 2) {
      shape_errors.push_back(where + ": A " + shape_to_string(a_raw.shape()) + " and B " +
                             shape_to_string(b_raw.shape()) + " must both be 2-D");
      continue;
    }
    const int64_t r = a_raw.dim(0);
    if (r == 0 || b_raw.dim(1) != r) {
      shape_errors.push_back(where + ": wrong rank: A " + shape_to_string(a_raw.shape()) + " has rank " +
                             std::to_string(r) + " but B " + shape_to_string(b_raw.shape()) + " has rank " +
                             std::to_string(b_raw.dim(1)));
      continue;
    }
    if (a_raw.dim(1) != m.target.in || b_raw.dim(0) != m.target.rows) {
      shape_errors.push_back(where + ": expected A [r, " + std::to_string(m.target.in) + "] and B [" +
                             std::to_string(m.target.rows) + ", r], got A " + shape_to_string(a_raw.shape()) +
                             " and B " + shape_to_string(b_raw.shape()));
      continue;
    }
    LoraPart part;
    part.layer = m.target.layer;
    part.row_offset = m.target.row_offset;
    part.source = m.module;
    VORTEX_ASSIGN_OR_RETURN(part.a, to_f32(a_raw, m.group->a_key));
    VORTEX_ASSIGN_OR_RETURN(part.b, to_f32(b_raw, m.group->b_key));
    if (m.target.swap_halves) part.b = swap_row_halves(part.b);
    if (m.target.qkv && ad.qkv_interleaved) part.b = deinterleave_qkv_rows(part.b, config.num_heads, config.head_dim);
    double alpha = std::nan("");
    if (!m.group->alpha_key.empty()) {
      VORTEX_ASSIGN_OR_RETURN(Tensor at, file.tensor(m.group->alpha_key));
      if (at.numel() != 1)
        return format_error(m.group->alpha_key + ": alpha must hold one value, got " + shape_to_string(at.shape()));
      VORTEX_ASSIGN_OR_RETURN(Tensor af, to_f32(at, m.group->alpha_key));
      alpha = af.data<float>()[0];
    }
    alphas.push_back(alpha);
    ad.parts.push_back(std::move(part));
  }
  if (!shape_errors.empty())
    return format_error(path + ": LoRA shapes do not fit " + config.name + ":" + join(shape_errors));

  // ---- alpha ----
  const size_t with_alpha =
      static_cast<size_t>(std::count_if(alphas.begin(), alphas.end(), [](double a) { return !std::isnan(a); }));
  std::optional<double> meta_alpha;
  std::string meta_key, ambiguity;
  for (const char* key : {"alpha", "lora_alpha", "ss_network_alpha"}) {
    auto it = file.metadata().find(key);
    if (it == file.metadata().end()) continue;
    meta_key = key;
    meta_alpha = parse_number(it->second);
    if (!meta_alpha) ambiguity = "__metadata__ " + std::string(key) + " = '" + it->second + "' is not a number";
    break;
  }
  const std::filesystem::path config_path = std::filesystem::path(path).parent_path() / "adapter_config.json";
  std::error_code ec;
  std::vector<double> scales(ad.parts.size(), 1.0);
  if (!ambiguity.empty()) {
  } else if (with_alpha > 0) {
    if (with_alpha != alphas.size()) {
      ambiguity =
          std::to_string(with_alpha) + " of " + std::to_string(alphas.size()) + " modules carry an .alpha tensor";
    } else {
      for (size_t i = 0; i < alphas.size(); ++i) {
        if (meta_alpha && *meta_alpha != alphas[i]) {
          ambiguity = "the .alpha tensors (" + fmt(alphas[i]) + ") and __metadata__ " + meta_key + " (" +
                      fmt(*meta_alpha) + ") disagree";
          break;
        }
        scales[i] = alphas[i] / static_cast<double>(ad.parts[i].rank());
      }
      ad.alpha_source = ".alpha tensors (alpha / rank per module)";
    }
  } else if (meta_alpha) {
    for (size_t i = 0; i < ad.parts.size(); ++i) scales[i] = *meta_alpha / static_cast<double>(ad.parts[i].rank());
    ad.alpha_source = "__metadata__ " + meta_key + " = " + fmt(*meta_alpha) + " (alpha / rank per module)";
  } else if (options.refuse_symlinks && std::filesystem::is_symlink(std::filesystem::symlink_status(config_path, ec))) {
    return invalid_argument("lora: the adapter_config.json beside " + std::filesystem::path(path).filename().string() +
                            " is a symbolic link; files in --lora-dir must be regular files");
  } else if (std::filesystem::is_regular_file(config_path, ec)) {
    Result<ConfigJson> read = read_adapter_config(config_path.string(), options.refuse_symlinks);
    if (!read.ok() && read.status().code() == ErrorCode::kInvalidArgument) return read.status();
    const json cfg = read.ok() ? read->json() : json();
    if (!cfg.is_object() || !cfg.contains("lora_alpha") || !cfg["lora_alpha"].is_number() || !cfg.contains("r") ||
        !cfg["r"].is_number()) {
      ambiguity = config_path.string() + " has no numeric lora_alpha and r";
    } else if ((cfg.contains("rank_pattern") && cfg["rank_pattern"].is_object() && !cfg["rank_pattern"].empty()) ||
               (cfg.contains("alpha_pattern") && cfg["alpha_pattern"].is_object() && !cfg["alpha_pattern"].empty())) {
      ambiguity = config_path.string() + " has a rank_pattern / alpha_pattern (per-module alphas are not read)";
    } else {
      const double lora_alpha = cfg["lora_alpha"].get<double>();
      const int64_t r = cfg["r"].get<int64_t>();
      for (size_t i = 0; i < ad.parts.size() && ambiguity.empty(); ++i) {
        if (ad.parts[i].rank() != r)
          ambiguity = config_path.string() + " says r = " + std::to_string(r) + " but " + ad.parts[i].source +
                      " has rank " + std::to_string(ad.parts[i].rank()) + " (alpha / r or alpha / rank?)";
        scales[i] = lora_alpha / static_cast<double>(r);
      }
      ad.alpha_source = "adapter_config.json lora_alpha = " + fmt(lora_alpha) + ", r = " + std::to_string(r);
    }
  } else if (ad.key_style == "native") {
    ad.alpha_source = "none in the file: alpha = rank (scale 1), ComfyUI's and diffusers' rule for alpha-less files";
  } else {
    ambiguity =
        "PEFT/diffusers keys without .alpha tensors, __metadata__ alpha or adapter_config.json: PEFT's "
        "default lora_alpha 8 gives 8 / rank, the alpha = rank convention gives 1";
  }
  if (!ambiguity.empty()) {
    if (!options.explicit_scale) {
      const int64_t r = ad.parts.empty() ? 0 : ad.parts.front().rank();
      const std::string name = std::filesystem::path(path).filename().string();
      const std::string examples =
          "(e.g. :1 for alpha = rank" +
          (r > 0 ? ", :" + fmt(8.0 / static_cast<double>(r)) + " for alpha 8 at rank " + std::to_string(r)
                 : std::string()) +
          ")";
      if (options.request_dialect)
        return invalid_argument(name + ": the LoRA alpha is ambiguous (" + ambiguity +
                                "); Vortex does not guess: give the effective scale in the request, \"lora\": [\"" +
                                name + ":SCALE\"] " + examples);
      return invalid_argument(path + ": the LoRA alpha is ambiguous (" + ambiguity +
                              "); Vortex does not guess: pass the effective scale explicitly, --lora " + path +
                              ":SCALE " + examples);
    }
    std::fill(scales.begin(), scales.end(), 1.0);
    ad.alpha_source = "ambiguous (" + ambiguity + "): the explicit scale is the effective scale";
  }
  for (size_t i = 0; i < ad.parts.size(); ++i) ad.parts[i].alpha_scale = scales[i];
  return ad;
}

Status merge_lora(H3Weights& weights, const LoraAdapter& adapter, double strength, Backend& backend,
                  LoraMergeProgram program, LoraMergeBackup* backup) {
  std::map<std::string, Slot> slots = weight_slots(weights);
  for (const LoraPart& part : adapter.parts) {
    auto it = slots.find(part.layer);
    if (it == slots.end()) return invalid_argument("merge_lora: the weights have no layer " + part.layer);
    Slot& s = it->second;
    if (s.linear && s.linear->format != QuantFormat::kNone)
      return unsupported(
          "merge_lora: " + part.layer + " is stored as " + quant_format_name(s.linear->format) +
          "; merging needs its BF16 weight (load a BF16 checkpoint; --precision fp8/nvfp4 quantize after the merge)");
    if (!s.weight->defined() || s.weight->dtype() != DType::kBF16)
      return invalid_argument("merge_lora: " + part.layer + " must be a BF16 weight, got " +
                              (s.weight->defined() ? s.weight->describe() : std::string("undefined")));
    if (backup && std::none_of(backup->weights.begin(), backup->weights.end(),
                               [&](const auto& b) { return b.first == part.layer; })) {
      VORTEX_ASSIGN_OR_RETURN(Tensor copy, host_copy(backend, *s.weight));
      backup->weights.emplace_back(part.layer, std::move(copy));
    }
    const double scale = strength * part.alpha_scale;
    VORTEX_ASSIGN_OR_RETURN(Tensor a, backend.upload(part.a));
    VORTEX_ASSIGN_OR_RETURN(Tensor b, backend.upload(part.b));
    Status st = backend.lora_merge(*s.weight, a, b, part.row_offset, scale, program);
    if (st.code() == ErrorCode::kUnsupported) {
      // The CPU reference on a host copy: the same bytes as CpuBackend::lora_merge.
      VORTEX_ASSIGN_OR_RETURN(Tensor host, host_copy(backend, *s.weight));
      VORTEX_RETURN_IF_ERROR(
          ref::lora_merge(host, part.a, part.b, part.row_offset, scale, program).with_context(part.layer));
      VORTEX_ASSIGN_OR_RETURN(Tensor merged, backend.upload(host));
      st = backend.copy(merged, *s.weight);
    }
    VORTEX_RETURN_IF_ERROR(st.with_context("merging " + part.source + " into " + part.layer));
  }
  return backend.synchronize();
}

Status unmerge_lora(H3Weights& weights, LoraMergeBackup& backup, Backend& backend) {
  std::map<std::string, Slot> slots = weight_slots(weights);
  for (auto& [layer, host] : backup.weights) {
    auto it = slots.find(layer);
    if (it == slots.end()) return invalid_argument("unmerge_lora: the weights have no layer " + layer);
    VORTEX_ASSIGN_OR_RETURN(Tensor dev, backend.upload(host));
    VORTEX_RETURN_IF_ERROR(backend.copy(dev, *it->second.weight));
  }
  backup.weights.clear();
  return backend.synchronize();
}

void detach_lora_branches(H3Weights& weights) {
  for (auto& [name, slot] : weight_slots(weights)) slot.branch->reset();
}

Status attach_lora_branches(H3Weights& weights, const std::vector<std::pair<const LoraAdapter*, double>>& adapters,
                            Backend& backend) {
  std::map<std::string, Slot> slots = weight_slots(weights);
  std::map<std::string, std::shared_ptr<LoraBranch>> branches;
  for (const auto& [adapter, strength] : adapters) {
    for (const LoraPart& part : adapter->parts) {
      auto it = slots.find(part.layer);
      if (it == slots.end()) return invalid_argument("attach_lora_branches: the weights have no layer " + part.layer);
      std::shared_ptr<LoraBranch>& br = branches[part.layer];
      if (!br) br = std::make_shared<LoraBranch>();
      LoraBranchPart p;
      VORTEX_ASSIGN_OR_RETURN(p.a, backend.upload(bf16_copy(part.a)));  // [r, K] bf16
      VORTEX_ASSIGN_OR_RETURN(p.b, backend.upload(bf16_copy(part.b)));  // [rows, r] bf16
      p.row_offset = part.row_offset;
      p.scale = strength * part.alpha_scale;
      br->parts.push_back(std::move(p));
    }
  }
  detach_lora_branches(weights);
  for (auto& [layer, br] : branches) *slots[layer].branch = br;
  return Status::Ok();
}

Status apply_lora_adapters(H3Weights& weights, const std::vector<LoraSpec>& specs, const LoraApplyOptions& options,
                           const ModelConfig& config, Backend& backend,
                           const std::function<void(std::string_view)>& note,
                           const std::function<void(std::string_view)>& warn, nlohmann::ordered_json* manifest_out) {
  if (options.mode != "merge" && options.mode != "runtime")
    return invalid_argument("--lora-mode must be merge or runtime, got '" + options.mode + "'");
  if (options.mode == "runtime" && options.precision != "bf16" && !specs.empty())
    return unsupported("--lora-mode runtime with --precision " + options.precision +
                       ": the run-time branch on quantized weights is not implemented; use --lora-mode merge "
                       "(the LoRA is merged into the BF16 weights, then quantized)");
  std::vector<LoraAdapter> adapters;
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  for (const LoraSpec& spec : specs) {
    LoraLoadOptions lo;
    lo.allow_unmatched = options.allow_unmatched;
    lo.explicit_scale = spec.scale.has_value();
    lo.refuse_symlinks = options.refuse_symlinks;
    VORTEX_ASSIGN_OR_RETURN(LoraAdapter ad, load_lora(spec.path, config, lo));
    const double strength = spec.scale.value_or(1.0);
    std::set<std::string> layers;
    std::set<int64_t> ranks;
    double lo_s = INFINITY, hi_s = -INFINITY;
    for (const LoraPart& p : ad.parts) {
      layers.insert(p.layer);
      ranks.insert(p.rank());
      lo_s = std::min(lo_s, strength * p.alpha_scale);
      hi_s = std::max(hi_s, strength * p.alpha_scale);
    }
    std::string rank_text;
    for (int64_t r : ranks) {
      if (!rank_text.empty()) rank_text += "/";
      rank_text += std::to_string(r);
    }
    const std::string scale_text = lo_s == hi_s ? fmt(lo_s) : fmt(lo_s) + ".." + fmt(hi_s);
    if (note)
      note("lora " + spec.path + ": " + std::to_string(layers.size()) + " layers (" + ad.key_style + " keys, rank " +
           rank_text + "), alpha: " + ad.alpha_source + "; strength " + fmt(strength) + " -> effective scale " +
           scale_text + " (" + options.mode + ")");
    if (!ad.unmatched_keys.empty() && warn)
      warn("lora " + spec.path + ": skipped " + std::to_string(ad.unmatched_keys.size()) +
           " keys that match no layer:" + join(ad.unmatched_keys, 10));
    nlohmann::ordered_json e;
    e["path"] = spec.path;
    e["mode"] = options.mode;
    e["merge_program"] =
        options.mode == "merge" ? nlohmann::ordered_json("single_rounding") : nlohmann::ordered_json(nullptr);
    e["key_style"] = ad.key_style;
    e["key_prefix"] = ad.prefix;
    e["factor_names"] = ad.factor_names;
    e["qkv_interleaved"] = ad.qkv_interleaved;
    e["alpha_source"] = ad.alpha_source;
    e["strength"] = strength;
    e["strength_explicit"] = spec.scale.has_value();
    e["effective_scale_min"] = lo_s;
    e["effective_scale_max"] = hi_s;
    e["ranks"] = ranks;
    e["layers"] = layers.size();
    e["parts"] = ad.parts.size();
    e["unmatched_keys"] = ad.unmatched_keys;
    entries.push_back(e);
    if (options.mode == "merge") {
      VORTEX_RETURN_IF_ERROR(merge_lora(weights, ad, strength, backend).with_context(spec.path));
    }
    adapters.push_back(std::move(ad));
  }
  if (options.mode == "runtime") {
    std::vector<std::pair<const LoraAdapter*, double>> list;
    for (size_t i = 0; i < adapters.size(); ++i) list.emplace_back(&adapters[i], specs[i].scale.value_or(1.0));
    VORTEX_RETURN_IF_ERROR(attach_lora_branches(weights, list, backend));
  }
  if (manifest_out) *manifest_out = entries;
  return Status::Ok();
}

}  // namespace vortex
