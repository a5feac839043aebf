#include "trainsim/kernels/gemm.hpp"

#include "lt_matmul.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace trainsim::kernels {

namespace {

cudaDataType_t cuda_type(DType t) {
    switch (t) {
    case DType::bf16: return CUDA_R_16BF;
    case DType::fp8_e4m3: return CUDA_R_8F_E4M3;
    case DType::fp8_e5m2: return CUDA_R_8F_E5M2;
    case DType::fp32: return CUDA_R_32F;
    }
    return CUDA_R_16BF;
}

bool is_fp8(DType t) { return t == DType::fp8_e4m3 || t == DType::fp8_e5m2; }

} // namespace

std::string describe(const GemmSpec& s) {
    std::string prec = s.a == s.b ? to_string(s.a) : std::string(to_string(s.a)) + "x" + to_string(s.b);
    std::string out = "gemm " + prec + " m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
                      " k=" + std::to_string(s.k);
    if (s.batch > 1) out += " batch=" + std::to_string(s.batch);
    return out;
}

namespace detail {

LtMatmul::LtMatmul(GpuDevice::Impl& dev, const GemmSpec& spec, const void* a, const void* b, void* d)
    : dev_(dev), spec_(spec), context_(describe(spec)), a_(a), b_(b), d_(d) {
    const bool fp8 = is_fp8(spec.a) || is_fp8(spec.b);
    if (fp8 && dev.info.cc_major * 10 + dev.info.cc_minor < 89)
        throw KernelUnsupported("cublasLtMatmul", context_,
                                "FP8 tensor cores need compute capability >= 8.9; this device is " +
                                    std::to_string(dev.info.cc_major) + "." + std::to_string(dev.info.cc_minor));
    if (fp8 && (is_fp8(spec.a) != is_fp8(spec.b)))
        throw KernelUnsupported("cublasLtMatmul", context_, "FP8 GEMMs need both operands in FP8");
    if (spec.a == DType::fp8_e5m2 && spec.b == DType::fp8_e5m2)
        throw KernelUnsupported("cublasLtMatmul", context_, "E5M2 x E5M2 has no cuBLASLt kernel (one operand must be E4M3)");
    if (fp8 && (spec.m % 16 != 0 || spec.n % 16 != 0 || spec.k % 16 != 0))
        throw KernelUnsupported("cublasLtMatmul", context_, "FP8 GEMMs need m, n, k multiples of 16");

    const std::string& ctx = context_;
    TS_CUBLAS(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F), ctx);
    const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;  // "TN"
    TS_CUBLAS(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)), ctx);
    TS_CUBLAS(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)), ctx);
    if (fp8) {
        // Each scale on its own 16-byte boundary: cuBLASLt 12.9+ refuses scale pointers that are
        // not 16-byte aligned (issue #17; TransformerEngine PR #1925, CUDA 13.1 release notes), and
        // `scales + 1` is only 4-byte aligned.
        const void* sa = dev.scales;
        const void* sb = dev.scales + GpuDevice::Impl::kScaleStride;
        TS_CUBLAS(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof(sa)), ctx);
        TS_CUBLAS(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof(sb)), ctx);
        const std::int8_t fast = spec.fast_accum ? 1 : 0;
        TS_CUBLAS(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)), ctx);
    }
    const auto m = static_cast<std::uint64_t>(spec.m), n = static_cast<std::uint64_t>(spec.n),
               k = static_cast<std::uint64_t>(spec.k);
    TS_CUBLAS(cublasLtMatrixLayoutCreate(&a_desc_, cuda_type(spec.a), k, m, static_cast<std::int64_t>(k)), ctx);
    TS_CUBLAS(cublasLtMatrixLayoutCreate(&b_desc_, cuda_type(spec.b), k, n, static_cast<std::int64_t>(k)), ctx);
    TS_CUBLAS(cublasLtMatrixLayoutCreate(&d_desc_, CUDA_R_16BF, m, n, static_cast<std::int64_t>(m)), ctx);
    if (spec.batch > 1) {
        const auto batch = static_cast<std::int32_t>(spec.batch);
        auto batched = [&](cublasLtMatrixLayout_t l, std::int64_t stride) {
            TS_CUBLAS(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)), ctx);
            TS_CUBLAS(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                       sizeof(stride)),
                      ctx);
        };
        batched(a_desc_, spec.m * spec.k);
        batched(b_desc_, spec.k * spec.n);
        batched(d_desc_, spec.m * spec.n);
    }
    TS_CUBLAS(cublasLtMatmulPreferenceCreate(&pref_), ctx);
    const std::uint64_t ws = GpuDevice::Impl::kWorkspaceBytes;
    TS_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
              ctx);

    std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<std::size_t>(std::max(1, spec.candidates)));
    int returned = 0;
    // C is not read (beta = 0) but must be described: same layout and type as D.
    TS_CUBLAS(cublasLtMatmulAlgoGetHeuristic(dev.lt, op_, a_desc_, b_desc_, d_desc_, d_desc_, pref_,
                                             static_cast<int>(results.size()), results.data(), &returned),
              ctx);
    for (int i = 0; i < returned; ++i)
        if (results[static_cast<std::size_t>(i)].state == CUBLAS_STATUS_SUCCESS)
            algos_.push_back(results[static_cast<std::size_t>(i)]);
    if (algos_.empty())
        throw KernelUnsupported("cublasLtMatmulAlgoGetHeuristic", ctx, "no algorithm for this shape and precision");
    if (spec.policy == AlgoPolicy::best_of_n && algos_.size() > 1) pick_fastest();
}

LtMatmul::~LtMatmul() {
    if (pref_ != nullptr) cublasLtMatmulPreferenceDestroy(pref_);
    if (d_desc_ != nullptr) cublasLtMatrixLayoutDestroy(d_desc_);
    if (b_desc_ != nullptr) cublasLtMatrixLayoutDestroy(b_desc_);
    if (a_desc_ != nullptr) cublasLtMatrixLayoutDestroy(a_desc_);
    if (op_ != nullptr) cublasLtMatmulDescDestroy(op_);
}

void LtMatmul::run_algo(std::size_t i, cudaStream_t stream) {
    const float alpha = 1.0f, beta = 0.0f;
    TS_CUBLAS(cublasLtMatmul(dev_.lt, op_, &alpha, a_, a_desc_, b_, b_desc_, &beta, d_, d_desc_, d_, d_desc_,
                             &algos_[i].algo, dev_.workspace, GpuDevice::Impl::kWorkspaceBytes, stream),
              context_ + " (algo " + std::to_string(i) + " of " + std::to_string(algos_.size()) + ")");
}

void LtMatmul::run(cudaStream_t stream) { run_algo(static_cast<std::size_t>(chosen_), stream); }

void LtMatmul::pick_fastest() {
    // Each candidate: 2 untimed calls, then the median of 5 event-timed calls. Candidates that
    // fail to launch (rare: a heuristic answer the kernel then rejects) are skipped.
    constexpr int kWarmup = 2, kTimed = 5;
    double best = 0.0;
    int best_i = -1;
    for (std::size_t i = 0; i < algos_.size(); ++i) {
        try {
            for (int w = 0; w < kWarmup; ++w) run_algo(i, dev_.stream);
            std::vector<double> t;
            for (int r = 0; r < kTimed; ++r) {
                TS_CUDA(cudaEventRecord(dev_.start, dev_.stream), context_);
                run_algo(i, dev_.stream);
                TS_CUDA(cudaEventRecord(dev_.stop, dev_.stream), context_);
                TS_CUDA(cudaEventSynchronize(dev_.stop), context_);
                float ms = 0.0f;
                TS_CUDA(cudaEventElapsedTime(&ms, dev_.start, dev_.stop), context_);
                t.push_back(static_cast<double>(ms));
            }
            std::nth_element(t.begin(), t.begin() + kTimed / 2, t.end());
            const double med = t[kTimed / 2];
            if (best_i < 0 || med < best) {
                best = med;
                best_i = static_cast<int>(i);
            }
        } catch (const KernelUnsupported&) {
            continue;
        }
    }
    if (best_i < 0) throw KernelUnsupported("cublasLtMatmul", context_, "no heuristic algorithm ran");
    chosen_ = best_i;
}

} // namespace detail

struct Gemm::Impl {
    GemmSpec spec;
    GpuDevice::Impl* dev = nullptr;
    std::unique_ptr<detail::LtMatmul> mm;
};

Gemm::Gemm(GpuDevice& device, const GemmSpec& spec) : impl_(std::make_unique<Impl>()) {
    impl_->spec = spec;
    impl_->dev = &device.impl();
    auto& dev = device.impl();
    const std::string ctx = describe(spec);
    const auto batch = static_cast<std::size_t>(std::max<std::int64_t>(1, spec.batch));
    const std::size_t a_bytes = batch * static_cast<std::size_t>(spec.m * spec.k) * size_of(spec.a);
    const std::size_t b_bytes = batch * static_cast<std::size_t>(spec.k * spec.n) * size_of(spec.b);
    const std::size_t d_bytes = batch * static_cast<std::size_t>(spec.m * spec.n) * size_of(DType::bf16);
    void* a = dev.scratch("gemm.a", a_bytes, spec.a, ctx);
    void* b = dev.scratch("gemm.b", b_bytes, spec.b, ctx);
    void* d = dev.scratch("gemm.d", d_bytes, DType::bf16, ctx);
    impl_->mm = std::make_unique<detail::LtMatmul>(dev, spec, a, b, d);
}

Gemm::~Gemm() = default;

void Gemm::run() { impl_->mm->run(impl_->dev->stream); }
const GemmSpec& Gemm::spec() const { return impl_->spec; }
int Gemm::algo_index() const { return impl_->mm->algo_index(); }
int Gemm::algo_count() const { return impl_->mm->algo_count(); }

} // namespace trainsim::kernels
