#include "trainsim/sim/cost/compute_cost.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

namespace trainsim::sim {

using model::Precision;

namespace {
// Reference shape at which profile GEMM efficiencies are quoted (8192^3, the size cuBLAS
// benchmarks and trainsim-calibrate report).
constexpr std::int64_t kRefDim = 8192;
// Per-tile fixed cost expressed in K elements at the BF16 rate: the main loop over K is preceded
// by a prologue (pipeline fill) and followed by the epilogue (C write-out). Fitted on XLA's
// measured H100 table (xla/service/gpu/model/matmul_interpolator_data.h, section sm_90; 135 BF16
// shapes with m, n >= 1024, batch 1-4; tests/data/xla-h100-gemm.csv): time = FLOPs / (E * shape
// factor of this file) + t0 fits with K0 = 160-192 and t0 = 5.25-5.5 us (the profile's
// kernel_overhead) on two revisions of the table, rms error 2.7-3.1%; e.g.
// 4096 x 4096 at K = 512 / 1024 / 2048 / 4096 -> 552 / 685 / 736 / 780 TFLOP/s. K0 = 176 gives
// 92% at K = 2048 and 74% at K = 512 relative to an infinite K. At the FP8 rate the same fixed
// time covers twice as many K elements (K0 = 352), as FP8 K-sweeps show (tilelang H800 FP8
// 8192^2: 1129 / 1467 / 1541 TFLOP/s at K = 1024 / 4096 / 16384 -> 0.73 / 0.95 of K = 16384;
// the model gives 0.76 / 0.94). Used for every GPU: A100 has no section in the table to fit.
constexpr double kTileOverheadK = 176.0;
// Sequence length at which flash attention reaches half its long-sequence efficiency.
// FlashAttention-2 (Dao 2023, arXiv 2307.08691) Fig. 4/6, causal, head dim 128 on A100:
// ~130 TFLOP/s at 512 vs ~ 200 at 8k-16k, i.e. 0.62 of the asymptote at s = 512 -> s_half ~ 320.
constexpr double kAttentionHalfSeq = 320.0;
// Throughput of the Triton flash-attention kernel relative to the fused (FlashAttention-2 /
// cuDNN) kernel of the profile: FlashAttention-2 paper (arXiv 2307.08691) Fig. 4, A100, causal,
// head dim 128: Triton ~ 100-130 vs FlashAttention-2 ~ 160-190 TFLOP/s forward -> ~0.65.
constexpr double kTritonVsFlash = 0.65;
// Relative throughput of the half-width (128x128) and quarter (64x128) tiles: smaller tiles
// load each operand element for fewer FMAs. Estimated from the operand reuse (arithmetic
// intensity per tile 2*tm*tn/(tm+tn): 85 and 51 vs 171 FLOP/B for 128x256), documented in
// docs/model.md; they only matter for skinny GEMMs.
constexpr double kHalfTileEfficiency = 0.92;
constexpr double kQuarterTileEfficiency = 0.80;
} // namespace

ComputeCost::ComputeCost(const model::HardwareProfile& hw) : hw_(hw) {}

double ComputeCost::shape_factor(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch,
                                 double k_rate_ratio) const {
    const auto ceil_div = [](std::int64_t a, std::int64_t b) { return (a + b - 1) / b; };
    const double sms = std::max(1, hw_.sm_count);
    const double k0 = kTileOverheadK * k_rate_ratio;
    const double k_eff = static_cast<double>(k) / (static_cast<double>(k) + k0);
    // cuBLAS picks among tile shapes; smaller tiles fit narrow matrices and fill partial waves
    // but re-read operands more often, which costs them a fixed share of throughput.
    double best = 0;
    // Profiles hold tiles of at least 16 x 8 (profile_reader.cpp); a profile built in memory is
    // held to 1 x 1 so that no tile is 0 wide.
    const std::int64_t tile_m = std::max(1, hw_.gemm_tile_m), tile_n = std::max(1, hw_.gemm_tile_n);
    const std::int64_t half_m = std::max<std::int64_t>(1, tile_m / 2), half_n = std::max<std::int64_t>(1, tile_n / 2);
    for (const auto& [tm, tn, tile_eff] : {std::tuple{tile_m, tile_n, 1.0},
                                           std::tuple{tile_m, half_n, kHalfTileEfficiency},
                                           std::tuple{half_m, half_n, kQuarterTileEfficiency}}) {
        // Wave quantisation: output tiles are spread over the SMs in waves; a partial last wave
        // leaves SMs idle. Edge tiles that are only partly filled do full work.
        const double tiles = static_cast<double>(batch * ceil_div(m, tm) * ceil_div(n, tn));
        const double waves = std::ceil(tiles / sms);
        const double wave_eff = tiles / (waves * sms);
        const double fill = (static_cast<double>(m) * static_cast<double>(n)) /
                            (static_cast<double>(ceil_div(m, tm) * tm) * static_cast<double>(ceil_div(n, tn) * tn));
        best = std::max(best, wave_eff * fill * tile_eff);
    }
    return best * k_eff;
}

double ComputeCost::gemm_efficiency(Precision p, std::int64_t m, std::int64_t n, std::int64_t k,
                                    std::int64_t batch) const {
    auto it = hw_.gemm_efficiency.find(p);
    double ref = 0.7;
    if (it != hw_.gemm_efficiency.end()) ref = it->second;
    else if (p == Precision::fp16 && hw_.gemm_efficiency.contains(Precision::bf16)) ref = hw_.gemm_efficiency.at(Precision::bf16);
    // FP8 runs the K loop at twice the BF16 rate per tile.
    const double rate = p == Precision::fp8 ? 2.0 : 1.0;
    const double eff = ref * shape_factor(m, n, k, batch, rate) / shape_factor(kRefDim, kRefDim, kRefDim, 1, rate);
    return std::min(eff, 1.0);
}

Time ComputeCost::gemm(Precision p, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch,
                       bool split_accumulate) const {
    // FP8 backward GEMMs with split accumulation run at a fraction of the fast rate.
    const double speed = split_accumulate ? hw_.fp8_split_accumulate_speed : 1.0;
    const double flops = 2.0 * static_cast<double>(batch) * static_cast<double>(m) * static_cast<double>(n) *
                         static_cast<double>(k);
    // Calibrated table: nearest measured shape (log distance), scaled by FLOPs.
    const model::GemmSample* best = nullptr;
    double best_d = std::numeric_limits<double>::infinity();
    for (const auto& s : hw_.gemm_table) {
        if (s.precision != p || batch != 1) continue;
        const double d = std::pow(std::log(static_cast<double>(m) / static_cast<double>(s.m)), 2) +
                         std::pow(std::log(static_cast<double>(n) / static_cast<double>(s.n)), 2) +
                         std::pow(std::log(static_cast<double>(k) / static_cast<double>(s.k)), 2);
        if (d < best_d) {
            best_d = d;
            best = &s;
        }
    }
    const double elt = p == Precision::fp8 ? 1.0 : 2.0;
    const double bytes = static_cast<double>(batch) * (elt * static_cast<double>(m * k + k * n) + 2.0 * static_cast<double>(m * n));
    const double t_mem = bytes / (hw_.hbm_bandwidth.value() * hw_.hbm_efficiency);
    if (best != nullptr && best_d < 0.25) {  // within ~1.6x on every dimension combined
        const double sflops = 2.0 * static_cast<double>(best->m) * static_cast<double>(best->n) *
                              static_cast<double>(best->k);
        // The measured time already holds the launch and tail cost, so none is added; the
        // measurement is a short benchmark, so the sustained training clock applies as below.
        const double rate = sflops / best->time.seconds() * hw_.sustained_clock_ratio * speed;
        return Time::from_seconds(std::max(flops / rate, t_mem));
    }
    auto peak_it = hw_.dense_peak.find(p);
    const double peak = peak_it != hw_.dense_peak.end() ? peak_it->second.value() : hw_.dense_peak.begin()->second.value();
    const double t_math = flops / (peak * hw_.sustained_clock_ratio * speed * gemm_efficiency(p, m, n, k, batch));
    return Time::from_seconds(std::max(t_math, t_mem)) + hw_.kernel_overhead;
}

Time ComputeCost::attention(const model::OpProto& op) const {
    const double peak = hw_.dense_peak.at(Precision::bf16).value();
    const bool fwd = op.kind == model::OpKind::attention_fwd;
    double base = fwd ? hw_.attention_fwd_efficiency : hw_.attention_bwd_efficiency;
    if (op.attention_impl == model::AttentionImpl::triton) {
        const double triton = fwd ? hw_.triton_attention_fwd_efficiency : hw_.triton_attention_bwd_efficiency;
        base = triton > 0 ? triton : base * kTritonVsFlash;
    } else if (op.attention_impl == model::AttentionImpl::flash2) {
        const double fa2 = fwd ? hw_.flash2_attention_fwd_efficiency : hw_.flash2_attention_bwd_efficiency;
        if (fa2 > 0) base = fa2;
    }
    const double s = static_cast<double>(op.seq_kv);
    const double eff = base * s / (s + kAttentionHalfSeq);
    const double t_mem = op.bytes.value() / (hw_.hbm_bandwidth.value() * hw_.hbm_efficiency);
    return Time::from_seconds(std::max(op.flops.value() / (peak * hw_.sustained_clock_ratio * eff), t_mem)) +
           hw_.kernel_overhead;
}

Time ComputeCost::memory(Bytes bytes) const {
    return Time::from_seconds(bytes.value() / (hw_.hbm_bandwidth.value() * hw_.hbm_efficiency)) + hw_.kernel_overhead;
}

Time ComputeCost::slice_copies(const model::OpProto& op) const {
    if (op.copy_slices <= 0) return Time();
    const double bytes = 2.0 * op.bytes.value();
    // Per rank: the Python loop builds one view of the flat buffer (a host op) and the process
    // group launches one copy kernel.
    return Time::from_seconds(bytes / (hw_.hbm_bandwidth.value() * hw_.hbm_efficiency)) +
           (hw_.kernel_overhead + hw_.host_op_overhead) * static_cast<std::int64_t>(op.copy_slices);
}

Time ComputeCost::cost(const model::OpProto& op) const {
    switch (op.kind) {
        case model::OpKind::gemm: {
            if (op.splits <= 1) return gemm(op.precision, op.m, op.n, op.k, op.batch, op.split_accumulate);
            const std::int64_t rows = (op.m + op.splits - 1) / op.splits;
            return gemm(op.precision, rows, op.n, op.k, op.batch, op.split_accumulate) *
                   static_cast<std::int64_t>(op.splits);
        }
    case model::OpKind::attention_fwd:
    case model::OpKind::attention_bwd: return attention(op);
    case model::OpKind::memory:
        // A wait with no kernel (a device synchronize) costs the GPU nothing.
        if (op.launches == 0 && op.bytes.value() <= 0) return Time();
        return memory(op.bytes);
    default: break;
    }
    throw std::logic_error("ComputeCost::cost called for a communication op '" + op.name + "'");
}

} // namespace trainsim::sim
