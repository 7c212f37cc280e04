// launch_ranks with /bin/sh children: every rank gets its VORTEX_RANK / VORTEX_WORLD_SIZE /
// VORTEX_RENDEZVOUS / CUDA_VISIBLE_DEVICES; a rank that exits non-zero, dies by a signal or hangs fails
// the world with a message naming it and the other ranks are stopped (no orphan keeps running); the
// rank environment parser refuses inconsistent settings; with forward_signals_to_rank0 SIGTERM and SIGINT reach
// rank 0 alone.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "dist/launcher.h"

namespace vortex {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir() {
  std::random_device rd;
  fs::path p = fs::temp_directory_path() / ("vortex_launch_" + std::to_string(::getpid()) + "_" + std::to_string(rd()));
  fs::create_directories(p);
  return p;
}

LaunchOptions sh(const std::string& script, int world) {
  LaunchOptions o;
  o.argv = {"/bin/sh", "-c", script};
  o.world = world;
  o.grace = std::chrono::milliseconds(500);
  return o;
}

TEST(Launcher, EveryRankGetsItsEnvironment) {
  const fs::path dir = fresh_dir();
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  auto r = launch_ranks(
      sh("echo \"$VORTEX_RANK $VORTEX_WORLD_SIZE $CUDA_VISIBLE_DEVICES $LOCAL_RANK $VORTEX_RENDEZVOUS\" > " +
             dir.string() + "/rank$VORTEX_RANK",
         3));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->exit_code, 0);
  for (int i = 0; i < 3; ++i) {
    std::ifstream in(dir / ("rank" + std::to_string(i)));
    int rank = -1, world = -1, dev = -1, local = -1;
    std::string rdv;
    in >> rank >> world >> dev >> local >> rdv;
    EXPECT_EQ(rank, i);
    EXPECT_EQ(world, 3);
    EXPECT_EQ(dev, i);
    EXPECT_EQ(local, 0);
    EXPECT_NE(rdv.find("nccl_unique_id"), std::string::npos) << rdv;
  }
  fs::remove_all(dir);
}

TEST(Launcher, AFailingCrashingOrHungRankFailsTheWorldAndStopsTheOthers) {
  const fs::path dir = fresh_dir();
  // Rank 1 exits 3 after a moment while the others would run for a minute.
  auto exited = launch_ranks(sh("if [ $VORTEX_RANK = 1 ]; then sleep 0.2; exit 3; fi; exec sleep 60", 3));
  ASSERT_FALSE(exited.ok());
  EXPECT_NE(exited.status().message().find("rank 1 of 3 exited with code 3"), std::string::npos)
      << exited.status().message();
  const auto t0 = std::chrono::steady_clock::now();
  auto killed = launch_ranks(sh("if [ $VORTEX_RANK = 2 ]; then sleep 0.2; kill -9 $$; fi; exec sleep 60", 3));
  ASSERT_FALSE(killed.ok());
  EXPECT_NE(killed.status().message().find("rank 2 of 3 was killed by signal 9"), std::string::npos)
      << killed.status().message();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20.0)
      << "the sleeping ranks must have been stopped";
  LaunchOptions hung = sh("if [ $VORTEX_RANK = 0 ]; then exit 0; fi; exec sleep 60", 2);
  hung.deadline = std::chrono::milliseconds(500);
  auto h = launch_ranks(hung);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("rank(s) 1 still running"), std::string::npos) << h.status().message();
  fs::remove_all(dir);
}

TEST(Launcher, RankEnvironmentIsCheckedWhole) {
  ::unsetenv("VORTEX_RANK"), ::unsetenv("VORTEX_WORLD_SIZE"), ::unsetenv("RANK"), ::unsetenv("WORLD_SIZE");
  ::unsetenv("VORTEX_RENDEZVOUS"), ::unsetenv("LOCAL_RANK");
  auto none = rank_env_from_environment();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  ::setenv("RANK", "3", 1);
  ::setenv("WORLD_SIZE", "2", 1);
  auto outside = rank_env_from_environment();
  EXPECT_FALSE(outside.ok());
  ::setenv("RANK", "1", 1);
  auto no_rdv = rank_env_from_environment();
  ASSERT_FALSE(no_rdv.ok());
  EXPECT_NE(no_rdv.status().message().find("VORTEX_RENDEZVOUS"), std::string::npos);
  ::setenv("VORTEX_RENDEZVOUS", "rendezvous.json", 1);  // parsed, never opened here
  ::setenv("LOCAL_RANK", "1", 1);
  auto ok = rank_env_from_environment();
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  ASSERT_TRUE(ok->has_value());
  EXPECT_EQ((*ok)->rank, 1);
  EXPECT_EQ((*ok)->world, 2);
  EXPECT_EQ((*ok)->local_rank, 1);
  ::unsetenv("RANK"), ::unsetenv("WORLD_SIZE"), ::unsetenv("VORTEX_RENDEZVOUS"), ::unsetenv("LOCAL_RANK");
}

// `vortex serve --gpus N`: SIGTERM or SIGINT sent to the launcher reaches rank 0 alone (which then stops the
// others through its own stop message, here a file), and the launcher itself survives it and exits 0.
TEST(Launcher, ForwardsSigtermAndSigintToRankZeroOnly) {
  for (const char* sig : {"TERM", "INT"}) {
    const fs::path dir = fresh_dir();
    const std::string d = dir.string();
    LaunchOptions o =
        sh(std::string("if [ \"$VORTEX_RANK\" = 0 ]; then trap 'echo got > ") + d + "/rank0; exit 0' " + sig +
               "; while :; do sleep 0.02; done; fi; " + "if [ \"$VORTEX_RANK\" = 1 ]; then sleep 0.3; kill -" + sig +
               " $PPID; fi; " + "i=0; while [ ! -f " + d +
               "/rank0 ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i+1)); done; " + "[ -f " + d +
               "/rank0 ] && echo stopped > " + d + "/rank$VORTEX_RANK",
           3);
    o.forward_signals_to_rank0 = true;
    o.deadline = std::chrono::seconds(20);
    auto r = launch_ranks(o);
    ASSERT_TRUE(r.ok()) << sig << ": " << r.status().to_string();
    EXPECT_EQ(r->exit_code, 0) << sig;
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(fs::exists(dir / ("rank" + std::to_string(i)))) << sig << " rank " << i;
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace vortex
