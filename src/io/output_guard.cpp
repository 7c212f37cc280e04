// Output replacement rules of synth / quantize (see output_guard.h). Reads only headers: a safetensors
// header, an index's weight_map, a config.json's keys. Tested in tests/cli/cli_test.cpp.
#include "io/output_guard.h"

#include <cstdio>
#include <filesystem>

#include "core/config_json.h"
#include "io/safetensors.h"

namespace vortex {
namespace fs = std::filesystem;

bool is_vortex_safetensors(const std::string& path) {
  Result<SafetensorsFile> f = SafetensorsFile::open(path);
  if (!f.ok()) return false;
  const auto& m = f->metadata();
  return m.count("vortex.synthetic_seed") > 0 || m.count("vortex.quantize") > 0;
}

namespace {

// The file's JSON object, or null when it is not one.
nlohmann::json read_json(const std::string& path) {
  Result<ConfigJson> j = ConfigJson::read_file(path);
  return j.ok() ? j->json() : nlohmann::json();
}

bool vortex_index(const std::string& path) {
  const nlohmann::json j = read_json(path);
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) return false;
  const fs::path dir = fs::path(path).parent_path();
  for (const auto& [name, shard] : j["weight_map"].items()) {
    (void)name;
    if (!shard.is_string()) return false;
    const fs::path p = dir / shard.get<std::string>();
    std::error_code ec;
    if (fs::exists(p, ec) && !is_vortex_safetensors(p.string())) return false;
  }
  return true;
}

}  // namespace

Status check_output_replaceable(const std::string& path, OutputKind kind, bool overwrite, bool vortex_sibling) {
  std::error_code ec;
  const auto st = fs::symlink_status(path, ec);
  if (!fs::exists(st)) return Status::Ok();
  if (!overwrite) {
    return invalid_argument(path +
                            " exists; pass --overwrite to replace it (only files Vortex wrote are replaced) "
                            "or choose another --out");
  }
  if (!fs::is_regular_file(st)) return invalid_argument(path + " exists and is not a regular file; not replacing it");
  bool ours = false;
  const char* mark = "";
  switch (kind) {
    case OutputKind::kSafetensors:
      ours = is_vortex_safetensors(path);
      mark = "no vortex.synthetic_seed / vortex.quantize in its __metadata__";
      break;
    case OutputKind::kIndex:
      ours = vortex_index(path);
      mark = "it lists shards Vortex did not write";
      break;
    case OutputKind::kConfigJson: {
      const nlohmann::json j = read_json(path);
      ours = vortex_sibling || (j.is_object() && j.contains(kConfigWrittenByKey));
      mark = "no \"vortex.written_by\" key, and the checkpoint beside it is not Vortex's";
      break;
    }
  }
  if (ours) return Status::Ok();
  return invalid_argument(path + " exists and was not written by Vortex (" + mark +
                          "); --overwrite replaces only Vortex's own outputs. Move it or choose another --out");
}

std::string format_size(uint64_t bytes) {
  char b[32];
  if (bytes >= 1000000000ull) {
    std::snprintf(b, sizeof b, "%.1f GB", static_cast<double>(bytes) / 1e9);
  } else {
    std::snprintf(b, sizeof b, "%.1f MB", static_cast<double>(bytes) / 1e6);
  }
  return b;
}

Status check_free_space(const std::string& path, uint64_t bytes, const std::string& what) {
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::absolute(path, ec).parent_path();
  while (!dir.empty() && !std::filesystem::exists(dir, ec) && dir != dir.root_path()) dir = dir.parent_path();
  const std::filesystem::space_info space = std::filesystem::space(dir, ec);
  if (ec) return Status::Ok();  // unknown: the write itself reports a full disk
  const uint64_t needed = bytes + bytes / 100;
  if (space.available < needed)
    return invalid_argument(what + " needs ~" + format_size(bytes) + " but only " + format_size(space.available) +
                            " is free on " + dir.string() + "; free space or choose another location");
  return Status::Ok();
}

}  // namespace vortex
