// Compute cost of one kernel from the hardware profile (docs/model.md, "Compute costs").
// Calibrated GEMM tables are used where the profile has them (nearest measured shape, scaled by
// FLOPs); otherwise the documented fallback: roofline x efficiency with wave quantisation.
#pragma once

#include "trainsim/model/core/hardware_profile.hpp"
#include "trainsim/model/workload/workload.hpp"

namespace trainsim::sim {

using model::Bytes;
using model::Time;

class ComputeCost {
public:
    explicit ComputeCost(const model::HardwareProfile& hw);

    // `batch` independent products C[m,n] = A[m,k] B[k,n] in precision p (one kernel);
    // split_accumulate: an FP8 GEMM with FP32-promoted accumulation (backward pass).
    // A shape in the calibrated table costs its measured time (which holds the launch cost)
    // over the sustained-clock ratio; others the fallback model.
    [[nodiscard]] Time gemm(model::Precision p, std::int64_t m, std::int64_t n, std::int64_t k,
                            std::int64_t batch = 1, bool split_accumulate = false) const;
    // Flash attention forward or backward described by the proto.
    [[nodiscard]] Time attention(const model::OpProto& op) const;
    // A memory-bound kernel moving `bytes` (read + write).
    [[nodiscard]] Time memory(Bytes bytes) const;
    // The host loop and copies of a list-API collective (OpProto::copy_slices): per rank one view
    // built in Python and one copy kernel, the copies together reading and writing the whole
    // buffer once. Zero for a flat collective.
    [[nodiscard]] Time slice_copies(const model::OpProto& op) const;
    // Any compute-stream kernel (gemm, attention, memory).
    [[nodiscard]] Time cost(const model::OpProto& op) const;

    // Fraction of peak a GEMM of this shape reaches in the fallback model (for explain/tests).
    [[nodiscard]] double gemm_efficiency(model::Precision p, std::int64_t m, std::int64_t n, std::int64_t k,
                                         std::int64_t batch = 1) const;

private:
    // Utilisation of the tensor cores by the tiling: the best of the kernel's tile shapes.
    // k_rate_ratio: K-loop speed relative to BF16 (2 for FP8), scaling the fixed per-tile cost.
    [[nodiscard]] double shape_factor(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch,
                                      double k_rate_ratio) const;
    const model::HardwareProfile& hw_;
};

} // namespace trainsim::sim
