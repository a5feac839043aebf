// NcclComm's and Collective's state, shared by nccl_comm.cpp and overlap.cpp. Internal.
#pragma once

#include "trainsim/kernels/nccl_comm.hpp"

#include "device_impl.hpp"

#include <nccl.h>

#include <exception>
#include <string>
#include <vector>

namespace trainsim::kernels {

namespace detail {
// ncclCommFinalize and a bounded poll until it completes (a nonblocking communicator is finalized
// before ncclCommDestroy: NCCL user guide, "Destroying a communicator"). False on an error or
// timeout: the caller aborts instead. Never throws (called from a destructor).
bool finalize(ncclComm_t comm, double timeout_s) noexcept;
} // namespace detail

// Registered with its device while it lives, so that every wait there polls its asynchronous
// errors and can abort it (device_impl.hpp, GpuDevice::Impl::wait).
struct NcclComm::Impl : detail::CommWatch {
    ncclComm_t comm = nullptr;
    int rank = 0, size = 1;
    GpuDevice::Impl* dev = nullptr;
    double* values = nullptr;  // device buffer for max_over_ranks
    std::size_t values_n = 0;

    Impl() = default;
    Impl(const Impl&) = delete;
    Impl& operator=(const Impl&) = delete;
    void watch() {
        if (dev != nullptr) dev->watched.push_back(this);
    }
    ncclResult_t async_error() override {
        ncclResult_t async = ncclSuccess;
        if (comm == nullptr) return ncclSuccess;
        const ncclResult_t r = detail::nccl().CommGetAsyncError(comm, &async);
        return r != ncclSuccess ? r : async;
    }
    void abort() noexcept override {
        if (comm != nullptr) detail::nccl().CommAbort(comm);
        comm = nullptr;
    }
    std::string describe() const override {
        return "communicator of " + std::to_string(size) + " ranks (this is rank " + std::to_string(rank) + ")";
    }
    ~Impl() override {
        if (dev != nullptr) std::erase(dev->watched, static_cast<detail::CommWatch*>(this));
        if (values != nullptr && (dev == nullptr || !dev->aborted)) cudaFree(values);
        if (comm == nullptr) return;
        // ncclCommDestroy waits for the communicator's outstanding operations, which after a
        // failure (a peer died, an error is being thrown through here) may never finish: abort
        // instead whenever the destruction is part of an error (NCCL docs, "Fault tolerance":
        // ncclCommAbort frees the resources and aborts uncompleted operations).
        const bool failed =
            std::uncaught_exceptions() > 0 || async_error() != ncclSuccess || (dev != nullptr && dev->aborted);
        if (failed || !detail::finalize(comm, dev != nullptr ? dev->wait_timeout_s : 60.0))
            detail::nccl().CommAbort(comm);
        else
            detail::nccl().CommDestroy(comm);
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
// Communicators are nonblocking (ncclConfig_t.blocking = 0, NCCL 2.14+): no NCCL call blocks the
// host, so that a rank that never joins, or dies, cannot hang this one. A call on such a
// communicator may return ncclInProgress; NCCL's user guide ("Creating a communication with
// options", "Fault tolerance") requires polling ncclCommGetAsyncError until the state leaves
// ncclInProgress before the next call on it. settle() does that for `comm` after call result
// `r`: returns at once on ncclSuccess, throws KernelError on an error, and after `timeout_s`
// aborts the communicator and throws KernelTimeout naming `what`.
ncclConfig_t nonblocking_config();
void settle(ncclComm_t& comm, ncclResult_t r, std::string_view expr, const std::string& what, double timeout_s);
// Enqueues the collective on `stream` (the device stream, or overlap's communication stream).
void run_collective(Collective::Impl& impl, cudaStream_t stream);
} // namespace detail

} // namespace trainsim::kernels
