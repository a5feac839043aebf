// When a plan search finds layouts that fit in memory but none that meets the deadline and the
// budget: which constraint excluded what (issue #45; docs/plan-search.md "When nothing meets the
// constraints"). The searches are run again without the constraints, so every figure here is a
// simulated plan's, on the search's basis (SearchOptions::basis: expected or steady).
#pragma once

#include "trainsim/sim/search/plan_search.hpp"

#include <optional>
#include <string>
#include <vector>

namespace trainsim::sim {

// The constraints a plan misses, on the search's basis: "deadline" (its days are over
// opt.deadline_days), "budget" (its cost over opt.budget); empty when it meets both.
[[nodiscard]] std::vector<std::string> constraints_missed(const RunEstimate& e, const SearchOptions& opt);

// One searched GPU count.
struct CountMiss {
    int gpus = 0;
    std::optional<RankedPlan> fastest; // its fastest layout that fits in memory; absent: none fits
    // Its cheapest (absent without a price): the fastest, as a count's plans share their nodes and
    // pricing and a bill only grows with the wall clock.
    std::optional<RankedPlan> cheapest;
    // Why none of its plans qualifies: "memory" (no layout of this count fits), else "deadline"
    // when even its fastest plan misses the deadline, "budget" when even its cheapest is over the
    // budget (both may be listed). Empty when the count has a plan that meets the constraints.
    std::vector<std::string> excluded_by;
};

// GPUs at which the fastest plan would meet the deadline, from the scaling of the fastest plans of
// the two largest searched counts (days ~ gpus^-exponent), rounded up to whole nodes and on to the
// first count with a valid layout that fits in memory. Only given
// where the scaling is measured (two counts, the larger one the faster) and the answer is at most
// kMaxDeadlineExtrapolation x the largest count searched: it is an extrapolation, not a search.
struct DeadlineGpus {
    int gpus = 0;
    int from_gpus = 0, to_gpus = 0; // the counts whose fastest plans gave the exponent
    double exponent = 0;
};
inline constexpr int kMaxDeadlineExtrapolation = 2;

struct ConstraintMiss {
    // Over every searched count, without the deadline and the budget.
    std::optional<RankedPlan> fastest;
    std::optional<RankedPlan> cheapest; // absent without a price
    // With both a deadline and a budget that each some plan meets: the cheapest plan that meets
    // the deadline (then over the budget) and the fastest within the budget (then late).
    std::optional<RankedPlan> cheapest_on_time;
    std::optional<RankedPlan> fastest_in_budget;
    std::vector<CountMiss> counts; // ascending
    std::optional<DeadlineGpus> deadline_gpus;
};

// Searches `base` as `opt` does but without its deadline and budget (by days; each count's fastest
// plan is also its cheapest), to say which constraint excluded each count and by how much. Precondition: `opt` has a
// deadline or a budget.
[[nodiscard]] ConstraintMiss explain_constraint_miss(const model::Plan& base, const SearchOptions& opt);

// "the fastest plan takes 78.0 days (deadline 60): ...; the cheapest costs 410000 CNY (budget
// 300000)", one sentence per constraint, then one line per count; in `tr`'s language.
[[nodiscard]] std::string format_constraint_miss(const ConstraintMiss& m, const SearchOptions& opt,
                                                 const std::string& currency, const Translator& tr = Translator());

} // namespace trainsim::sim
