// Errors raised by the CUDA / cuBLASLt / NCCL layer. Every failing library call becomes a
// KernelError that names the call and the operation (with its shape) it was made for, e.g.
//   cublasLtMatmul: gemm bf16 m=8192 n=8192 k=8192 (algo 0 of 8): CUBLAS_STATUS_EXECUTION_FAILED
#pragma once

#include <stdexcept>
#include <string>

namespace trainsim::kernels {

class KernelError : public std::runtime_error {
public:
    KernelError(std::string call, std::string context, std::string detail)
        : std::runtime_error(call + ": " + context + ": " + detail), call_(std::move(call)),
          context_(std::move(context)), detail_(std::move(detail)) {}
    // The library function that failed ("cudaMalloc", "cublasLtMatmul", "ncclAllReduce", ...).
    [[nodiscard]] const std::string& call() const { return call_; }
    // The operation and shape it was made for ("gemm fp8 e4m3xe4m3 m=... n=... k=...").
    [[nodiscard]] const std::string& context() const { return context_; }
    // The library's own error text.
    [[nodiscard]] const std::string& detail() const { return detail_; }

private:
    std::string call_, context_, detail_;
};

// The operation is not available on this device / library combination (FP8 before sm_89, no
// cuBLASLt algorithm for the shape, not enough memory). Not a failure: the calibration records
// "unsupported" with this reason and goes on.
class KernelUnsupported : public KernelError {
public:
    using KernelError::KernelError;
};

// No usable CUDA device (none present, no driver, or CUDA_VISIBLE_DEVICES hides them all).
class NoCudaDevice : public KernelError {
public:
    explicit NoCudaDevice(std::string detail)
        : KernelError("cudaGetDeviceCount", "no CUDA device", std::move(detail)) {}
};

// NCCL (libnccl.so.2, opened at run time) is not where it was looked for, or too old; the detail
// lists every place tried. Only runs that communicate need it.
class NcclNotFound : public KernelError {
public:
    explicit NcclNotFound(std::string detail) : KernelError("dlopen", "NCCL", std::move(detail)) {}
};

// A wait on the GPU did not finish in time, or NCCL reported an asynchronous error while it ran
// (a peer died, a network error): the communicators of the device were aborted (ncclCommAbort).
class KernelTimeout : public KernelError {
public:
    using KernelError::KernelError;
};

} // namespace trainsim::kernels
