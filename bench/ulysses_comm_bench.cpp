// Ulysses communication benchmark (multi-GPU; run by bench/ulysses_scaling.py): one rank per GPU through
// launch_ranks, like `vortex generate --gpus N`. Times, with CUDA events on the rank's stream, the two
// all-to-alls of one H3 block at the canonical 37,810 rows (q/k/v rows -> heads: [S/U, 3I/U] bf16 per
// peer; attention output back: [S/U, I/U]) and a rank 0 -> rank 1 transfer of 1 GiB (the link's
// measured point-to-point bandwidth), p10/p50/p90 over the iterations. Rank 0 prints one JSON object.
//   ulysses_comm_bench --gpus N [--rows 37810] [--iters 20]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "dist/launcher.h"
#include "dist/nccl.h"
#include "dist/rendezvous.h"

using namespace vortex;

namespace {

int die(const std::string& m) {
  std::fprintf(stderr, "ulysses_comm_bench: error: %s\n", m.c_str());
  return 1;
}

struct Pct {
  double p10, p50, p90;
};
Pct percentiles(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[static_cast<size_t>(q * (v.size() - 1) + 0.5)]; };
  return {at(0.1), at(0.5), at(0.9)};
}

// Times `iters` calls of fn on the backend stream (after 3 warm-ups); ms per call.
template <typename F>
Result<std::vector<double>> time_on(cudaStream_t s, int iters, F&& fn) {
  cudaEvent_t a, b;
  if (cudaEventCreate(&a) != cudaSuccess || cudaEventCreate(&b) != cudaSuccess)
    return internal_error("cudaEventCreate");
  std::vector<double> ms;
  for (int i = 0; i < iters + 3; ++i) {
    cudaEventRecord(a, s);
    VORTEX_RETURN_IF_ERROR(fn());
    cudaEventRecord(b, s);
    if (cudaEventSynchronize(b) != cudaSuccess) return internal_error("cudaEventSynchronize");
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    if (i >= 3) ms.push_back(t);
  }
  cudaEventDestroy(a), cudaEventDestroy(b);
  return ms;
}

Status rank_main(const RankEnv& e, int64_t rows, int iters) {
  VORTEX_ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> be, CudaBackend::create(0));
  NcclUniqueIdBytes id;
  CommOptions opts;
  if (e.rank == 0) {
    VORTEX_ASSIGN_OR_RETURN(id, nccl_unique_id());
    VORTEX_RETURN_IF_ERROR(publish_rendezvous(e.rendezvous, std::string(id.data(), id.size())));
  } else {
    VORTEX_ASSIGN_OR_RETURN(std::string bytes, await_rendezvous(e.rendezvous, id.size(), opts.timeout));
    std::copy(bytes.begin(), bytes.end(), id.begin());
  }
  VORTEX_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                          make_nccl_communicator(id, e.rank, e.world, be->stream(), opts));
  const int u = e.world, heads = 56, hd = 128;
  const int64_t inner = heads * hd;
  std::vector<Span> r(static_cast<size_t>(u)), h(static_cast<size_t>(u));
  for (int j = 0; j < u; ++j)
    r[static_cast<size_t>(j)] = even_split(rows, u, j), h[static_cast<size_t>(j)] = even_split(heads, u, j);
  const int64_t s_me = r[static_cast<size_t>(e.rank)].size(), i_me = h[static_cast<size_t>(e.rank)].size() * hd;
  VORTEX_ASSIGN_OR_RETURN(Tensor send_qkv, be->alloc({s_me * 3 * inner}, DType::kBF16));
  VORTEX_ASSIGN_OR_RETURN(Tensor recv_qkv, be->alloc({rows * 3 * i_me}, DType::kBF16));
  std::vector<Tensor> sq, rq, so, ro;
  int64_t off_s = 0, off_r = 0, bytes_out = 0;
  for (int j = 0; j < u; ++j) {
    const int64_t ij = h[static_cast<size_t>(j)].size() * hd, sj = r[static_cast<size_t>(j)].size();
    VORTEX_ASSIGN_OR_RETURN(Tensor a, send_qkv.narrow(0, off_s, s_me * 3 * ij));
    VORTEX_ASSIGN_OR_RETURN(Tensor b, recv_qkv.narrow(0, off_r, sj * 3 * i_me));
    sq.push_back(a), rq.push_back(b);
    off_s += s_me * 3 * ij, off_r += sj * 3 * i_me;
    if (j != e.rank) bytes_out += s_me * 3 * ij * 2;
  }
  // The inverse exchange moves a third of the bytes: the same buffers, a third of each chunk.
  for (int j = 0; j < u; ++j) {
    VORTEX_ASSIGN_OR_RETURN(Tensor a, sq[static_cast<size_t>(j)].narrow(0, 0, sq[static_cast<size_t>(j)].numel() / 3));
    VORTEX_ASSIGN_OR_RETURN(Tensor b, rq[static_cast<size_t>(j)].narrow(0, 0, rq[static_cast<size_t>(j)].numel() / 3));
    so.push_back(a), ro.push_back(b);
  }
  VORTEX_ASSIGN_OR_RETURN(auto t_qkv, time_on(be->stream(), iters, [&] { return comm->all_to_all(sq, rq); }));
  VORTEX_ASSIGN_OR_RETURN(auto t_out, time_on(be->stream(), iters, [&] { return comm->all_to_all(so, ro); }));
  // Link: 1 GiB from rank 0 to rank 1 (others idle).
  const int64_t link_bytes = int64_t{1} << 30;
  VORTEX_ASSIGN_OR_RETURN(Tensor big, be->alloc({link_bytes}, DType::kU8));
  VORTEX_ASSIGN_OR_RETURN(Tensor none, big.narrow(0, 0, 0));
  std::vector<Tensor> ls(static_cast<size_t>(u), none), lr(static_cast<size_t>(u), none);
  if (u > 1 && e.rank == 0) ls[1] = big;
  if (u > 1 && e.rank == 1) lr[0] = big;
  VORTEX_ASSIGN_OR_RETURN(auto t_link,
                          time_on(be->stream(), std::max(3, iters / 4), [&] { return comm->all_to_all(ls, lr); }));
  if (e.rank == 0) {
    const Pct q = percentiles(t_qkv), o = percentiles(t_out), l = percentiles(t_link);
    const auto info = be->device_info();
    std::printf(
        "{\"ranks\": %d, \"rows\": %lld, \"gpu\": \"%s\", \"nccl\": \"%s\", "
        "\"all_to_all_qkv_ms\": {\"p10\": %.4f, \"p50\": %.4f, \"p90\": %.4f}, "
        "\"all_to_all_out_ms\": {\"p10\": %.4f, \"p50\": %.4f, \"p90\": %.4f}, "
        "\"block_comm_ms_p50\": %.4f, \"qkv_bytes_sent_per_rank\": %lld, \"all_to_all_qkv_GBps_p50\": %.2f, "
        "\"link_p2p_ms\": {\"p10\": %.4f, \"p50\": %.4f, \"p90\": %.4f}, \"link_p2p_GBps_p50\": %.2f}\n",
        u, static_cast<long long>(rows), info.name.c_str(), nccl_version().ok() ? nccl_version()->c_str() : "?", q.p10,
        q.p50, q.p90, o.p10, o.p50, o.p90, q.p50 + o.p50, static_cast<long long>(bytes_out), bytes_out / (q.p50 * 1e6),
        l.p10, l.p50, l.p90, u > 1 ? link_bytes / (l.p50 * 1e6) : 0.0);
  }
  return comm->barrier();
}

}  // namespace

int main(int argc, char** argv) {
  int gpus = 0, iters = 20;
  int64_t rows = 37810;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--gpus") gpus = std::atoi(argv[i + 1]);
    else if (a == "--rows") rows = std::atoll(argv[i + 1]);
    else if (a == "--iters") iters = std::atoi(argv[i + 1]);
    else return die("unknown flag " + a + " (--gpus N [--rows R] [--iters K])");
  }
  auto env = rank_env_from_environment();
  if (!env.ok()) return die(env.status().message());
  if (!env->has_value()) {
    if (gpus < 1) return die("--gpus N is required");
    LaunchOptions lo;
    lo.argv.assign(argv, argv + argc);
    lo.argv[0] = "/proc/self/exe";
    lo.world = gpus;
    auto r = launch_ranks(lo);
    if (!r.ok()) return die(r.status().message());
    return r->exit_code;
  }
  Status st = rank_main(**env, rows, iters);
  if (!st.ok()) return die("rank " + std::to_string((*env)->rank) + ": " + st.to_string());
  return 0;
}
