// One cuBLASLt matmul with its descriptors and chosen algorithm (internal; used by Gemm,
// Attention and OverlapGemm). See gemm.hpp for the layout and precision conventions.
#pragma once

#include "trainsim/kernels/gemm.hpp"

#include "device_impl.hpp"

#include <cublasLt.h>

#include <string>
#include <vector>

namespace trainsim::kernels::detail {

class LtMatmul {
public:
    // a: k x m (column-major, used transposed), b: k x n, d: m x n (bf16), per batch entry.
    LtMatmul(GpuDevice::Impl& dev, const GemmSpec& spec, const void* a, const void* b, void* d);
    ~LtMatmul();
    LtMatmul(const LtMatmul&) = delete;
    LtMatmul& operator=(const LtMatmul&) = delete;

    void run(cudaStream_t stream);
    [[nodiscard]] int algo_index() const { return chosen_; }
    [[nodiscard]] int algo_count() const { return static_cast<int>(algos_.size()); }
    [[nodiscard]] const std::string& context() const { return context_; }

private:
    void run_algo(std::size_t i, cudaStream_t stream);
    void pick_fastest();

    GpuDevice::Impl& dev_;
    GemmSpec spec_;
    std::string context_;
    const void* a_;
    const void* b_;
    void* d_;
    cublasLtMatmulDesc_t op_ = nullptr;
    cublasLtMatrixLayout_t a_desc_ = nullptr, b_desc_ = nullptr, d_desc_ = nullptr;
    cublasLtMatmulPreference_t pref_ = nullptr;
    std::vector<cublasLtMatmulHeuristicResult_t> algos_;
    int chosen_ = 0;
};

} // namespace trainsim::kernels::detail
