// NcclCommunicator: the Communicator of one process per GPU, over NCCL loaded at run time (dlopen of
// $VORTEX_NCCL_LIBRARY, else libnccl.so.2 from the loader path: the `nvidia-nccl-cu13` wheel's
// nvidia/nccl/lib or the distribution's libnccl2), so a build runs on machines without NCCL until a
// multi-GPU run asks for it. Non-blocking communicator (config.blocking = 0): every call's ncclResult_t
// is checked, and each collective is enqueued on the backend's stream, then polled (cudaEventQuery +
// ncclCommGetAsyncError) until done or the timeout, which aborts the communicator (ncclCommAbort) and
// fails with a message naming the collective. NCCL_NVLS_ENABLE=0 is set before initialisation (NVLink
// multicast is off on the lent machines). Compiled only with the CUDA backend. Tested by
// tests/dist/nccl_test.cpp (label gpu: a world of size 1 on one GPU, and the row-range exchanges).
#pragma once

#include <array>
#include <memory>
#include <string>

#include "dist/communicator.h"

struct CUstream_st;

namespace vortex {

// ncclUniqueId's 128 bytes (NCCL_UNIQUE_ID_BYTES), passed from rank 0 to the others through a file.
using NcclUniqueIdBytes = std::array<char, 128>;

// Loads NCCL (once per process); kUnsupported with what to install when it cannot be found.
Status nccl_load();
// "2.28.9" of the loaded library.
Result<std::string> nccl_version();
// A fresh unique id (rank 0 calls this and publishes it).
Result<NcclUniqueIdBytes> nccl_unique_id();
// Joins the world of `size` ranks as `rank` on the current CUDA device; collectives run on `stream`
// (the backend's). Blocks until every rank has joined or options.timeout passes.
Result<std::unique_ptr<Communicator>> make_nccl_communicator(const NcclUniqueIdBytes& id, int rank, int size,
                                                             CUstream_st* stream, CommOptions options);

}  // namespace vortex
