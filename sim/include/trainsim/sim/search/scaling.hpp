// Data-parallel scaling of a plan (the HTML report's scaling chart, docs/report.md): the plan's
// model-parallel layout (tp, pp, vp, cp), micro-batch, global batch, sharding and recompute kept,
// its data-parallel degree (and the node count) changed to fill each GPU count.
#pragma once

#include "trainsim/model/core/scenario.hpp"

#include <optional>
#include <string>
#include <vector>

namespace trainsim::sim {

struct ScalingPoint {
    int gpus = 0;
    int dp = 0;
    bool valid = false; // a legal layout (check_layout) on whole nodes
    bool fits = false;  // valid and fits in GPU memory (simulated only then)
    std::string reason; // why not valid / does not fit
    double memory_per_gpu_gib = 0;
    double capacity_gib = 0; // the GPU's HBM (when simulated), for the reason in the report's language
    double step_time_s = 0; // the rest only when fits
    double tokens_per_s = 0;
    double tokens_per_s_per_gpu = 0;
    double days_to_train = 0;
    std::optional<double> cost; // absent without a price
};

struct ScalingSeries {
    std::vector<std::size_t> plans;   // indices of the scenario plans that give this series
    std::string label;                // their names, joined
    std::string layout;               // "tp8 pp2 mbs1 dist_opt" (what is kept)
    std::vector<ScalingPoint> points; // one per GPU count the layout can fill, ascending
};

// GPU counts 8, 16, ..., 1024 (powers of two).
[[nodiscard]] std::vector<int> default_scaling_gpu_counts();

// For every plan: the counts in `gpu_counts` (and the plan's own count) that tp*pp*cp divides,
// each simulated with one representative rank per stage on `threads` workers (0: all cores).
// Plans whose points are all equal (e.g. the same layout at two sizes) share one series.
[[nodiscard]] std::vector<ScalingSeries> data_parallel_scaling(const std::vector<const model::Plan*>& plans,
                                                               const std::vector<int>& gpu_counts,
                                                               unsigned threads = 0);

} // namespace trainsim::sim
