// When a plan does not fit in memory: how close it comes and what makes it fit (issue #18 item 6;
// docs/plan-search.md "When nothing fits"). Each knob a user can turn — full recompute, ZeRO-3, a
// micro-batch of 1, CPU offload of the optimizer or of the parameters too, all of them together —
// is applied to the layout nearest to fitting, its memory computed, and, where it fits, the plan
// simulated for its days and cost. Separately, the fewest GPUs (the requested count doubled, whole
// nodes) at which some GPU-only layout fits.
#pragma once

#include "trainsim/model/core/scenario.hpp"
#include "trainsim/sim/report/lang.hpp"
#include "trainsim/sim/run/estimate.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace trainsim::sim {

struct KnobTry {
    std::string knob;        // what was changed, in scenario keys ("parallel.recompute: full")
    model::Plan plan;        // the plan tried
    std::string problem;     // why the layout is not valid (check_layout); empty when valid
    double memory_gib = 0;   // per GPU, peak stage
    double capacity_gib = 0; // what may be used: the HBM less the headroom
    double host_gib = 0;     // CPU offload: host memory per node needed
    double host_capacity_gib = 0;
    bool fits = false;
    std::optional<RunEstimate> estimate; // simulated when it fits
};

struct FitAdvice {
    model::Plan closest; // the valid layout nearest to fitting (least memory over the HBM)
    double closest_memory_gib = 0;
    double capacity_gib = 0;    // the HBM less the headroom
    std::vector<KnobTry> knobs; // each knob on `closest` that changes it
    // The knobs `closest` already has (e.g. "training.micro_batch: 1" on a layout with micro-batch
    // 1): never proposed as a change.
    std::vector<std::string> already_in_plan;
    // The fewest GPUs at which a GPU-only layout fits, with the layout needing the least memory
    // there (simulated); absent when none does up to 64x the request.
    std::optional<KnobTry> more_gpus;
};

// `candidates`: the layouts to pick the closest from (a plan search's space; one plan for
// simulate). Precondition: at least one of them passes check_layout. `headroom`: the fraction of
// the HBM a plan must leave free. `simulate`: simulate the knobs that fit (days and cost).
[[nodiscard]] FitAdvice fit_advice(const std::vector<model::Plan>& candidates, double headroom, bool simulate = true);

// {"closest": {layout, memory_gib, capacity_gib}, "knobs": [{knob, layout, fits, memory_gib, ...,
// days_to_train, cost}], "more_gpus": {...}} and its text form, in `tr`'s language (the knobs are
// scenario keys and the layouts ids, as in the JSON).
[[nodiscard]] nlohmann::json fit_advice_json(const FitAdvice& a);
[[nodiscard]] std::string format_fit_advice(const FitAdvice& a, const Translator& tr = Translator());

} // namespace trainsim::sim
