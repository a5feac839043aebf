// GpuDevice's state, shared by the kernels/ sources. Internal (includes CUDA headers).
#pragma once

#include "trainsim/kernels/gpu_device.hpp"

#include "check.hpp"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace trainsim::kernels {

namespace detail {
class Nvml;  // libnvidia-ml opened at run time (gpu_device.cpp)

// A communicator whose asynchronous errors every wait on its device polls (NcclComm registers
// its state; nccl_comm.cpp).
class CommWatch {
public:
    virtual ~CommWatch() = default;
    // ncclCommGetAsyncError's answer (ncclSuccess while healthy).
    [[nodiscard]] virtual ncclResult_t async_error() = 0;
    // ncclCommAbort: uncompleted operations are aborted, the communicator is gone.
    virtual void abort() noexcept = 0;
    [[nodiscard]] virtual std::string describe() const = 0;
};
} // namespace detail

struct GpuDevice::Impl {
    DeviceInfo info;
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    void* l2_flush = nullptr;
    std::size_t l2_flush_bytes = 0;
    unsigned* l2_flush_sink = nullptr; // the flush kernel's never-taken store (keeps its loads)
    cublasLtHandle_t lt = nullptr;
    // cuBLASLt workspace: 32 MiB, what Transformer Engine and PyTorch give Hopper GEMMs
    // (smaller workspaces rule out some split-K / stream-K algorithms).
    static constexpr std::size_t kWorkspaceBytes = 32u << 20;
    void* workspace = nullptr;
    // Per-tensor FP8 scale factors (device fp32, all 1.0), pointed to by the matmul descriptors:
    // A's at scales[0], B's at scales[kScaleStride], each 16-byte aligned as cuBLASLt requires.
    static constexpr std::size_t kScaleStride = 4;
    float* scales = nullptr;
    std::unique_ptr<detail::Nvml> nvml;

    // Named scratch buffers, grown on demand and reused across operations so that a plan of
    // hundreds of shapes does not call cudaMalloc hundreds of times.
    struct Slot {
        void* ptr = nullptr;
        std::size_t bytes = 0;
        DType filled_as = DType::fp32;
        bool positive = false;
    };
    std::map<std::string, Slot> slots;
    std::uint64_t seed = 1;

    // Waits on this device (timers, synchronize, the overlap's communication stream, NCCL's
    // max over ranks) poll NCCL's asynchronous errors and give up after wait_timeout_s.
    std::vector<detail::CommWatch*> watched;
    double wait_timeout_s = GpuDevice::kDefaultWaitTimeoutSeconds;
    bool aborted = false; // communicators aborted after an error: teardown must not wait on the GPU
    // Until `event` completes (null: until `s` is idle): cudaEventQuery / cudaStreamQuery in a loop
    // that yields the CPU (NCCL's proxy threads need it) and polls ncclCommGetAsyncError of every
    // watched communicator, as nccl-tests' testStreamSynchronize does (NVIDIA/nccl-tests
    // src/common.cu). On an asynchronous error or after wait_timeout_s every watched communicator
    // is aborted (ncclCommAbort) and KernelTimeout names `what`.
    void wait(cudaStream_t s, cudaEvent_t event, const std::string& what);
    void abort_watched() noexcept;

    // A buffer of at least `bytes` filled with random values of type `fill`.
    void* scratch(const std::string& name, std::size_t bytes, DType fill, const std::string& context,
                  bool positive = false);
    void release_scratch();
    void check_memory(std::size_t bytes, const std::string& context) const;

    Impl() = default;
    ~Impl();
    Impl(const Impl&) = delete;
    Impl& operator=(const Impl&) = delete;
};

} // namespace trainsim::kernels
