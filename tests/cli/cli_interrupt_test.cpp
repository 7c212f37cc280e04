// Interrupts of real runs (apps/vortex/interrupt.h): SIGINT, SIGTERM and SIGPIPE during generate, decode, synth
// and quantize end the process with 128 + the signal (130, 143, 141) and "interrupted" on stderr, and leave none
// of its staging behind (`<out>.partial-<pid>`, `<file>.tmp.<pid>`); a later run sweeps the staging of processes
// that are gone and nothing else. Decode, synth and quantize write their staging only briefly, so those runs are
// signalled the moment their staging appears (retried until one is caught mid-write).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "cli_test_util.h"

namespace vortex_cli_test {
namespace {

using Clock = std::chrono::steady_clock;

// Starts `vortex ARGS...` with stdout and stderr in `log`.
pid_t spawn(const std::vector<std::string>& args, const fs::path& log) {
  const std::string bin = vortex_cli_path();
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(bin.c_str()));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

// The exit code, or 1000 + the signal when the process was killed by one (no handler ran).
int wait_code(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
}

bool exited(pid_t pid, int& code) {
  int status = 0;
  if (::waitpid(pid, &status, WNOHANG) != pid) return false;
  code = WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
  return true;
}

// Entries of `dir` that are Vortex staging: "*.partial-<n>..." folders or "*.tmp.<n>" files.
std::vector<std::string> staging_in(const fs::path& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.find(".partial-") != std::string::npos || n.find(".tmp.") != std::string::npos) found.push_back(n);
  }
  return found;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += x + " ";
  return s;
}

const char* signal_word(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGPIPE"; }

// Runs `args` in `dir` until a staging entry appears (polled every millisecond), then sends `sig`. Returns true
// when the signal landed while the staging existed; `code` and `log_text` describe the end of the run.
bool interrupt_mid_write(const std::vector<std::string>& args, const fs::path& dir, int sig, int& code,
                         std::string& log_text) {
  const fs::path log = dir / "log.txt";
  const pid_t pid = spawn(args, log);
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  bool sent = false;
  while (Clock::now() < deadline) {
    if (exited(pid, code)) break;
    if (!staging_in(dir).empty()) {
      ::kill(pid, sig);
      sent = true;
      code = wait_code(pid);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!sent && Clock::now() >= deadline) {
    ::kill(pid, SIGKILL);
    code = wait_code(pid);
  }
  log_text = read_file(log);
  return sent && code == 128 + sig;
}

const std::vector<std::string> kLongGenerate = {"generate", "--config",  "h3-tiny", "--synthetic", "--steps",
                                                "400",      "--threads", "1",       "--backend",   "cpu"};

TEST(CliInterrupt, GenerateRemovesItsStagingOnSigintSigtermSigpipe) {
  for (int sig : {SIGINT, SIGTERM, SIGPIPE}) {
    ScratchDir tmp;
    std::vector<std::string> args = kLongGenerate;
    args.insert(args.end(), {"-o", tmp.str("out")});
    const pid_t pid = spawn(args, tmp.path() / "log.txt");
    // Wait for the staging folder, then for sampling to be under way.
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    int code = -1;
    while (staging_in(tmp.path()).empty() && Clock::now() < deadline && !exited(pid, code))
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_EQ(code, -1) << read_file(tmp.path() / "log.txt");
    ASSERT_FALSE(staging_in(tmp.path()).empty()) << "no staging folder appeared";
    const auto sampling = Clock::now() + std::chrono::seconds(60);
    while (read_file(tmp.path() / "log.txt").find("step 1/") == std::string::npos && Clock::now() < sampling)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ::kill(pid, sig);
    code = wait_code(pid);
    const std::string log = read_file(tmp.path() / "log.txt");
    EXPECT_EQ(code, 128 + sig) << signal_word(sig) << "\n" << log;
    EXPECT_NE(log.find(std::string("vortex generate: interrupted (") + signal_word(sig) + ")"), std::string::npos)
        << log;
    EXPECT_NE(log.find("removed the unfinished " + tmp.str("out") + ".partial-" + std::to_string(pid)),
              std::string::npos)
        << log;
    EXPECT_TRUE(staging_in(tmp.path()).empty()) << joined(staging_in(tmp.path()));
    EXPECT_FALSE(fs::exists(tmp.path() / "out"));
  }
}

TEST(CliInterrupt, GenerateIntoAClosedPipeEndsWith141AndNoStaging) {
  ScratchDir tmp;
  std::string cmd = "bash -c \"'" + vortex_cli_path() + "'";
  for (const std::string& a : kLongGenerate) cmd += " " + a;
  cmd += " -o " + tmp.str("out") + " 2>&1 | head -c 1 >/dev/null; echo rc=\\${PIPESTATUS[0]}\"";
  RunResult r = run_shell(cmd);
  EXPECT_NE(r.output.find("rc=141"), std::string::npos) << r.output;
  EXPECT_TRUE(staging_in(tmp.path()).empty()) << joined(staging_in(tmp.path()));
  EXPECT_FALSE(fs::exists(tmp.path() / "out"));
}

TEST(CliInterrupt, DecodeSynthAndQuantizeRemoveTheirStaging) {
  ScratchDir tmp;
  RunResult g = run_vortex("generate --config h3-tiny --synthetic --steps 1 --frames 39 --quiet -o " + tmp.str("gen"));
  ASSERT_EQ(g.exit_code, 0) << g.output;
  RunResult ck = run_vortex("synth --config h3-tiny --quiet -o " + tmp.str("ck/w.safetensors"));
  ASSERT_EQ(ck.exit_code, 0) << ck.output;
  struct Command {
    const char* name;
    std::vector<std::string> args;  // "{W}" is the work folder
    int sig;
  };
  const std::vector<Command> commands = {
      {"decode",
       {"decode", tmp.str("gen"), "--synthetic-vae", "tiny", "--threads", "1", "-o", "{W}/dec", "--frames-dir",
        "{W}/frames"},
       SIGINT},
      {"synth", {"synth", "--config", "h3-tiny", "-o", "{W}/s.safetensors"}, SIGTERM},
      {"quantize",
       {"quantize", "--format", "fp8_scaled", "--threads", "1", "--in", tmp.str("ck/w.safetensors"), "-o",
        "{W}/q.safetensors"},
       SIGINT},
  };
  for (const Command& c : commands) {
    bool caught = false;
    for (int attempt = 0; attempt < 30 && !caught; ++attempt) {
      const fs::path work = tmp.path() / (std::string(c.name) + std::to_string(attempt));
      fs::create_directories(work);
      std::vector<std::string> args = c.args;
      for (std::string& a : args)
        if (a.rfind("{W}", 0) == 0) a = work.string() + a.substr(3);
      int code = -1;
      std::string log;
      caught = interrupt_mid_write(args, work, c.sig, code, log);
      // Caught or not (the run may finish before its staging is seen), nothing of the staging is left.
      EXPECT_TRUE(staging_in(work).empty()) << c.name << ": " << joined(staging_in(work)) << "\n" << log;
      if (caught) {
        EXPECT_NE(log.find(std::string("vortex ") + c.name + ": interrupted (" + signal_word(c.sig) + ")"),
                  std::string::npos)
            << log;
        EXPECT_NE(log.find("removed the unfinished"), std::string::npos) << log;
      } else {
        EXPECT_TRUE(code == 0 || code == 128 + c.sig) << c.name << " exit " << code << "\n" << log;
      }
    }
    EXPECT_TRUE(caught) << c.name << ": no run was interrupted while its staging existed";
  }
}

TEST(CliInterrupt, ALaterRunSweepsOnlyStagingOfProcessesThatAreGone) {
  ScratchDir tmp;
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  wait_code(child);  // `child` is now the pid of a process that is gone
  const fs::path dead = tmp.path() / ("out.partial-" + std::to_string(child));
  const fs::path alive = tmp.path() / "out.partial-1";  // init: alive
  const fs::path foreign = tmp.path() / "out.partial-mine";
  const fs::path other = tmp.path() / ("other.partial-" + std::to_string(child));
  for (const fs::path& d : {dead, alive, foreign, other}) {
    fs::create_directories(d);
    std::ofstream(d / "video_latents.safetensors") << "x";
  }
  RunResult r = run_vortex("generate --config h3-tiny --synthetic --steps 1 --quiet -o " + tmp.str("out"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(dead)) << "a dead process's staging of the same --out is swept";
  EXPECT_TRUE(fs::exists(alive / "video_latents.safetensors"));
  EXPECT_TRUE(fs::exists(foreign / "video_latents.safetensors"));
  EXPECT_TRUE(fs::exists(other / "video_latents.safetensors"));
  EXPECT_TRUE(fs::exists(tmp.path() / "out" / "run.json"));
}

}  // namespace
}  // namespace vortex_cli_test
