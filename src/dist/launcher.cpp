// The rank launcher and the rank environment (see launcher.h). POSIX: fork + execv, waitpid polling.
#include "dist/launcher.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

namespace vortex {
namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

Result<int> env_int(const char* name, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(value.c_str(), &end, 10);
  if (end == value.c_str() || *end != '\0' || errno != 0 || v < 0 || v > 1 << 20)
    return invalid_argument(std::string(name) + "=" + value + " is not a rank number");
  return static_cast<int>(v);
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  return "stopped (status " + std::to_string(status) + ")";
}

}  // namespace

Result<std::optional<RankEnv>> rank_env_from_environment() {
  auto rank_s = env("VORTEX_RANK") ? env("VORTEX_RANK") : env("RANK");
  auto world_s = env("VORTEX_WORLD_SIZE") ? env("VORTEX_WORLD_SIZE") : env("WORLD_SIZE");
  if (!rank_s && !world_s) return std::optional<RankEnv>();
  if (!rank_s || !world_s)
    return invalid_argument("a rank environment needs both VORTEX_RANK and VORTEX_WORLD_SIZE (or RANK and WORLD_SIZE)");
  RankEnv e;
  VORTEX_ASSIGN_OR_RETURN(e.rank, env_int("RANK", *rank_s));
  VORTEX_ASSIGN_OR_RETURN(e.world, env_int("WORLD_SIZE", *world_s));
  if (e.world < 1 || e.rank >= e.world)
    return invalid_argument("rank " + std::to_string(e.rank) + " is outside a world of " + std::to_string(e.world));
  e.local_rank = e.rank;
  if (auto lr = env("LOCAL_RANK")) {
    VORTEX_ASSIGN_OR_RETURN(e.local_rank, env_int("LOCAL_RANK", *lr));
  }
  auto rdv = env("VORTEX_RENDEZVOUS");
  if (!rdv)
    return invalid_argument(
        "VORTEX_RENDEZVOUS is not set: every rank needs the path of the file through which rank 0 "
        "publishes the NCCL unique id (a fresh path on a file system all ranks see)");
  e.rendezvous = *rdv;
  return std::optional<RankEnv>(e);
}

Result<LaunchResult> launch_ranks(const LaunchOptions& o) {
  if (o.world < 1) return invalid_argument("--gpus must be >= 1, got " + std::to_string(o.world));
  if (o.argv.empty()) return invalid_argument("launch_ranks: empty command");
  std::string dir = o.rendezvous_dir;
  bool own_dir = false;
  if (dir.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "vortex-ranks-XXXXXX").string();
    if (!::mkdtemp(tmpl.data()))
      return io_error(std::string("cannot create the rendezvous folder: ") + std::strerror(errno));
    dir = tmpl;
    own_dir = true;
  }
  const std::string rendezvous = dir + "/nccl_unique_id";
  std::vector<std::string> devices;
  if (auto visible = env("CUDA_VISIBLE_DEVICES")) devices = split_list(*visible);
  if (!devices.empty() && static_cast<int>(devices.size()) < o.world)
    return invalid_argument("--gpus " + std::to_string(o.world) + " but CUDA_VISIBLE_DEVICES lists only " +
                            std::to_string(devices.size()) + " devices");

  std::vector<pid_t> pids(static_cast<size_t>(o.world), -1);
  auto stop_all = [&](int except) {
    for (int r = 0; r < o.world; ++r)
      if (r != except && pids[static_cast<size_t>(r)] > 0) ::kill(pids[static_cast<size_t>(r)], SIGTERM);
    const auto until = std::chrono::steady_clock::now() + o.grace;
    for (int r = 0; r < o.world; ++r) {
      pid_t& p = pids[static_cast<size_t>(r)];
      if (r == except || p <= 0) continue;
      int st = 0;
      while (::waitpid(p, &st, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > until) {
          ::kill(p, SIGKILL);
          ::waitpid(p, &st, 0);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      p = -1;
    }
  };
  auto cleanup = [&] {
    std::error_code ec;
    if (own_dir) std::filesystem::remove_all(dir, ec);
  };

  sigset_t forwarded, old_mask;
  sigemptyset(&forwarded);
  sigaddset(&forwarded, SIGINT);
  sigaddset(&forwarded, SIGTERM);
  if (o.forward_signals_to_rank0) ::pthread_sigmask(SIG_BLOCK, &forwarded, &old_mask);
  struct RestoreMask {
    bool on;
    sigset_t mask;
    ~RestoreMask() {
      if (on) ::pthread_sigmask(SIG_SETMASK, &mask, nullptr);
    }
  } restore{o.forward_signals_to_rank0, old_mask};
  for (int r = 0; r < o.world; ++r) {
    pid_t pid = ::fork();
    if (pid < 0) {
      const std::string why = std::strerror(errno);
      stop_all(-1);
      cleanup();
      return io_error("cannot start rank " + std::to_string(r) + ": fork failed: " + why);
    }
    if (pid == 0) {
      if (o.forward_signals_to_rank0) ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
      ::setenv("VORTEX_RANK", std::to_string(r).c_str(), 1);
      ::setenv("VORTEX_WORLD_SIZE", std::to_string(o.world).c_str(), 1);
      ::setenv("LOCAL_RANK", "0", 1);  // each rank sees exactly one device, its own
      ::setenv("VORTEX_RENDEZVOUS", rendezvous.c_str(), 1);
      ::setenv("CUDA_VISIBLE_DEVICES",
               devices.empty() ? std::to_string(r).c_str() : devices[static_cast<size_t>(r)].c_str(), 1);
      std::vector<char*> args;
      for (const std::string& a : o.argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      std::fprintf(stderr, "vortex: rank %d: cannot run %s: %s\n", r, args[0], std::strerror(errno));
      ::_exit(127);
    }
    pids[static_cast<size_t>(r)] = pid;
  }

  const auto start = std::chrono::steady_clock::now();
  int remaining = o.world;
  LaunchResult result;
  while (remaining > 0) {
    if (o.forward_signals_to_rank0) {
      const timespec now = {0, 0};
      const int sig = ::sigtimedwait(&forwarded, nullptr, &now);
      if (sig > 0 && pids[0] > 0) ::kill(pids[0], sig);
    }
    for (int r = 0; r < o.world; ++r) {
      pid_t& p = pids[static_cast<size_t>(r)];
      if (p <= 0) continue;
      int st = 0;
      pid_t got = ::waitpid(p, &st, WNOHANG);
      if (got == 0) continue;
      p = -1;
      --remaining;
      const bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
      if (!ok) {
        stop_all(r);
        cleanup();
        const int code = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
        return Status(code == 2 ? ErrorCode::kInvalidArgument : ErrorCode::kNccl,
                      "rank " + std::to_string(r) + " of " + std::to_string(o.world) + " " + describe_exit(st) +
                          "; the other ranks were stopped");
      }
    }
    if (o.deadline.count() > 0 && std::chrono::steady_clock::now() - start > o.deadline) {
      std::ostringstream hung;
      for (int r = 0; r < o.world; ++r)
        if (pids[static_cast<size_t>(r)] > 0) hung << (hung.tellp() > 0 ? ", " : "") << r;
      stop_all(-1);
      cleanup();
      return Status(ErrorCode::kNccl, "rank(s) " + hung.str() + " still running after " +
                                          std::to_string(o.deadline.count() / 1000.0) + " s; all ranks were stopped");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  cleanup();
  return result;
}

}  // namespace vortex
