#include "trainsim/sim/compute_cost.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace trainsim::sim {

using model::Precision;

namespace {
// Reference shape at which profile GEMM efficiencies are quoted (8192^3, the size cuBLAS
// benchmarks and trainsim-calibrate report).
constexpr std::int64_t kRefDim = 8192;
// Per-tile fixed cost expressed in K elements: the main loop over K is preceded by a prologue
// (pipeline fill) and followed by the epilogue (C write-out). CUTLASS Hopper kernels keep 4-7
// K-stages of 64 in flight; ~128 K-elements of equivalent time is the documented estimate
// (docs/model.md), giving 94% at K=2048 and 80% at K=512 relative to an infinite K.
constexpr double kTileOverheadK = 128.0;
// Sequence length at which flash attention reaches half its long-sequence efficiency.
// FlashAttention-2 (Dao 2023, arXiv 2307.08691) Fig. 4/6, causal, head dim 128 on A100:
// ~130 TFLOP/s at 512 vs ~ 200 at 8k-16k, i.e. 0.62 of the asymptote at s = 512 -> s_half ~ 320.
constexpr double kAttentionHalfSeq = 320.0;
} // namespace

ComputeCost::ComputeCost(const model::HardwareProfile& hw) : hw_(hw) {}

double ComputeCost::shape_factor(std::int64_t m, std::int64_t n, std::int64_t k) const {
    // Wave quantisation: output tiles are spread over the SMs in waves; a partial last wave
    // leaves SMs idle.
    const auto ceil_div = [](std::int64_t a, std::int64_t b) { return (a + b - 1) / b; };
    const double tiles = static_cast<double>(ceil_div(m, hw_.gemm_tile_m) * ceil_div(n, hw_.gemm_tile_n));
    const double sms = std::max(1, hw_.sm_count);
    const double waves = std::ceil(tiles / sms);
    const double wave_eff = tiles / (waves * sms);
    // Edge tiles that are only partly filled do full work.
    const double fill = (static_cast<double>(m) * static_cast<double>(n)) /
                        (static_cast<double>(ceil_div(m, hw_.gemm_tile_m) * hw_.gemm_tile_m) *
                         static_cast<double>(ceil_div(n, hw_.gemm_tile_n) * hw_.gemm_tile_n));
    const double k_eff = static_cast<double>(k) / (static_cast<double>(k) + kTileOverheadK);
    return wave_eff * fill * k_eff;
}

double ComputeCost::gemm_efficiency(Precision p, std::int64_t m, std::int64_t n, std::int64_t k) const {
    auto it = hw_.gemm_efficiency.find(p);
    double ref = 0.7;
    if (it != hw_.gemm_efficiency.end()) ref = it->second;
    else if (p == Precision::fp16 && hw_.gemm_efficiency.contains(Precision::bf16)) ref = hw_.gemm_efficiency.at(Precision::bf16);
    const double eff = ref * shape_factor(m, n, k) / shape_factor(kRefDim, kRefDim, kRefDim);
    return std::min(eff, 1.0);
}

Time ComputeCost::gemm(Precision p, std::int64_t m, std::int64_t n, std::int64_t k) const {
    const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    // Calibrated table: nearest measured shape (log distance), scaled by FLOPs.
    const model::GemmSample* best = nullptr;
    double best_d = std::numeric_limits<double>::infinity();
    for (const auto& s : hw_.gemm_table) {
        if (s.precision != p) continue;
        const double d = std::pow(std::log(static_cast<double>(m) / static_cast<double>(s.m)), 2) +
                         std::pow(std::log(static_cast<double>(n) / static_cast<double>(s.n)), 2) +
                         std::pow(std::log(static_cast<double>(k) / static_cast<double>(s.k)), 2);
        if (d < best_d) {
            best_d = d;
            best = &s;
        }
    }
    const double elt = p == Precision::fp8 ? 1.0 : 2.0;
    const double bytes = elt * static_cast<double>(m * k + k * n) + 2.0 * static_cast<double>(m * n);
    const double t_mem = bytes / (hw_.hbm_bandwidth.value() * hw_.hbm_efficiency);
    if (best != nullptr && best_d < 0.25) {  // within ~1.6x on every dimension combined
        const double sflops = 2.0 * static_cast<double>(best->m) * static_cast<double>(best->n) *
                              static_cast<double>(best->k);
        const double rate = sflops / best->time.seconds();
        return Time::from_seconds(std::max(flops / rate, t_mem)) + hw_.kernel_overhead;
    }
    auto peak_it = hw_.dense_peak.find(p);
    const double peak = peak_it != hw_.dense_peak.end() ? peak_it->second.value() : hw_.dense_peak.begin()->second.value();
    const double t_math = flops / (peak * gemm_efficiency(p, m, n, k));
    return Time::from_seconds(std::max(t_math, t_mem)) + hw_.kernel_overhead;
}

Time ComputeCost::attention(const model::OpProto& op) const {
    const double peak = hw_.dense_peak.at(Precision::bf16).value();
    const double base = op.kind == model::OpKind::attention_fwd ? hw_.attention_fwd_efficiency : hw_.attention_bwd_efficiency;
    const double s = static_cast<double>(op.seq_kv);
    const double eff = base * s / (s + kAttentionHalfSeq);
    const double t_mem = op.bytes.value() / (hw_.hbm_bandwidth.value() * hw_.hbm_efficiency);
    return Time::from_seconds(std::max(op.flops.value() / (peak * eff), t_mem)) + hw_.kernel_overhead;
}

Time ComputeCost::memory(Bytes bytes) const {
    return Time::from_seconds(bytes.value() / (hw_.hbm_bandwidth.value() * hw_.hbm_efficiency)) + hw_.kernel_overhead;
}

Time ComputeCost::cost(const model::OpProto& op) const {
    switch (op.kind) {
    case model::OpKind::gemm: return gemm(op.precision, op.m, op.n, op.k);
    case model::OpKind::attention_fwd:
    case model::OpKind::attention_bwd: return attention(op);
    case model::OpKind::memory: return memory(op.bytes);
    default: break;
    }
    throw std::logic_error("ComputeCost::cost called for a communication op '" + op.name + "'");
}

} // namespace trainsim::sim
