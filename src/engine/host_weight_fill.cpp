// HostWeightFill (see host_weight_fill.h): direct reads of the wanted weights into page-locked host memory, in the
// spec's order, on a thread of their own.
#include "engine/host_weight_fill.h"

#include <chrono>
#include <utility>
#include <vector>

#include "io/checkpoint.h"
#include "model/h3_spec.h"

namespace vortex {

namespace {

Result<std::map<std::string, Tensor>> fill(Backend& backend, std::map<std::string, FileExtent> extents,
                                           const std::vector<TensorSpec>& specs, const HostWeightFill::Hooks& hooks,
                                           const std::atomic<bool>& stop) {
  DirectFileReader reader(extents);
  std::map<std::string, Tensor> out;
  for (const TensorSpec& spec : specs) {  // the spec's order: block 0's weights first
    if (stop.load(std::memory_order_relaxed)) return cancelled("the host-memory fill was stopped");
    VORTEX_ASSIGN_OR_RETURN(Tensor host, backend.alloc_host(spec.shape, spec.dtype));
    VORTEX_RETURN_IF_ERROR(reader.read(spec.name, host));
    if (hooks.filled) VORTEX_RETURN_IF_ERROR(hooks.filled(spec.name, host));
    out.emplace(spec.name, std::move(host));
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<HostWeightFill>> HostWeightFill::start(Backend& backend, const std::string& checkpoint_path,
                                                              const ModelConfig& cfg,
                                                              const std::function<bool(const std::string&)>& wanted,
                                                              bool threaded, Hooks hooks) {
  Result<std::map<std::string, FileExtent>> found = checkpoint_extents(checkpoint_path, cfg, wanted);
  VORTEX_RETURN_IF_ERROR(found.status());
  std::map<std::string, FileExtent> extents = std::move(found).value();
  std::vector<TensorSpec> specs;
  for (const TensorSpec& spec : h3_tensor_specs(cfg))
    if (extents.count(spec.name) != 0) specs.push_back(spec);
  std::unique_ptr<HostWeightFill> f(new HostWeightFill());
  const auto t0 = std::chrono::steady_clock::now();
  HostWeightFill* self = f.get();
  auto work = [&backend, extents = std::move(extents), specs = std::move(specs), hooks = std::move(hooks), t0, self]() {
    Result<std::map<std::string, Tensor>> r = fill(backend, extents, specs, hooks, self->stop_);
    self->seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!r.ok() && hooks.failed) hooks.failed(r.status());
    return r;
  };
  f->pending_ = std::async(threaded ? std::launch::async : std::launch::deferred, std::move(work));
  if (!threaded) f->pending_.wait();
  return f;
}

HostWeightFill::~HostWeightFill() {
  stop_.store(true, std::memory_order_relaxed);
  if (pending_.valid()) pending_.wait();  // the thread writes into this object and reads the backend
}

Result<std::map<std::string, Tensor>> HostWeightFill::finish() {
  if (!pending_.valid()) return internal_error("HostWeightFill::finish called twice");
  return pending_.get();
}

}  // namespace vortex
