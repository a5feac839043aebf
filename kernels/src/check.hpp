// Turns CUDA / cuBLASLt / NCCL status codes into KernelError naming the call and the operation.
// Internal to kernels/ (includes CUDA headers).
#pragma once

#include "trainsim/kernels/kernel_error.hpp"

#include "nccl_api.hpp"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>
#include <string_view>

namespace trainsim::kernels::detail {

// "cudaMalloc(&p, n)" -> "cudaMalloc": the function named by a checked expression.
inline std::string call_name(std::string_view expr) {
    const auto paren = expr.find('(');
    return std::string(paren == std::string_view::npos ? expr : expr.substr(0, paren));
}

inline void check_cuda(cudaError_t e, std::string_view expr, const std::string& context) {
    if (e == cudaSuccess) return;
    std::string detail = std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
    // Running out of memory does not poison the context: the operation is skipped as unsupported.
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();  // clear it so the next call does not report it again
        throw KernelUnsupported(call_name(expr), context, "out of device memory: " + detail);
    }
    throw KernelError(call_name(expr), context, detail);
}

inline void check_cublas(cublasStatus_t s, std::string_view expr, const std::string& context) {
    if (s == CUBLAS_STATUS_SUCCESS) return;
    std::string detail = cublasLtGetStatusName(s);
    if (const char* text = cublasLtGetStatusString(s)) detail += std::string(" (") + text + ")";
    if (s == CUBLAS_STATUS_NOT_SUPPORTED) throw KernelUnsupported(call_name(expr), context, detail);
    throw KernelError(call_name(expr), context, detail);
}

// `expr` is a call through the loaded NCCL (nccl().AllReduce(...)): the name reported is NCCL's
// own (ncclAllReduce).
inline void check_nccl(ncclResult_t r, std::string_view expr, const std::string& context, ncclComm_t comm = nullptr) {
    if (r == ncclSuccess || r == ncclInProgress) return;
    const NcclApi* api = try_nccl();
    std::string detail = api != nullptr ? api->GetErrorString(r) : "ncclResult " + std::to_string(static_cast<int>(r));
    if (const char* last = api != nullptr ? api->GetLastError(comm) : nullptr; last != nullptr && *last != '\0')
        detail += std::string(": ") + last;
    std::string call = call_name(expr);
    if (const auto dot = call.rfind('.'); dot != std::string::npos) call = "nccl" + call.substr(dot + 1);
    throw KernelError(call, context, detail);
}

} // namespace trainsim::kernels::detail

#define TS_CUDA(expr, context) ::trainsim::kernels::detail::check_cuda((expr), #expr, (context))
#define TS_CUBLAS(expr, context) ::trainsim::kernels::detail::check_cublas((expr), #expr, (context))
#define TS_NCCL(expr, context, ...) ::trainsim::kernels::detail::check_nccl((expr), #expr, (context), ##__VA_ARGS__)
