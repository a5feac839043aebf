// Compute cost of one kernel from the hardware profile (docs/model.md, "Compute costs").
// Calibrated GEMM tables are used where the profile has them (nearest measured shape, scaled by
// FLOPs); otherwise the documented fallback: roofline x efficiency with wave quantisation.
#pragma once

#include "trainsim/model/hardware_profile.hpp"
#include "trainsim/model/workload.hpp"

namespace trainsim::sim {

using model::Bytes;
using model::Time;

class ComputeCost {
public:
    explicit ComputeCost(const model::HardwareProfile& hw);

    // C[m,n] = A[m,k] B[k,n] in precision p.
    [[nodiscard]] Time gemm(model::Precision p, std::int64_t m, std::int64_t n, std::int64_t k) const;
    // Flash attention forward or backward described by the proto.
    [[nodiscard]] Time attention(const model::OpProto& op) const;
    // A memory-bound kernel moving `bytes` (read + write).
    [[nodiscard]] Time memory(Bytes bytes) const;
    // Any compute-stream kernel (gemm, attention, memory).
    [[nodiscard]] Time cost(const model::OpProto& op) const;

    // Fraction of peak a GEMM of this shape reaches in the fallback model (for explain/tests).
    [[nodiscard]] double gemm_efficiency(model::Precision p, std::int64_t m, std::int64_t n, std::int64_t k) const;

private:
    [[nodiscard]] double shape_factor(std::int64_t m, std::int64_t n, std::int64_t k) const;
    const model::HardwareProfile& hw_;
};

} // namespace trainsim::sim
