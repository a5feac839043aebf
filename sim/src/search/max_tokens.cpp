#include "trainsim/sim/search/max_tokens.hpp"

#include "trainsim/sim/search/constraint_miss.hpp"

#include <algorithm>
#include <cmath>

namespace trainsim::sim {

void retarget_tokens(RunEstimate& e, model::Plan& plan, double tokens) {
    plan.training.tokens = tokens;
    // As estimate_plan computes them from the step (estimate.cpp), then the run model and bills.
    e.steps = tokens / e.tokens_per_step;
    const double seconds = tokens / e.tokens_per_s;
    e.days_to_train = seconds / 86400.0;
    e.gpu_hours = seconds / 3600.0 * plan.num_gpus();
    apply_run_model(e, plan, plan.run);
}

double constrained_days(const RunEstimate& e, const SearchOptions& opt) {
    return opt.basis == DaysBasis::expected ? e.expected_days : e.days_to_train;
}
double constrained_cost(const RunEstimate& e, const SearchOptions& opt) {
    return opt.basis == DaysBasis::expected ? e.expected_cost : e.cost;
}

TokensWithin tokens_within(RankedPlan r, const SearchOptions& opt, double time_factor) {
    r.estimate.tokens_per_s /= time_factor;
    const double per_step = r.estimate.tokens_per_step;
    auto at = [&](double steps) {
        retarget_tokens(r.estimate, r.plan, steps * per_step);
        return constraints_missed(r.estimate, opt);
    };
    // 2^53 steps: beyond any run (a step takes at least milliseconds: that is hundreds of thousands
    // of years), and the largest count of steps a double holds exactly.
    constexpr double kMaxSteps = 9007199254740992.0;
    double lo = 0, hi = 1;
    std::vector<std::string> missed = at(hi);
    while (missed.empty() && hi < kMaxSteps) {
        lo = hi;
        hi = std::min(2 * hi, kMaxSteps);
        missed = at(hi);
    }
    if (missed.empty()) lo = hi; // within the constraints at kMaxSteps: no real limit
    while (hi - lo > 1) {
        const double mid = std::floor(lo + (hi - lo) / 2);
        auto m = at(mid);
        if (m.empty()) {
            lo = mid;
        } else {
            hi = mid;
            missed = std::move(m);
        }
    }
    return {lo, lo * per_step, missed};
}

namespace {

// The count with the most tokens (ties: the smaller bill on opt's basis, then the first, i.e.
// fewer GPUs); absent where no count trains a step.
std::optional<std::size_t> most_tokens(const std::vector<MaxTokensCount>& counts, const SearchOptions& opt) {
    std::optional<std::size_t> best;
    for (std::size_t i = 0; i < counts.size(); ++i) {
        const auto& c = counts[i];
        if (!c.best || c.tokens <= 0) continue;
        if (!best) {
            best = i;
            continue;
        }
        const auto& b = counts[*best];
        if (c.tokens > b.tokens ||
            (c.tokens == b.tokens && constrained_cost(c.best->estimate, opt) < constrained_cost(b.best->estimate, opt)))
            best = i;
    }
    return best;
}

} // namespace

MaxTokensResult max_tokens(const model::Plan& base, const SearchOptions& opt) {
    std::vector<int> counts = opt.space.gpu_counts.empty() ? std::vector<int>{base.num_gpus()} : opt.space.gpu_counts;
    std::sort(counts.begin(), counts.end());
    counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
    // Each count's fastest layout, without the constraints (they depend on the tokens).
    SearchOptions free = opt;
    free.deadline_days.reset();
    free.budget.reset();
    free.rank = RankBy::days;
    free.top = 1;
    free.space.gpu_counts = counts;
    auto r = search_plans(base, free);
    MaxTokensResult out;
    out.stats = r.stats;
    for (int g : counts) {
        MaxTokensCount c;
        c.gpus = g;
        std::optional<RankedPlan> fastest;
        if (r.frontier.empty()) {
            if (!r.plans.empty()) fastest = r.plans.front();
        } else {
            for (const auto& f : r.frontier)
                if (f.gpus == g) fastest = f.best;
        }
        if (fastest) {
            const auto w = tokens_within(*fastest, opt);
            c.steps = w.steps;
            c.tokens = w.tokens;
            c.limited_by = w.limited_by;
            retarget_tokens(fastest->estimate, fastest->plan, std::max(w.steps, 1.0) * fastest->estimate.tokens_per_step);
            c.best = std::move(fastest);
        }
        out.counts.push_back(std::move(c));
    }
    out.best = most_tokens(out.counts, opt);
    return out;
}

} // namespace trainsim::sim
