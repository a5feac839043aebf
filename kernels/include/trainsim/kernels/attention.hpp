// Attention forward / backward for the calibration. The cuDNN frontend (fused flash attention
// through cudnn_frontend.h) was not available when this was written, so this is the documented
// fallback (docs/calibration.md "Attention"): the attention is timed as its GEMMs (cuBLASLt
// strided batched, BF16, one batch entry per head) plus a causal softmax kernel over the
// materialised S = QK^T. It is an *unfused* attention: it moves S through HBM, which flash
// attention never does, so its throughput is a lower bound for a fused kernel; the fit reports it
// but does not write it into the profile's attention efficiencies.
#pragma once

#include "trainsim/kernels/gpu_device.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace trainsim::kernels {

struct AttentionSpec {
    std::int64_t batch_heads = 1;  // batch x heads, one GEMM batch entry each
    std::int64_t seq = 1024;       // query = key length
    std::int64_t head_dim = 128;
    bool causal = true;
    bool backward = false;
    DType dtype = DType::bf16;  // the fallback supports bf16 only
};

[[nodiscard]] std::string describe(const AttentionSpec& s);

class Attention {
public:
    // Throws KernelUnsupported for FP8 (no fused FP8 attention without cuDNN) or when S does not
    // fit in memory; KernelError otherwise.
    Attention(GpuDevice& device, const AttentionSpec& spec);
    ~Attention();
    Attention(const Attention&) = delete;
    Attention& operator=(const Attention&) = delete;

    void run();
    // What was timed, for the sample ("unfused-cublaslt": GEMMs + softmax kernel).
    [[nodiscard]] std::string implementation() const;
    // Device bytes the operation needs (Q, K, V, O, S and for backward the gradients).
    [[nodiscard]] static std::size_t bytes_needed(const AttentionSpec& s);

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

} // namespace trainsim::kernels
