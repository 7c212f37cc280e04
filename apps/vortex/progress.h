// One progress style for every command (generate, decode, synth, quantize): on a terminal a bar redrawn with \r,
// "[#####.....] step 3/12  1.92 step/s  eta 4.7 s"; otherwise one plain line per event, "step 3/12  520 ms/step
// eta 4.7 s"; the last event of a count says "done in 6.2 s". Times go through format_duration (ms under a second, one
// decimal under a minute, then "2m 05s" and "1h 02m"). Everything goes to stderr; --quiet silences all but warnings.
// Tested in tests/cli/cli_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/pipeline.h"

namespace vortex::cli {

// A duration for people: "840 ms", "4.7 s", "2m 05s", "1h 02m".
std::string format_duration(double seconds);

class StderrProgress : public ProgressSink {
 public:
  // `command` prefixes stage, note and warning lines ("vortex generate: ...").
  StderrProgress(std::string command, bool quiet);
  ~StderrProgress() override;

  void stage(std::string_view what) override;
  void note(std::string_view what) override;
  void warning(std::string_view what) override;  // printed even with --quiet
  void loading(std::string_view what, uint64_t bytes_done, uint64_t bytes_total, int layers_done, int layers_total,
               double seconds) override;
  void step(int done, int total, double step_seconds, double elapsed_seconds) override;
  void decode(std::string_view stage, int64_t done, int64_t total, double elapsed_seconds) override;
  // A plain progress line from a library callback (synth, quantize): printed as is, after closing a bar.
  void line(std::string_view text);

 private:
  // `label` "step" / "video tile" ..., `unit` of the rate ("step", "tile"): the bar (terminal) or the plain line
  // with rate and ETA.
  void counter(std::string_view label, std::string_view unit, int64_t done, int64_t total, double elapsed_seconds);
  void finish_bar();
  std::string command_;
  bool quiet_;
  bool tty_;
  bool bar_open_ = false;
};

}  // namespace vortex::cli
