// BackgroundLoad (see load_overlap.h): a loader thread that publishes the transformer's weights group by group, the
// host weights another thread places beside it, and the waits of the model's thread on both; the decision whether a
// one-shot generate overlaps its load at all.
#include "engine/load_overlap.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <utility>

#include "io/checkpoint.h"
#include "model/h3_spec.h"

namespace vortex {

namespace {
using Clock = std::chrono::steady_clock;
constexpr auto kReportEvery = std::chrono::milliseconds(250);
}  // namespace

void copy_weight_group(int group, const H3Weights& from, H3Weights& to) {
  const int num_layers = static_cast<int>(from.blocks.size());
  if (group < 0) {
    std::vector<H3BlockWeights> blocks = std::move(to.blocks);
    Tensor fn = to.final_layer_norm_weight, fw = to.final_layer_adaln_proj_linear_weight,
           fb = to.final_layer_adaln_proj_linear_bias, vw = to.final_layer_video_out_weight,
           vb = to.final_layer_video_out_bias, aw = to.final_layer_audio_out_weight, ab = to.final_layer_audio_out_bias;
    std::shared_ptr<const LoraBranch> fl = to.final_layer_adaln_proj_lora;
    to = from;  // every field before the blocks (and, overwritten below, the rest)
    to.blocks = std::move(blocks);
    to.final_layer_norm_weight = fn;
    to.final_layer_adaln_proj_linear_weight = fw;
    to.final_layer_adaln_proj_linear_bias = fb;
    to.final_layer_adaln_proj_lora = fl;
    to.final_layer_video_out_weight = vw;
    to.final_layer_video_out_bias = vb;
    to.final_layer_audio_out_weight = aw;
    to.final_layer_audio_out_bias = ab;
  } else if (group < num_layers) {
    if (to.blocks.size() < from.blocks.size()) to.blocks.resize(from.blocks.size());
    to.blocks[static_cast<size_t>(group)] = from.blocks[static_cast<size_t>(group)];
  } else {
    to.final_layer_norm_weight = from.final_layer_norm_weight;
    to.final_layer_adaln_proj_linear_weight = from.final_layer_adaln_proj_linear_weight;
    to.final_layer_adaln_proj_linear_bias = from.final_layer_adaln_proj_linear_bias;
    to.final_layer_adaln_proj_lora = from.final_layer_adaln_proj_lora;
    to.final_layer_video_out_weight = from.final_layer_video_out_weight;
    to.final_layer_video_out_bias = from.final_layer_video_out_bias;
    to.final_layer_audio_out_weight = from.final_layer_audio_out_weight;
    to.final_layer_audio_out_bias = from.final_layer_audio_out_bias;
  }
}

int weight_group_of(const std::string& name, int num_layers) {
  if (name.rfind("blocks.", 0) == 0) return std::atoi(name.c_str() + 7);
  return name.rfind("final_layer.", 0) == 0 ? num_layers : -1;
}

namespace {
bool is_block_adaln_projection(const std::string& name) {
  static constexpr std::string_view kSuffix = ".adaln_proj.linear.weight";
  return name.rfind("blocks.", 0) == 0 && name.size() > kSuffix.size() &&
         name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}
}  // namespace

bool adaln_projections_beside_load(const PipelineOptions& o, const ResidencyPlan& residency) {
  const bool host =
      o.adaln_weights_on_host() || (o.backend == BackendKind::kCpu && o.adaln_weights == AdalnPlacement::kHost);
  return host && o.loras.empty() && !residency.adaln_from_disk;
}

std::string load_overlap_refusal(const PipelineOptions& o, const ModelConfig& cfg, const ResidencyPlan& residency,
                                 bool switch_on, bool ranks) {
  if (!switch_on) return "--switches load_overlap=0";
  if (ranks) return "with ranks every rank loads before the world samples";
  if (o.synthetic_weights || o.checkpoint_path.empty()) return "synthetic weights are made in one pass";
  if (!o.loras.empty()) return "load-time --lora adapters merge into the loaded weights";
  if (o.precision != Precision::kBf16)
    return std::string("--precision ") + precision_name(o.precision) + " converts the weights after they load";
  if (residency.resident_blocks < residency.num_blocks) return "blocks stream (their weights move after the load)";
  if (residency.adaln_from_disk || residency.blocks_from_disk) return "weights stream from disk";
  if (o.backend != BackendKind::kCpu && o.device != 0) return "the loader thread runs on device 0 only";
  if (adaln_projections_beside_load(o, residency)) {
    // Read into host memory beside the load: each must be stored as the model reads it.
    Result<std::map<std::string, FileExtent>> extents =
        checkpoint_extents(o.checkpoint_path, cfg, is_block_adaln_projection);
    if (!extents.ok())
      return "the AdaLN projections bound for host memory cannot be read as stored (" + extents.status().message() +
             "); they load with the rest and move after (--adaln-weights device overlaps)";
  }
  return "";
}

Result<bool> take_load_overlap_switch(std::string& switches) {
  bool on = true;
  std::string rest;
  size_t begin = 0;
  while (begin <= switches.size()) {
    size_t end = switches.find(',', begin);
    if (end == std::string::npos) end = switches.size();
    const std::string item = switches.substr(begin, end - begin);
    if (item.rfind("load_overlap=", 0) == 0) {
      const std::string v = item.substr(13);
      if (v == "0" || v == "off") on = false;
      else if (v == "1" || v == "on") on = true;
      else return invalid_argument("switch load_overlap takes 0 or 1, got '" + v + "'");
    } else if (!item.empty()) {
      rest += (rest.empty() ? "" : ",") + item;
    }
    begin = end + 1;
  }
  switches = rest;
  return on;
}

BackgroundLoad::BackgroundLoad(Options options) : options_(std::move(options)), t_start_(Clock::now()) {}

std::shared_ptr<BackgroundLoad> BackgroundLoad::start(Options options, Body body) {
  std::shared_ptr<BackgroundLoad> load(new BackgroundLoad(std::move(options)));
  load->published_.blocks.resize(static_cast<size_t>(load->options_.num_layers));
  for (const std::string& name : load->options_.host_weights)
    ++load->host_expected_[weight_group_of(name, load->options_.num_layers)];
  load->thread_ = std::thread([raw = load.get(), body = std::move(body)]() mutable { raw->run(std::move(body)); });
  return load;
}

BackgroundLoad::~BackgroundLoad() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
}

void BackgroundLoad::run(Body body) {
  Result<H3Weights> out = body(*this);
  if (out.ok()) publish(options_.num_layers, *out);  // whatever was not published on the way
  std::lock_guard<std::mutex> lock(mu_);
  if (!out.ok() && status_.ok()) status_ = out.status();  // the first error stays (a fill may have failed first)
  done_ = true;
  seconds_ = std::chrono::duration<double>(Clock::now() - t_start_).count();
  cv_.notify_all();
}

void BackgroundLoad::publish(int group, const H3Weights& placed) {
  for (int g = -1; g <= group && g <= options_.num_layers; ++g) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (g <= published_up_to_) continue;
    }
    if (options_.before_publish) options_.before_publish(g);
    std::lock_guard<std::mutex> lock(mu_);
    copy_weight_group(g, placed, published_);
    if (host_expected_.count(g) != 0) {  // their slots hold the loader's placeholders: left empty until they arrive
      for (auto& [name, t] : h3_tensor_slots(published_))
        if (weight_group_of(name, options_.num_layers) == g &&
            std::find(options_.host_weights.begin(), options_.host_weights.end(), name) != options_.host_weights.end())
          *t = Tensor();
    }
    published_up_to_ = g;
    progress_.groups = g + 2;
    if (g == options_.num_layers) seconds_ = std::chrono::duration<double>(Clock::now() - t_start_).count();
    cv_.notify_all();
  }
}

void BackgroundLoad::report(uint64_t done, uint64_t total) {
  std::lock_guard<std::mutex> lock(mu_);
  progress_.done = done;
  progress_.total = total;
  progress_.seconds = std::chrono::duration<double>(Clock::now() - t_start_).count();
}

void BackgroundLoad::note(std::string line) {
  std::lock_guard<std::mutex> lock(mu_);
  notes_.push_back(std::move(line));
}

void BackgroundLoad::place_host(const std::string& name, Tensor host) {
  if (options_.before_place_host) options_.before_place_host(name);
  std::lock_guard<std::mutex> lock(mu_);
  if (host_in_.count(name) != 0) return;
  auto it = host_expected_.find(weight_group_of(name, options_.num_layers));
  if (it == host_expected_.end() ||
      std::find(options_.host_weights.begin(), options_.host_weights.end(), name) == options_.host_weights.end())
    return;  // not a host weight of this load
  host_in_.emplace(name, std::move(host));
  --it->second;
  cv_.notify_all();
}

void BackgroundLoad::fail(const Status& error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (status_.ok()) status_ = error;
  cv_.notify_all();
}

bool BackgroundLoad::host_ready(int group) const {
  auto it = host_expected_.find(group);
  return it == host_expected_.end() || it->second <= 0;
}

void BackgroundLoad::set_reporter(std::function<void(const Progress&)> reporter) {
  std::lock_guard<std::mutex> lock(mu_);
  reporter_ = std::move(reporter);
}

Status BackgroundLoad::await(int group, H3Weights& weights) {
  std::unique_lock<std::mutex> lock(mu_);
  // The final group waits for the loader to have returned too: once the model holds every weight it may capture a
  // CUDA graph, and the loader must be done with the device (its staging buffers freed) by then.
  const bool last = group >= options_.num_layers;
  while (!done_ && status_.ok() && (last || published_up_to_ < group || !host_ready(group))) {
    if (cv_.wait_for(lock, kReportEvery) == std::cv_status::timeout && reporter_) {
      const Progress p = progress_;
      const std::function<void(const Progress&)> reporter = reporter_;
      lock.unlock();
      reporter(p);  // on this thread: the sink is not shared with the loader
      lock.lock();
    }
  }
  // The loader returned without this group (or its host weights), or a thread failed first.
  if (published_up_to_ < group || !host_ready(group) || (last && !status_.ok())) {
    const std::string what = group < 0                     ? "the weights before the blocks"
                             : group < options_.num_layers ? "block " + std::to_string(group)
                                                           : "the final layer";
    if (!status_.ok()) return status_.with_context("loading the transformer beside the run (waiting for " + what + ")");
    return internal_error("the background load ended without " + what);
  }
  copy_weight_group(group, published_, weights);
  if (host_expected_.count(group) != 0) {
    for (auto& [name, t] : h3_tensor_slots(weights))
      if (auto h = host_in_.find(name); h != host_in_.end() && weight_group_of(name, options_.num_layers) == group)
        *t = h->second;
  }
  return Status::Ok();
}

Status BackgroundLoad::finish() {
  if (thread_.joinable()) thread_.join();
  joined_ = true;
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

double BackgroundLoad::seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seconds_;
}

std::vector<std::string> BackgroundLoad::take_notes() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(notes_, {});
}

BackgroundLoad::Progress BackgroundLoad::progress() const {
  std::lock_guard<std::mutex> lock(mu_);
  return progress_;
}

}  // namespace vortex
