#include "trainsim/kernels/attention.hpp"

#include "device_kernels.hpp"
#include "lt_matmul.hpp"

#include <array>
#include <memory>
#include <string>

namespace trainsim::kernels {

std::string describe(const AttentionSpec& s) {
    return std::string("attention ") + (s.backward ? "bwd " : "fwd ") + to_string(s.dtype) +
           " batch_heads=" + std::to_string(s.batch_heads) + " seq=" + std::to_string(s.seq) +
           " head_dim=" + std::to_string(s.head_dim) + (s.causal ? " causal" : "");
}

std::size_t Attention::bytes_needed(const AttentionSpec& s) {
    const auto bh = static_cast<std::size_t>(s.batch_heads), n = static_cast<std::size_t>(s.seq),
               d = static_cast<std::size_t>(s.head_dim);
    // Q, K, V, O (+ dO, dQ, dK, dV) and S (+ dP), all bf16.
    const std::size_t vectors = (s.backward ? 8 : 4) * bh * n * d * 2;
    const std::size_t scores = (s.backward ? 2 : 1) * bh * n * n * 2;
    return vectors + scores;
}

struct Attention::Impl {
    AttentionSpec spec;
    std::string context;
    GpuDevice::Impl* dev = nullptr;
    void* s = nullptr;   // S / P: batch_heads x seq x seq
    void* dp = nullptr;  // dP / dS (backward)
    // Forward: S = Q K^T, O = P V. Backward (FlashAttention-2's work, with S recomputed as the
    // fused kernel does): S = Q K^T, dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q.
    std::unique_ptr<detail::LtMatmul> qk, pv, dv, dpm, dq, dk;
};

Attention::Attention(GpuDevice& device, const AttentionSpec& spec) : impl_(std::make_unique<Impl>()) {
    auto& I = *impl_;
    I.spec = spec;
    I.context = describe(spec);
    I.dev = &device.impl();
    if (spec.dtype != DType::bf16)
        throw KernelUnsupported("cudnnGraphExecute", I.context,
                                "FP8 attention needs cuDNN's fused kernel; the unfused fallback is BF16 only");
    auto& dev = device.impl();
    dev.check_memory(bytes_needed(spec), I.context);

    const auto bh = static_cast<std::size_t>(spec.batch_heads);
    const std::size_t vec = bh * static_cast<std::size_t>(spec.seq * spec.head_dim) * 2;
    const std::size_t sq = bh * static_cast<std::size_t>(spec.seq * spec.seq) * 2;
    std::array<void*, 8> v{};
    const std::array<const char*, 8> names{"attn.q", "attn.k", "attn.v", "attn.o", "attn.do", "attn.dq", "attn.dk",
                                           "attn.dv"};
    for (std::size_t i = 0; i < (spec.backward ? 8u : 4u); ++i) v[i] = dev.scratch(names[i], vec, DType::bf16, I.context);
    I.s = dev.scratch("attn.s", sq, DType::bf16, I.context);
    if (spec.backward) I.dp = dev.scratch("attn.dp", sq, DType::bf16, I.context);
    void *q = v[0], *k = v[1], *vv = v[2], *o = v[3], *dO = v[4], *dq = v[5], *dk = v[6], *dv = v[7];

    auto spec_of = [&](std::int64_t m, std::int64_t n, std::int64_t kk) {
        GemmSpec g;
        g.m = m;
        g.n = n;
        g.k = kk;
        g.batch = spec.batch_heads;
        return g;
    };
    const std::int64_t s = spec.seq, d = spec.head_dim;
    // Every GEMM in the cuBLASLt TN layout (gemm.hpp); a fused kernel's operand layouts differ,
    // which changes the time by a few percent at most for these sizes.
    I.qk = std::make_unique<detail::LtMatmul>(dev, spec_of(s, s, d), q, k, I.s);
    if (!spec.backward) {
        I.pv = std::make_unique<detail::LtMatmul>(dev, spec_of(s, d, s), I.s, vv, o);
    } else {
        I.dv = std::make_unique<detail::LtMatmul>(dev, spec_of(s, d, s), I.s, dO, dv);
        I.dpm = std::make_unique<detail::LtMatmul>(dev, spec_of(s, s, d), dO, vv, I.dp);
        I.dq = std::make_unique<detail::LtMatmul>(dev, spec_of(s, d, s), I.dp, k, dq);
        I.dk = std::make_unique<detail::LtMatmul>(dev, spec_of(s, d, s), I.dp, q, dk);
    }
}

Attention::~Attention() = default;

void Attention::run() {
    auto& I = *impl_;
    cudaStream_t st = I.dev->stream;
    const std::int64_t rows = I.spec.batch_heads * I.spec.seq;
    I.qk->run(st);
    detail::softmax_fwd(I.s, rows, I.spec.seq, I.spec.causal, st, I.context);
    if (!I.spec.backward) {
        I.pv->run(st);
        return;
    }
    I.dv->run(st);
    I.dpm->run(st);
    detail::softmax_bwd(I.s, I.dp, rows, I.spec.seq, st, I.context);
    I.dq->run(st);
    I.dk->run(st);
}

std::string Attention::implementation() const { return "unfused-cublaslt"; }

} // namespace trainsim::kernels
