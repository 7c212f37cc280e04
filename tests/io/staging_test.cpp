// io/staging.h: the staging-name parser, the sweep of dead processes' staging (only matching names whose pid is
// gone; never a live pid's, a foreign name, or the wrong kind of entry) and the registry an interrupt empties.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "io/staging.h"

namespace vortex {
namespace {
namespace fs = std::filesystem;

// A pid that belonged to a process which has exited and been reaped.
long dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

struct Scratch {
  Scratch() {
    path = fs::temp_directory_path() /
           ("vortex_staging_test_" + std::to_string(::getpid()) + "_" + std::to_string(std::random_device{}()));
    fs::create_directories(path);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path path;
};

void touch(const fs::path& p) { std::ofstream(p) << "x"; }

TEST(Staging, ParsesItsOwnNamesOnly) {
  EXPECT_EQ(staging_pid("out.partial-123", "out", ".partial-"), 123);
  EXPECT_EQ(staging_pid("out.partial-123-4", "out", ".partial-"), 123);
  EXPECT_EQ(staging_pid("out.partial-", "out", ".partial-"), 0);
  EXPECT_EQ(staging_pid("out.partial-12x", "out", ".partial-"), 0);
  EXPECT_EQ(staging_pid("out.partial-12-", "out", ".partial-"), 0);
  EXPECT_EQ(staging_pid("other.partial-12", "out", ".partial-"), 0);
  EXPECT_EQ(staging_pid("out2.partial-12", "out", ".partial-"), 0);
  EXPECT_EQ(staging_pid("w.safetensors.tmp.77", "w.safetensors", ".tmp."), 77);
  EXPECT_EQ(staging_pid("out.partial-0", "out", ".partial-"), 0);
}

TEST(Staging, SweepRemovesOnlyDeadProcessesStaging) {
  Scratch s;
  const long dead = dead_pid();
  ASSERT_TRUE(process_is_gone(dead));
  ASSERT_FALSE(process_is_gone(::getppid()));
  const fs::path out = s.path / "out";
  const fs::path stale = s.path / ("out.partial-" + std::to_string(dead));
  const fs::path stale2 = s.path / ("out.partial-" + std::to_string(dead) + "-2");
  const fs::path live = s.path / ("out.partial-" + std::to_string(::getppid()));
  const fs::path foreign = s.path / "out.partial-notapid";
  const fs::path other_target = s.path / ("other.partial-" + std::to_string(dead));
  const fs::path file_not_folder = s.path / ("out.partial-" + std::to_string(dead_pid()));
  for (const fs::path& d : {stale, stale2, live, foreign, other_target}) {
    fs::create_directories(d / "sub");
    touch(d / "sub" / "video_latents.safetensors");
  }
  touch(file_not_folder);
  const auto removed = sweep_stale_staging(out, ".partial-", /*folders=*/true);
  EXPECT_EQ(removed.size(), 2u);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(fs::exists(stale2));
  EXPECT_TRUE(fs::exists(live / "sub" / "video_latents.safetensors"));
  EXPECT_TRUE(fs::exists(foreign / "sub" / "video_latents.safetensors"));
  EXPECT_TRUE(fs::exists(other_target / "sub" / "video_latents.safetensors"));
  EXPECT_TRUE(fs::exists(file_not_folder)) << "a folder sweep leaves files alone";

  // Files: `<file>.tmp.<pid>` of a writer that is gone.
  const fs::path ck = s.path / "w.safetensors";
  const fs::path tmp_dead = s.path / ("w.safetensors.tmp." + std::to_string(dead));
  const fs::path tmp_live = s.path / ("w.safetensors.tmp." + std::to_string(::getppid()));
  touch(tmp_dead);
  touch(tmp_live);
  EXPECT_EQ(sweep_stale_staging(ck, ".tmp.", /*folders=*/false).size(), 1u);
  EXPECT_FALSE(fs::exists(tmp_dead));
  EXPECT_TRUE(fs::exists(tmp_live));
}

TEST(Staging, RegistryRemovesRegisteredPathsAndGuardsRelease) {
  Scratch s;
  const fs::path a = s.path / "a.partial-1";
  const fs::path b = s.path / "b.tmp.1";
  fs::create_directories(a / "x");
  touch(a / "x" / "f");
  touch(b);
  register_staging(a);
  register_staging(b);
  const auto removed = remove_registered_staging();
  EXPECT_EQ(removed.size(), 2u);
  EXPECT_FALSE(fs::exists(a));
  EXPECT_FALSE(fs::exists(b));
  EXPECT_TRUE(remove_registered_staging().empty()) << "the registry is emptied";

  const fs::path kept = s.path / "kept";
  fs::create_directories(kept);
  {
    StagingGuard g(kept);
    g.release();
  }
  EXPECT_TRUE(fs::exists(kept)) << "released: renamed into place by its owner";
  EXPECT_TRUE(remove_registered_staging().empty()) << "released paths leave the registry";
  { StagingGuard g(kept); }
  EXPECT_FALSE(fs::exists(kept)) << "not released: removed on scope exit";
}

}  // namespace
}  // namespace vortex
