#include "trainsim/sim/search/constraint_miss.hpp"

#include "trainsim/model/accounting/layout.hpp"
#include "trainsim/model/accounting/memory_model.hpp"
#include "trainsim/model/core/text_format.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace trainsim::sim {

namespace {

double days_of(const RunEstimate& e, const SearchOptions& o) {
    return o.basis == DaysBasis::expected ? e.expected_days : e.days_to_train;
}
double cost_of(const RunEstimate& e, const SearchOptions& o) {
    return o.basis == DaysBasis::expected ? e.expected_cost : e.cost;
}

// The best plan of `o`'s search, and per count (one count: the list's first plan).
struct Best {
    std::optional<RankedPlan> overall;
    std::map<int, std::optional<RankedPlan>> per_count;
};
Best best_of(const model::Plan& base, SearchOptions o, RankBy by, const std::vector<int>& counts) {
    o.rank = by;
    o.top = 1;
    o.progress = nullptr;
    auto r = search_plans(base, o);
    Best b;
    if (!r.plans.empty()) b.overall = std::move(r.plans.front());
    if (r.frontier.empty()) {
        for (int g : counts) b.per_count[g] = b.overall;
    } else {
        for (auto& f : r.frontier) b.per_count[f.gpus] = std::move(f.best);
    }
    return b;
}

// Whether some layout of `gpus` GPUs in `o`'s space passes check_layout and fits with its headroom.
bool has_fitting_layout(const model::Plan& base, const SearchOptions& o, int gpus) {
    SearchSpace one = o.space;
    one.gpu_counts = {gpus};
    std::vector<model::Plan> all;
    try {
        all = enumerate_layouts(base, one);
    } catch (const SearchError&) {
        return false; // not whole nodes
    }
    return std::any_of(all.begin(), all.end(), [&](const model::Plan& p) {
        return model::check_layout(p).empty() &&
               model::fits_in_memory(p, model::peak_memory(p), p.hardware.hbm_capacity * (1.0 - o.memory_headroom));
    });
}

std::string plan_words(const RankedPlan& r, const Translator& tr) {
    return fmt::format(fmt::runtime(tr("{} GPUs {}")), r.plan.num_gpus(), layout_label(r.plan));
}

} // namespace

std::vector<std::string> constraints_missed(const RunEstimate& e, const SearchOptions& opt) {
    std::vector<std::string> out;
    if (opt.deadline_days && days_of(e, opt) > *opt.deadline_days) out.emplace_back("deadline");
    if (opt.budget && cost_of(e, opt) > *opt.budget) out.emplace_back("budget");
    return out;
}

ConstraintMiss explain_constraint_miss(const model::Plan& base, const SearchOptions& opt) {
    std::vector<int> counts = opt.space.gpu_counts.empty() ? std::vector<int>{base.num_gpus()} : opt.space.gpu_counts;
    std::sort(counts.begin(), counts.end());
    counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
    SearchOptions free = opt;
    free.deadline_days.reset();
    free.budget.reset();
    // One search by days is enough. Within one GPU count every plan has the same nodes and pricing,
    // and a bill only grows with the wall clock (whole units of it, billing.hpp), so a count's
    // fastest plan on the basis is also its cheapest: per count, if any plan meets the deadline
    // the fastest does, and no plan is cheaper. (Searching by cost instead cannot prune: with
    // whole months billed, most plans' lower bounds tie the cheapest bill, and every one of them
    // was simulated: 55 s for one 8-GPU count of a 7B model.)
    const Best fast = best_of(base, free, RankBy::days, counts);
    const bool priced = has_price(base.pricing);
    ConstraintMiss m;
    m.fastest = fast.overall;
    auto cheaper = [&](const RankedPlan& a, const RankedPlan& b) {
        return std::pair{cost_of(a.estimate, opt), days_of(a.estimate, opt)} <
               std::pair{cost_of(b.estimate, opt), days_of(b.estimate, opt)};
    };
    auto late = [&](const RankedPlan& r) { return opt.deadline_days && days_of(r.estimate, opt) > *opt.deadline_days; };
    auto dear = [&](const RankedPlan& r) { return opt.budget && cost_of(r.estimate, opt) > *opt.budget; };
    for (int g : counts) {
        CountMiss c;
        c.gpus = g;
        if (auto it = fast.per_count.find(g); it != fast.per_count.end()) c.fastest = it->second;
        if (priced) c.cheapest = c.fastest;
        if (!c.fastest) {
            c.excluded_by = {"memory"};
        } else {
            if (late(*c.fastest)) c.excluded_by.emplace_back("deadline");
            if (dear(*c.fastest)) c.excluded_by.emplace_back("budget");
            if (priced && (!m.cheapest || cheaper(*c.fastest, *m.cheapest))) m.cheapest = c.fastest;
            if (priced && !late(*c.fastest) && (!m.cheapest_on_time || cheaper(*c.fastest, *m.cheapest_on_time)))
                m.cheapest_on_time = c.fastest;
            if (!dear(*c.fastest) && (!m.fastest_in_budget ||
                                      days_of(c.fastest->estimate, opt) < days_of(m.fastest_in_budget->estimate, opt)))
                m.fastest_in_budget = c.fastest;
        }
        m.counts.push_back(std::move(c));
    }
    const bool deadline_reachable = !opt.deadline_days || (m.fastest && !late(*m.fastest));
    const bool budget_reachable = !opt.budget || (m.cheapest && !dear(*m.cheapest));
    // Named only where both constraints are given and each alone is met by some count.
    if (!(opt.deadline_days && opt.budget && deadline_reachable && budget_reachable)) {
        m.cheapest_on_time.reset();
        m.fastest_in_budget.reset();
    }
    // "N more GPUs would meet the deadline": only from the scaling the searched counts show.
    if (opt.deadline_days && !deadline_reachable) {
        std::vector<const CountMiss*> have;
        for (const auto& c : m.counts)
            if (c.fastest) have.push_back(&c);
        if (have.size() >= 2) {
            const auto& lo = *have[have.size() - 2];
            const auto& hi = *have.back();
            const double d1 = days_of(lo.fastest->estimate, opt), d2 = days_of(hi.fastest->estimate, opt);
            if (d2 < d1 && m.fastest && m.fastest->plan.num_gpus() == hi.gpus) {
                const double exponent = std::log(d1 / d2) / std::log(static_cast<double>(hi.gpus) / lo.gpus);
                const double need = hi.gpus * std::pow(d2 / *opt.deadline_days, 1.0 / exponent);
                // The first count of whole nodes from there that has a valid layout fitting in
                // memory (1024 sequences split 24 ways has none), within the extrapolation's reach.
                const int node = std::max(1, base.cluster.gpus_per_node);
                const int limit = kMaxDeadlineExtrapolation * hi.gpus;
                for (int g = static_cast<int>(std::ceil(need / node)) * node; need <= limit && g <= limit; g += node) {
                    if (g <= hi.gpus) continue;
                    if (has_fitting_layout(base, free, g)) {
                        m.deadline_gpus = DeadlineGpus{g, lo.gpus, hi.gpus, exponent};
                        break;
                    }
                }
            }
        }
    }
    return m;
}

std::string format_constraint_miss(const ConstraintMiss& m, const SearchOptions& opt, const std::string& currency,
                                   const Translator& tr) {
    auto trf = [&](std::string_view f, auto&&... args) {
        return fmt::format(fmt::runtime(tr(f)), std::forward<decltype(args)>(args)...);
    };
    const std::string_view days_word = tr(opt.basis == DaysBasis::expected ? "expected days" : "days (steady state)");
    const std::string_view bill_word = tr(opt.basis == DaysBasis::expected ? "a bill of" : "a steady-state cost of");
    std::string s(tr("no plan meets the constraints (layouts fit in memory; the searched plans' best without them):\n"));
    if (opt.deadline_days && m.fastest) {
        const double d = days_of(m.fastest->estimate, opt);
        if (d > *opt.deadline_days) {
            s += trf("  the fastest plan, {}, takes {:.1f} {} (deadline {:g})", plan_words(*m.fastest, tr), d,
                     days_word, *opt.deadline_days);
            if (m.deadline_gpus) {
                const auto& x = *m.deadline_gpus;
                s += trf(": about {} more GPUs ({}) would meet it, extrapolated from the {} -> {} GPU plans "
                         "(days ~ GPUs^-{:.2f}; not searched: plan --gpus {} checks it)",
                         x.gpus - m.fastest->plan.num_gpus(), x.gpus, x.from_gpus, x.to_gpus, x.exponent, x.gpus);
            }
            s += "\n";
        }
    }
    if (opt.budget && m.cheapest) {
        const double c = cost_of(m.cheapest->estimate, opt);
        if (c > *opt.budget)
            s += trf("  the cheapest plan, {}, costs {} {} (budget {})\n", plan_words(*m.cheapest, tr), bill_word,
                     model::format_money(c, currency), model::format_money(*opt.budget, currency));
    }
    if (m.cheapest_on_time)
        s += trf("  each alone can be met, not both: the cheapest plan within the deadline, {}, costs {} (budget {})",
                 plan_words(*m.cheapest_on_time, tr),
                 model::format_money(cost_of(m.cheapest_on_time->estimate, opt), currency),
                 model::format_money(*opt.budget, currency));
    if (m.fastest_in_budget)
        s += trf("; the fastest within the budget, {}, takes {:.1f} {} (deadline {:g})\n",
                 plan_words(*m.fastest_in_budget, tr), days_of(m.fastest_in_budget->estimate, opt), days_word,
                 *opt.deadline_days);
    else if (m.cheapest_on_time)
        s += "\n";
    if (m.counts.size() > 1) {
        s += tr("  per GPU count (fastest / cheapest plan that fits, and what excluded it):\n");
        for (const auto& c : m.counts) {
            if (!c.fastest) {
                s += fmt::format("  {:>6}  {}\n", c.gpus, tr("no layout fits in memory"));
                continue;
            }
            // "deadline", "budget": the JSON's excluded_by words, in the reader's language.
            std::vector<std::string_view> by;
            for (const auto& x : c.excluded_by) by.push_back(tr(x));
            s += trf("  {:>6}  {:>8.1f} days  {:>16}  excluded by: {}\n", c.gpus, days_of(c.fastest->estimate, opt),
                     c.cheapest ? model::format_money(cost_of(c.cheapest->estimate, opt), currency)
                                : std::string(tr("no price")),
                     by.empty() ? std::string("-") : fmt::format("{}", fmt::join(by, tr(" and "))));
        }
    }
    return s;
}

} // namespace trainsim::sim
