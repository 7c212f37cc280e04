// `vortex serve` as a process (apps/vortex/cmd_serve.cpp): it prints its port (--port 0), serves a job,
// and on SIGTERM stops accepting and exits 0, finishing (default) or cancelling (--on-sigterm cancel) the
// running job, whose job.json records the outcome; the drain's hard exits (--drain-timeout, a second
// signal); the safe-default refusals and the argument errors (exit 2). Loopback only.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "cli/cli_test_util.h"

namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;
using vortex_cli_test::ScratchDir;

struct ServeProcess {
  pid_t pid = -1;
  int port = 0;
  FILE* out = nullptr;

  explicit ServeProcess(const std::vector<std::string>& args) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid = fork();
    if (pid == 0) {
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
      std::vector<std::string> argv_s = {vortex_cli_test::vortex_cli_path(), "serve"};
      argv_s.insert(argv_s.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (std::string& a : argv_s) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fds[1]);
    out = fdopen(fds[0], "r");
    char line[512];
    while (std::fgets(line, sizeof line, out) != nullptr) {
      const std::string s(line);
      const size_t at = s.find("listening on http://127.0.0.1:");
      if (at != std::string::npos) {
        port = std::stoi(s.substr(at + 30));
        break;
      }
    }
  }
  // Waits up to `timeout_s` for the exit; -1 if it did not exit (then it is killed).
  int wait_exit(double timeout_s) {
    const auto t0 = std::chrono::steady_clock::now();
    int status = 0;
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < timeout_s) {
      if (waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  ~ServeProcess() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    if (out) fclose(out);
  }
};

json wait_status(httplib::Client& c, const std::string& id, const std::string& until_step_or_state, int step) {
  const auto t0 = std::chrono::steady_clock::now();
  json j;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 60) {
    auto r = c.Get("/v1/videos/" + id);
    if (r && r->status == 200) {
      j = json::parse(r->body);
      if (j["status"] == until_step_or_state || j["step"].get<int>() >= step) return j;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return j;
}

json job_file(const fs::path& data, const std::string& id) {
  std::ifstream f(data / "jobs" / id / "job.json");
  return json::parse(f, nullptr, false);
}

void sigterm_case(bool cancel) {
  ScratchDir dir;
  const fs::path data = dir.path() / "data";
  std::vector<std::string> args = {"--synthetic", "--config", "h3-tiny", "--threads",   "2",
                                   "--port",      "0",        "--data",  data.string(), "--quiet"};
  if (cancel) args.insert(args.end(), {"--on-sigterm", "cancel"});
  ServeProcess p(args);
  ASSERT_GT(p.port, 0) << "no 'listening on' line";
  httplib::Client c("127.0.0.1", p.port);
  const int steps = cancel ? 1000 : 30;
  auto r = c.Post("/v1/videos",
                  json{{"prompt", "sigterm"}, {"width", 64}, {"height", 64}, {"frames", 5}, {"steps", steps}}.dump(),
                  "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  const std::string id = json::parse(r->body)["id"];
  wait_status(c, id, "succeeded", 1);
  ASSERT_EQ(kill(p.pid, SIGTERM), 0);
  EXPECT_EQ(p.wait_exit(60), 0);
  const json j = job_file(data, id);
  EXPECT_EQ(j["status"], cancel ? "cancelled" : "succeeded") << j.dump();
  EXPECT_FALSE(c.Get("/health"));
}

TEST(CliServe, SigtermFinishesTheRunningJobAndExitsZero) { sigterm_case(false); }
TEST(CliServe, SigtermWithOnSigtermCancelStopsTheRunningJob) { sigterm_case(true); }

// The drain is bounded: past --drain-timeout, or on a second signal, the process exits 1 at once (issue 26:
// two SIGTERMs and a SIGINT were ignored); the next start marks the interrupted job failed.
TEST(CliServe, TheDrainTimeoutAndASecondSignalEndTheProcess) {
  for (const bool second_signal : {false, true}) {
    ScratchDir dir;
    const fs::path data = dir.path() / "data";
    std::vector<std::string> args = {"--synthetic",
                                     "--config",
                                     "h3-tiny",
                                     "--threads",
                                     "2",
                                     "--port",
                                     "0",
                                     "--data",
                                     data.string(),
                                     "--quiet",
                                     "--drain-timeout",
                                     second_signal ? "30" : "1"};
    std::string id;
    {
      ServeProcess p(args);
      ASSERT_GT(p.port, 0);
      httplib::Client c("127.0.0.1", p.port);
      auto r = c.Post("/v1/videos",
                      json{{"prompt", "drain"}, {"width", 64}, {"height", 64}, {"frames", 5}, {"steps", 1000}}.dump(),
                      "application/json");
      ASSERT_TRUE(r && r->status == 201);
      id = json::parse(r->body)["id"];
      wait_status(c, id, "running", 1);
      const auto t0 = std::chrono::steady_clock::now();
      ASSERT_EQ(kill(p.pid, SIGTERM), 0);
      if (second_signal) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        ASSERT_EQ(kill(p.pid, SIGINT), 0);
      }
      EXPECT_EQ(p.wait_exit(10), 1);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_LT(s, second_signal ? 1.3 : 2.0) << "the drain bound is --drain-timeout + 1 s";
    }
    ServeProcess again(args);
    ASSERT_GT(again.port, 0);
    httplib::Client c("127.0.0.1", again.port);
    auto r = c.Get("/v1/videos/" + id);
    ASSERT_TRUE(r && r->status == 200);
    EXPECT_EQ(json::parse(r->body)["status"], "failed") << r->body;
    EXPECT_EQ(json::parse(r->body)["error"]["type"], "interrupted") << r->body;
  }
}

// Safe by default: an empty key is an error, and so is a non-loopback address without a key.
TEST(CliServe, AnEmptyKeyOrAnOpenAddressWithoutAKeyIsRefused) {
  ScratchDir dir;
  const std::string base = "serve --synthetic --port 0 --data " + dir.str("d");
  auto r = vortex_cli_test::run_vortex(base + " --api-key ''");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--api-key is empty"), std::string::npos) << r.output;
  r = vortex_cli_test::run_vortex(base + " --host 0.0.0.0");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--insecure-no-auth"), std::string::npos) << r.output;
}

TEST(CliServe, ArgumentErrors) {
  ScratchDir dir;
  auto r = vortex_cli_test::run_vortex("serve --data " + dir.str("d"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--model DIR, --checkpoint FILE|DIR or --synthetic"), std::string::npos) << r.output;
  r = vortex_cli_test::run_vortex("serve --synthetic");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--data is required"), std::string::npos) << r.output;
  r = vortex_cli_test::run_vortex("serve --synthetic --data " + dir.str("d") + " --on-sigterm later");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = vortex_cli_test::run_vortex("serve --model " + dir.str("missing") + " --data " + dir.str("d"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = vortex_cli_test::run_vortex("serve --synthetic --config h3-huge --data " + dir.str("d"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

// Several GPUs: what the multi-rank server cannot do is refused before any rank starts or any weight loads.
TEST(CliServe, GpusArgumentErrors) {
  ScratchDir dir;
  const std::string base = "serve --synthetic --port 0 --data " + dir.str("d");
  auto r = vortex_cli_test::run_vortex(base + " --gpus 2");  // --backend cpu (the default)
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--gpus needs --backend cuda"), std::string::npos) << r.output;
  r = vortex_cli_test::run_vortex(base + " --backend cuda --gpus 0");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--gpus must be an integer between 1 and 64"), std::string::npos) << r.output;
  // --lora-dir is served over several GPUs; a folder that does not exist is refused before any rank starts.
  r = vortex_cli_test::run_vortex(base + " --backend cuda --gpus 2 --lora-dir " + dir.str("adapters"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--lora-dir " + dir.str("adapters") + " is not a directory"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("starting 2 rank processes"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("not supported"), std::string::npos) << r.output;
  fs::create_directories(dir.path() / "adapters");
  r = vortex_cli_test::run_vortex(base + " --backend cuda --gpus 2 --precision fp8 --lora-dir " + dir.str("adapters"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--lora-dir applies adapters as run-time branches, which need --precision bf16"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("starting 2 rank processes"), std::string::npos) << r.output;
  r = vortex_cli_test::run_vortex(base + " --backend cuda --gpus 2 --comm-timeout -1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--comm-timeout expects seconds"), std::string::npos) << r.output;
  // One rank of a world (the launcher's or torchrun's environment) on the CPU backend.
  ::setenv("VORTEX_RANK", "1", 1);
  ::setenv("VORTEX_WORLD_SIZE", "2", 1);
  ::setenv("VORTEX_RENDEZVOUS", dir.str("rdv").c_str(), 1);
  r = vortex_cli_test::run_vortex(base);
  ::unsetenv("VORTEX_RANK");
  ::unsetenv("VORTEX_WORLD_SIZE");
  ::unsetenv("VORTEX_RENDEZVOUS");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("a rank environment (VORTEX_RANK / RANK) needs --backend cuda"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir.path() / "d" / "jobs")) << "nothing was served";
}

// A second `vortex serve` on a port the first one listens on exits 1 naming the port, and the first keeps serving.
TEST(CliServe, PortInUseExitsOneNamingThePort) {
  ScratchDir dir;
  ServeProcess first(
      {"--synthetic", "--config", "h3-tiny", "--threads", "1", "--port", "0", "--data", dir.str("a"), "--quiet"});
  ASSERT_GT(first.port, 0) << "no 'listening on' line";
  const std::string port = std::to_string(first.port);
  auto r = vortex_cli_test::run_vortex("serve --synthetic --config h3-tiny --threads 1 --port " + port + " --data " +
                                       dir.str("b") + " --quiet");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("port " + port + " is in use"), std::string::npos) << r.output;
  httplib::Client c("127.0.0.1", first.port);
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
}

}  // namespace
