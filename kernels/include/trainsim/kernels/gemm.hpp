// A GEMM timed through cuBLASLt, the library frameworks (Megatron, Transformer Engine) call:
// D[m,n] = A[m,k] * B[k,n] with beta = 0, TN layout (A transposed: the only layout FP8 tensor
// cores accept on Hopper), BF16 output, FP32 accumulation, a 32 MiB workspace. FP8 operands carry
// per-tensor scale pointers (as TE's delayed scaling does); E4M3 x E4M3 is the forward GEMM,
// E4M3 x E5M2 / E5M2 x E4M3 the backward ones (gradients in E5M2). E5M2 x E5M2 does not exist.
#pragma once

#include "trainsim/kernels/gpu_device.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace trainsim::kernels {

// Which cuBLASLt algorithm is timed.
enum class AlgoPolicy {
    heuristic_first,  // the heuristic's first answer: what a framework runs
    best_of_n,        // the fastest of the heuristic's first n answers (timed here)
};

struct GemmSpec {
    std::int64_t m = 0, n = 0, k = 0;
    DType a = DType::bf16;  // operand types: bf16, or fp8_e4m3 / fp8_e5m2 (not both e5m2)
    DType b = DType::bf16;
    std::int64_t batch = 1;  // > 1: strided batched (attention's per-head GEMMs)
    // FP8 only: accumulate in the tensor core's reduced-precision accumulator (TE does this for
    // the forward GEMM, not for dgrad / wgrad); faster on Hopper.
    bool fast_accum = false;
    AlgoPolicy policy = AlgoPolicy::heuristic_first;
    int candidates = 8;  // heuristic answers requested (best_of_n times all of them)
};

// "gemm bf16 m=8192 n=8192 k=8192" (used in error messages and sample labels).
[[nodiscard]] std::string describe(const GemmSpec& s);

class Gemm {
public:
    // Allocates (or reuses) operand buffers filled with random values, asks the heuristic and,
    // for best_of_n, times every candidate. Throws KernelUnsupported when the device has no FP8
    // tensor cores or the heuristic returns no algorithm for the shape; KernelError otherwise.
    Gemm(GpuDevice& device, const GemmSpec& spec);
    ~Gemm();
    Gemm(const Gemm&) = delete;
    Gemm& operator=(const Gemm&) = delete;

    // Enqueues one call on the device's stream.
    void run();
    [[nodiscard]] const GemmSpec& spec() const;
    // Index of the algorithm used among the heuristic's answers, and how many it returned.
    [[nodiscard]] int algo_index() const;
    [[nodiscard]] int algo_count() const;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

} // namespace trainsim::kernels
