// One policy for what a command writes (generate's run folder, decode's media folder and frames, serve's job files,
// synth and quantize checkpoints): stage, then publish atomically; never delete or overwrite what Vortex did not
// write; on failure or interrupt remove only our own staging. Folders: StagedDir stages `<target>.partial-<pid>`
// beside the target and publish() renames it into place, replacing an existing target only when its OutputOwnership
// says every entry is the command's own. Files: media/atomic_file.h (temp, fsync, rename; O_NOFOLLOW), and
// check_output_replaceable for a file that may exist already. The staging registry: io/staging.h.
// Tested in tests/io/publish_test.cpp, tests/cli/cli_test.cpp and tests/cli/cli_interrupt_test.cpp.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <utility>

#include "io/staging.h"
#include "media/atomic_file.h"
#include "vortex/status.h"

namespace vortex {

// ---- Output folders ----

// What a command writes into an output folder, so that a folder already at the target is replaced only when it
// holds nothing else, and only the command's own entries are ever deleted.
struct OutputOwnership {
  std::string flag;      // "--out", "--frames-dir": names the target in messages
  std::string shown;     // the target as the caller wrote it
  std::string previous;  // what --overwrite replaces: "a previous Vortex run", "a previous decode"
  // OK when the non-empty folder `dir` holds only this command's outputs; else kInvalidArgument saying why.
  std::function<Status(const std::filesystem::path& dir)> check_replaceable;
  // True for an entry of a replaced folder that this command wrote (a regular file, never a link).
  std::function<bool(const std::filesystem::directory_entry& entry)> is_own;
};

// Absolute, normalized, without a trailing separator ("out/" -> "/abs/out"), so that the staging folder
// "<out>.partial-<pid>" is a sibling of out, never a child.
std::filesystem::path normalized_output_path(const std::string& path);

// kInvalidArgument when `out` (as `flag shown` in the message) is `/`, $HOME, the current directory or one
// of its ancestors: output folders that every command refuses, whatever they hold.
Status check_output_location(const std::filesystem::path& out, const std::string& flag, const std::string& shown);

// The checks before any work: `target` (normalized_output_path) passes check_output_location, is not a symbolic
// link (refused, never followed), and is absent, an empty folder, or with `overwrite` a folder that
// `owner.check_replaceable` accepts. Creates the target's parent folders.
Status check_publish_target(const std::filesystem::path& target, const OutputOwnership& owner, bool overwrite);

// Puts the finished `staged` folder at `out`: an existing `out` (already checked by the caller) is moved
// aside, restored if the final rename fails, and handed to `remove_replaced` once the new one is in place.
Status replace_with_staged(const std::filesystem::path& staged, const std::filesystem::path& out,
                           const std::function<void(const std::filesystem::path&)>& remove_replaced);

// A command's staging folder for one output folder. create() makes the empty folder `<target>.partial-<pid>[-n]`
// beside `target` (never reusing an existing one) after removing the staging of `target` left by processes that are
// gone; it is registered, so an interrupt removes it (io/staging.h), and the destructor removes it unless it was
// published. Nothing else is ever removed.
class StagedDir {
 public:
  // kInvalidArgument naming owner.flag when the folder cannot be created (the target's folder is not writable).
  static Result<StagedDir> create(const std::filesystem::path& target, OutputOwnership owner);
  const std::filesystem::path& path() const { return path_; }
  const std::filesystem::path& target() const { return target_; }
  // Renames the staged folder into place under hold_staging() (an interrupt never cuts it in half). A target that
  // appeared meanwhile is checked again: a symbolic link is refused, a non-empty folder needs `overwrite` and
  // owner.check_replaceable. It is moved aside, restored if the rename fails, and once the new folder is in place
  // only its own entries (owner.is_own) are deleted, then the folder itself if that left it empty.
  Status publish(bool overwrite);

 private:
  StagedDir(std::filesystem::path target, std::filesystem::path path, OutputOwnership owner)
      : target_(std::move(target)), path_(std::move(path)), owner_(std::move(owner)), guard_(path_) {}
  std::filesystem::path target_;
  std::filesystem::path path_;
  OutputOwnership owner_;
  StagingGuard guard_;  // removes path_ unless published
};

// ---- Output files (synth, quantize) ----

// Key in the config.json that `vortex synth` writes beside a checkpoint (ModelConfig ignores it).
constexpr const char* kConfigWrittenByKey = "vortex.written_by";

enum class OutputKind { kSafetensors, kIndex, kConfigJson };

// True when `path` is a safetensors file whose __metadata__ carries "vortex.synthetic_seed" (synth) or
// "vortex.quantize" (quantize).
bool is_vortex_safetensors(const std::string& path);

// OK when `path` does not exist, or when `overwrite` is set and Vortex wrote it:
//   kSafetensors: is_vortex_safetensors;  kIndex: every shard it lists is;
//   kConfigJson: it holds kConfigWrittenByKey, or `vortex_sibling` (the checkpoint beside it that this
//   command replaces is Vortex's). Otherwise kInvalidArgument saying why.
Status check_output_replaceable(const std::string& path, OutputKind kind, bool overwrite, bool vortex_sibling = false);

// OK when the file system that will hold `path` (its nearest existing ancestor folder) has room for `bytes`
// plus a 1% margin; otherwise kInvalidArgument naming the size, the free space and the folder. `what` names the
// output ("--out h3.safetensors").
Status check_free_space(const std::string& path, uint64_t bytes, const std::string& what);

// "66.3 GB", "512.0 MB": sizes in messages.
std::string format_size(uint64_t bytes);

}  // namespace vortex
