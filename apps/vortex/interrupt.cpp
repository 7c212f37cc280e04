// Interrupt cleanup of the writing commands (see interrupt.h).
#include "interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "io/staging.h"

namespace vortex::cli {
namespace {

int g_pipe[2] = {-1, -1};
std::atomic<int> g_signal{0};
std::string g_command;

void on_signal(int sig) {
  int expected = 0;
  g_signal.compare_exchange_strong(expected, sig);
  const char c = static_cast<char>(sig);
  const int saved = errno;
  [[maybe_unused]] const ssize_t n = ::write(g_pipe[1], &c, 1);  // async-signal-safe; the watcher does the rest
  errno = saved;
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGPIPE:
      return "SIGPIPE";
    default:
      return "signal";
  }
}

[[noreturn]] void watch() {
  char c = 0;
  while (::read(g_pipe[0], &c, 1) != 1) {
  }
  const int sig = g_signal.load() != 0 ? g_signal.load() : static_cast<int>(c);
  // Held until _exit: no staging can be created or registered after the cleanup (io/publish.cpp creates under it).
  auto hold = hold_staging();
  const auto removed = remove_registered_staging();
  std::string message = "vortex " + g_command + ": interrupted (" + signal_name(sig) + ")";
  if (!removed.empty()) {
    message += "; removed the unfinished ";
    for (size_t i = 0; i < removed.size(); ++i) message += (i ? ", " : "") + removed[i].string();
  }
  message += "\n";
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, message.data(), message.size());
  ::_exit(128 + sig);
}

}  // namespace

void install_interrupt_cleanup(const char* command) {
  if (g_pipe[0] >= 0) return;
  if (::pipe(g_pipe) != 0) return;  // without the pipe the default actions stay (the sweep still cleans up later)
  g_command = command;
  struct sigaction sa = {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM, SIGPIPE}) ::sigaction(sig, &sa, nullptr);
  std::thread(watch).detach();
}

bool interrupted() { return g_signal.load() != 0; }

void await_interrupt_exit() {
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

}  // namespace vortex::cli
