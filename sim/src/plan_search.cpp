#include "trainsim/sim/plan_search.hpp"

#include "trainsim/sim/parallel_for.hpp"

#include "trainsim/model/layout.hpp"
#include "trainsim/model/memory_model.hpp"
#include "trainsim/model/workload.hpp"
#include "trainsim/sim/compute_cost.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>
#include <tuple>

namespace trainsim::sim {

namespace {

std::vector<int> divisors(int n, int max) {
    std::vector<int> out;
    for (int d = 1; d <= std::min(n, max); ++d)
        if (n % d == 0) out.push_back(d);
    return out;
}

// Days and cost implied by a step time (the definitions of estimate_plan).
double days_for_step(const model::Plan& p, double step_s) {
    const double tokens_per_step = static_cast<double>(p.training.global_batch) * p.training.seq_len;
    return p.training.tokens / tokens_per_step * step_s / 86400.0;
}
double cost_for_days(const model::Plan& p, double days) {
    return days * 24.0 * p.num_gpus() * price_per_gpu_hour(p.pricing);
}

// The ranking key: (primary, secondary) metric; ties are broken by enumeration index.
std::pair<double, double> rank_key(const RunEstimate& e, RankBy by) {
    return by == RankBy::days ? std::pair{e.days_to_train, e.cost} : std::pair{e.cost, e.days_to_train};
}

bool passes_filters(const RunEstimate& e, const SearchOptions& o) {
    if (o.deadline_days && e.days_to_train > *o.deadline_days) return false;
    if (o.budget && e.cost > *o.budget) return false;
    return true;
}

model::Plan with_gpu_count(const model::Plan& base, int gpus) {
    model::Plan p = base;
    const int gpn = base.cluster.gpus_per_node;
    auto fail = [&](std::string msg) {
        model::Diagnostic d;
        d.file = "trainsim plan";
        d.key = "--gpus";
        d.message = std::move(msg);
        throw SearchError({d});
    };
    if (gpus < 1) fail(fmt::format("a GPU count must be at least 1, got {}", gpus));
    if (gpus < gpn) {
        // Part of one node: the node holds just these GPUs (as `trainsim collective` does).
        p.cluster.nodes = 1;
        p.cluster.gpus_per_node = gpus;
    } else {
        if (gpus % gpn != 0) fail(fmt::format("{} GPUs do not fill whole nodes of {} GPUs", gpus, gpn));
        p.cluster.nodes = gpus / gpn;
    }
    return p;
}

} // namespace

std::string layout_label(const model::Plan& plan) {
    const auto& q = plan.parallel;
    std::string s = fmt::format("tp{} pp{}", q.tp, q.pp);
    if (q.vp > 1) s += fmt::format(" vp{}", q.vp);
    if (q.cp > 1) s += fmt::format(" cp{}", q.cp);
    s += fmt::format(" dp{}", q.dp);
    if (q.sequence_parallel) s += " sp";
    s += fmt::format(" mbs{} {} rc:{}", plan.training.micro_batch, model::to_string(q.sharding),
                     model::to_string(q.recompute));
    return s;
}

std::vector<model::Plan> enumerate_layouts(const model::Plan& base, const SearchSpace& space) {
    std::vector<int> counts = space.gpu_counts;
    if (counts.empty()) counts.push_back(base.num_gpus());
    std::vector<model::Plan> out;
    const auto& m = base.model;
    for (int gpus : counts) {
        const model::Plan node_plan = with_gpu_count(base, gpus);
        const int gpn = node_plan.cluster.gpus_per_node;
        for (int tp : divisors(gpn, gpn)) {
            if (m.heads % tp != 0) continue;
            for (int pp : divisors(m.layers, gpus / tp)) {
                std::vector<int> vps{1};
                if (pp > 1) vps = divisors(m.layers / pp, m.layers / pp);
                for (int cp = 1; cp <= space.max_cp && tp * pp * cp <= gpus; cp *= 2) {
                    const int dp = model::derive_dp(gpus, tp, pp, cp);
                    if (dp == 0) continue;
                    if (base.training.global_batch % dp != 0) continue;
                    const auto mbs = divisors(base.training.global_batch / dp, space.max_micro_batch);
                    std::vector<bool> sps{tp > 1};
                    if (tp > 1 && space.try_without_sp) sps.push_back(false);
                    for (int vp : vps)
                        for (bool sp : sps)
                            for (int mb : mbs)
                                for (auto sh : space.shardings) {
                                    // FSDP / ZeRO-3 shard gradients across micro-batches: pp == 1 only.
                                    if (pp > 1 && (sh == model::Sharding::fsdp || sh == model::Sharding::zero3 ||
                                                   sh == model::Sharding::zero2 || sh == model::Sharding::hsdp))
                                        continue;
                                    for (auto rc : space.recomputes) {
                                        model::Plan p = node_plan;
                                        p.parallel.tp = tp;
                                        p.parallel.pp = pp;
                                        p.parallel.vp = vp;
                                        p.parallel.cp = cp;
                                        p.parallel.dp = dp;
                                        p.parallel.sequence_parallel = sp;
                                        p.parallel.sharding = sh;
                                        p.parallel.recompute = rc;
                                        p.training.micro_batch = mb;
                                        p.name = fmt::format("{} GPUs {}", gpus, layout_label(p));
                                        out.push_back(std::move(p));
                                    }
                                }
                }
            }
        }
    }
    return out;
}

namespace {

// Per-stage sums of the nominal compute-kernel times of the plan as given.
std::vector<double> stage_compute_sums(const model::Plan& plan) {
    const auto graph = model::build_workload(plan);
    const ComputeCost compute(plan.hardware);
    std::vector<double> proto_s(graph.protos.size(), 0.0);
    for (std::size_t i = 1; i < graph.protos.size(); ++i) {
        const auto k = graph.protos[i].kind;
        if (k == model::OpKind::gemm || k == model::OpKind::attention_fwd || k == model::OpKind::attention_bwd ||
            k == model::OpKind::memory)
            proto_s[i] = compute.cost(graph.protos[i]).seconds();
    }
    std::vector<double> out;
    for (const auto& st : graph.stages) {
        double sum = 0;
        for (const auto& op : st.ops)
            if (op.stream == model::Stream::compute) sum += proto_s[op.proto];
        out.push_back(sum);
    }
    return out;
}

// Largest per-stage sum of nominal compute-kernel times for the plan as given.
double compute_stream_bound_s(const model::Plan& plan) {
    const auto sums = stage_compute_sums(plan);
    return *std::max_element(sums.begin(), sums.end());
}

// Per-stage compute sums for a plan with the same layout but `microbatches` micro-batches.
std::vector<double> stage_sums(model::Plan plan, int microbatches) {
    plan.training.global_batch = microbatches * plan.training.micro_batch * plan.parallel.dp;
    return stage_compute_sums(plan);
}

} // namespace

double step_time_lower_bound_s(const model::Plan& plan) {
    // Every micro-batch adds the same compute kernels to a stage (its forward and backward of each
    // chunk, same shapes); the rest (optimizer, once-per-step casts) does not depend on the count.
    // So a stage's compute sum is a + b x microbatches, exactly: two small graphs (pp and 2 pp
    // micro-batches, valid for interleaving) give a and b, instead of building the step's full
    // graph (gradient accumulation of hundreds of micro-batches at small dp). Tested against the
    // direct sum.
    const int m = plan.grad_accum();
    const int m1 = plan.parallel.pp, m2 = 2 * plan.parallel.pp;
    if (m <= m2) return compute_stream_bound_s(plan);
    const auto s1 = stage_sums(plan, m1);
    const auto s2 = stage_sums(plan, m2);
    double best = 0;
    for (std::size_t i = 0; i < s1.size(); ++i) {
        const double b = (s2[i] - s1[i]) / (m2 - m1);
        best = std::max(best, s1[i] + b * (m - m1));
    }
    // Floating-point sums in a different order: shave a relative 1e-9 so it stays a lower bound.
    return best * (1.0 - 1e-9);
}

double step_time_lower_bound_direct_s(const model::Plan& plan) { return compute_stream_bound_s(plan); }

SearchResult search_plans(const model::Plan& base, const SearchOptions& opt) {
    const auto t0 = std::chrono::steady_clock::now();
    SearchResult res;
    auto& st = res.stats;
    const unsigned threads = opt.threads > 0 ? opt.threads : std::max(1u, std::thread::hardware_concurrency());
    const std::size_t top = std::max<std::size_t>(1, opt.top);

    auto all = enumerate_layouts(base, opt.space);
    st.enumerated = all.size();

    // 1. Validity and memory (cheap, exact: a plan that breaks a layout rule or does not fit is
    //    not a candidate at all).
    std::vector<char> fits(all.size(), 0);
    parallel_for(all.size(), threads, [&](std::size_t i) {
        if (!model::check_layout(all[i]).empty()) {
            fits[i] = 1;
            return;
        }
        fits[i] = model::peak_memory(all[i]).total() <= all[i].hardware.hbm_capacity ? 2 : 0;
    });
    std::vector<std::size_t> cand;
    // 2. Dominated recompute policies. Rule: among variants of one layout that differ only in the
    //    recompute policy and all fit, only the lightest (none < selective < full) is kept. Why it
    //    cannot drop the best: recompute only *adds* compute-stream kernels (a forward pass of part
    //    or all of the layer before its backward) and, for full recompute, the TP collectives of that
    //    forward, to the same op graph; every other op is unchanged, and in the executor an op never
    //    starts earlier because work was added before it on its stream. So its step time is >= the
    //    lighter policy's, with the same GPUs and price: days and cost are >= too, and it cannot pass
    //    a deadline or budget the lighter one fails. Enumeration puts recompute innermost, so the
    //    variants of one layout are adjacent.
    auto same_layout_but_recompute = [&](const model::Plan& a, const model::Plan& b) {
        const auto& x = a.parallel;
        const auto& y = b.parallel;
        return a.num_gpus() == b.num_gpus() && x.tp == y.tp && x.pp == y.pp && x.vp == y.vp && x.cp == y.cp &&
               x.dp == y.dp && x.sequence_parallel == y.sequence_parallel && x.sharding == y.sharding &&
               a.training.micro_batch == b.training.micro_batch;
    };
    auto weight = [](model::Recompute r) { return static_cast<int>(r); };  // none 0 < selective 1 < full 2
    for (std::size_t i = 0; i < all.size(); ++i) {
        if (fits[i] == 1) {
            ++st.invalid;
            continue;
        }
        if (fits[i] == 0) {
            ++st.does_not_fit;
            continue;
        }
        bool dominated = false;
        if (opt.prune) {
            for (std::size_t j = i; j-- > 0 && same_layout_but_recompute(all[i], all[j]);)
                if (fits[j] == 2 && weight(all[j].parallel.recompute) < weight(all[i].parallel.recompute))
                    dominated = true;
        }
        if (dominated) ++st.pruned_dominated;
        else cand.push_back(i);
    }

    // 3. Compute lower bound on the step time of each candidate; simulate in order of the bound
    //    and skip a plan whose bound (as days or cost) is already worse than the `top`-th accepted
    //    plan, or already misses the deadline / budget. Why it cannot drop a listed plan: the bound
    //    is <= the plan's simulated step time (step_time_lower_bound_s), days and cost grow with
    //    the step time, and the threshold only falls as plans are accepted, so every plan of the
    //    final top list has bound <= metric <= threshold at every moment and is simulated.
    std::vector<double> lb(cand.size(), 0.0);
    if (opt.prune) parallel_for(cand.size(), threads, [&](std::size_t c) { lb[c] = step_time_lower_bound_s(all[cand[c]]); });
    std::vector<std::size_t> order(cand.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    if (opt.prune)
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return lb[a] < lb[b]; });

    std::mutex mu;
    std::vector<std::pair<std::pair<double, double>, std::size_t>> accepted_keys;  // sorted, at most `top`
    std::vector<std::optional<RunEstimate>> est(cand.size());
    std::size_t done = 0;
    std::atomic<std::size_t> pruned_bound{0}, simulated{0}, filtered{0};
    auto report = [&] {
        ++done;
        if (opt.progress) opt.progress(done, cand.size());
    };
    parallel_for(order.size(), threads, [&](std::size_t k) {
        const std::size_t c = order[k];
        const model::Plan& p = all[cand[c]];
        if (opt.prune) {
            const double days_lb = days_for_step(p, lb[c]);
            const double cost_lb = cost_for_days(p, days_lb);
            bool skip = (opt.deadline_days && days_lb > *opt.deadline_days) || (opt.budget && cost_lb > *opt.budget);
            {
                std::lock_guard lock(mu);
                if (!skip && accepted_keys.size() >= top) {
                    const double bound = opt.rank == RankBy::days ? days_lb : cost_lb;
                    skip = bound > accepted_keys.back().first.first;
                }
                if (skip) {
                    ++pruned_bound;
                    report();
                    return;
                }
            }
        }
        auto e = estimate_plan(p);
        ++simulated;
        std::lock_guard lock(mu);
        if (e.fits && e.step && passes_filters(e, opt)) {
            accepted_keys.emplace_back(rank_key(e, opt.rank), cand[c]);
            std::sort(accepted_keys.begin(), accepted_keys.end());
            if (accepted_keys.size() > top) accepted_keys.pop_back();
            est[c] = std::move(e);
        } else {
            ++filtered;
            est[c] = std::move(e);
        }
        report();
    });
    st.pruned_bound = pruned_bound;
    st.simulated = simulated;
    st.filtered = filtered;

    // 4. Rank every accepted plan (not just the running top list) by (metric, enumeration index).
    std::vector<std::pair<std::pair<double, double>, std::size_t>> ranked;
    for (std::size_t c = 0; c < cand.size(); ++c)
        if (est[c] && est[c]->fits && est[c]->step && passes_filters(*est[c], opt))
            ranked.emplace_back(rank_key(*est[c], opt.rank), c);
    std::sort(ranked.begin(), ranked.end(), [&](const auto& a, const auto& b) {
        return std::tie(a.first, cand[a.second]) < std::tie(b.first, cand[b.second]);
    });
    for (std::size_t r = 0; r < ranked.size() && r < top; ++r) {
        const std::size_t c = ranked[r].second;
        res.plans.push_back({all[cand[c]], std::move(*est[c])});
    }
    st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return res;
}

std::string explain_winner(const RankedPlan& best, const RankedPlan& runner_up) {
    const auto& a = best.estimate;
    const auto& b = runner_up.estimate;
    if (!a.step || !b.step) return {};
    const auto& x = a.step->breakdown;
    const auto& y = b.step->breakdown;
    struct Row {
        const char* name;
        double diff;
    };
    std::vector<Row> rows{{"forward", (y.forward - x.forward).seconds()},
                          {"backward", (y.backward - x.backward).seconds()},
                          {"recompute", (y.recompute - x.recompute).seconds()},
                          {"optimizer", (y.optimizer - x.optimizer).seconds()},
                          {"exposed TP comm", (y.tp_exposed - x.tp_exposed).seconds()},
                          {"exposed CP comm", (y.cp_exposed - x.cp_exposed).seconds()},
                          {"exposed DP comm", (y.dp_exposed - x.dp_exposed).seconds()},
                          {"exposed PP comm", (y.pp_exposed - x.pp_exposed).seconds()},
                          {"pipeline bubble", (y.bubble - x.bubble).seconds()}};
    std::stable_sort(rows.begin(), rows.end(),
                     [](const Row& r, const Row& s) { return std::abs(r.diff) > std::abs(s.diff); });
    std::string s = fmt::format("why the best wins: vs the runner-up ({}), {:.1f} vs {:.1f} days, step {:.3f} vs "
                                "{:.3f} s; per step the runner-up spends",
                                layout_label(runner_up.plan), a.days_to_train, b.days_to_train, a.step_time_s,
                                b.step_time_s);
    int shown = 0;
    for (const auto& r : rows) {
        if (shown == 3 || std::abs(r.diff) < 1e-4) break;
        s += fmt::format("{} {:+.3f} s {}", shown == 0 ? "" : ",", r.diff, r.name);
        ++shown;
    }
    if (shown == 0) s += " the same in every category (a tie broken by cost, then by enumeration order)";
    return s + "\n";
}

} // namespace trainsim::sim
