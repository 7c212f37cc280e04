// SdpaAttention through cuDNN's backend (graph) API: one fused flash-attention plan per
// (batch, S, heads, D, row strides), cached. Graph order tried: the unified SDPA_FWD operation (cuDNN >= 9.13),
// then the composite flash pattern (bmm, scale, max, sub, exp, sum, div, bmm). Q/K/V are strided views
// of the [B * S, 3I] QKV buffer (dims [B, H, S, D], strides {S*ld, D, ld, 1}); O is token-major [B * S, I].
// kUnsupported with cuDNN's own message when no engine accepts the configuration.
// Tested in tests/attention/sdpa_test.cpp (two-reference rule vs FP64 attention, ragged S, sentinels).
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>
#include <vector>

#include "cuda/attention/sdpa.h"
#include "gemm/gemm.h"  // cuda_malloc_resource

namespace vortex {
namespace {

Status cudnn_status(cudnnStatus_t st, const std::string& what) {
  char last[1024] = {0};
  cudnnGetLastErrorString(last, sizeof(last));
  return Status(ErrorCode::kCudnn, what + " failed: " + cudnnGetErrorString(st) +
                                       (last[0] ? std::string(" (") + last + ")" : std::string()));
}

#define VORTEX_CUDNN(expr, what)                                                               \
  do {                                                                                         \
    cudnnStatus_t vortex_cudnn_st_ = (expr);                                                   \
    if (vortex_cudnn_st_ != CUDNN_STATUS_SUCCESS) return cudnn_status(vortex_cudnn_st_, what); \
  } while (0)

// Owns one backend descriptor.
class Desc {
 public:
  Desc() = default;
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  Desc(Desc&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
  Desc& operator=(Desc&& o) noexcept {
    std::swap(d_, o.d_);
    return *this;
  }
  ~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  static Result<Desc> make(cudnnBackendDescriptorType_t type) {
    Desc d;
    VORTEX_CUDNN(cudnnBackendCreateDescriptor(type, &d.d_), "cudnnBackendCreateDescriptor");
    return d;
  }
  cudnnBackendDescriptor_t get() const { return d_; }
  Status set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count, const void* values,
             const char* what) {
    VORTEX_CUDNN(cudnnBackendSetAttribute(d_, name, type, count, values), std::string("set ") + what);
    return Status::Ok();
  }
  Status set_desc(cudnnBackendAttributeName_t name, const Desc& other, const char* what) {
    cudnnBackendDescriptor_t p = other.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p, what);
  }
  Status finalize(const char* what) {
    VORTEX_CUDNN(cudnnBackendFinalize(d_), std::string("finalize ") + what);
    return Status::Ok();
  }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

constexpr int64_t kUidQ = 1, kUidK = 2, kUidV = 3, kUidO = 4, kUidScale = 5;

enum class SdpaGraphKind { kUnified, kComposite };
const char* graph_name(SdpaGraphKind k) { return k == SdpaGraphKind::kUnified ? "unified" : "composite"; }

Result<Desc> make_tensor(int64_t uid, cudnnDataType_t type, std::vector<int64_t> dims, std::vector<int64_t> strides,
                         bool is_virtual, bool by_value) {
  VORTEX_ASSIGN_OR_RETURN(Desc t, Desc::make(CUDNN_BACKEND_TENSOR_DESCRIPTOR));
  const int64_t align = 16;
  bool virt = is_virtual;
  VORTEX_RETURN_IF_ERROR(t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, "tensor dtype"));
  VORTEX_RETURN_IF_ERROR(t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, static_cast<int64_t>(dims.size()),
                               dims.data(), "tensor dims"));
  VORTEX_RETURN_IF_ERROR(t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, static_cast<int64_t>(strides.size()),
                               strides.data(), "tensor strides"));
  VORTEX_RETURN_IF_ERROR(t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor uid"));
  VORTEX_RETURN_IF_ERROR(t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "tensor alignment"));
  VORTEX_RETURN_IF_ERROR(t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt, "tensor virtual"));
  if (by_value) {
    bool bv = true;
    VORTEX_RETURN_IF_ERROR(t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &bv, "tensor by-value"));
  }
  VORTEX_RETURN_IF_ERROR(t.finalize("tensor"));
  return t;
}

struct GraphParts {
  std::vector<Desc> keep;  // everything the graph references
  Desc graph;
};

Status add_pointwise(std::vector<Desc>& keep, std::vector<cudnnBackendDescriptor_t>& ops, cudnnPointwiseMode_t mode,
                     const Desc& x, const Desc* b, const Desc& y) {
  VORTEX_ASSIGN_OR_RETURN(Desc pw, Desc::make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR));
  cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  VORTEX_RETURN_IF_ERROR(pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "pointwise mode"));
  VORTEX_RETURN_IF_ERROR(pw.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, "pointwise precision"));
  VORTEX_RETURN_IF_ERROR(pw.finalize("pointwise descriptor"));
  VORTEX_ASSIGN_OR_RETURN(Desc op, Desc::make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR));
  VORTEX_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw, "pointwise op desc"));
  VORTEX_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x, "pointwise x"));
  if (b) VORTEX_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b, "pointwise b"));
  VORTEX_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y, "pointwise y"));
  VORTEX_RETURN_IF_ERROR(op.finalize("pointwise operation"));
  ops.push_back(op.get());
  keep.push_back(std::move(pw));
  keep.push_back(std::move(op));
  return Status::Ok();
}

Status add_reduction(std::vector<Desc>& keep, std::vector<cudnnBackendDescriptor_t>& ops, cudnnReduceTensorOp_t mode,
                     const Desc& x, const Desc& y) {
  VORTEX_ASSIGN_OR_RETURN(Desc r, Desc::make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR));
  cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  VORTEX_RETURN_IF_ERROR(
      r.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode, "reduction op"));
  VORTEX_RETURN_IF_ERROR(r.set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &prec, "reduction precision"));
  VORTEX_RETURN_IF_ERROR(r.finalize("reduction descriptor"));
  VORTEX_ASSIGN_OR_RETURN(Desc op, Desc::make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR));
  VORTEX_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, r, "reduction op desc"));
  VORTEX_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x, "reduction x"));
  VORTEX_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y, "reduction y"));
  VORTEX_RETURN_IF_ERROR(op.finalize("reduction operation"));
  ops.push_back(op.get());
  keep.push_back(std::move(r));
  keep.push_back(std::move(op));
  return Status::Ok();
}

Status add_matmul(std::vector<Desc>& keep, std::vector<cudnnBackendDescriptor_t>& ops, const Desc& a, const Desc& b,
                  const Desc& c) {
  VORTEX_ASSIGN_OR_RETURN(Desc m, Desc::make(CUDNN_BACKEND_MATMUL_DESCRIPTOR));
  cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  VORTEX_RETURN_IF_ERROR(m.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &prec, "matmul precision"));
  VORTEX_RETURN_IF_ERROR(m.finalize("matmul descriptor"));
  VORTEX_ASSIGN_OR_RETURN(Desc op, Desc::make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR));
  VORTEX_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a, "matmul a"));
  VORTEX_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b, "matmul b"));
  VORTEX_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c, "matmul c"));
  VORTEX_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, m, "matmul desc"));
  VORTEX_RETURN_IF_ERROR(op.finalize("matmul operation"));
  ops.push_back(op.get());
  keep.push_back(std::move(m));
  keep.push_back(std::move(op));
  return Status::Ok();
}

struct Shape {
  int64_t s, h, d, ld_qkv, ld_out, b = 1;  // b sequences of s rows each, packed along the rows
  auto tie() const { return std::tie(s, h, d, ld_qkv, ld_out, b); }
  bool operator<(const Shape& o) const { return tie() < o.tie(); }
};

Result<GraphParts> build_graph(cudnnHandle_t handle, SdpaGraphKind kind, const Shape& sh) {
  GraphParts g;
  const int64_t s = sh.s, h = sh.h, d = sh.d, ld = sh.ld_qkv, ldo = sh.ld_out, b = sh.b;
  // [B, H, S, D] views of the token-major buffers: sequence stride S*ld, head stride D, token stride ld.
  VORTEX_ASSIGN_OR_RETURN(Desc q,
                          make_tensor(kUidQ, CUDNN_DATA_BFLOAT16, {b, h, s, d}, {s * ld, d, ld, 1}, false, false));
  VORTEX_ASSIGN_OR_RETURN(Desc v,
                          make_tensor(kUidV, CUDNN_DATA_BFLOAT16, {b, h, s, d}, {s * ld, d, ld, 1}, false, false));
  VORTEX_ASSIGN_OR_RETURN(Desc o,
                          make_tensor(kUidO, CUDNN_DATA_BFLOAT16, {b, h, s, d}, {s * ldo, d, ldo, 1}, false, false));
  VORTEX_ASSIGN_OR_RETURN(Desc scale,
                          make_tensor(kUidScale, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true));
  std::vector<cudnnBackendDescriptor_t> ops;
  if (kind == SdpaGraphKind::kUnified) {
    VORTEX_ASSIGN_OR_RETURN(Desc k,
                            make_tensor(kUidK, CUDNN_DATA_BFLOAT16, {b, h, s, d}, {s * ld, d, ld, 1}, false, false));
    VORTEX_ASSIGN_OR_RETURN(Desc op, Desc::make(CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR));
    VORTEX_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, q, "sdpa q"));
    VORTEX_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, k, "sdpa k"));
    VORTEX_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, v, "sdpa v"));
    VORTEX_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, o, "sdpa o"));
    VORTEX_RETURN_IF_ERROR(op.set_desc(CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, scale, "sdpa scale"));
    VORTEX_RETURN_IF_ERROR(op.finalize("sdpa_fwd operation"));
    ops.push_back(op.get());
    g.keep.push_back(std::move(k));
    g.keep.push_back(std::move(op));
  } else {
    // K^T as a [B, H, D, S] view: element (d, s) at s*ld + d.
    VORTEX_ASSIGN_OR_RETURN(Desc kt,
                            make_tensor(kUidK, CUDNN_DATA_BFLOAT16, {b, h, d, s}, {s * ld, d, 1, ld}, false, false));
    auto full = [&](int64_t uid) {
      return make_tensor(uid, CUDNN_DATA_FLOAT, {b, h, s, s}, {h * s * s, s * s, s, 1}, true, false);
    };
    auto row = [&](int64_t uid) {
      return make_tensor(uid, CUDNN_DATA_FLOAT, {b, h, s, 1}, {h * s, s, 1, 1}, true, false);
    };
    VORTEX_ASSIGN_OR_RETURN(Desc sc, full(100));
    VORTEX_ASSIGN_OR_RETURN(Desc sc2, full(101));
    VORTEX_ASSIGN_OR_RETURN(Desc mx, row(102));
    VORTEX_ASSIGN_OR_RETURN(Desc sub, full(103));
    VORTEX_ASSIGN_OR_RETURN(Desc ex, full(104));
    VORTEX_ASSIGN_OR_RETURN(Desc sum, row(105));
    VORTEX_ASSIGN_OR_RETURN(Desc p, full(106));
    VORTEX_RETURN_IF_ERROR(add_matmul(g.keep, ops, q, kt, sc));
    VORTEX_RETURN_IF_ERROR(add_pointwise(g.keep, ops, CUDNN_POINTWISE_MUL, sc, &scale, sc2));
    VORTEX_RETURN_IF_ERROR(add_reduction(g.keep, ops, CUDNN_REDUCE_TENSOR_MAX, sc2, mx));
    VORTEX_RETURN_IF_ERROR(add_pointwise(g.keep, ops, CUDNN_POINTWISE_SUB, sc2, &mx, sub));
    VORTEX_RETURN_IF_ERROR(add_pointwise(g.keep, ops, CUDNN_POINTWISE_EXP, sub, nullptr, ex));
    VORTEX_RETURN_IF_ERROR(add_reduction(g.keep, ops, CUDNN_REDUCE_TENSOR_ADD, ex, sum));
    VORTEX_RETURN_IF_ERROR(add_pointwise(g.keep, ops, CUDNN_POINTWISE_DIV, ex, &sum, p));
    VORTEX_RETURN_IF_ERROR(add_matmul(g.keep, ops, p, v, o));
    for (Desc* t : {&kt, &sc, &sc2, &mx, &sub, &ex, &sum, &p}) g.keep.push_back(std::move(*t));
  }
  VORTEX_ASSIGN_OR_RETURN(g.graph, Desc::make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
  VORTEX_RETURN_IF_ERROR(g.graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                     static_cast<int64_t>(ops.size()), ops.data(), "graph ops"));
  VORTEX_RETURN_IF_ERROR(g.graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, "graph handle"));
  VORTEX_RETURN_IF_ERROR(g.graph.finalize("operation graph"));
  for (Desc* t : {&q, &v, &o, &scale}) g.keep.push_back(std::move(*t));
  return g;
}

struct Plan {
  GraphParts graph;
  std::vector<Desc> configs;
  Desc heuristic;
  Desc plan;
  int64_t workspace = 0;
  std::string info;
};

Result<std::unique_ptr<Plan>> build_plan(cudnnHandle_t handle, SdpaGraphKind kind, const Shape& sh) {
  auto plan = std::make_unique<Plan>();
  VORTEX_ASSIGN_OR_RETURN(plan->graph, build_graph(handle, kind, sh));
  std::string last = "no engine config";
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B, CUDNN_HEUR_MODE_FALLBACK}) {
    auto heur = Desc::make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    if (!heur.ok()) return heur.status();
    Desc h = std::move(heur).value();
    VORTEX_RETURN_IF_ERROR(h.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, plan->graph.graph, "heuristic graph"));
    VORTEX_RETURN_IF_ERROR(h.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "heuristic mode"));
    Status fin = h.finalize("engine heuristic");
    if (!fin.ok()) {
      last = fin.message();
      continue;
    }
    constexpr int kMaxConfigs = 16;
    std::vector<Desc> cfgs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int i = 0; i < kMaxConfigs; ++i) {
      VORTEX_ASSIGN_OR_RETURN(Desc c, Desc::make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
      raw.push_back(c.get());
      cfgs.push_back(std::move(c));
    }
    int64_t count = 0;
    cudnnStatus_t st = cudnnBackendGetAttribute(h.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                                kMaxConfigs, &count, raw.data());
    if (st != CUDNN_STATUS_SUCCESS || count <= 0) {
      last = st != CUDNN_STATUS_SUCCESS ? cudnn_status(st, "heuristic results").message() : "0 engine configs";
      continue;
    }
    for (int64_t i = 0; i < std::min<int64_t>(count, kMaxConfigs); ++i) {
      VORTEX_ASSIGN_OR_RETURN(Desc p, Desc::make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR));
      VORTEX_RETURN_IF_ERROR(p.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, "plan handle"));
      VORTEX_RETURN_IF_ERROR(
          p.set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfgs[static_cast<size_t>(i)], "plan config"));
      Status pf = p.finalize("execution plan");
      if (!pf.ok()) {
        last = pf.message();
        continue;
      }
      int64_t ws = 0, n = 0;
      VORTEX_CUDNN(
          cudnnBackendGetAttribute(p.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws),
          "plan workspace size");
      char json[4096] = {0};
      int64_t json_n = 0;
      cudnnBackendGetAttribute(p.get(), CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
                               sizeof(json) - 1, &json_n, json);
      std::ostringstream info;
      info << "cuDNN " << cudnnGetVersion() << " graph " << graph_name(kind) << " heur mode " << static_cast<int>(mode)
           << " config " << i << " of " << count << " workspace " << ws << " " << std::string(json).substr(0, 300);
      plan->plan = std::move(p);
      plan->workspace = ws;
      plan->info = info.str();
      plan->configs = std::move(cfgs);
      plan->heuristic = std::move(h);
      return plan;
    }
  }
  return unsupported(std::string("cuDNN has no executable SDPA plan (graph ") + graph_name(kind) +
                     ") for B=" + std::to_string(sh.b) + " S=" + std::to_string(sh.s) +
                     " heads=" + std::to_string(sh.h) + " D=" + std::to_string(sh.d) + ": " + last);
}

class CudnnSdpa final : public SdpaAttention {
 public:
  ~CudnnSdpa() override {
    plans_.clear();
    workspace_.reset();
    if (handle_) cudnnDestroy(handle_);
  }
  Status init(std::shared_ptr<DeviceMemoryResource> memory) {
    memory_ = std::move(memory);
    VORTEX_CUDNN(cudnnCreate(&handle_), "cudnnCreate (is libcudnn.so.9 on the library path?)");
    return Status::Ok();
  }

  Status run(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads, int head_dim, Tensor& out,
             cudaStream_t stream) override {
    return run_batched(q, k, v, 1, num_heads, head_dim, out, stream);
  }

  Status run_batched(const Tensor& q, const Tensor& k, const Tensor& v, int64_t batch, int num_heads, int head_dim,
                     Tensor& out, cudaStream_t stream) override {
    for (const Tensor* t : {&q, &k, &v, static_cast<const Tensor*>(&out)}) {
      if (!t->defined() || t->device() != Device::kCuda || t->dtype() != DType::kBF16 || t->ndim() != 2 ||
          t->stride(1) != 1)
        return invalid_argument(
            "sdpa: q, k, v, out must be 2-D bf16 device row views with unit column "
            "stride, got " +
            (t->defined() ? t->describe() : std::string("undefined")));
    }
    const int64_t s = q.dim(0), width = static_cast<int64_t>(num_heads) * head_dim;
    if (q.dim(1) != width || k.dim(1) != width || v.dim(1) != width || out.dim(1) != width || k.dim(0) != s ||
        v.dim(0) != s || out.dim(0) != s)
      return invalid_argument("sdpa: expected q, k, v, out of shape [S, heads*head_dim] = [" + std::to_string(s) +
                              ", " + std::to_string(width) + "], got q " + q.describe() + ", k " + k.describe() +
                              ", v " + v.describe() + ", out " + out.describe());
    if (k.stride(0) != q.stride(0) || v.stride(0) != q.stride(0))
      return invalid_argument("sdpa: q, k and v must share one row stride (views of one [S, 3I] buffer)");
    if (batch < 1 || s % batch != 0)
      return invalid_argument("sdpa: " + std::to_string(batch) + " sequences do not split " + std::to_string(s) +
                              " rows into equal blocks");
    return run_impl(q.raw_data(), k.raw_data(), v.raw_data(), q.stride(0), out.raw_data(), out.stride(0), s / batch,
                    batch, num_heads, head_dim, stream);
  }

  Status run_raw(const void* q, const void* k, const void* v, int64_t ld_qkv, void* out, int64_t ld_out,
                 int64_t seq_len, int num_heads, int head_dim, cudaStream_t stream) override {
    return run_impl(q, k, v, ld_qkv, out, ld_out, seq_len, 1, num_heads, head_dim, stream);
  }

  Status run_impl(const void* q, const void* k, const void* v, int64_t ld_qkv, void* out, int64_t ld_out,
                  int64_t seq_len, int64_t batch, int num_heads, int head_dim, cudaStream_t stream) {
    if (seq_len <= 0 || batch <= 0 || num_heads <= 0 || head_dim <= 0)
      return invalid_argument("sdpa: sizes must be positive");
    if (ld_qkv < static_cast<int64_t>(num_heads) * head_dim || ld_out < static_cast<int64_t>(num_heads) * head_dim)
      return invalid_argument("sdpa: row stride smaller than heads*head_dim");
    for (const void* p : {q, k, v, static_cast<const void*>(out)})
      if (!p || reinterpret_cast<uintptr_t>(p) % 16)
        return invalid_argument("sdpa: q, k, v, out must be non-null and 16-byte aligned");
    if ((ld_qkv * 2) % 16 || (ld_out * 2) % 16)
      return invalid_argument("sdpa: row strides must be multiples of 8 elements (16 bytes)");
    std::lock_guard<std::mutex> lock(mu_);
    VORTEX_ASSIGN_OR_RETURN(Plan * plan, get_plan({seq_len, num_heads, head_dim, ld_qkv, ld_out, batch}));
    if (plan->workspace > 0)  // a replaced block is reused only by later work on the same stream
      VORTEX_RETURN_IF_ERROR(
          workspace_.reserve(memory_, static_cast<size_t>(plan->workspace)).with_context("sdpa workspace"));
    VORTEX_CUDNN(cudnnSetStream(handle_, stream), "cudnnSetStream");
    float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
    int64_t uids[5] = {kUidQ, kUidK, kUidV, kUidO, kUidScale};
    void* ptrs[5] = {const_cast<void*>(q), const_cast<void*>(k), const_cast<void*>(v), out, &scale};
    VORTEX_ASSIGN_OR_RETURN(Desc pack, Desc::make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR));
    VORTEX_RETURN_IF_ERROR(pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 5, uids, "variant uids"));
    VORTEX_RETURN_IF_ERROR(
        pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 5, ptrs, "variant pointers"));
    void* ws = workspace_.data();
    VORTEX_RETURN_IF_ERROR(
        pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws, "variant workspace"));
    VORTEX_RETURN_IF_ERROR(pack.finalize("variant pack"));
    VORTEX_CUDNN(cudnnBackendExecute(handle_, plan->plan.get(), pack.get()), "cudnnBackendExecute (sdpa)");
    return Status::Ok();
  }

  Result<std::string> plan_info(int64_t seq_len, int num_heads, int head_dim, int64_t ld_qkv, int64_t ld_out) override {
    std::lock_guard<std::mutex> lock(mu_);
    VORTEX_ASSIGN_OR_RETURN(Plan * plan, get_plan({seq_len, num_heads, head_dim, ld_qkv, ld_out}));
    return plan->info;
  }

 private:
  Result<Plan*> get_plan(const Shape& sh) {
    auto it = plans_.find(sh);
    if (it != plans_.end()) return it->second.get();
    std::string errors;
    for (SdpaGraphKind kind : {SdpaGraphKind::kUnified, SdpaGraphKind::kComposite}) {
      auto plan = build_plan(handle_, kind, sh);
      if (plan.ok()) {
        Plan* raw = plan->get();
        plans_.emplace(sh, std::move(plan).value());
        return raw;
      }
      errors += std::string(errors.empty() ? "" : "; ") + graph_name(kind) + ": " + plan.status().message();
    }
    return unsupported("cuDNN rejects this SDPA configuration (B=" + std::to_string(sh.b) +
                       ", S=" + std::to_string(sh.s) + ", heads=" + std::to_string(sh.h) +
                       ", D=" + std::to_string(sh.d) + ", ld=" + std::to_string(sh.ld_qkv) + "): " + errors +
                       ". Use the Sage2 or reference attention backend instead.");
  }

  cudnnHandle_t handle_ = nullptr;
  std::shared_ptr<DeviceMemoryResource> memory_;
  DeviceBuffer workspace_;  // cuDNN workspace, grown to the largest plan's
  std::map<Shape, std::unique_ptr<Plan>> plans_;
  std::mutex mu_;
};

}  // namespace

Result<std::unique_ptr<SdpaAttention>> SdpaAttention::create(std::shared_ptr<DeviceMemoryResource> memory) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0)
    return Status(ErrorCode::kCuda, std::string("SdpaAttention needs a CUDA device: ") +
                                        (err != cudaSuccess ? cudaGetErrorString(err) : "none found"));
  auto sdpa = std::make_unique<CudnnSdpa>();
  VORTEX_RETURN_IF_ERROR(sdpa->init(memory ? std::move(memory) : cuda_malloc_resource()));
  return std::unique_ptr<SdpaAttention>(std::move(sdpa));
}

}  // namespace vortex
