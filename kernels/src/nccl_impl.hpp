// NcclComm's and Collective's state, shared by nccl_comm.cpp and overlap.cpp. Internal.
#pragma once

#include "trainsim/kernels/nccl_comm.hpp"

#include "device_impl.hpp"

#include <nccl.h>

#include <exception>
#include <string>

namespace trainsim::kernels {

struct NcclComm::Impl {
    ncclComm_t comm = nullptr;
    int rank = 0, size = 1;
    GpuDevice::Impl* dev = nullptr;
    double* values = nullptr;  // device buffer for max_over_ranks
    std::size_t values_n = 0;
    ~Impl() {
        if (values != nullptr) cudaFree(values);
        if (comm == nullptr) return;
        // ncclCommDestroy waits for the communicator's outstanding operations, which after a
        // failure (a peer died, an error is being thrown through here) may never finish: abort
        // instead whenever the destruction is part of an error (NCCL docs, "Fault tolerance":
        // ncclCommAbort frees the resources and aborts uncompleted operations).
        ncclResult_t async = ncclSuccess;
        const bool failed = std::uncaught_exceptions() > 0 || ncclCommGetAsyncError(comm, &async) != ncclSuccess ||
                            async != ncclSuccess;
        if (failed) ncclCommAbort(comm);
        else ncclCommDestroy(comm);
    }
};

struct Collective::Impl {
    CollectiveKind kind = CollectiveKind::all_reduce;
    std::size_t bytes = 0;
    NcclComm::Impl* comm = nullptr;
    GpuDevice::Impl* dev = nullptr;
    void* send = nullptr;
    void* recv = nullptr;
    std::string context;
};

namespace detail {
// Enqueues the collective on `stream` (the device stream, or overlap's communication stream).
void run_collective(Collective::Impl& impl, cudaStream_t stream);
} // namespace detail

} // namespace trainsim::kernels
