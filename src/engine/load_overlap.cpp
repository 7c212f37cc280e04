// BackgroundLoad (see load_overlap.h): a loader thread that publishes the transformer's weights group by group, and
// the waits of the model's thread on them.
#include "engine/load_overlap.h"

#include <cstdlib>
#include <utility>

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
  if (!out.ok()) status_ = out.status();
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

void BackgroundLoad::set_reporter(std::function<void(const Progress&)> reporter) {
  std::lock_guard<std::mutex> lock(mu_);
  reporter_ = std::move(reporter);
}

Status BackgroundLoad::await(int group, H3Weights& weights) {
  std::unique_lock<std::mutex> lock(mu_);
  // The final group waits for the loader to have returned too: once the model holds every weight it may capture a
  // CUDA graph, and the loader must be done with the device (its staging buffers freed) by then.
  const bool last = group >= options_.num_layers;
  while (!done_ && (last || published_up_to_ < group)) {
    if (cv_.wait_for(lock, kReportEvery) == std::cv_status::timeout && reporter_) {
      const Progress p = progress_;
      const std::function<void(const Progress&)> reporter = reporter_;
      lock.unlock();
      reporter(p);  // on this thread: the sink is not shared with the loader
      lock.lock();
    }
  }
  if (published_up_to_ < group || (last && !status_.ok())) {  // the loader returned without this group, or failed
    const std::string what = group < 0                     ? "the weights before the blocks"
                             : group < options_.num_layers ? "block " + std::to_string(group)
                                                           : "the final layer";
    if (!status_.ok()) return status_.with_context("loading the transformer beside the run (waiting for " + what + ")");
    return internal_error("the background load ended without " + what);
  }
  copy_weight_group(group, published_, weights);
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
