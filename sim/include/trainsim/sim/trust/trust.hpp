// How far to trust a prediction (docs/trust.md): an error model built from `validate` on every
// published-measurements file the project has, looked up by the plan's regime, and the plan's
// distance from that evidence.
//
// Signed error e = (predicted - measured) / measured of tokens/s/GPU. A measured run's time is the
// predicted time x (1 + e), so a regime's p10 / p90 of e give the p10 / p90 of every time-like
// figure (step time, days, GPU-hours, cost) and, inverted, of the throughput.
#pragma once

#include "trainsim/model/core/scenario.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace trainsim::sim {

struct StepResult; // executor.hpp

// The dimensions a plan's error is looked up by, coarsest first.
struct Regime {
    std::string family;  // megatron-core | megatron-lm | deepspeed | fsdp | xla | generic
    std::string gpu_gen; // ampere | hopper | other
    std::string scale;   // 1-8 | 9-256 | 257+ GPUs
    std::string tokens;  // tokens per GPU per step: <4k | 4k-16k | 16k+
    // host-heavy | gpu-bound: whether the host's issue time is at least kHostHeavyShare of the
    // step (empty: no step was simulated, the key stops at `tokens`).
    std::string host;
    // The levels this regime has: 5 with `host`, else 4.
    [[nodiscard]] int levels() const { return host.empty() ? 4 : 5; }
    // "family/gpu_gen/scale/tokens/host", or its first `levels` parts (0: "all").
    [[nodiscard]] std::string key(int levels = 5) const;
};
// The host's share of the step (host_busy / step_time) from which a plan is host-heavy. Half: the
// host then needs, per kernel, more than half the kernel's own time to issue it, so its jitter
// and every wait it makes show in the step; below it, the host's run-ahead hides them. It is
// where vTrain's signed errors change sign (median -5.5% below, +8.3% above; docs/trust.md).
inline constexpr double kHostHeavyShare = 0.5;
// The plan's regime; with its simulated step (`step`), also whether it is host-heavy.
[[nodiscard]] Regime regime_of(const model::Plan& plan, const StepResult* step = nullptr);
// The framework family of a `parallel.framework` value (empty: megatron-core, the default stack).
[[nodiscard]] std::string framework_family(const std::string& framework);

// The GPU a profile's plans are judged as: a fitted profile's base (`fit --base`: the node it
// measured is that GPU), else the profile's own id.
[[nodiscard]] const std::string& trust_gpu(const model::HardwareProfile& hw);

// What a plan is, for judging whether published runs are near it.
struct PlanFeatures {
    double params = 0; // model parameters
    int gpus = 0;
    std::string gpu;       // profile id (trust_gpu: a fitted profile's base)
    std::string precision; // bf16 | fp16 | fp8
    std::string family;
    int seq_len = 0;
    bool cp = false;              // context parallelism
    bool tp_across_nodes = false; // a TP group spans nodes
};
[[nodiscard]] PlanFeatures features_of(const model::Plan& plan);

// One measured row's signed error, with where it came from.
struct ErrorSample {
    std::string file;   // the published file's name
    std::string source; // its source group
    Regime regime;
    PlanFeatures features;
    double error = 0; // signed, as a fraction
    bool held_out = false;
};

// The band of one regime key.
struct RegimeBand {
    std::string key;
    int rows = 0, held_out = 0, sources = 0;
    double p10 = 0, p50 = 0, p90 = 0; // signed error quantiles (fractions), after widening
    std::string basis;                // held-out | seen (widened) ...
};

// The range of what was measured on one GPU.
struct GpuEvidence {
    std::string gpu;
    double params_min = 0, params_max = 0;
    int gpus_max = 0;
    std::vector<std::string> precisions; // sorted
};
// The range of what was measured, per kind of feature.
struct Evidence {
    std::vector<GpuEvidence> gpus;     // sorted by id
    std::vector<std::string> families; // sorted
    int seq_max = 0;
    // Rows that used context parallelism / a TP group across nodes. A layout feature is in the
    // evidence with at least kMinRegimeRows of them (the rows a regime needs for a band): with
    // fewer, what they read is one source's cluster, not the feature.
    int cp_rows = 0, tp_across_nodes_rows = 0;
};

struct ErrorModel {
    std::vector<RegimeBand> bands; // sorted by key
    Evidence evidence;
    int rows = 0;
    // The share of the errors' variance that lies between GPU profiles (sum over GPUs of
    // rows x (GPU mean - mean)^2 over the total sum of squares): what calibrating the GPU can
    // remove.
    double hardware_share = 0;
};

// Linear-interpolated quantile (type 7, numpy's default) of a sorted sample; 0 for an empty one.
[[nodiscard]] double quantile(const std::vector<double>& sorted, double q);

// Rows per regime below which the lookup falls back to the coarser key.
inline constexpr int kMinRegimeRows = 12;
// Bands of the published runs that used a layout feature, across regimes: keys beside the
// regimes' in ErrorModel::bands, kept like a regime's with at least kMinRegimeRows rows, from all
// of them (held out or not) and without the sources' spread. A plan using the feature has its
// band reach at least the feature band's p10 / p90, after every other widening and narrowing
// (band_for).
inline constexpr std::string_view kFeaturePrefix = "feature:";
inline constexpr std::string_view kFeatureCp = "feature:context parallelism";
inline constexpr std::string_view kFeatureTpAcrossNodes = "feature:TP across nodes";
// The feature-band keys of the layout features a plan uses.
[[nodiscard]] std::vector<std::string_view> layout_feature_keys(const PlanFeatures& f);

[[nodiscard]] ErrorModel build_error_model(const std::vector<ErrorSample>& samples);
[[nodiscard]] nlohmann::json error_model_json(const ErrorModel& m);
// Throws model::InputError naming `file` on a malformed table.
[[nodiscard]] ErrorModel error_model_from_json(const nlohmann::json& j, const std::string& file);

// A plan's band: factors on its time-like figures (measured = predicted x factor).
struct Band {
    double time_p10 = 1, time_p50 = 1, time_p90 = 1;
    std::string basis;  // which rows the band comes from, and how it was widened
    std::string regime; // the key it was looked up at
    int rows = 0;
    std::vector<std::string> out_of_domain; // why the plan is outside the evidence; widened per reason
};
// With a calibrated profile (its fit residuals present) and the plan's step breakdown, the band
// keeps the part of the variance that is not the GPU's (1 - hardware_share) and adds the fits'
// own error, compute and communication weighted by their shares of the step:
//   d' = min(d, sqrt(d^2 (1 - hardware_share) + (1.2816 r)^2)),  r = sqrt((c r_compute)^2 + (m r_comm)^2)
// for each side's deviation d from the median (never wider than d) (1.2816: the normal 90th percentile, taking each
// residual as one standard deviation).
// `step` (when given) is the plan's simulated step: its host share picks the regime's last
// level, and its breakdown weighs a calibrated profile's residuals.
[[nodiscard]] Band band_for(const ErrorModel& m, const model::Plan& plan, const StepResult* step = nullptr);
// The band's deviations from p50 grow by this factor per out-of-domain reason.
inline constexpr double kOutOfDomainWidening = 1.5;

} // namespace trainsim::sim
