// io/publish.h, the one output policy of generate, decode, serve, synth and quantize: a staged folder is published
// into place only when the target is absent, empty or (with overwrite) holds nothing but the command's own files;
// foreign files are never deleted or overwritten; an interrupt or a failure removes only our own staging; a symbolic
// link at the target is refused and never followed; write_file_atomic refuses a link at its temporary name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include "io/publish.h"

namespace vortex {
namespace {
namespace fs = std::filesystem;

struct Scratch {
  Scratch() {
    path = fs::temp_directory_path() /
           ("vortex_publish_test_" + std::to_string(::getpid()) + "_" + std::to_string(std::random_device{}()));
    fs::create_directories(path);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path path;
};

void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// A command that writes "a.out" and "b.out" and nothing else.
OutputOwnership ownership(const std::string& shown) {
  OutputOwnership own;
  own.flag = "--out";
  own.shown = shown;
  own.previous = "a previous test run";
  own.is_own = [](const fs::directory_entry& e) { return e.path().extension() == ".out"; };
  own.check_replaceable = [shown, is_own = own.is_own](const fs::path& dir) -> Status {
    for (const fs::directory_entry& e : fs::directory_iterator(dir))
      if (!is_own(e)) return invalid_argument("--out " + shown + " holds '" + e.path().filename().string() + "'");
    return Status::Ok();
  };
  return own;
}

// Entries of `dir` (names), sorted.
std::vector<std::string> names(const fs::path& dir) {
  std::vector<std::string> n;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) n.push_back(e.path().filename().string());
  std::sort(n.begin(), n.end());
  return n;
}

TEST(Publish, StagedFolderAppearsAtAnAbsentTarget) {
  Scratch s;
  const fs::path out = s.path / "nested" / "out";
  ASSERT_TRUE(check_publish_target(out, ownership("out"), false).ok());
  EXPECT_TRUE(fs::is_directory(out.parent_path()));  // the parent is made before any work
  Result<StagedDir> staged = StagedDir::create(out, ownership("out"));
  ASSERT_TRUE(staged.ok()) << staged.status().message();
  EXPECT_EQ(staged->path().parent_path(), out.parent_path());  // a sibling, never a child
  EXPECT_EQ(staged->path().filename().string(), "out.partial-" + std::to_string(::getpid()));
  write(staged->path() / "a.out", "new");
  ASSERT_TRUE(staged->publish(false).ok());
  EXPECT_EQ(read(out / "a.out"), "new");
  EXPECT_EQ(names(out.parent_path()), std::vector<std::string>{"out"});  // no staging, no aside left
}

TEST(Publish, ForeignFilesInAnExistingFolderAreRefusedAndKept) {
  Scratch s;
  const fs::path out = s.path / "out";
  fs::create_directories(out);
  write(out / "a.out", "old");
  write(out / "notes.txt", "the user's");
  // Without --overwrite: refused whatever the folder holds; with it: refused for the foreign file.
  Status refused = check_publish_target(out, ownership("out"), false);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("pass --overwrite to replace a previous test run"), std::string::npos)
      << refused.message();
  refused = check_publish_target(out, ownership("out"), true);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("notes.txt"), std::string::npos) << refused.message();
  // A folder filled with a foreign file while the command ran is not replaced either; the staging goes.
  fs::remove(out / "notes.txt");
  ASSERT_TRUE(check_publish_target(out, ownership("out"), true).ok());
  fs::path staging;
  {
    Result<StagedDir> staged = StagedDir::create(out, ownership("out"));
    ASSERT_TRUE(staged.ok());
    staging = staged->path();
    write(staging / "a.out", "new");
    write(out / "notes.txt", "the user's, written during the run");
    EXPECT_FALSE(staged->publish(true).ok());
  }
  EXPECT_EQ(read(out / "a.out"), "old");
  EXPECT_EQ(read(out / "notes.txt"), "the user's, written during the run");
  EXPECT_FALSE(fs::exists(staging));
}

TEST(Publish, ReplacingDeletesOnlyOwnEntriesOfTheOldFolder) {
  Scratch s;
  const fs::path out = s.path / "out";
  fs::create_directories(out);
  write(out / "a.out", "old");
  write(out / "b.out", "old");
  // An owner that accepts the folder but owns only *.out: whatever else is there is kept, beside the new folder.
  OutputOwnership lenient = ownership("out");
  lenient.check_replaceable = [](const fs::path&) { return Status::Ok(); };
  write(out / "keep.txt", "foreign");
  Result<StagedDir> staged = StagedDir::create(out, lenient);
  ASSERT_TRUE(staged.ok());
  write(staged->path() / "a.out", "new");
  ASSERT_TRUE(staged->publish(true).ok()) << "publish";
  EXPECT_EQ(names(out), std::vector<std::string>{"a.out"});
  EXPECT_EQ(read(out / "a.out"), "new");
  const fs::path aside = s.path / ("out.old-" + std::to_string(::getpid()));
  ASSERT_TRUE(fs::is_directory(aside));  // kept: it still holds the foreign file
  EXPECT_EQ(names(aside), std::vector<std::string>{"keep.txt"});
  EXPECT_EQ(read(aside / "keep.txt"), "foreign");
}

TEST(Publish, OverwriteIsRefusedWithoutTheFlagEvenForOwnFiles) {
  Scratch s;
  const fs::path out = s.path / "out";
  Result<StagedDir> staged = StagedDir::create(out, ownership("out"));
  ASSERT_TRUE(staged.ok());
  write(staged->path() / "a.out", "new");
  fs::create_directories(out);  // another run of ours published meanwhile
  write(out / "a.out", "theirs");
  Status s2 = staged->publish(false);
  ASSERT_FALSE(s2.ok());
  EXPECT_NE(s2.message().find("was filled by something else during the run"), std::string::npos) << s2.message();
  EXPECT_EQ(read(out / "a.out"), "theirs");
}

TEST(Publish, InterruptOrFailureRemovesOnlyOurStaging) {
  Scratch s;
  const fs::path out = s.path / "out";
  fs::create_directories(out);
  write(out / "a.out", "previous");
  write(s.path / "out.txt", "a sibling file");
  const fs::path live_other = s.path / ("out.partial-" + std::to_string(::getppid()));  // a live process's staging
  fs::create_directories(live_other);
  // An interrupt: the handler removes the registered staging, nothing else.
  Result<StagedDir> staged = StagedDir::create(out, ownership("out"));
  ASSERT_TRUE(staged.ok());
  write(staged->path() / "a.out", "half");
  const std::vector<fs::path> removed = remove_registered_staging();
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0], staged->path());
  EXPECT_FALSE(fs::exists(staged->path()));
  EXPECT_EQ(read(out / "a.out"), "previous");
  EXPECT_EQ(read(s.path / "out.txt"), "a sibling file");
  EXPECT_TRUE(fs::is_directory(live_other));
  // A failure: the staging goes when the StagedDir does.
  fs::path second;
  {
    Result<StagedDir> again = StagedDir::create(out, ownership("out"));
    ASSERT_TRUE(again.ok());
    second = again->path();
    write(second / "a.out", "half");
  }
  EXPECT_FALSE(fs::exists(second));
  EXPECT_EQ(read(out / "a.out"), "previous");
  EXPECT_TRUE(fs::is_directory(live_other));
}

TEST(Publish, SymbolicLinkAtTheTargetIsRefusedNeverFollowed) {
  Scratch s;
  const fs::path victim = s.path / "victim";
  fs::create_directories(victim);
  write(victim / "a.out", "the user's");
  const fs::path out = s.path / "out";
  fs::create_directory_symlink(victim, out);
  for (bool overwrite : {false, true}) {
    Status refused = check_publish_target(out, ownership("out"), overwrite);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.message().find("symbolic link"), std::string::npos) << refused.message();
  }
  // A link planted while the command ran: publish refuses it too, and neither the link nor its target changes.
  fs::remove(out);
  Result<StagedDir> staged = StagedDir::create(out, ownership("out"));
  ASSERT_TRUE(staged.ok());
  write(staged->path() / "a.out", "new");
  fs::create_directory_symlink(victim, out);
  Status refused = staged->publish(true);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("symbolic link"), std::string::npos) << refused.message();
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(out)));
  EXPECT_EQ(read(victim / "a.out"), "the user's");
}

TEST(Publish, TargetThatIsAFileOrACallersFolderIsRefused) {
  Scratch s;
  write(s.path / "file", "x");
  EXPECT_FALSE(check_publish_target(s.path / "file", ownership("file"), true).ok());
  EXPECT_EQ(read(s.path / "file"), "x");
  EXPECT_FALSE(check_publish_target(fs::path("/"), ownership("/"), true).ok());
  EXPECT_FALSE(check_publish_target(fs::current_path(), ownership("."), true).ok());
}

TEST(Publish, WriteFileAtomicRefusesALinkAtItsTemporaryName) {
  Scratch s;
  const fs::path victim = s.path / "victim.txt";
  write(victim, "not Vortex's");
  const fs::path file = s.path / "job.json";
  fs::create_symlink(victim, atomic_temp_path(file.string()));
  Status refused = write_file_atomic(file.string(), "{}\n");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("symbolic link"), std::string::npos) << refused.message();
  EXPECT_EQ(read(victim), "not Vortex's");
  EXPECT_FALSE(fs::exists(file));
  // A link at the final name is replaced by the rename (the link itself, never its target).
  fs::remove(atomic_temp_path(file.string()));
  fs::create_symlink(victim, file);
  ASSERT_TRUE(write_file_atomic(file.string(), "{\"a\": 1}\n").ok());
  EXPECT_FALSE(fs::is_symlink(fs::symlink_status(file)));
  EXPECT_EQ(read(file), "{\"a\": 1}\n");
  EXPECT_EQ(read(victim), "not Vortex's");
  EXPECT_FALSE(fs::exists(atomic_temp_path(file.string())));
}

TEST(Publish, StagingGuardMovesItsDuty) {
  Scratch s;
  const fs::path p = s.path / "scratch";
  fs::create_directories(p);
  {
    StagingGuard a(p);
    StagingGuard b(std::move(a));  // a no longer removes anything
  }
  EXPECT_FALSE(fs::exists(p));
  fs::create_directories(p);
  {
    StagingGuard kept(p);
    kept.release();
  }
  EXPECT_TRUE(fs::exists(p));
}

}  // namespace
}  // namespace vortex
