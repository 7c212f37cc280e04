// bench_elementwise_ops: see bench_ops.h. Inputs come from fill_synthetic (never zeros); each timed
// repetition uses the next input set so caches do not flatter; fused vs eager outputs are downloaded
// and compared byte for byte, and the result is recorded in each row's `check`.
#include "measure/bench_ops.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "cuda/check.h"
#include "cuda/cuda_backend.h"
#include "profiling/evidence.h"

namespace vortex {
namespace {

// Times body(rep) with CUDA events on the backend stream.
Result<std::vector<double>> time_reps(CudaBackend& b, int warmup, int reps, const std::function<Status(int)>& body) {
  for (int i = 0; i < warmup; ++i) VORTEX_RETURN_IF_ERROR(body(i));
  std::vector<cudaEvent_t> events(2 * static_cast<size_t>(reps));
  for (cudaEvent_t& e : events) VORTEX_CUDA_CHECK(cudaEventCreate(&e));
  Status st;
  for (int i = 0; i < reps && st.ok(); ++i) {
    VORTEX_CUDA_CHECK(cudaEventRecord(events[2 * i], b.stream()));
    st = body(i);
    VORTEX_CUDA_CHECK(cudaEventRecord(events[2 * i + 1], b.stream()));
  }
  VORTEX_CUDA_CHECK(cudaStreamSynchronize(b.stream()));
  std::vector<double> ms;
  for (int i = 0; i < reps && st.ok(); ++i) {
    float t = 0;
    VORTEX_CUDA_CHECK(cudaEventElapsedTime(&t, events[2 * i], events[2 * i + 1]));
    ms.push_back(t);
  }
  for (cudaEvent_t e : events) (void)cudaEventDestroy(e);
  VORTEX_RETURN_IF_ERROR(st);
  return ms;
}

OpsBenchRow make_row(std::string op, int64_t rows, int64_t cols, const std::vector<double>& ms, double bytes,
                     double peak_gbps, std::string check) {
  OpsBenchRow r;
  r.op = std::move(op);
  r.rows = rows;
  r.cols = cols;
  r.reps = static_cast<int>(ms.size());
  const Percentiles p = percentiles(ms);
  r.ms_p10 = p.p10;
  r.ms_p50 = p.p50;
  r.ms_p90 = p.p90;
  r.ms_p95 = p.p95;
  r.bytes_moved = bytes;
  r.gbps_p50 = bytes / (r.ms_p50 * 1e-3) / 1e9;
  r.fraction_of_peak = r.gbps_p50 / peak_gbps;
  r.check = std::move(check);
  return r;
}

// True when `name` is in the comma list `list` (an empty list selects everything when `empty_means_all`).
bool in_list(const std::string& list, const std::string& name, bool empty_means_all) {
  if (list.empty()) return empty_means_all;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    if (list.compare(start, comma - start, name) == 0 && comma - start == name.size()) return true;
    start = comma + 1;
  }
  return false;
}

Result<bool> same_bytes(CudaBackend& b, const Tensor& x, const Tensor& y) {
  Tensor hx = Tensor::empty(x.shape(), x.dtype());
  Tensor hy = Tensor::empty(y.shape(), y.dtype());
  VORTEX_RETURN_IF_ERROR(b.download(x, hx));
  VORTEX_RETURN_IF_ERROR(b.download(y, hy));
  return std::memcmp(hx.raw_data(), hy.raw_data(), hx.nbytes()) == 0;
}

}  // namespace

Result<OpsBenchResult> bench_elementwise_ops(CudaBackend& b, const OpsBenchConfig& cfg) {
  if (cfg.rows <= 0 || cfg.hidden <= 0 || cfg.ffn <= 0 || cfg.reps < 1 || cfg.table_rows < 1)
    return invalid_argument("bench_elementwise_ops: rows, hidden, ffn, table_rows and reps must be positive");
  const int64_t S = cfg.rows, D = cfg.hidden, F = cfg.ffn;
  OpsBenchResult res;
  res.device = b.gpu_info().describe();
  res.peak_gbps = cfg.peak_gbps;
  // Enough sets that one rotation exceeds 3x L2 (never fewer than 2).
  const double set_bytes = static_cast<double>(S) * static_cast<double>(2 * D + 2 * F) * 2.0;
  res.input_sets = std::max<int>(2, static_cast<int>(3.0 * static_cast<double>(b.gpu_info().l2_bytes) / set_bytes) + 1);
  const int sets = res.input_sets;

  SegmentTable seg;  // rows split across the table rows (video / audio / text-like segments)
  seg.rows = S;
  for (int64_t t = 0; t < cfg.table_rows; ++t) {
    const int64_t start = S * t / cfg.table_rows, stop = S * (t + 1) / cfg.table_rows;
    if (stop > start) seg.segments.push_back({start, stop, static_cast<int32_t>(t)});
  }
  uint64_t seed = cfg.seed;
  auto make = [&](Shape shape, float scale, float offset) -> Result<Tensor> {
    VORTEX_ASSIGN_OR_RETURN(Tensor t, b.alloc(shape, DType::kBF16));
    VORTEX_RETURN_IF_ERROR(b.fill_synthetic(t, seed++, scale, offset));
    return t;
  };
  std::vector<Tensor> xs, as, us;
  for (int i = 0; i < sets; ++i) {
    VORTEX_ASSIGN_OR_RETURN(Tensor x, make({S, D}, 2.0f, 0.0f));      // [S, D] bf16 residual stream
    VORTEX_ASSIGN_OR_RETURN(Tensor a, make({S, D}, 1.0f, 0.0f));      // [S, D] bf16 branch output
    VORTEX_ASSIGN_OR_RETURN(Tensor u, make({S, 2 * F}, 3.0f, 0.0f));  // [S, 2F] bf16 FC1 output
    xs.push_back(std::move(x));
    as.push_back(std::move(a));
    us.push_back(std::move(u));
  }
  VORTEX_ASSIGN_OR_RETURN(Tensor weight, make({D}, 0.5f, 1.0f));                     // [D] bf16 norm weight
  VORTEX_ASSIGN_OR_RETURN(Tensor table, make({cfg.table_rows, 6 * D}, 0.2f, 0.0f));  // [rows, 6D] bf16 AdaLN
  VORTEX_ASSIGN_OR_RETURN(Tensor out, b.alloc({S, D}, DType::kBF16));
  VORTEX_ASSIGN_OR_RETURN(Tensor out_eager, b.alloc({S, D}, DType::kBF16));
  VORTEX_ASSIGN_OR_RETURN(Tensor m, b.alloc({S, F}, DType::kBF16));
  const double bf = 2.0;
  const double sd = static_cast<double>(S) * static_cast<double>(D);

  // rms_norm_modulate (fused) vs rms_norm + modulate (eager).
  if (in_list(cfg.ops, "rms_norm_modulate", true)) {
    VORTEX_ASSIGN_OR_RETURN(auto ms_fused, time_reps(b, cfg.warmup, cfg.reps, [&](int i) {
                              return b.rms_norm_modulate(xs[i % sets], weight, 1e-5f, table, 0, 1, seg, out);
                            }));
    VORTEX_ASSIGN_OR_RETURN(auto ms_eager, time_reps(b, cfg.warmup, cfg.reps, [&](int i) -> Status {
                              VORTEX_RETURN_IF_ERROR(b.rms_norm(xs[i % sets], weight, 1e-5f, out_eager));
                              return b.modulate(out_eager, table, 0, 1, seg);
                            }));
    VORTEX_ASSIGN_OR_RETURN(bool same_norm, same_bytes(b, out, out_eager));  // both last ran on set (reps-1)%sets
    const std::string norm_check = same_norm ? "fused == eager bytes: pass" : "fused == eager bytes: FAIL";
    res.rows.push_back(make_row("rms_norm_modulate", S, D, ms_fused, 2 * sd * bf, cfg.peak_gbps, norm_check));
    res.rows.push_back(make_row("rms_norm+modulate (eager)", S, D, ms_eager, 4 * sd * bf, cfg.peak_gbps, norm_check));
  }

  // gate_add fused vs eager: x is updated in place, so each variant runs on a fresh copy of the same x.
  if (in_list(cfg.ops, "gate_add", true)) {
    VORTEX_ASSIGN_OR_RETURN(Tensor x_fused, b.alloc({S, D}, DType::kBF16));
    VORTEX_ASSIGN_OR_RETURN(Tensor x_eager, b.alloc({S, D}, DType::kBF16));
    const bool fused_before = b.fused_gate_add();
    b.set_fused_gate_add(true);
    VORTEX_ASSIGN_OR_RETURN(auto ms_gate, time_reps(b, cfg.warmup, cfg.reps, [&](int i) {
                              return b.gate_add(xs[i % sets], as[i % sets], &table, 2, seg);
                            }));
    b.set_fused_gate_add(false);
    VORTEX_ASSIGN_OR_RETURN(auto ms_gate_eager, time_reps(b, cfg.warmup, cfg.reps, [&](int i) {
                              return b.gate_add(xs[i % sets], as[i % sets], &table, 2, seg);
                            }));
    VORTEX_RETURN_IF_ERROR(b.copy(xs[0], x_fused));
    VORTEX_RETURN_IF_ERROR(b.copy(xs[0], x_eager));
    b.set_fused_gate_add(true);
    VORTEX_RETURN_IF_ERROR(b.gate_add(x_fused, as[0], &table, 2, seg));
    b.set_fused_gate_add(false);
    VORTEX_RETURN_IF_ERROR(b.gate_add(x_eager, as[0], &table, 2, seg));
    b.set_fused_gate_add(fused_before);
    VORTEX_ASSIGN_OR_RETURN(bool same_gate, same_bytes(b, x_fused, x_eager));
    const std::string gate_check = same_gate ? "fused == eager bytes: pass" : "fused == eager bytes: FAIL";
    res.rows.push_back(make_row("gate_add", S, D, ms_gate, 3 * sd * bf, cfg.peak_gbps, gate_check));
    res.rows.push_back(
        make_row("gate_multiply+residual_add (eager)", S, D, ms_gate_eager, 5 * sd * bf, cfg.peak_gbps, gate_check));
  }

  // swiglu: read [S, 2F], write [S, F].
  if (in_list(cfg.ops, "swiglu", true)) {
    VORTEX_ASSIGN_OR_RETURN(auto ms_swiglu,
                            time_reps(b, cfg.warmup, cfg.reps, [&](int i) { return b.swiglu(us[i % sets], m); }));
    res.rows.push_back(make_row("swiglu", S, F, ms_swiglu, 3.0 * static_cast<double>(S) * static_cast<double>(F) * bf,
                                cfg.peak_gbps, "E0 vs CPU reference in tests/cuda (not re-run here)"));
  }

  // qk_norm_rope in place on the strided Q/K views of a [S, 3I] QKV buffer (56 x 128 heads, 96 RoPE dims):
  // reads and writes Q and K once.
  if (in_list(cfg.ops, "qk_norm_rope", true)) {
    const int heads = 56, head_dim = 128, rope_dims = 96;
    const int64_t inner = static_cast<int64_t>(heads) * head_dim;
    std::vector<Tensor> qkvs;
    for (int i = 0; i < sets; ++i) {
      VORTEX_ASSIGN_OR_RETURN(Tensor qkv, make({S, 3 * inner}, 2.0f, 0.0f));  // [S, 3I] bf16 QKV output
      qkvs.push_back(std::move(qkv));
    }
    VORTEX_ASSIGN_OR_RETURN(Tensor qw, make({head_dim}, 0.5f, 1.0f));
    VORTEX_ASSIGN_OR_RETURN(Tensor kw, make({head_dim}, 0.5f, 1.0f));
    RopeTables rope;
    rope.rope_dims = rope_dims;
    VORTEX_ASSIGN_OR_RETURN(rope.cos, make({S, rope_dims / 2}, 1.0f, 0.0f));  // [S, 48] bf16
    VORTEX_ASSIGN_OR_RETURN(rope.sin, make({S, rope_dims / 2}, 1.0f, 0.0f));  // [S, 48] bf16
    VORTEX_ASSIGN_OR_RETURN(auto ms_qk, time_reps(b, cfg.warmup, cfg.reps, [&](int i) -> Status {
                              Tensor& qkv = qkvs[i % sets];
                              VORTEX_ASSIGN_OR_RETURN(Tensor q, qkv.as_strided({S, inner}, {3 * inner, 1}, 0));
                              VORTEX_ASSIGN_OR_RETURN(Tensor k, qkv.as_strided({S, inner}, {3 * inner, 1}, inner));
                              return b.qk_norm_rope(q, k, qw, kw, 1e-6f, &rope, heads, head_dim);
                            }));
    const double bytes = 4.0 * static_cast<double>(S) * static_cast<double>(inner) * bf +
                         2.0 * static_cast<double>(S) * (rope_dims / 2) * bf;
    res.rows.push_back(make_row("qk_norm_rope", S, 2 * inner, ms_qk, bytes, cfg.peak_gbps,
                                "E0 vs CPU reference in tests/cuda (not re-run here)"));
  }
  return res;
}

}  // namespace vortex
