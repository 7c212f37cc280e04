// io/publish.h, the one output policy of generate, decode, serve, synth and quantize: a staged folder is published
// into place only when the target is absent, empty or (with overwrite) holds nothing but the command's own files;
// foreign files are never deleted or overwritten; an interrupt or a failure removes only our own staging; a symbolic
// link at the target is refused and never followed; write_file_atomic refuses a link at its temporary name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "io/publish.h"
#include "test_files.h"

namespace vortex {
namespace {
namespace fs = std::filesystem;

// A fresh folder per test (tests/io/test_files.h) and the output folder the tests publish to in it.
class Publish : public ::testing::Test {
 protected:
  testing::TempDir dir_;
  fs::path root = dir_.path;
  fs::path out = root / "out";
};

void write(const fs::path& p, const std::string& text) { testing::write_file_bytes(p.string(), text); }
std::string read(const fs::path& p) { return testing::read_file_bytes(p.string()); }

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
  std::vector<std::string> n = testing::list_dir(dir.string());
  std::sort(n.begin(), n.end());
  return n;
}

// A staging folder for `out` holding a.out = `text`.
StagedDir staged_with(const fs::path& out, const OutputOwnership& owner, const std::string& text) {
  Result<StagedDir> staged = StagedDir::create(out, owner);
  EXPECT_TRUE(staged.ok()) << staged.status().message();
  write(staged->path() / "a.out", text);
  return std::move(staged).value();
}

TEST_F(Publish, StagedFolderAppearsAtAnAbsentTarget) {
  out = root / "nested" / "out";
  ASSERT_TRUE(check_publish_target(out, ownership("out"), false).ok());
  EXPECT_TRUE(fs::is_directory(out.parent_path()));  // the parent is made before any work
  StagedDir staged = staged_with(out, ownership("out"), "new");
  EXPECT_EQ(staged.path().parent_path(), out.parent_path());  // a sibling, never a child
  EXPECT_EQ(staged.path().filename().string(), "out.partial-" + std::to_string(::getpid()));
  ASSERT_TRUE(staged.publish(false).ok());
  EXPECT_EQ(read(out / "a.out"), "new");
  EXPECT_EQ(names(out.parent_path()), std::vector<std::string>{"out"});  // no staging, no aside left
}

TEST_F(Publish, ForeignFilesInAnExistingFolderAreRefusedAndKept) {
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
    StagedDir staged = staged_with(out, ownership("out"), "new");
    staging = staged.path();
    write(out / "notes.txt", "the user's, written during the run");
    EXPECT_FALSE(staged.publish(true).ok());
  }
  EXPECT_EQ(read(out / "a.out"), "old");
  EXPECT_EQ(read(out / "notes.txt"), "the user's, written during the run");
  EXPECT_FALSE(fs::exists(staging));
}

TEST_F(Publish, ReplacingDeletesOnlyOwnEntriesOfTheOldFolder) {
  fs::create_directories(out);
  write(out / "a.out", "old");
  write(out / "b.out", "old");
  // An owner that accepts the folder but owns only *.out: whatever else is there is kept, beside the new folder.
  OutputOwnership lenient = ownership("out");
  lenient.check_replaceable = [](const fs::path&) { return Status::Ok(); };
  write(out / "keep.txt", "foreign");
  StagedDir staged = staged_with(out, lenient, "new");
  ASSERT_TRUE(staged.publish(true).ok());
  EXPECT_EQ(names(out), std::vector<std::string>{"a.out"});
  EXPECT_EQ(read(out / "a.out"), "new");
  const fs::path aside = root / ("out.old-" + std::to_string(::getpid()));
  ASSERT_TRUE(fs::is_directory(aside));  // kept: it still holds the foreign file
  EXPECT_EQ(names(aside), std::vector<std::string>{"keep.txt"});
  EXPECT_EQ(read(aside / "keep.txt"), "foreign");
}

TEST_F(Publish, OverwriteIsRefusedWithoutTheFlagEvenForOwnFiles) {
  StagedDir staged = staged_with(out, ownership("out"), "new");
  fs::create_directories(out);  // another run of ours published meanwhile
  write(out / "a.out", "theirs");
  Status s2 = staged.publish(false);
  ASSERT_FALSE(s2.ok());
  EXPECT_NE(s2.message().find("was filled by something else during the run"), std::string::npos) << s2.message();
  EXPECT_EQ(read(out / "a.out"), "theirs");
}

TEST_F(Publish, InterruptOrFailureRemovesOnlyOurStaging) {
  fs::create_directories(out);
  write(out / "a.out", "previous");
  write(root / "out.txt", "a sibling file");
  const fs::path live_other = root / ("out.partial-" + std::to_string(::getppid()));  // a live process's staging
  fs::create_directories(live_other);
  // An interrupt: the handler removes the registered staging, nothing else.
  StagedDir staged = staged_with(out, ownership("out"), "half");
  const std::vector<fs::path> removed = remove_registered_staging();
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0], staged.path());
  EXPECT_FALSE(fs::exists(staged.path()));
  EXPECT_EQ(read(out / "a.out"), "previous");
  EXPECT_EQ(read(root / "out.txt"), "a sibling file");
  EXPECT_TRUE(fs::is_directory(live_other));
  // A failure: the staging goes when the StagedDir does.
  const fs::path second = staged_with(out, ownership("out"), "half").path();  // the temporary's staging goes with it
  EXPECT_FALSE(fs::exists(second));
  EXPECT_EQ(read(out / "a.out"), "previous");
  EXPECT_TRUE(fs::is_directory(live_other));
}

TEST_F(Publish, SymbolicLinkAtTheTargetIsRefusedNeverFollowed) {
  const fs::path victim = root / "victim";
  fs::create_directories(victim);
  write(victim / "a.out", "the user's");
  fs::create_directory_symlink(victim, out);
  for (bool overwrite : {false, true}) {
    Status refused = check_publish_target(out, ownership("out"), overwrite);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.message().find("symbolic link"), std::string::npos) << refused.message();
  }
  // A link planted while the command ran: publish refuses it too, and neither the link nor its target changes.
  fs::remove(out);
  StagedDir staged = staged_with(out, ownership("out"), "new");
  fs::create_directory_symlink(victim, out);
  Status refused = staged.publish(true);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("symbolic link"), std::string::npos) << refused.message();
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(out)));
  EXPECT_EQ(read(victim / "a.out"), "the user's");
}

TEST_F(Publish, TargetThatIsAFileOrACallersFolderIsRefused) {
  write(root / "file", "x");
  EXPECT_FALSE(check_publish_target(root / "file", ownership("file"), true).ok());
  EXPECT_EQ(read(root / "file"), "x");
  EXPECT_FALSE(check_publish_target(fs::path("/"), ownership("/"), true).ok());
  EXPECT_FALSE(check_publish_target(fs::current_path(), ownership("."), true).ok());
}

TEST_F(Publish, WriteFileAtomicRefusesALinkAtItsTemporaryName) {
  const fs::path victim = root / "victim.txt";
  write(victim, "not Vortex's");
  const fs::path file = root / "job.json";
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

TEST_F(Publish, StagingGuardMovesItsDuty) {
  const fs::path p = root / "scratch";
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
