// The one table of request and load options (RequestFlag): each declared once with its CLI flag, its id (the
// public API's and the JSON dialect's name), its Field, its help and its parser into a RequestSpec. `vortex
// generate`, `serve`, `bench` and `encode-text` register their flags from it (apps/vortex/request_flags_cli.h);
// the public API (include/vortex/vortex.h) sets options by id or flag through it. Messages name the field as a
// flag ("--steps", FieldStyle::kFlag) or by its id ("steps", kJson). Tested in tests/api/request_flags_test.cpp.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request.h"
#include "vortex/status.h"

namespace vortex::api {

// Where a flag's value goes: the options fixed at load, or one request.
enum class FlagScope : uint8_t { kLoad, kRun };
// How the CLI takes it: a value, a switch (present or not), or a value that may repeat (--lora).
enum class FlagKind : uint8_t { kValue, kSwitch, kRepeated };
// --preset: named sampler settings over the request's.
enum class Preset : uint8_t { kNone, kTurbo4 };

// What the table's parsers fill: the typed options and request, plus the few choices resolved later
// (resolve_generate in src/api/resolve.h: the model folder, the preset, the decoders a folder brings).
struct RequestSpec {
  PipelineOptions load;
  RunRequest run;
  std::string out_dir;
  bool overwrite = false;
  std::string model_dir;    // --model DIR
  std::string prompt_file;  // --prompt-file FILE (read by resolve_generate)
  int text_layer = -1;      // --text-layer K
  bool latents_only = false;
  Preset preset = Preset::kNone;
  std::optional<CudaGraphMode> cuda_graph;  // appended to the switches as cuda_graph=...
  bool random_seed = false;                 // --seed -1
  int gpus = 0;                             // --gpus N (the CLI's launcher), 0: one process
  double comm_timeout_seconds = 0.0;        // --comm-timeout S, 0: the default
  bool quiet = false;
  // The flags given (by their long name), so that exclusions and presets see what was asked, not defaults.
  std::set<std::string> given;
  bool has(std::string_view flag) const { return given.count(std::string(flag)) > 0; }
};

struct RequestFlag {
  const char* names;  // CLI11 names, the long one last: "-o,--out"
  const char* id;     // the public API's name: "out"
  Field field;        // kNone for switches no error names alone (--overwrite, --no-tiling)
  FlagScope scope;
  FlagKind kind;
  const char* type_name;  // "INT", "DIR"; "" for switches
  const char* help;
  // Parses `text` ("1" for a switch) into `spec`; messages name the field in `style`.
  Status (*parse)(std::string_view text, RequestSpec& spec, FieldStyle style);
  std::string flag() const;  // the long name: "--out"
};

// Every flag, in the order errors are checked (the CLI's historical order).
const std::vector<RequestFlag>& request_flags();
// The entry whose long flag ("--steps") or id ("steps") is `name`; nullptr when none.
const RequestFlag* find_request_flag(std::string_view name);
// The entry for `field`; nullptr when no flag has it.
const RequestFlag* find_request_flag(Field field);
// The public id of a field: its JSON name, else its flag without the dashes ("prompt_file"); "" for kNone.
std::string field_id(Field field);

// Parses `text` for `flag` into `spec` and records it as given.
Status apply_request_flag(const RequestFlag& flag, std::string_view text, RequestSpec& spec, FieldStyle style);

}  // namespace vortex::api
