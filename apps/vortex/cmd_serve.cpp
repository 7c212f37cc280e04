// `vortex serve`: the CLI front end of serve/server.h. Loads the model once, serves the /v1/videos job API
// (docs/serve.md) until SIGTERM or SIGINT, then stops accepting, cancels the queue, finishes or cancels
// the running job (--on-sigterm) and exits 0. The signals are blocked in every thread and taken by
// sigwait here, so no handler runs inside library code. With --gpus N (or a rank environment, as
// `vortex generate` takes) it is one pipeline over N GPUs (docs/multi_gpu.md "vortex serve with N GPUs"):
// the launcher starts N ranks and forwards SIGINT/SIGTERM to rank 0, rank 0 serves, the others follow
// (serve/world.h); when the world fails rank 0 exits 1 and the launcher stops the rest. Tested in
// tests/cli/cli_serve_test.cpp and, with threads as ranks, tests/serve/serve_world_test.cpp.
#include <signal.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "commands.h"
#include "engine/generate.h"
#include "engine/model_folder.h"
#include "rank_options.h"
#include "request_flags_cli.h"
#include "serve/server.h"

namespace vortex::cli {
namespace {

// Serve's own flags; the weights, backend, precision, decoders, --lora-dir, --gpus and --comm-timeout come from the
// option table (`flags`, request_flags_cli.h).
struct ServeArgs {
  FlagValues flags;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string data;
  int queue = 16;
  int keep_jobs = 100;
  std::string api_key;
  std::string on_sigterm = "finish";
  std::string input_dir;  // fl2va keyframes requests may name as file:// URIs (docs/serve.md)
  bool allow_fault_injection = false;
  double memory_limit_gb = 0.0;
  int max_upload_mb = 64;
  int http_threads = 16;
  int max_connections = 512;
  std::string allowed_hosts;  // comma-separated
  bool insecure_no_auth = false;
  double drain_timeout = 30.0;
  serve::CostLimits cost;  // --max-job-seconds, --max-frames, --max-pixels, --max-text-rows
};

int fail(int code, const std::string& message) {
  std::fprintf(stderr, "vortex serve: error: %s\n", message.c_str());
  return code;
}

int run_serve(const ServeArgs& a, CLI::App& sub, int device) {
  api::RequestSpec spec;
  if (Status s = parse_given_flags(sub, a.flags, spec); !s.ok()) return fail(2, s.message());
  const std::string& model = spec.model_dir;
  const bool synthetic = spec.load.synthetic_weights;
  const bool quiet = spec.quiet;
  const int sources = (model.empty() ? 0 : 1) + (spec.load.checkpoint_path.empty() ? 0 : 1) + (synthetic ? 1 : 0);
  if (sources != 1) return fail(2, "give the weights one way: --model DIR, --checkpoint FILE|DIR or --synthetic");
  if (!model.empty() && !std::filesystem::is_directory(model)) {
    return fail(2, "--model " + model + " is not a directory (a single file goes to --checkpoint)");
  }
  if (sub.count("--config") > 0 && !synthetic) {
    return fail(2, "--config names the synthetic model's config: a checkpoint brings its own");
  }
  if (a.on_sigterm != "finish" && a.on_sigterm != "cancel") {
    return fail(2, "--on-sigterm must be finish or cancel, got '" + a.on_sigterm + "'");
  }
  if (a.max_upload_mb < 1) return fail(2, "--max-upload-mb must be >= 1");
  if (a.memory_limit_gb < 0.0) return fail(2, "--memory-limit-gb must be positive");
  if (sub.count("--api-key") > 0 && a.api_key.empty()) {
    return fail(2, "--api-key is empty: give a key, or leave the option out (loopback only without one)");
  }
  if (const char* env = std::getenv("VORTEX_API_KEY"); env != nullptr && *env == '\0' && a.api_key.empty()) {
    return fail(2, "VORTEX_API_KEY is set but empty: give a key, or unset it");
  }
  if (!(a.drain_timeout > 0.0)) return fail(2, "--drain-timeout must be positive (seconds)");
  if (a.cost.max_job_seconds < 0 || a.cost.max_frames < 1 || a.cost.max_pixels < 1 || a.cost.max_text_rows < 1) {
    return fail(2, "--max-job-seconds must be >= 0 (0: no limit); --max-frames, --max-pixels, --max-text-rows >= 1");
  }

  // ---- several GPUs: the launcher (--gpus N) or one rank of a world (VORTEX_RANK / RANK) ----
  Result<std::optional<RankEnv>> rank_env = rank_env_from_environment();
  if (!rank_env.ok()) return fail(2, rank_env.status().message());
  CommOptions comm;
  if (spec.comm_timeout_seconds > 0.0)
    comm.timeout = std::chrono::milliseconds(static_cast<int64_t>(spec.comm_timeout_seconds * 1000.0));
  const bool launcher = spec.gpus > 0 && !rank_env->has_value();
  if (launcher || rank_env->has_value()) {
    const int n = launcher ? spec.gpus : 1;
    if (spec.load.backend != BackendKind::kCuda) {
      return fail(2, std::string(launcher ? "--gpus" : "a rank environment (VORTEX_RANK / RANK)") +
                         " needs --backend cuda (one rank process per GPU, over NCCL)");
    }
    if (launcher) {
      // Every rank gets this command line, so the same --lora-dir: a wrong one is refused once, here.
      if (Status s = validate_lora_dir_options(spec.load); !s.ok()) return fail(exit_code_for(s), s.message());
      if (a.data.empty()) return fail(2, "--data is required: the directory job outputs go to");
      if (!quiet) std::fprintf(stderr, "vortex serve: starting %d rank processes, one per GPU\n", n);
      LaunchOptions lo;
      lo.argv = rank_command_line();
      lo.world = n;
      lo.forward_signals_to_rank0 = true;  // rank 0 stops the followers with its stop message
      Result<LaunchResult> launched = launch_ranks(lo);
      if (!launched.ok()) return fail(exit_code_for(launched.status()), launched.status().message());
      return launched->exit_code;
    }
    if (std::string e = select_local_rank_device(**rank_env); !e.empty()) return fail(2, e);
  }

  serve::ServeOptions o;
  o.pipeline = spec.load;  // the table's load options: weights, backend, precision, decoders, --lora-dir
  if (!model.empty()) o.pipeline.checkpoint_path = model;
  o.pipeline.device = device;
  // The official snapshot (engine/model_folder.h): its transformer, and its text encoder for real prompts.
  if (!model.empty() && is_model_folder(model)) {
    Result<ModelFolder> folder = open_model_folder(model);
    if (!folder.ok()) return fail(exit_code_for(folder.status()), folder.status().message());
    // A Ref2VA partition serves reference jobs (ref2va); the root and the FL2VA partition serve t2va and fl2va.
    const std::string task = folder->partition == "ref2va" ? "ref2va" : "t2va";
    if (Status s = apply_model_folder(*folder, -1, o.pipeline, task); !s.ok())
      return fail(exit_code_for(s), s.message());
  }
  o.host = a.host;
  o.port = a.port;
  o.data_dir = a.data;
  if (std::error_code ec;
      !a.data.empty() && std::filesystem::exists(a.data, ec) && !std::filesystem::is_directory(a.data, ec))
    return fail(2, "--data " + a.data + " is not a directory: job outputs go into a folder");
  o.queue_limit = a.queue;
  o.keep_jobs = a.keep_jobs;
  o.api_key = a.api_key;
  if (o.api_key.empty()) {
    if (const char* env = std::getenv("VORTEX_API_KEY"); env != nullptr) o.api_key = env;
  }
  o.limits.allow_fault_injection = a.allow_fault_injection;
  o.limits.input_dir = a.input_dir;
  o.max_upload_bytes = static_cast<size_t>(a.max_upload_mb) << 20;
  if (a.memory_limit_gb > 0.0) o.memory_limit_bytes = static_cast<uint64_t>(a.memory_limit_gb * 1e9);
  o.http_threads = a.http_threads;
  o.max_connections = a.max_connections;
  o.cost = a.cost;
  o.insecure_no_auth = a.insecure_no_auth;
  for (size_t at = 0; at < a.allowed_hosts.size();) {
    const size_t comma = std::min(a.allowed_hosts.find(',', at), a.allowed_hosts.size());
    std::string h = a.allowed_hosts.substr(at, comma - at);
    for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (!h.empty()) o.allowed_hosts.push_back(h);
    at = comma + 1;
  }
  if (!quiet) o.log = [](const std::string& line) { std::fprintf(stderr, "vortex serve: %s\n", line.c_str()); };
  if (rank_env->has_value()) {
    const RankEnv e = **rank_env;
    o.join = [e, comm](Backend& backend) { return join_world(e, comm, backend); };
    // A heartbeat well inside the timeout: an idle follower's wait never expires.
    o.heartbeat = std::min<std::chrono::milliseconds>(std::chrono::seconds(10), comm.timeout / 4);
    if (e.rank != 0) {
      // Ctrl-C reaches every rank of the terminal's process group: a follower waits for rank 0's stop
      // message instead (SIGTERM, the launcher's way of stopping it, still ends it).
      ::signal(SIGINT, SIG_IGN);
      serve::FollowerOptions fo;
      fo.pipeline = o.pipeline;
      fo.join = o.join;
      fo.log = o.log;
      Status st = serve::run_serve_follower(fo);
      if (!st.ok()) return fail(exit_code_for(st), st.message());
      return 0;
    }
  }

  // Blocked before any thread starts, so every thread inherits the mask and only sigwait sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  if (o.join) {
    // A failed world wakes the sigwait below, as a signal would.
    o.on_world_failure = [](const Status&) { ::kill(::getpid(), SIGTERM); };
  }
  Result<std::unique_ptr<serve::Server>> server = serve::Server::start(o);
  if (!server.ok()) return fail(exit_code_for(server.status()), server.status().message());
  std::printf("vortex serve: listening on http://%s:%d\n", o.host.c_str(), (*server)->port());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  if (!quiet) {
    std::fprintf(stderr, "vortex serve: %s: draining (%s the running job, at most %g s)\n",
                 sig == SIGTERM ? "SIGTERM" : "SIGINT", a.on_sigterm == "finish" ? "finishing" : "cancelling",
                 a.drain_timeout);
  }
  // The drain runs on its own thread; this one exits hard when it overruns --drain-timeout or when a
  // second SIGTERM/SIGINT arrives (an interrupted job is marked failed at the next start).
  std::atomic<bool> drained{false};
  serve::Server* srv = server->get();
  std::thread drain([&] {
    srv->shutdown(a.on_sigterm == "finish" ? serve::RunningJob::kFinish : serve::RunningJob::kCancel);
    drained = true;
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(a.drain_timeout);
  while (!drained) {
    const timespec tick{0, 50'000'000};
    const int again = sigtimedwait(&signals, nullptr, &tick);
    const bool late = std::chrono::steady_clock::now() >= deadline;
    if (again > 0 || late) {
      std::fprintf(stderr, "vortex serve: %s: exiting without finishing the drain\n",
                   late ? "the drain timeout passed" : "a second signal");
      std::fflush(stderr);
      std::_Exit(1);
    }
  }
  drain.join();
  if (Status world = (*server)->world_status(); !world.ok()) return fail(1, world.message());
  std::printf("vortex serve: stopped\n");
  return 0;
}

}  // namespace

void register_serve(CLI::App& app, CommandContext& ctx) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* sub = app.add_subcommand("serve", "HTTP job API (/v1/videos) over one resident model (docs/serve.md)");
  add_request_flags(
      sub, a->flags,
      {{"--config", "Built-in config of --synthetic: h3-tiny | h3 (default h3-tiny)"},
       {"--model",
        "Model folder: the MiniMax-H3 snapshot (prompts encoded by its text encoder) or a transformer folder"},
       {"--checkpoint", "Weights: a .safetensors file, an index, or a folder"},
       {"--synthetic", "Deterministic synthetic weights for --config; prompts map to synthetic text rows"},
       {"--weights-seed"},
       {"--backend"},
       {"--threads", "CPU threads, 0 = all cores"},
       {"--precision", "bf16 | fp8 | nvfp4 | nvfp4-weight-only, fixed at load (default bf16)"}});
  sub->add_option("--host", a->host, "Address to listen on (default 127.0.0.1)")->type_name("ADDR");
  sub->add_option("--port", a->port, "Port (default 8000; 0 = any free port, printed at start)")->type_name("INT");
  sub->add_option("--data", a->data, "Directory for job outputs (required)")->type_name("DIR");
  add_request_flags(sub, a->flags, {{"--lora-dir"}});
  sub->add_option("--queue", a->queue, "Queued jobs before 429 (default 16)")->type_name("INT");
  sub->add_option("--keep-jobs", a->keep_jobs, "Finished jobs kept, older ones deleted (default 100)")
      ->type_name("INT");
  sub->add_option("--api-key", a->api_key, "Require 'Authorization: Bearer KEY' (or set VORTEX_API_KEY)")
      ->type_name("KEY");
  sub->add_option("--on-sigterm", a->on_sigterm, "finish | cancel the running job on SIGTERM (default finish)")
      ->type_name("MODE");
  sub->add_option("--input-dir", a->input_dir,
                  "fl2va keyframes requests may name as file:// URIs under this folder (default: none; data URLs "
                  "are always accepted)")
      ->type_name("DIR");
  sub->add_flag("--allow-fault-injection", a->allow_fault_injection,
                "Accept the fail_alloc_after request field (tests)");
  sub->add_option("--memory-limit-gb", a->memory_limit_gb,
                  "Admit only requests estimated below this (default: free memory)")
      ->type_name("GB");
  sub->add_option("--max-upload-mb", a->max_upload_mb, "Largest text_embeddings upload (default 64)")->type_name("MB");
  sub->add_option("--http-threads", a->http_threads,
                  "Request handler threads (default 16; streams and slow clients hold none)")
      ->type_name("INT");
  sub->add_option("--max-connections", a->max_connections, "Open connections; beyond: 503 (default 512)")
      ->type_name("INT");
  sub->add_option("--allowed-hosts", a->allowed_hosts,
                  "Host/Origin names answered, comma-separated; '*' any (default: --host, localhost, 127.0.0.1, ::1)")
      ->type_name("H,H");
  sub->add_flag("--insecure-no-auth", a->insecure_no_auth,
                "Allow a non-loopback --host without --api-key (anyone who reaches the port can submit jobs)");
  sub->add_option("--max-job-seconds", a->cost.max_job_seconds,
                  "Refuse requests estimated above this, stop jobs running past it (default 3600; 0: none)")
      ->type_name("S");
  sub->add_option("--max-frames", a->cost.max_frames, "Largest frames a request may ask (default 257)")->type_name("N");
  sub->add_option("--max-pixels", a->cost.max_pixels, "Largest width x height (default 2088960 = 1920x1088)")
      ->type_name("N");
  sub->add_option("--max-text-rows", a->cost.max_text_rows, "Most text rows, a prompt's or an upload's (default 4096)")
      ->type_name("N");
  sub->add_option("--drain-timeout", a->drain_timeout,
                  "Seconds a SIGTERM/SIGINT drain may take before a hard exit (default 30)")
      ->type_name("S");
  add_request_flags(
      sub, a->flags,
      {{"--vae"},
       {"--audio-vae"},
       {"--synthetic-vae"},
       {"--vae-seed"},
       {"--no-tiling"},
       {"--crf"},
       {"--video-encoder"},
       {"--x264-preset"},
       {"--gpus",
        "N GPUs as one pipeline: one rank process per GPU, Ulysses sequence parallelism over NCCL; rank 0 serves HTTP "
        "and writes outputs, latents identical to one GPU (--backend cuda; docs/multi_gpu.md)"},
       {"--comm-timeout", "Seconds one collective may wait for the other ranks before the world fails (default 300)"},
       {"--quiet", "No log lines on stderr"}});
  sub->callback([a, sub, &ctx]() { ctx.exit_code = run_serve(*a, *sub, ctx.device); });
}

}  // namespace vortex::cli
