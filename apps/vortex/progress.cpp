// The CLI's progress printer (see progress.h).
#include "progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <utility>

namespace vortex::cli {

std::string format_duration(double seconds) {
  char buf[32];
  if (!std::isfinite(seconds) || seconds < 0) seconds = 0;
  if (seconds < 1.0) {
    std::snprintf(buf, sizeof(buf), "%.0f ms", seconds * 1e3);
  } else if (seconds < 59.95) {
    std::snprintf(buf, sizeof(buf), "%.1f s", seconds);
  } else if (seconds < 3600.0) {
    const long s = std::lround(seconds);
    std::snprintf(buf, sizeof(buf), "%ldm %02lds", s / 60, s % 60);
  } else {
    const long m = std::lround(seconds / 60.0);
    std::snprintf(buf, sizeof(buf), "%ldh %02ldm", m / 60, m % 60);
  }
  return buf;
}

StderrProgress::StderrProgress(std::string command, bool quiet)
    : command_(std::move(command)), quiet_(quiet), tty_(::isatty(::fileno(stderr)) == 1) {}

StderrProgress::~StderrProgress() { finish_bar(); }

void StderrProgress::stage(std::string_view what) {
  if (quiet_) return;
  finish_bar();
  std::fprintf(stderr, "vortex %s: %.*s\n", command_.c_str(), static_cast<int>(what.size()), what.data());
}

void StderrProgress::note(std::string_view what) {
  if (quiet_) return;
  finish_bar();
  std::fprintf(stderr, "vortex %s: note: %.*s\n", command_.c_str(), static_cast<int>(what.size()), what.data());
}

void StderrProgress::warning(std::string_view what) {
  finish_bar();
  std::fprintf(stderr, "vortex %s: warning: %.*s\n", command_.c_str(), static_cast<int>(what.size()), what.data());
}

void StderrProgress::line(std::string_view text) {
  if (quiet_) return;
  finish_bar();
  std::fprintf(stderr, "%.*s\n", static_cast<int>(text.size()), text.data());
}

// Weight loading: a redrawn "layers, GB, GB/s, eta" line on a terminal; off a terminal only the stage lines.
void StderrProgress::loading(std::string_view what, uint64_t bytes_done, uint64_t bytes_total, int layers_done,
                             int layers_total, double seconds) {
  if (quiet_ || !tty_) return;
  const double gb = 1e-9;
  const double rate = seconds > 0 ? static_cast<double>(bytes_done) / seconds : 0.0;  // bytes per second so far
  const double eta = rate > 0 ? static_cast<double>(bytes_total - bytes_done) / rate : 0.0;
  std::fprintf(stderr, "\r%.*s: layer %d/%d  %.2f/%.2f GB  %.2f GB/s  eta %s   ", static_cast<int>(what.size()),
               what.data(), layers_done, layers_total, bytes_done * gb, bytes_total * gb, rate * gb,
               format_duration(eta).c_str());
  bar_open_ = layers_done < layers_total;
  if (!bar_open_) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

void StderrProgress::counter(std::string_view label, std::string_view unit, int64_t done, int64_t total,
                             double elapsed_seconds) {
  if (quiet_) return;
  const double per = done > 0 ? elapsed_seconds / static_cast<double>(done) : 0.0;
  const double eta = per * static_cast<double>(total - done);
  const std::string l(label), u(unit);
  // The last event says how long it all took instead of an ETA of nothing.
  const std::string tail =
      done >= total ? "done in " + format_duration(elapsed_seconds) : "eta " + format_duration(eta);
  if (tty_) {
    constexpr int kBarWidth = 30;
    const int filled = total > 0 ? static_cast<int>(done * kBarWidth / total) : 0;
    std::string bar(static_cast<size_t>(filled), '#');
    bar.append(static_cast<size_t>(kBarWidth - filled), '.');
    char rate[48];
    if (per > 0 && per < 1.0) {
      std::snprintf(rate, sizeof(rate), "%.2f %s/s", 1.0 / per, u.c_str());
    } else {
      std::snprintf(rate, sizeof(rate), "%s/%s", format_duration(per).c_str(), u.c_str());
    }
    std::fprintf(stderr, "\r[%s] %s %lld/%lld  %s  %s   ", bar.c_str(), l.c_str(), static_cast<long long>(done),
                 static_cast<long long>(total), rate, tail.c_str());
    bar_open_ = done < total;
    if (!bar_open_) std::fprintf(stderr, "\n");
  } else {
    std::fprintf(stderr, "%s %lld/%lld  %s/%s  %s\n", l.c_str(), static_cast<long long>(done),
                 static_cast<long long>(total), format_duration(per).c_str(), u.c_str(), tail.c_str());
  }
  std::fflush(stderr);
}

void StderrProgress::step(int done, int total, double step_seconds, double elapsed_seconds) {
  (void)step_seconds;  // the rate is the mean over the run so far, as the ETA is
  counter("step", "step", done, total, elapsed_seconds);
}

void StderrProgress::decode(std::string_view stage, int64_t done, int64_t total, double elapsed_seconds) {
  const bool video = stage == "video";
  counter(video ? "video tile" : "audio channel", video ? "tile" : "channel", done, total, elapsed_seconds);
}

void StderrProgress::finish_bar() {
  if (bar_open_) std::fprintf(stderr, "\n");
  bar_open_ = false;
}

}  // namespace vortex::cli
