// `trainsim-calibrate fit`: samples -> hardware profile (docs/calibration.md "The fit").
//  - GEMMs, per profile precision: the measured shapes become the profile's gemm table (the
//    heuristic's first algorithm: what frameworks run); t = t0 + FLOPs / R fitted on the square
//    sweep gives the large-GEMM rate R; gemm_efficiency = rate at 8192^3 (the shape the
//    simulator's efficiencies are quoted at) or R, over the base profile's dense peak.
//    FP8: squares timed with fast and with split accumulation give fp8_split_accumulate_speed;
//    the table holds fast-accumulation times, as the simulator divides backward (split) GEMMs
//    by that speed: rows measured with the split accumulator are entered as t x speed, so the
//    simulator gives back exactly the measured time.
//  - memory-bound kernels, per precision: t = t0 + bytes / (eta BW) -> memory curve, and
//    hbm_efficiency = eta (the simulator's elementwise model); t0 -> kernel_overhead.
//  - collectives, per (op, group size, scope): t = alpha + bus_bytes / busbw, nccl-tests'
//    bus-bandwidth normalisation -> the profile's collective curves; the hop latency from how
//    alpha grows with the ring's step count.
//  - GEMM under all-reduce vs alone -> comm_compute_slowdown.
//  - attention: reported; written into the efficiencies only when a fused kernel was measured.
//  - board power (NVML, recorded with every sample): the highest reading after a GEMM sample ->
//    power.compute_busy; the reading before the run (run.json) -> power.idle. Written only over a
//    base profile with a power section (the section is all or nothing).
// Straight lines are fitted by least squares (Eigen) with relative weights (each point's error
// as a fraction of its time), so microsecond and second-long points count alike.
#pragma once

#include "trainsim/calibrate/samples/sample.hpp"
#include "trainsim/model/core/hardware_profile.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace trainsim::calibrate {

// t = alpha + slope * x fitted to points (x_i, t_i).
struct LineFit {
    double alpha = 0;     // intercept (seconds); constrained >= 0
    double slope = 0;     // seconds per unit of x; > 0 for a usable fit
    double r2 = 0;        // coefficient of determination of t (unweighted)
    double max_rel_err = 0;  // max |fit - t| / t over the points
    std::size_t points = 0;
};
// Weighted least squares with weights 1/t_i (minimises the sum of squared relative errors).
// When the unconstrained intercept is negative, refits through the origin (alpha = 0).
// Precondition: x.size() == t.size() >= 2, t_i > 0.
[[nodiscard]] LineFit fit_line(const std::vector<double>& x, const std::vector<double>& t);

struct GemmFit {
    std::string precision;          // profile precision (bf16, fp8)
    std::vector<std::string> dtypes;  // measured element types mapped to it
    std::size_t table_rows = 0;     // shapes written into the gemm table
    double rate = 0;                // large-GEMM rate R (FLOP/s) of the sweep fit
    double t0 = 0;                  // seconds
    LineFit quality;                // of the sweep fit
    double rate_8192 = 0;           // measured at 8192^3 (0: not measured)
    double peak = 0;                // base profile dense peak (FLOP/s)
    double efficiency = 0;          // written as gemm_efficiency
    double best_over_first = 0;     // mean speedup of the best algorithm over the first (0: none)
};

struct MemoryFit {
    std::string precision;    // profile precision of the curve
    std::string kernel;       // a kernel name, or "all" for the joint fit written to the profile
    double alpha = 0;         // seconds
    double bandwidth = 0;     // bytes/s
    double efficiency = 0;    // bandwidth / base hbm_bandwidth
    LineFit quality;
    // Whether the kernel's samples are in the joint curve ("all" itself: true). A kernel below 80%
    // of its precision's fastest kernel is not bandwidth-bound as written and stays out.
    bool pooled = true;
};

struct CollectiveFit {
    std::string op;
    int group_size = 0;
    std::string scope;
    double alpha = 0;   // seconds
    double busbw = 0;   // bytes/s
    LineFit quality;
};

struct AttentionFit {
    std::string direction;  // fwd | bwd
    std::string impl;
    std::size_t points = 0;
    double efficiency = 0;     // long-sequence asymptote, fraction of the BF16 peak
    double max_rel_err = 0;    // of the simulator's curve eff(s) = e * s / (s + 320)
    double best_rate = 0;      // highest measured FLOP/s (causal FLOP count)
    std::int64_t best_seq = 0; // at this sequence length
    bool written = false;      // only fused kernels update the profile
};

struct FitReport {
    std::string samples_file;
    std::size_t samples = 0, ok = 0, unsupported = 0;
    std::string backend, device;
    std::vector<GemmFit> gemm;
    std::vector<MemoryFit> memory;
    std::vector<CollectiveFit> collectives;
    std::vector<AttentionFit> attention;
    double copy_bandwidth = 0;  // bytes/s of the largest bf16 copy (STREAM copy: the HBM headline)
    // FP8 throughput with the split accumulator relative to fast accumulation, from squares
    // measured both ways (the median ratio over those of 2048^3 and up when there are any).
    std::optional<double> fp8_split_accumulate_speed;
    std::optional<double> comm_compute_slowdown;
    // Short-benchmark GEMM time over the same GEMM's time after sustained load (<= 1).
    std::optional<double> sustained_clock_ratio;
    std::optional<double> hop_latency_s;  // intra-node per-step latency from all_reduce alphas
    // Board power (NVML): the highest reading after the GEMM samples, and the reading when the
    // backend started (before burn-in), in W; written as power.compute_busy and power.idle.
    std::optional<double> compute_busy_power_w;
    std::optional<double> idle_power_w;
    std::vector<std::string> replaced;    // profile entries replaced by measurements
    std::vector<std::string> notes;       // what was not written and why, unsupported ops
};

struct FitOptions {
    // Measured element type -> profile precision. The defaults map bf16 -> bf16 and every FP8
    // combination -> fp8; add {"fp32", bf16} to enter CPU fp32 numbers as bf16 (pipeline tests).
    std::map<std::string, model::Precision> precision_map;
    std::string id;      // of the written profile (default: <base id>.calibrated)
    std::string name;    // default: "<base name> (calibrated)"
    std::string device;  // what was measured (from run.json), for the sources
    // Board power of the idle device when the measurement started (run.json
    // provenance.telemetry_at_start.power_w), in W; absent without NVML.
    std::optional<double> idle_power_w;
};
[[nodiscard]] FitOptions default_fit_options();

struct FitResult {
    model::HardwareProfile profile;
    FitReport report;
};

// Rejects impossible data against the base profile (SampleError naming each line): a GEMM above
// the dense peak of its precision, a memory kernel above the HBM bandwidth, an intra-node
// collective whose bus bandwidth is above the fastest intra-node link.
void check_against_profile(const SampleFile& file, const model::HardwareProfile& base, const FitOptions& opts);

// check_against_profile, then the fit. The profile starts from `base`, replaces what was
// measured (with sources naming the samples file), and has provenance calibrated.
[[nodiscard]] FitResult fit(const SampleFile& file, const model::HardwareProfile& base, const FitOptions& opts);

[[nodiscard]] nlohmann::json to_json(const FitReport& r);
[[nodiscard]] std::string format_report(const FitReport& r);

} // namespace trainsim::calibrate
