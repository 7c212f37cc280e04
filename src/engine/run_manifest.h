// run.json helpers: SHA-256 of output files (OpenSSL EVP), UTC timestamp, host name, build info, and
// JSON views of the config and geometry. The schema is documented in docs/outputs.md; generate.cpp
// assembles the manifest. Tested through tests/cli/cli_test.cpp (run.json parses, sha256 values are
// recomputed independently and must match the files).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "dist/communicator.h"
#include "model/packing.h"
#include "vortex/config.h"
#include "vortex/status.h"

namespace vortex {

// Lower-case hex SHA-256 of a file's bytes.
Result<std::string> sha256_file(const std::string& path);
// Lower-case hex SHA-256 of a buffer.
std::string sha256_hex(const void* data, size_t bytes);
// This machine's host name ("unknown" when it cannot be read). Timestamps: profiling's utc_now_iso8601().
std::string host_name();
// {"version": "0.1.0", "git_commit": "abc123..."} from the generated vortex/build_info.h.
nlohmann::ordered_json build_info_json();
nlohmann::ordered_json model_config_json(const ModelConfig& cfg);
nlohmann::ordered_json geometry_json(const RequestGeometry& geo);
// run.json "world": {"world_size": U, "parallelism": "ulysses" | "none", "communicator": "nccl" | "in-process"
// | null}; `comm` is the model's communicator (nullptr: one device, no world; a world of 1 is still "ulysses").
nlohmann::ordered_json world_json(const Communicator* comm);
// Writes `j` pretty-printed (2 spaces) to `path`, flushed and closed; error names the file.
Status write_json_file(const nlohmann::ordered_json& j, const std::string& path);

}  // namespace vortex
