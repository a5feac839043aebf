// `trainsim plan --max-tokens`: the question asked backwards (issue #45, docs/plan-search.md "The
// most tokens for a budget and a deadline"). Not "how long and how much for N tokens" but "how many
// tokens can this money and this time buy": per GPU count, the most whole steps' tokens that its
// fastest layout trains within the deadline and the budget, on the search's basis (the expected
// wall clock and its bill in whole billing units by default, what is paid).
//
// Why each count's fastest layout is its answer: a count's plans share their nodes and pricing, so
// the bill only grows with the wall clock, and the wall clock (steady or expected: checkpoints,
// failures, restarts; run_model.hpp) only grows with the steady time tokens / throughput. The plan
// with the highest throughput therefore trains the most tokens within any deadline and any budget.
// The tokens do not change the step, so the largest token count is found on the simulated plan by
// bisection over whole steps (retarget_tokens), with no further simulation.
#pragma once

#include "trainsim/sim/search/plan_search.hpp"

#include <optional>
#include <string>
#include <vector>

namespace trainsim::sim {

// Recomputes `e`, an estimate of `plan`, for the same plan trained on `tokens`: steps, steady days,
// GPU-hours, then the run model, bills, billing options and energy (apply_run_model, with the
// plan's run settings). Sets plan.training.tokens. Equal to a fresh estimate_plan of the plan with
// those tokens, as the step does not depend on them. Preconditions: e was simulated, tokens > 0.
void retarget_tokens(RunEstimate& e, model::Plan& plan, double tokens);

// The most whole steps of `r`'s plan that meet opt's deadline and budget, with the step time
// multiplied by `time_factor` (an error band's end: 1.4 = every step 40% slower), and what one more
// step would exceed ("deadline", "budget"; where no step qualifies, what one step exceeds).
// Doubling then bisection: the wall clock and the bill only grow with the steps, so the steps that
// qualify are 1..n. Preconditions: r was simulated, time_factor > 0.
struct TokensWithin {
    double steps = 0;
    double tokens = 0;
    std::vector<std::string> limited_by;
};
[[nodiscard]] TokensWithin tokens_within(RankedPlan r, const SearchOptions& opt, double time_factor = 1.0);

struct MaxTokensCount {
    int gpus = 0;
    // The count's fastest layout, estimated at `tokens` (or at one step where not even one step
    // meets the constraints); absent where no layout of this count fits in memory.
    std::optional<RankedPlan> best;
    double tokens = 0; // whole steps' tokens; 0: not even one step meets the constraints
    double steps = 0;
    // What one more step would exceed ("deadline", "budget"); where tokens is 0, what one step does.
    std::vector<std::string> limited_by;
};

struct MaxTokensResult {
    std::vector<MaxTokensCount> counts; // ascending GPU count
    // Index into counts of the most tokens (ties: the smaller bill, then fewer GPUs); absent
    // where no count trains a step within the constraints.
    std::optional<std::size_t> best;
    SearchStats stats; // of the one layout search
};

// Preconditions: opt has a deadline or a budget (a budget needs a priced plan); opt.rank and
// opt.top are ignored (each count's fastest layout is searched). The token count of `base` is
// only the point the layouts are simulated at.
[[nodiscard]] MaxTokensResult max_tokens(const model::Plan& base, const SearchOptions& opt);

// The days and the bill the constraints are held to, on the search's basis.
[[nodiscard]] double constrained_days(const RunEstimate& e, const SearchOptions& opt);
[[nodiscard]] double constrained_cost(const RunEstimate& e, const SearchOptions& opt);

} // namespace trainsim::sim
