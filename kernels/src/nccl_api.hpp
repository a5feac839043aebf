// NCCL, opened at run time (dlopen) instead of linked. Internal to kernels/.
//
// Why: on the machines trainsim-calibrate is carried to (a rented node with only the PyTorch
// wheel's libnccl.so.2 under site-packages/nvidia/nccl/lib, docs/calibration.md "The GPU bundle"),
// a binary with libnccl.so.2 in its DT_NEEDED list would not even start, and no rpath can name a
// Python environment's folder in advance. Loaded on first use, NCCL is needed only by runs that
// communicate: one-GPU measurements, `fit`, `show` and `env` run without it, and a missing NCCL is
// one clear message naming where it was looked for. The function types come from the nccl.h the
// build saw (decltype), so a signature can never drift from the header; NCCL keeps these entry
// points ABI-stable across 2.x releases (ncclCommSplit needs 2.18 or later).
#pragma once

#include <nccl.h>

#include <string>

namespace trainsim::kernels::detail {

struct NcclApi {
    std::string library; // the file that was loaded
    int version = 0;     // ncclGetVersion of that library: 22809 = 2.28.9
    decltype(&::ncclGetVersion) GetVersion = nullptr;
    decltype(&::ncclGetUniqueId) GetUniqueId = nullptr;
    decltype(&::ncclCommInitRank) CommInitRank = nullptr;
    decltype(&::ncclCommInitRankConfig) CommInitRankConfig = nullptr;
    decltype(&::ncclCommSplit) CommSplit = nullptr;
    decltype(&::ncclCommUserRank) CommUserRank = nullptr;
    decltype(&::ncclCommCount) CommCount = nullptr;
    decltype(&::ncclCommGetAsyncError) CommGetAsyncError = nullptr;
    decltype(&::ncclCommAbort) CommAbort = nullptr;
    decltype(&::ncclCommFinalize) CommFinalize = nullptr;
    decltype(&::ncclCommDestroy) CommDestroy = nullptr;
    decltype(&::ncclGetErrorString) GetErrorString = nullptr;
    decltype(&::ncclGetLastError) GetLastError = nullptr;
    decltype(&::ncclAllReduce) AllReduce = nullptr;
    decltype(&::ncclAllGather) AllGather = nullptr;
    decltype(&::ncclReduceScatter) ReduceScatter = nullptr;
    decltype(&::ncclSend) Send = nullptr;
    decltype(&::ncclRecv) Recv = nullptr;
    decltype(&::ncclGroupStart) GroupStart = nullptr;
    decltype(&::ncclGroupEnd) GroupEnd = nullptr;
};

// The loaded library, opened once per process (thread-safe). Looks, in this order, for
//   $NCCL_HOME/lib/libnccl.so.2 and $NCCL_HOME/lib64/libnccl.so.2,
//   libnccl.so.2 through the dynamic loader (LD_LIBRARY_PATH, the executable's RUNPATH, ld.so.cache),
//   the folder of the libnccl CMake found at build time (TRAINSIM_NCCL_BUILD_DIR).
// Throws NcclNotFound (a KernelError) naming every place tried and why each failed.
const NcclApi& nccl();

// Non-throwing view for provenance and `trainsim-calibrate env`: the API when it loads, else null
// and *why set to the reason.
const NcclApi* try_nccl(std::string* why = nullptr) noexcept;

} // namespace trainsim::kernels::detail
