// The output publish policy (see publish.h): staged folders renamed into place, and the replacement rules of
// synth / quantize's files (which read only headers: a safetensors header, an index's weight_map, a config.json's
// keys).
#include "io/publish.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "core/config_json.h"
#include "io/safetensors.h"

namespace vortex {
namespace fs = std::filesystem;

namespace {

bool is_same_or_ancestor(const fs::path& a, const fs::path& b) {  // a == b, or a is a parent of b
  auto ai = a.begin(), bi = b.begin();
  for (; ai != a.end(); ++ai, ++bi) {
    if (ai->empty()) continue;  // trailing separator
    if (bi == b.end() || *ai != *bi) return false;
  }
  return true;
}

fs::path resolved(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p : c;
}

// A target that exists: not a link, a folder, and empty or (overwrite) replaceable. `during_run`: the message of a
// target that was filled while the command ran.
Status check_existing_target(const fs::path& target, const OutputOwnership& owner, bool overwrite, bool during_run) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(target, ec);
  if (!fs::exists(st)) return Status::Ok();
  const std::string named = owner.flag + " " + owner.shown;
  if (fs::is_symlink(st))
    return invalid_argument(named + " is a symbolic link; pass the directory itself or a new path");
  if (!fs::is_directory(st)) return invalid_argument(named + " exists and is not a directory; choose another path");
  if (fs::is_empty(target, ec)) return Status::Ok();
  if (!overwrite) {
    if (during_run)
      return invalid_argument(target.string() + " was filled by something else during the run; not replacing it");
    return invalid_argument(named + " exists and is not empty; pass --overwrite to replace " + owner.previous +
                            " there, or choose another directory");
  }
  return owner.check_replaceable(target);
}

// Deletes from a replaced folder only the entries its owner wrote, then the folder if that left it empty: anything
// that appeared there meanwhile stays.
void remove_own_entries(const fs::path& dir, const OutputOwnership& owner) {
  std::error_code ec;
  std::vector<fs::path> own;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (fs::is_regular_file(e.symlink_status(ec)) && owner.is_own(e)) own.push_back(e.path());
  }
  for (const fs::path& f : own) fs::remove(f, ec);
  fs::remove(dir, ec);  // fails, keeping it, when something else is left
}

}  // namespace

fs::path normalized_output_path(const std::string& path) {
  fs::path out = fs::absolute(fs::path(path)).lexically_normal();
  while (out.has_parent_path() && out.filename().empty() && out != out.root_path()) out = out.parent_path();
  return out;
}

Status check_output_location(const fs::path& out, const std::string& flag, const std::string& shown) {
  const fs::path target = resolved(out);
  if (target == target.root_path())
    return invalid_argument(flag + " " + shown + " is the root directory; choose a new directory");
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0' && target == resolved(home)) {
    return invalid_argument(flag + " " + shown + " is your home directory; choose a new directory");
  }
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  if (!ec && is_same_or_ancestor(target, resolved(cwd))) {
    return invalid_argument(
        flag + " " + shown +
        (target == resolved(cwd) ? " is the current directory" : " is an ancestor of the current directory") +
        "; choose a new directory, e.g. " + flag + " out/run1");
  }
  return Status::Ok();
}

Status check_publish_target(const fs::path& target, const OutputOwnership& owner, bool overwrite) {
  VORTEX_RETURN_IF_ERROR(check_output_location(target, owner.flag, owner.shown));
  VORTEX_RETURN_IF_ERROR(check_existing_target(target, owner, overwrite, /*during_run=*/false));
  const fs::path parent = target.parent_path();
  std::error_code ec;
  if (!parent.empty() && !fs::exists(parent, ec)) {
    fs::create_directories(parent, ec);
    if (ec) {
      return invalid_argument(owner.flag + " " + owner.shown + ": cannot create the parent directory " +
                              parent.string() + " (" + ec.message() + "); choose a writable location");
    }
  }
  return Status::Ok();
}

Status replace_with_staged(const fs::path& staged, const fs::path& out,
                           const std::function<void(const fs::path&)>& remove_replaced) {
  std::error_code ec;
  fs::path aside;
  if (fs::exists(fs::symlink_status(out, ec))) {
    aside = out;
    aside += ".old-" + std::to_string(::getpid());
    if (fs::exists(fs::symlink_status(aside, ec))) {
      return io_error("cannot move the existing " + out.string() + " aside: " + aside.string() + " exists");
    }
    fs::rename(out, aside, ec);
    if (ec) return io_error("cannot move the existing " + out.string() + " aside: " + ec.message());
  }
  fs::rename(staged, out, ec);
  if (ec) {
    std::error_code ec2;
    if (!aside.empty()) fs::rename(aside, out, ec2);
    return io_error("cannot rename " + staged.string() + " to " + out.string() + ": " + ec.message());
  }
  if (!aside.empty()) remove_replaced(aside);  // best effort: the new outputs are already in place
  return Status::Ok();
}

Result<StagedDir> StagedDir::create(const fs::path& target, OutputOwnership owner) {
  sweep_stale_staging(target, ".partial-", /*folders=*/true);
  std::error_code ec;
  if (const fs::path parent = target.parent_path(); !parent.empty()) fs::create_directories(parent, ec);
  // The folder is created and registered under the staging lock: an interrupt's cleanup, which holds that lock until
  // the process exits, either sees it registered or runs before it exists and never lets it be created.
  auto hold = hold_staging();
  for (int n = 0; n < 100; ++n) {
    std::string suffix = ".partial-";  // (appends: GCC 12 warns -Wrestrict on "-" + std::string)
    suffix.append(std::to_string(::getpid()));
    if (n > 0) suffix.append("-").append(std::to_string(n));
    fs::path p = target;
    p += suffix;
    if (fs::create_directory(p, ec)) return StagedDir(target, p, std::move(owner));
    if (ec) {
      return invalid_argument(owner.flag + " " + owner.shown + " cannot be written: creating " + p.string() +
                              " failed (" + ec.message() + "); choose a writable location");
    }
  }
  return invalid_argument(owner.flag + " " + owner.shown + ": 100 staging directories " + target.string() +
                          ".partial-* already exist; remove the stale ones");
}

Status StagedDir::publish(bool overwrite) {
  auto hold = hold_staging();  // an interrupt waits until the outputs are in place
  VORTEX_RETURN_IF_ERROR(check_existing_target(target_, owner_, overwrite, /*during_run=*/true));
  const OutputOwnership& owner = owner_;
  VORTEX_RETURN_IF_ERROR(
      replace_with_staged(path_, target_, [&owner](const fs::path& aside) { remove_own_entries(aside, owner); }));
  guard_.release();
  return Status::Ok();
}

// ---- Output files ----

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
