#include "trainsim/sim/search/plan_search.hpp"

#include "trainsim/sim/search/parallel_for.hpp"

#include "trainsim/model/accounting/flops.hpp"
#include "trainsim/model/accounting/layout.hpp"
#include "trainsim/model/accounting/memory_model.hpp"
#include "trainsim/model/accounting/pipeline_schedule.hpp"
#include "trainsim/model/workload/workload.hpp"
#include "trainsim/sim/cost/compute_cost.hpp"
#include "trainsim/sim/network/network.hpp"
#include "trainsim/sim/run/offload.hpp"
#include "trainsim/sim/step/executor.hpp"
#include "trainsim/sim/step/periodic.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <array>
#include <chrono>
#include <cstdint>
#include <cmath>
#include <exception>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <thread>
#include <unordered_map>
#include <tuple>

namespace trainsim::sim {

std::vector<int> divisors(int n, int max) {
    std::vector<int> out;
    for (int d = 1; d <= std::min(n, max); ++d)
        if (n % d == 0) out.push_back(d);
    return out;
}

namespace {

// Days and cost as the search ranks and filters them (SearchOptions::basis).
struct Metrics {
    double days = 0;
    double cost = 0;
};

Metrics metrics_of(const RunEstimate& e, const SearchOptions& o) {
    return o.basis == DaysBasis::expected ? Metrics{e.expected_days, e.expected_cost}
                                          : Metrics{e.days_to_train, e.cost};
}

// The metrics of a plan whose step takes at least `step_s`, as lower bounds: the definitions of
// estimate_plan (days = tokens / throughput, cost = GPU-hours x price), and for the expected basis
// the run model's overhead factor, which depends on the plan's GPUs, nodes, parameters and run
// settings but not on its step time. Shaved by a relative 1e-6: the formulas here round
// differently from estimate_plan's (1e-12 would do for that), and a step extended from three
// short ones is within that of the full simulation's (step/periodic.hpp).
Metrics metrics_lower_bound(const model::Plan& p, double step_s, const SearchOptions& o) {
    // A fitted stack's discrepancy scales the simulated step (estimate_plan); the bound with it.
    if (const auto d = stack_discrepancy_at(p)) step_s /= std::exp(d->mean_log);
    const double tokens_per_step = static_cast<double>(p.training.global_batch) * p.training.seq_len;
    const double days = p.training.tokens / tokens_per_step * step_s / 86400.0;
    const double factor = o.basis == DaysBasis::expected ? run_time(p, 1.0, p.run).overhead_factor : 1.0;
    const double shave = 1.0 - kPeriodicRelativeError;
    const double wall_days = days * factor * shave;
    // The bill only grows with the wall clock (whole units of it), so billing the bound bounds it.
    const double cost =
        has_price(p.pricing)
            ? bill(p.pricing, p.pricing.commitment, wall_days * 24.0, p.cluster.nodes, p.cluster.gpus_per_node).cost *
                  shave
            : 0.0;
    return {wall_days, cost};
}

// A lower bound on the step time from the layers' GEMM FLOPs alone, O(1) per plan: every layer
// GEMM of the step (forward, dgrad and wgrad of QKV, projection, FC1, FC2: 3 x the forward FLOPs of
// model::layer_gemm_flops_per_token per token) runs on some rank's compute stream, split across
// TP / CP / PP / DP without loss, so the busiest rank runs at least 1 / num_gpus of them; and no
// GEMM kernel runs faster than the dense peak of its precision at the sustained clock
// (ComputeCost::gemm: efficiency <= 1, plus a memory term, a launch overhead, contention) or a
// calibrated table sample's own rate, whichever is higher. It ignores attention, element-wise
// kernels, communication, the pipeline bubble and recompute, so it is loose (about half the step
// of a good plan), but it costs nothing: it prunes the GPU counts that cannot meet a deadline or
// a budget before any graph is built.
double gemm_flops_lower_bound_s(const model::Plan& p) {
    const auto& hw = p.hardware;
    double rate = 0;
    if (auto it = hw.dense_peak.find(p.precision); it != hw.dense_peak.end()) rate = it->second.value();
    for (const auto& s : hw.gemm_table)
        if (s.precision == p.precision && s.time > Time())
            rate = std::max(rate, 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k) /
                                      s.time.seconds());
    if (!(rate > 0)) return 0.0;
    const double tokens = static_cast<double>(p.training.global_batch) * p.training.seq_len;
    const double flops = 3.0 * tokens * p.model.layers * model::layer_gemm_flops_per_token(p.model);
    // ComputeCost divides by the sustained clock ratio and by the split-accumulation speed (never
    // above 1 in a profile, but the bound stays a bound whatever they are).
    return flops / p.num_gpus() / (rate * hw.sustained_clock_ratio * std::max(1.0, hw.fp8_split_accumulate_speed));
}

// The ranking key: (primary, secondary) metric; ties are broken by enumeration index.
std::pair<double, double> rank_key(const Metrics& m, RankBy by) {
    return by == RankBy::days ? std::pair{m.days, m.cost} : std::pair{m.cost, m.days};
}

bool passes_filters(const Metrics& m, const SearchOptions& o) {
    if (o.deadline_days && m.days > *o.deadline_days) return false;
    if (o.budget && m.cost > *o.budget) return false;
    return true;
}

model::Plan with_gpu_count(const model::Plan& base, int gpus) {
    model::Plan p = base;
    if (auto why = model::set_gpu_count(p, gpus); !why.empty()) {
        model::Diagnostic d;
        d.file = "trainsim plan";
        d.key = "--gpus";
        d.message = std::move(why);
        throw SearchError({d});
    }
    return p;
}

// A searched plan's name: its GPU count and layout.
std::string search_name(const model::Plan& plan) {
    return fmt::format("{} GPUs {}", plan.num_gpus(), layout_label(plan));
}

} // namespace

std::string layout_label(const model::Plan& plan, bool with_dp) {
    const auto& q = plan.parallel;
    std::string s = fmt::format("tp{} pp{}", q.tp, q.pp);
    if (q.vp > 1) s += fmt::format(" vp{}", q.vp);
    // A schedule the search chose beyond the default order (1F1B / interleaved by vp).
    if (q.pp_schedule != model::PpSchedule::automatic) s += " " + model::to_string(q.pp_schedule);
    if (q.cp > 1) s += fmt::format(" cp{}", q.cp);
    if (with_dp) s += fmt::format(" dp{}", q.dp);
    if (q.sequence_parallel) s += " sp";
    s += fmt::format(" mbs{} {} rc:{}", plan.training.micro_batch, model::to_string(q.sharding),
                     model::block_recompute(plan) ? fmt::format("block{}", model::full_recompute_layers(plan))
                                                  : std::string(model::to_string(q.recompute)));
    if (q.offload != model::Offload::none) s += fmt::format(" offload:{}", model::to_string(q.offload));
    // Fine-tuning's memory tricks, where the plan has them (docs/model.md "Fine-tuning").
    if (!q.master_weights) s += " no-master";
    if (q.optimizer_state == model::OptimizerState::int8) s += " opt:8bit";
    if (q.optimizer_in_backward) s += " opt-in-bwd";
    if (q.paged_optimizer) s += " paged";
    return s;
}

namespace {

// One layout of the space, as enumerate_layouts makes it from its GPU count's plan (`count`, an
// index into the node plans): a few bytes instead of a plan (the 405B search enumerates 215,808
// layouts; copies of the whole plan were a quarter of its time and most of its memory).
struct LayoutChoice {
    std::uint32_t count = 0;
    int tp = 1, pp = 1, vp = 1, cp = 1, dp = 1, micro_batch = 1;
    int recipe = -1;  // into SearchSpace::recipes; -1: the plan's own
    model::PpSchedule schedule = model::PpSchedule::automatic;
    bool sp = false;
    model::Sharding sharding = model::Sharding::none;
    model::Offload offload = model::Offload::none;
    model::Recompute recompute = model::Recompute::none;
};

// `p` becomes the layout `c` of its count's plan `node` (every field a choice sets is reset from
// `node` first, so one plan can take one choice after another), named if asked.
void apply_choice(model::Plan& p, const model::Plan& node, const LayoutChoice& c, const SearchSpace& space,
                  bool named, int recompute_layers = -1) {
    p.parallel = node.parallel;
    p.training.micro_batch = c.micro_batch;
    if (c.recipe >= 0) {
        const auto& r = space.recipes[static_cast<std::size_t>(c.recipe)];
        p.parallel.master_weights = r.master_weights;
        p.parallel.optimizer_state = r.optimizer_state;
        p.parallel.optimizer_in_backward = r.optimizer_in_backward;
    }
    p.parallel.tp = c.tp;
    p.parallel.pp = c.pp;
    p.parallel.vp = c.vp;
    p.parallel.pp_schedule = c.schedule;
    p.parallel.cp = c.cp;
    p.parallel.dp = c.dp;
    p.parallel.sequence_parallel = c.sp;
    p.parallel.sharding = c.sharding;
    p.parallel.offload = c.offload;
    p.parallel.recompute = c.recompute;
    if (recompute_layers >= 0) p.parallel.recompute_layers = recompute_layers;
    if (named) p.name = search_name(p);
}

// The layouts of the space, in enumerate_layouts' order, and the plan of each GPU count.
std::vector<LayoutChoice> enumerate_choices(const model::Plan& base, const SearchSpace& space,
                                            std::vector<model::Plan>& node_plans) {
    std::vector<int> counts = space.gpu_counts;
    if (counts.empty()) counts.push_back(base.num_gpus());
    const auto& m = base.model;
    // The base plan's own sharding is always tried too, so that a scenario's ZeRO-3 or HSDP plan
    // lies in the space it is compared against.
    std::vector<model::Sharding> shardings = space.shardings;
    if (std::find(shardings.begin(), shardings.end(), base.parallel.sharding) == shardings.end())
        shardings.push_back(base.parallel.sharding);
    // The cluster of each count first, in order (a count that is not whole nodes is an error, the
    // first such count's); then each count's layouts, concatenated in the counts' order.
    node_plans.clear();
    node_plans.reserve(counts.size());
    for (int gpus : counts) node_plans.push_back(with_gpu_count(base, gpus));
    std::vector<LayoutChoice> out;
    for (std::size_t ci = 0; ci < counts.size(); ++ci) {
        const int gpus = counts[ci];
        const model::Plan& node_plan = node_plans[ci];
        const int gpn = node_plan.cluster.gpus_per_node;
        for (int tp : divisors(gpn, gpn)) {
            if (m.heads % tp != 0) continue;
            for (int pp : model::pipeline_depths(m.layers, gpus / tp)) {
                std::vector<int> vps{1};
                if (pp > 1) vps = model::interleavings(m.layers, pp);
                // (vp, schedule): the default order (automatic) of every vp whose schedule is
                // offered, in the order the search enumerated before schedules were searched (so
                // that with 1F1B and interleaved offered the enumeration, and its tie-breaks, are
                // unchanged), then each offered split-backward schedule at the vp it runs at:
                // zb-h1 on 1F1B's one chunk per stage, the V schedules on two (check_layout has
                // the last word on whether the layers split into them).
                const auto& offered = space.pp_schedules;
                auto offers = [&](model::PpSchedule x) {
                    return std::find(offered.begin(), offered.end(), x) != offered.end();
                };
                std::vector<std::pair<int, model::PpSchedule>> pipes;
                for (int vp : vps)
                    if (pp == 1 || offers(vp == 1 ? model::PpSchedule::one_f_one_b : model::PpSchedule::interleaved))
                        pipes.emplace_back(vp, model::PpSchedule::automatic);
                if (pp > 1) {
                    if (offers(model::PpSchedule::zb_h1) && std::find(vps.begin(), vps.end(), 1) != vps.end())
                        pipes.emplace_back(1, model::PpSchedule::zb_h1);
                    for (auto v : {model::PpSchedule::zb_v, model::PpSchedule::dualpipe_v})
                        if (offers(v)) pipes.emplace_back(2, v);
                }
                for (int cp = 1; cp <= space.max_cp && tp * pp * cp <= gpus; cp *= 2) {
                    const int dp = model::derive_dp(gpus, tp, pp, cp);
                    if (dp == 0) continue;
                    if (base.training.global_batch % dp != 0) continue;
                    const auto mbs = divisors(base.training.global_batch / dp, space.max_micro_batch);
                    std::vector<bool> sps{tp > 1};
                    if (tp > 1 && space.try_without_sp) sps.push_back(false);
                    for (const auto& [vp, schedule] : pipes)
                        for (bool sp : sps)
                            for (int mb : mbs)
                                for (auto sh : shardings)
                                    for (auto off : space.offloads) {
                                        // ZeRO-2/3 shard gradients across micro-batches: pp == 1 only (FSDP /
                                        // HSDP under pp keep their gathered weights through the step).
                                        if (pp > 1 && (sh == model::Sharding::zero3 || sh == model::Sharding::zero2))
                                            continue;
                                        for (auto rc : space.recomputes)
                                            for (std::size_t ri = 0; ri < std::max<std::size_t>(1, space.recipes.size());
                                                 ++ri) {
                                                LayoutChoice c;
                                                c.count = static_cast<std::uint32_t>(ci);
                                                c.recipe = space.recipes.empty() ? -1 : static_cast<int>(ri);
                                                c.tp = tp;
                                                c.pp = pp;
                                                c.vp = vp;
                                                c.schedule = schedule;
                                                c.cp = cp;
                                                c.dp = dp;
                                                c.sp = sp;
                                                c.sharding = sh;
                                                c.offload = off;
                                                c.recompute = rc;
                                                c.micro_batch = mb;
                                                out.push_back(c);
                                            }
                                    }
                }
            }
        }
    }
    return out;
}

// Runs body(i, plan) for every choice, `plan` the choice applied (unnamed) to its count's plan:
// each worker takes a contiguous share and one plan it copies only when the count changes.
template <class F>
void for_each_choice(const std::vector<LayoutChoice>& choices, const std::vector<model::Plan>& nodes,
                     const SearchSpace& space, unsigned threads, F&& body) {
    const std::size_t n = choices.size();
    const std::size_t parts = std::max<std::size_t>(1, std::min<std::size_t>(threads, n));
    parallel_for(parts, static_cast<unsigned>(parts), [&](std::size_t t) {
        model::Plan p;
        std::uint32_t have = std::numeric_limits<std::uint32_t>::max();
        for (std::size_t i = n * t / parts; i < n * (t + 1) / parts; ++i) {
            const auto& c = choices[i];
            if (c.count != have) {
                p = nodes[c.count];
                have = c.count;
            }
            apply_choice(p, nodes[c.count], c, space, false);
            body(i, p);
        }
    });
}

} // namespace

std::vector<model::Plan> enumerate_layouts(const model::Plan& base, const SearchSpace& space) {
    std::vector<model::Plan> nodes;
    const auto choices = enumerate_choices(base, space, nodes);
    std::vector<model::Plan> all(choices.size());
    parallel_for(choices.size(), std::max(1u, std::thread::hardware_concurrency()), [&](std::size_t i) {
        const auto& c = choices[i];
        all[i] = nodes[c.count];
        apply_choice(all[i], nodes[c.count], c, space, true);
    });
    return all;
}

namespace {

// The least time the executor can spend on each op of a graph's representative ranks (one per
// pipeline stage, as the search simulates them), costed by the executor's own nominal_op_time
// (kernels, collectives incl. list-API copies), pipeline transfers point to point between the
// representative ranks of two stages (global rank stage x stride_pp). The executor only ever
// lengthens an op (a kernel next to communication runs slower, transfers sharing a link share
// its bandwidth) except by rounding: when it re-rates a kernel or re-shares a link it rounds the
// end time to whole ps, so an op can end up to half a ps early. Hence nominal - 1 ps.
class LeastTimes {
public:
    LeastTimes(const model::Plan& plan, const model::OpGraph& graph, const AnalyticNetwork& network)
        : proto_ps_(graph.protos.size(), {0, 0}), stride_pp_(model::rank_strides(plan.parallel).pp),
          gpn_(plan.cluster.gpus_per_node) {
        const ComputeCost compute(plan.hardware);
        for (std::size_t i = 1; i < graph.protos.size(); ++i) {
            const auto& p = graph.protos[i];
            if (p.kind == model::OpKind::send || p.kind == model::OpKind::recv) {
                // [0]: to a GPU of the same node, [1]: of another node (each only where one exists).
                if (plan.cluster.gpus_per_node > 1) proto_ps_[i][0] = least(network.p2p(false, p.bytes));
                if (plan.cluster.nodes > 1) proto_ps_[i][1] = least(network.p2p(true, p.bytes));
            } else {
                proto_ps_[i].fill(least(nominal_op_time(plan, graph, p, compute, network)));
            }
        }
    }
    // ps; `stage`: the stage whose program holds `op`.
    [[nodiscard]] std::int64_t of(std::size_t stage, const model::Op& op) const {
        const int node = static_cast<int>(stage) * stride_pp_ / gpn_;
        const bool cross = op.peer_stage >= 0 && op.peer_stage * stride_pp_ / gpn_ != node;
        return proto_ps_[op.proto][cross ? 1 : 0];
    }

private:
    static std::int64_t least(Time nominal) { return std::max<std::int64_t>(0, nominal.count_ps() - 1); }
    std::vector<std::array<std::int64_t, 2>> proto_ps_;
    int stride_pp_;
    int gpn_;
};

// Per pipeline stage: the sum of the least op times (ps) of each stream, with the compute stream
// split into its kernels ([compute]) and the collectives that block it ([kBlocking]); and, inside
// the kernels' sum, a bound above the optimizer's (its update and gradient norm, [kOptimizer]).
constexpr std::size_t kBlocking = model::kNumStreams;
constexpr std::size_t kOptimizer = model::kNumStreams + 1;
using StreamSums = std::vector<std::array<std::int64_t, model::kNumStreams + 2>>;

// `least`: the least times of `graph`'s ops.
StreamSums stream_sums_of(const model::OpGraph& graph, const LeastTimes& least) {
    StreamSums out(graph.stages.size());
    for (std::size_t s = 0; s < graph.stages.size(); ++s) {
        out[s].fill(0);
        for (const auto& op : graph.stages[s].ops) {
            const bool blocking =
                op.stream == model::Stream::compute && graph.protos[op.proto].kind == model::OpKind::collective;
            const std::int64_t t = least.of(s, op);
            out[s][blocking ? kBlocking : static_cast<std::size_t>(op.stream)] += t;
            // At most: the nominal time (least + 1 ps) plus 1 ps for the executor's rounding of
            // a slowed kernel's end (< 0.5 ps), so that (1 + s) x this sum bounds the time taken.
            if (!blocking && op.stream == model::Stream::compute && op.category == model::Category::optimizer)
                out[s][kOptimizer] += t + 2;
        }
    }
    return out;
}

StreamSums stream_sums(const model::Plan& plan, const AnalyticNetwork& network) {
    const auto graph = model::build_workload(plan);
    return stream_sums_of(graph, LeastTimes(plan, graph, network));
}

// No stage finishes before the largest of, with s = the profile's comm_compute_slowdown:
//   - the sum of any communication stream (a stream runs one op at a time);
//   - C + B + max(0, A - B) x s / (1 + s), with C the compute kernels' sum, B the blocking
//     collectives' and A the largest communication stream's sum. Why: the executor runs a kernel
//     at 1 / (1 + s) of its speed while any communication of its rank is in flight (A at least,
//     as a stream's ops do not overlap). Over the time the stage takes, kernels run outside
//     communication for U0 and inside it for U1 <= A, and the compute stream is busy with blocking
//     collectives for B: C <= U0 + U1 / (1 + s), and the stage takes at least
//     U0 + U1 + max(B, A - U1) >= C + U1 x s / (1 + s) + max(B, A - U1), whose least over U1 is
//     the expression above (at U1 = A - B when A > B, else U1 = 0).
std::int64_t largest(const StreamSums& sums, double slowdown) {
    const double slow = slowdown / (1.0 + slowdown);
    std::int64_t best = 0;
    for (const auto& st : sums) {
        std::int64_t comm = 0;
        for (std::size_t k = 0; k < model::kNumStreams; ++k)
            if (k != static_cast<std::size_t>(model::Stream::compute)) comm = std::max(comm, st[k]);
        const std::int64_t c = st[static_cast<std::size_t>(model::Stream::compute)], b = st[kBlocking];
        // Rounded down to whole ps (and by 1 ps more for the floating-point product): a lower bound.
        const auto extra = static_cast<std::int64_t>(static_cast<double>(std::max<std::int64_t>(0, comm - b)) * slow);
        best = std::max({best, comm, c + b + std::max<std::int64_t>(0, extra - 1)});
    }
    return best;
}

bool chain_applies(const model::Plan& plan);
model::WorkloadOrder small_graph_order(const model::Plan& plan);
model::Plan with_microbatches(model::Plan plan, int microbatches);
std::int64_t pipeline_chain_ps(const model::Plan& plan, const model::OpGraph& graph, const LeastTimes& least);

// `chain`: where given, also the pipeline's chain of passes (pipeline_chain_ps; 0 where it does not
// apply), from the same small graph.
StreamSums bound_sums(const model::Plan& plan, const AnalyticNetwork& network, std::int64_t* chain = nullptr) {
    // Every micro-batch adds the same ops to a stage (its forward and backward of each chunk, with
    // their TP / CP collectives and pipeline transfers, same shapes); the rest (optimizer, DP
    // reductions and gathers, once-per-step casts) does not depend on the count. So each
    // (stage, stream) sum is a + b x microbatches, exactly, in integer ps, and two small graphs
    // give a and b (1 and 2 micro-batches, or 2 and 3 where the second serves the pipeline's
    // chain too; for ZB-V pp and 2 pp, for DualPipeV 2 pp and 4 pp, which they need) instead of
    // the step's full graph (gradient accumulation of hundreds of micro-batches at small dp). A
    // difference that does not divide evenly would show the premise broken: the full graph is
    // then summed instead. Tested against the direct sum.
    // The interleaved schedule needs a multiple of pp, but its ops laid out depth first
    // (model::WorkloadOrder) are the same for any count (tested against the direct sum).
    const int m = plan.grad_accum();
    const auto schedule = model::effective_schedule(plan.parallel.pp_schedule, plan.parallel.vp);
    const bool with_chain = chain != nullptr && chain_applies(plan);
    if (chain != nullptr) *chain = 0;
    const int m1 = schedule == model::PpSchedule::dualpipe_v                                   ? 2 * plan.parallel.pp
                   : plan.parallel.vp > 1 && schedule != model::PpSchedule::interleaved ? plan.parallel.pp
                   : with_chain                                                            ? 2
                                                                                           : 1;
    const int m2 = with_chain ? 3 : 2 * m1;
    if (m <= m2) {
        const auto graph = model::build_workload(plan);
        const LeastTimes least(plan, graph, network);
        if (with_chain) *chain = pipeline_chain_ps(plan, graph, least);
        return stream_sums_of(graph, least);
    }
    const auto order = small_graph_order(plan);
    const auto p1 = with_microbatches(plan, m1), p2 = with_microbatches(plan, m2);
    const auto g1 = model::build_workload(p1, order);
    const auto s1 = stream_sums_of(g1, LeastTimes(p1, g1, network));
    // One set of least times for the second graph serves its sums and the chain.
    const auto g2 = model::build_workload(p2, order);
    const LeastTimes least2(p2, g2, network);
    const auto s2 = stream_sums_of(g2, least2);
    if (with_chain) *chain = pipeline_chain_ps(plan, g2, least2);
    if (s1.size() != s2.size()) return stream_sums(plan, network);
    StreamSums s = s1;
    const std::int64_t dm = m2 - m1, steps = m - m1;
    for (std::size_t i = 0; i < s.size(); ++i)
        for (std::size_t k = 0; k < s[i].size(); ++k) {
            const std::int64_t d = s2[i][k] - s1[i][k];
            if (d < 0 || d % dm != 0) return stream_sums(plan, network);
            s[i][k] += d / dm * steps;
        }
    return s;
}

// The stream sums' bound and the pipeline's chain, whichever is larger.
std::int64_t stream_bound_ps(const model::Plan& plan, const AnalyticNetwork& network) {
    std::int64_t chain = 0;
    const auto sums = bound_sums(plan, network, &chain);
    return std::max(largest(sums, plan.hardware.comm_compute_slowdown), chain);
}

// A CPU-offload step is the simulated GPU step less its optimizer kernels' time on the critical
// stage, plus what offload adds (sim/offload.hpp). The GPU step is >= the stream bound; the
// optimizer time removed is <= (1 + s) x the largest stage's optimizer sum (a kernel runs at no
// less than 1 / (1 + s) of its speed; the sum counts each kernel's nominal time and its rounding); what offload adds is >= CPU Adam and the parameters
// back (the exposed transfers are >= 0).
std::int64_t offload_bound_ps(const model::Plan& plan, const StreamSums& sums) {
    const double slowdown = plan.hardware.comm_compute_slowdown;
    std::int64_t optimizer = 0;
    for (const auto& st : sums) optimizer = std::max(optimizer, st[kOptimizer]);
    const auto removed = static_cast<std::int64_t>(std::ceil(static_cast<double>(optimizer) * (1.0 + slowdown))) + 1;
    const auto serial = static_cast<std::int64_t>(std::floor(offload_serial_s(plan) * 1e12)) - 1;
    return std::max<std::int64_t>(0, largest(sums, slowdown) - removed) + std::max<std::int64_t>(0, serial);
}

// The contention-free critical path of the step (ps): every op starts as soon as the ops it
// depends on and the op before it on its stream have ended, and a pipeline transfer once both of
// its sides are posted, as in the executor, and takes its least time. The executor starts each
// op under exactly these rules, and takes at least that long for each, so by induction over
// the ops in the order they start, no op ends earlier in the executor than here: the longest
// path bounds the step time from below. It includes what the stream sums cannot see: pipeline
// fill and drain, and communication on the critical path. 0 if the graph cannot complete (the
// simulation then reports the stuck ops).
std::int64_t critical_path_ps(const model::Plan& plan, const model::OpGraph& graph, const AnalyticNetwork& network) {
    constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
    const LeastTimes least(plan, graph, network);
    const std::size_t stages = graph.stages.size();
    std::vector<std::uint32_t> base(stages + 1, 0);  // global op index of a stage's first op
    for (std::size_t s = 0; s < stages; ++s)
        base[s + 1] = base[s] + static_cast<std::uint32_t>(graph.stages[s].ops.size());
    const std::uint32_t n = base[stages];
    std::vector<std::int64_t> time(n, 0);  // ready time; once the op ended, its end time
    std::vector<std::uint32_t> waiting(n, 0), next_on_stream(n, kNone), partner(n, kNone), first_dependent(n + 1, 0);
    std::unordered_map<std::uint64_t, std::uint32_t> unmatched;  // pipeline transfers by (src, dst, tag)
    for (std::size_t s = 0; s < stages; ++s) {
        const auto& prog = graph.stages[s];
        std::array<std::uint32_t, model::kNumStreams> last;
        last.fill(kNone);
        for (std::uint32_t i = 0; i < prog.ops.size(); ++i) {
            const auto& o = prog.ops[i];
            const std::uint32_t id = base[s] + i;
            waiting[id] = o.dep_count;
            for (std::uint32_t d = 0; d < o.dep_count; ++d) ++first_dependent[base[s] + prog.deps[o.dep_begin + d] + 1];
            auto& prev = last[static_cast<std::size_t>(o.stream)];
            if (prev != kNone) {
                next_on_stream[prev] = id;
                ++waiting[id];
            }
            prev = id;
            if (o.peer_stage >= 0) {
                // Matched as the executor matches them: (source stage, destination stage, tag).
                const bool is_send = graph.protos[o.proto].kind == model::OpKind::send;
                const auto self = static_cast<std::uint64_t>(s), peer = static_cast<std::uint64_t>(o.peer_stage);
                const std::uint64_t key = (((is_send ? self : peer) << 20 | (is_send ? peer : self)) << 24) | o.tag;
                auto [it, fresh] = unmatched.try_emplace(key, id);
                if (!fresh) {
                    partner[id] = it->second;
                    partner[it->second] = id;
                    unmatched.erase(it);
                }
            }
        }
    }
    for (std::uint32_t i = 0; i < n; ++i) first_dependent[i + 1] += first_dependent[i];
    std::vector<std::uint32_t> dependents(first_dependent[n]);
    {
        auto fill = first_dependent;
        for (std::size_t s = 0; s < stages; ++s) {
            const auto& prog = graph.stages[s];
            for (std::uint32_t i = 0; i < prog.ops.size(); ++i) {
                const auto& o = prog.ops[i];
                for (std::uint32_t d = 0; d < o.dep_count; ++d)
                    dependents[fill[base[s] + prog.deps[o.dep_begin + d]]++] = base[s] + i;
            }
        }
    }
    std::vector<std::int64_t> least_ps(n);
    for (std::size_t s = 0; s < stages; ++s)
        for (std::uint32_t i = 0; i < graph.stages[s].ops.size(); ++i)
            least_ps[base[s] + i] = least.of(s, graph.stages[s].ops[i]);

    std::vector<std::uint32_t> ready;
    std::vector<char> posted(n, 0);
    for (std::uint32_t i = 0; i < n; ++i)
        if (waiting[i] == 0) ready.push_back(i);
    std::int64_t longest = 0;
    std::uint32_t ended = 0;
    auto release = [&](std::uint32_t v, std::int64_t t) {
        time[v] = std::max(time[v], t);
        if (--waiting[v] == 0) ready.push_back(v);
    };
    auto end = [&](std::uint32_t i, std::int64_t t) {
        time[i] = t;
        longest = std::max(longest, t);
        ++ended;
        for (auto k = first_dependent[i]; k < first_dependent[i + 1]; ++k) release(dependents[k], t);
        if (next_on_stream[i] != kNone) release(next_on_stream[i], t);
    };
    while (!ready.empty()) {
        const auto i = ready.back();
        ready.pop_back();
        const auto p = partner[i];
        if (p == kNone) {
            end(i, time[i] + least_ps[i]);
            continue;
        }
        posted[i] = 1;
        if (posted[p] == 0) continue;
        const std::int64_t start = std::max(time[i], time[p]);
        end(i, start + least_ps[i]);
        end(p, start + least_ps[p]);
    }
    return ended == n ? longest : 0;
}

// The pipeline's own bound (ps): the schedule's passes as blocks, each as long as the least time
// of its compute-stream ops, chained as the executor must run them. A stage's compute stream runs
// its ops in program order, and the builder emits each schedule item's ops together, after the
// receive of its input and before the send of its output; so an item starts no earlier than the
// item before it on its stage ends, nor than the item it takes its input from (the previous
// virtual stage's forward, the next one's backward or B pass) ends, and lasts at least the sum of
// its compute-stream ops' least times. The longest chain bounds the step from below and, unlike
// the stream sums, sees the fill and drain (the bubble). Each item's sum is taken from a graph of
// 3 micro-batches (interleaved: laid out depth first) as the least over its micro-batches of
// (pass, chunk): the middle micro-batch has the ops every micro-batch has (the first and the last
// may add the step's once-only ops), so no item of the step is shorter. The optimizer's and DP
// communication's ops are not items'. 1F1B, interleaved and ZB-H1 (the V schedules pair and
// reorder their transfers); 0 where it does not apply. Tested <= the critical path.
bool chain_applies(const model::Plan& plan) {
    const auto& q = plan.parallel;
    const auto sched = model::effective_schedule(q.pp_schedule, q.vp);
    return q.pp >= 2 && plan.grad_accum() >= 3 && q.offload == model::Offload::none &&
           (sched == model::PpSchedule::one_f_one_b || sched == model::PpSchedule::interleaved ||
            sched == model::PpSchedule::zb_h1);
}

// The order of the small graphs the bounds sum: the interleaved schedule's depth first.
model::WorkloadOrder small_graph_order(const model::Plan& plan) {
    return model::effective_schedule(plan.parallel.pp_schedule, plan.parallel.vp) == model::PpSchedule::interleaved
               ? model::WorkloadOrder::depth_first
               : model::WorkloadOrder::schedule;
}

// `graph`: of the plan with 3 micro-batches, build_workload(small, small_graph_order(plan)) (or the
// step's own of 3); `least`: its ops' least times.
std::int64_t pipeline_chain_ps(const model::Plan& plan, const model::OpGraph& graph, const LeastTimes& least) {
    using model::PipelinePass;
    const auto& q = plan.parallel;
    const auto sched = model::effective_schedule(q.pp_schedule, q.vp);
    const int m = plan.grad_accum();
    const int pp = q.pp, vp = q.vp, nvs = pp * vp;
    // [stage][pass][chunk][micro-batch 0..2] sums, then the least over the micro-batches.
    constexpr int kPasses = 4;
    auto slot = [&](int stage, PipelinePass pass, int chunk) {
        return (static_cast<std::size_t>(stage) * kPasses + static_cast<std::size_t>(pass)) * static_cast<std::size_t>(vp) +
               static_cast<std::size_t>(chunk);
    };
    std::vector<std::array<std::int64_t, 3>> sums(static_cast<std::size_t>(pp) * kPasses * static_cast<std::size_t>(vp),
                                                  {0, 0, 0});
    for (std::size_t st = 0; st < graph.stages.size(); ++st)
        for (const auto& op : graph.stages[st].ops) {
            if (op.stream != model::Stream::compute || op.microbatch > 2 || op.chunk >= vp ||
                op.category == model::Category::optimizer || op.category == model::Category::dp_comm)
                continue;
            sums[slot(static_cast<int>(st), op.pass, op.chunk)][op.microbatch] += least.of(st, op);
        }
    auto length = [&](int stage, PipelinePass pass, int chunk) {
        const auto& v = sums[slot(stage, pass, chunk)];
        return std::min({v[0], v[1], v[2]});
    };
    const PipelinePass grad_pass = sched == model::PpSchedule::zb_h1 ? PipelinePass::input_grad : PipelinePass::backward;
    // A long accumulation (m > 4 pp): walking every pass would cost more than it finds, as the
    // bubble is (pp - 1) / m of a 1F1B step; a floor of the chain in O(pp vp) instead, each term a
    // path through it. Stage s starts with micro-batch 0's forward of its first chunk, after every
    // earlier stage's (the virtual stages before it); runs all its passes of every micro-batch one
    // after another; and (1F1B, interleaved) ends with the last micro-batch's backward of its first
    // chunk, which every earlier stage's first chunk then takes back (ZB-H1 ends with W passes:
    // no tail).
    if (m > 4 * pp) {
        std::int64_t best = 0, head = 0, tail = 0;
        for (int s = 0; s < pp; ++s) {
            std::int64_t work = 0;
            for (int pass = 0; pass < kPasses; ++pass)
                for (int c = 0; c < vp; ++c) work += length(s, static_cast<PipelinePass>(pass), c);
            best = std::max(best, head + work * m + tail);
            head += length(s, PipelinePass::forward, 0);
            if (grad_pass == PipelinePass::backward) tail += length(s, PipelinePass::backward, 0);
        }
        return best;
    }
    // Each stage's items in its schedule order; an item's end once placed, by (stage, pass, chunk, mb).
    // The schedules, shared by the candidates of one (schedule, pp, vp, micro-batches) on a thread
    // (a search bounds thousands of layouts over a few dozen of them).
    using Schedules = std::vector<std::vector<model::ScheduleItem>>;
    thread_local std::map<std::tuple<model::PpSchedule, int, int, int>, Schedules> cache;
    if (cache.size() > 256) cache.clear();
    auto [cached, fresh] = cache.try_emplace({sched, pp, vp, m});
    if (fresh)
        for (int s = 0; s < pp; ++s) cached->second.push_back(model::pipeline_schedule(sched, s, pp, vp, m));
    const Schedules& items = cached->second;
    // Per (stage, chunk): the (stage, chunk) its forward's input comes from and its backward's,
    // or (-1, -1) for none.
    std::vector<std::array<model::StageChunk, 2>> source(static_cast<std::size_t>(nvs));
    for (int st = 0; st < pp; ++st)
        for (int c = 0; c < vp; ++c) {
            const int vs = model::virtual_stage(sched, pp, vp, st, c);
            auto& src = source[static_cast<std::size_t>(st * vp + c)];
            src[0] = vs > 0 ? model::stage_chunk(sched, pp, vp, vs - 1) : model::StageChunk{-1, -1};
            src[1] = vs < nvs - 1 ? model::stage_chunk(sched, pp, vp, vs + 1) : model::StageChunk{-1, -1};
        }
    constexpr std::int64_t kUnset = -1;
    // Only forward and gradient passes feed another stage: their ends, [stage][input side][chunk][mb],
    // in a buffer a thread reuses.
    thread_local std::vector<std::int64_t> ends;
    ends.assign(static_cast<std::size_t>(pp) * 2 * static_cast<std::size_t>(vp) * static_cast<std::size_t>(m), kUnset);
    auto end_of = [&](int stage, bool forward, int chunk, int mb) -> std::int64_t& {
        return ends[((static_cast<std::size_t>(stage) * 2 + (forward ? 0 : 1)) * static_cast<std::size_t>(vp) +
                     static_cast<std::size_t>(chunk)) *
                        static_cast<std::size_t>(m) +
                    static_cast<std::size_t>(mb)];
    };
    std::vector<std::int64_t> lengths(static_cast<std::size_t>(pp) * kPasses * static_cast<std::size_t>(vp));
    for (int st = 0; st < pp; ++st)
        for (int pass = 0; pass < kPasses; ++pass)
            for (int c = 0; c < vp; ++c)
                lengths[slot(st, static_cast<PipelinePass>(pass), c)] = length(st, static_cast<PipelinePass>(pass), c);
    std::vector<std::size_t> next(static_cast<std::size_t>(pp), 0);
    std::vector<std::int64_t> clock(static_cast<std::size_t>(pp), 0);
    for (bool moved = true; moved;) {
        moved = false;
        for (int s = 0; s < pp; ++s) {
            auto& k = next[static_cast<std::size_t>(s)];
            const auto& prog = items[static_cast<std::size_t>(s)];
            while (k < prog.size()) {
                const auto& it = prog[k];
                std::int64_t ready = clock[static_cast<std::size_t>(s)];
                const auto& from = source[static_cast<std::size_t>(s * vp + it.chunk)][it.forward ? 0 : 1];
                if (it.pass != PipelinePass::weight_grad && from.stage >= 0) {
                    const std::int64_t e = end_of(from.stage, it.forward, from.chunk, it.microbatch);
                    if (e == kUnset) break;  // its input is not placed yet
                    ready = std::max(ready, e);
                }
                const std::int64_t e = ready + lengths[slot(s, it.pass, it.chunk)];
                if (it.pass == PipelinePass::forward || it.pass == grad_pass)
                    end_of(s, it.pass == PipelinePass::forward, it.chunk, it.microbatch) = e;
                clock[static_cast<std::size_t>(s)] = e;
                ++k;
                moved = true;
            }
        }
    }
    for (int s = 0; s < pp; ++s)
        if (next[static_cast<std::size_t>(s)] < items[static_cast<std::size_t>(s)].size()) return 0;  // cannot happen
    return *std::max_element(clock.begin(), clock.end());
}

model::Plan with_microbatches(model::Plan plan, int microbatches) {
    plan.training.global_batch = microbatches * plan.training.micro_batch * plan.parallel.dp;
    return plan;
}

// The chain alone (tests).
std::int64_t pipeline_bound_ps(const model::Plan& plan, const AnalyticNetwork& network) {
    if (!chain_applies(plan)) return 0;
    const auto small = with_microbatches(plan, 3);
    const auto graph = model::build_workload(small, small_graph_order(plan));
    return pipeline_chain_ps(plan, graph, LeastTimes(small, graph, network));
}

} // namespace

double step_time_lower_bound_s(const model::Plan& plan, const AnalyticNetwork& network) {
    if (plan.parallel.offload != model::Offload::none)
        return Time::ps(offload_bound_ps(plan, bound_sums(plan, network))).seconds();
    return Time::ps(stream_bound_ps(plan, network)).seconds();
}

double pipeline_lower_bound_s(const model::Plan& plan) {
    return Time::ps(pipeline_bound_ps(plan, plan_network(plan))).seconds();
}

double step_time_lower_bound_s(const model::Plan& plan) { return step_time_lower_bound_s(plan, plan_network(plan)); }

double step_time_lower_bound_direct_s(const model::Plan& plan) {
    const auto network = plan_network(plan);
    const auto sums = stream_sums(plan, network);
    if (plan.parallel.offload != model::Offload::none) return Time::ps(offload_bound_ps(plan, sums)).seconds();
    return Time::ps(std::max(largest(sums, plan.hardware.comm_compute_slowdown), pipeline_bound_ps(plan, network)))
        .seconds();
}

double critical_path_lower_bound_s(const model::Plan& plan, const model::OpGraph& graph,
                                   const AnalyticNetwork& network) {
    return Time::ps(critical_path_ps(plan, graph, network)).seconds();
}

SearchResult search_plans(const model::Plan& base, const SearchOptions& opt) {
    if (!has_price(base.pricing) && (opt.rank == RankBy::cost || opt.budget)) {
        model::Diagnostic d;
        d.file = "trainsim plan";
        d.key = opt.budget ? "--budget" : "--rank";
        d.message = "a budget or a cost ranking needs a price (pricing.rate); without one the cost is unknown";
        throw SearchError({d});
    }
    const auto t0 = std::chrono::steady_clock::now();
    SearchResult res;
    auto& st = res.stats;
    const unsigned threads = opt.threads > 0 ? opt.threads : std::max(1u, std::thread::hardware_concurrency());
    const std::size_t top = std::max<std::size_t>(1, opt.top);

    std::vector<model::Plan> nodes;
    const auto choices = enumerate_choices(base, opt.space, nodes);
    st.enumerated = choices.size();
    const std::size_t n_choices = choices.size();

    // 1. Validity and memory (cheap, exact: a plan that breaks a layout rule or does not fit is
    //    not a candidate at all).
    std::vector<char> fits(n_choices, 0);
    for_each_choice(choices, nodes, opt.space, threads, [&](std::size_t i, const model::Plan& p) {
        if (!model::check_layout(p).empty()) {
            fits[i] = 1;
            return;
        }
        fits[i] = model::fits_in_memory(p, model::peak_memory(p), p.hardware.hbm_capacity * (1.0 - opt.memory_headroom))
                      ? 2
                      : 0;
    });
    for (std::size_t i = 0; i < n_choices; ++i)
        if (fits[i] == 2) ++res.fitting_per_count[nodes[choices[i].count].num_gpus()];
    auto same_layout_but_recompute = [&](std::size_t a, std::size_t b) {
        const auto& x = choices[a];
        const auto& y = choices[b];
        return x.count == y.count && x.tp == y.tp && x.pp == y.pp && x.vp == y.vp && x.cp == y.cp &&
               x.schedule == y.schedule && x.dp == y.dp && x.sp == y.sp && x.sharding == y.sharding &&
               x.offload == y.offload && x.micro_batch == y.micro_batch;
    };
    // Full recompute that fits is taken as block recompute of the fewest layers per chunk that
    // still fit (recompute_layers): fewer recomputed layers only remove kernels. Not needed where
    // the same layout fits without recompute, which beats any recompute (rule 2).
    // Per choice: its recompute_layers (-1: its count's plan's).
    std::vector<int> rc_layers(n_choices, -1);
    for_each_choice(choices, nodes, opt.space, threads, [&](std::size_t i, const model::Plan& p) {
        if (fits[i] != 2 || p.parallel.recompute != model::Recompute::full || p.parallel.recompute_layers != 0) return;
        for (std::size_t j = i; j-- > 0 && same_layout_but_recompute(i, j);)
            if (choices[j].recompute == model::Recompute::none && fits[j] == 2) return;
        rc_layers[i] = model::fewest_recompute_layers(p, p.hardware.hbm_capacity * (1.0 - opt.memory_headroom));
    });
    // The plan of a choice as the enumeration names it, with its recompute layers.
    auto materialize = [&](std::size_t i, model::Plan& p) {
        const auto& c = choices[i];
        p = nodes[c.count];
        apply_choice(p, nodes[c.count], c, opt.space, true, rc_layers[i]);
    };
    std::vector<std::size_t> cand;
    // 2. Dominated recompute policies. Rule: among variants of one layout that differ only in the
    //    recompute policy and all fit, a policy is dropped when a fitting lighter one adds a subset
    //    of its kernels: no recompute beats every policy, selective (the attention forward of every
    //    layer) beats full recompute of every layer, but not block recompute of some layers (whose
    //    recomputed forward passes need not cover all the attention). Why it cannot drop the best:
    //    recompute only *adds* compute-stream kernels (a forward pass of part or all of the layer
    //    before its backward) and, for full recompute, the TP collectives of that forward, to the
    //    same op graph; every other op is unchanged, and in the executor an op never
    //    starts earlier because work was added before it on its stream. So its step time is >= the
    //    lighter policy's, with the same GPUs, price and run settings: days and cost, steady or
    //    expected, are >= too, and it cannot pass a deadline or budget the lighter one fails.
    //    Enumeration puts recompute innermost, so the variants of one layout are adjacent.
    model::Plan heavy;
    auto lighter_subset = [&](std::size_t light, std::size_t i) {
        const auto l = choices[light].recompute, h = choices[i].recompute;
        if (l == model::Recompute::none) return h != model::Recompute::none;
        if (l != model::Recompute::selective || h != model::Recompute::full) return false;
        materialize(i, heavy);
        return !model::block_recompute(heavy);
    };
    for (std::size_t i = 0; i < n_choices; ++i) {
        if (fits[i] == 1) {
            ++st.invalid;
            continue;
        }
        if (fits[i] == 0) {
            ++st.does_not_fit;
            continue;
        }
        bool dominated = false;
        // With CPU offload the host's part of the step is not a sum of GPU kernels (parameter
        // fetches hide behind recompute): no dominance argument, every policy is simulated.
        if (opt.prune && choices[i].offload == model::Offload::none) {
            for (std::size_t j = i; !dominated && j-- > 0 && same_layout_but_recompute(i, j);)
                if (fits[j] == 2 && lighter_subset(j, i)) dominated = true;
        }
        if (dominated) ++st.pruned_dominated;
        else cand.push_back(i);
    }

    // 3. Lower bounds on the step time; simulate in order of the first and skip a plan whose bound
    //    (as days or cost) is already worse than the `top`-th accepted plan, or already misses the
    //    deadline / budget. Two bounds: the stream sums (step_time_lower_bound_s: cheap, from two
    //    small graphs, for every candidate) and, once there is a threshold to beat, the critical
    //    path of the step's graph (built anyway to simulate the plan). Why no listed plan is
    //    dropped: each bound is <= the plan's simulated step time, days and cost grow with the step
    //    time, and the threshold only falls as plans are accepted, so every plan of the final top
    //    list has bound <= metric <= threshold at every moment and is simulated.
    //    One network per cluster shape: its topology and its cache of solved collectives serve
    //    every plan on that cluster (the cache holds pure functions of the topology, so a plan's
    //    costs are those of a network of its own; the cache is thread-safe).
    // First the GEMM-FLOP bound (O(1) per plan): a plan that misses the deadline or the budget even
    //    at that bound is dropped before any graph is built for it. It drops whole GPU counts that
    //    are too small for a deadline (and too large for a budget: cost counts every GPU).
    // A candidate's plan, made when it is needed (a copy of its count's plan, which is most of a
    // plan's bytes: a search keeps none of the thousands it bounds and prunes).
    auto plan_of = [&](std::size_t c) {
        model::Plan p;
        materialize(cand[c], p);
        return p;
    };
    if (opt.prune && (opt.deadline_days || opt.budget)) {
        std::vector<std::size_t> kept;
        kept.reserve(cand.size());
        model::Plan p;
        for (std::size_t c = 0; c < cand.size(); ++c) {
            materialize(cand[c], p);
            if (passes_filters(metrics_lower_bound(p, gemm_flops_lower_bound_s(p), opt), opt))
                kept.push_back(cand[c]);
            else
                ++st.pruned_bound;
        }
        cand = std::move(kept);
    }
    std::map<std::pair<int, int>, std::unique_ptr<AnalyticNetwork>> networks;
    auto cluster_key = [](const model::Plan& p) { return std::pair{p.cluster.nodes, p.cluster.gpus_per_node}; };
    for (std::size_t i : cand) {
        const auto& node = nodes[choices[i].count];
        auto& n = networks[cluster_key(node)];
        if (!n) n = std::make_unique<AnalyticNetwork>(plan_network(node));
    }
    auto network_of = [&](const model::Plan& p) -> const AnalyticNetwork& { return *networks.at(cluster_key(p)); };

    std::vector<double> lb(cand.size(), 0.0);
    if (opt.prune)
        parallel_for(cand.size(), threads, [&](std::size_t c) {
            const auto p = plan_of(c);
            lb[c] = step_time_lower_bound_s(p, network_of(p));
        });
    std::vector<std::size_t> order(cand.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    if (opt.prune)
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return lb[a] < lb[b]; });

    std::mutex mu;
    std::vector<std::pair<std::pair<double, double>, std::size_t>> accepted_keys;  // sorted, at most `top`
    std::vector<std::optional<RunEstimate>> est(cand.size());
    std::size_t done = 0;
    std::atomic<std::size_t> pruned_bound{0}, pruned_critical_path{0}, simulated{0}, filtered{0}, filtered_deadline{0},
        filtered_budget{0};
    auto report = [&] {
        ++done;
        if (opt.progress) opt.progress(done, cand.size());
    };
    // With several GPU counts each count's best plan is kept exact too (the frontier): a plan is
    // dropped only if it can enter neither the top list nor beat its count's best so far.
    std::vector<int> searched = opt.space.gpu_counts;
    std::sort(searched.begin(), searched.end());
    searched.erase(std::unique(searched.begin(), searched.end()), searched.end());
    const bool per_count = searched.size() > 1;
    // GPU count -> ranking key of its best accepted plan.
    std::map<int, std::pair<double, double>> count_best;
    // Whether a plan of `gpus` GPUs whose metrics are at least `m` can no longer be listed. Call
    // under `mu`.
    auto hopeless = [&](const Metrics& m, int gpus) {
        if (!passes_filters(m, opt)) return true;
        // Compared as whole ranking keys (primary, then secondary metric), both bounded below by
        // `m`: a plan whose bound ties the threshold's primary metric (whole billing units make
        // many costs equal) but is slower is worse too, and is dropped.
        const auto key = rank_key(m, opt.rank);
        if (accepted_keys.size() < top || key <= accepted_keys.back().first) return false;
        if (!per_count) return true;
        const auto it = count_best.find(gpus);
        return it != count_best.end() && key > it->second;
    };
    auto has_threshold = [&] { return accepted_keys.size() >= top || opt.deadline_days || opt.budget; };
    parallel_for(order.size(), threads, [&](std::size_t k) {
        const std::size_t c = order[k];
        const model::Plan p = plan_of(c);
        bool check_path = false;
        if (opt.prune) {
            const Metrics m = metrics_lower_bound(p, lb[c], opt);
            std::lock_guard lock(mu);
            if (hopeless(m, p.num_gpus())) {
                ++pruned_bound;
                report();
                return;
            }
            check_path = has_threshold() && p.parallel.offload == model::Offload::none;
        }
        // A long gradient accumulation is simulated from three short steps (step/periodic.hpp).
        // Where they are at most a quarter of the step, without the step's graph, and so without
        // its critical path (building the graph and its path costs about 0.7 of a simulation,
        // the short steps 1.4 x their share of it); else the path may spare the simulation.
        const auto pts = periodic_points(p);
        const bool short_only = pts && 4 * periodic_microbatches(*pts) <= p.grad_accum();
        std::optional<model::OpGraph> graph;
        if (!short_only) graph = model::build_workload(p);
        if (check_path && graph) {
            const double path_s = critical_path_lower_bound_s(p, *graph, network_of(p));
            const Metrics m = metrics_lower_bound(p, path_s, opt);
            std::lock_guard lock(mu);
            if (hopeless(m, p.num_gpus())) {
                ++pruned_critical_path;
                report();
                return;
            }
        }
        auto e = pts ? estimate_plan(p, network_of(p), graph ? &*graph : nullptr)
                     : estimate_plan(p, *graph, network_of(p));
        ++simulated;
        std::lock_guard lock(mu);
        if (e.fits && e.step && passes_filters(metrics_of(e, opt), opt)) {
            const auto v = rank_key(metrics_of(e, opt), opt.rank);
            auto [it, fresh] = count_best.try_emplace(p.num_gpus(), v);
            if (!fresh) it->second = std::min(it->second, v);
            accepted_keys.emplace_back(rank_key(metrics_of(e, opt), opt.rank), cand[c]);
            std::sort(accepted_keys.begin(), accepted_keys.end());
            if (accepted_keys.size() > top) accepted_keys.pop_back();
        } else {
            ++filtered;
            if (e.fits && e.step) {
                const Metrics m = metrics_of(e, opt);
                if (opt.deadline_days && m.days > *opt.deadline_days) ++filtered_deadline;
                if (opt.budget && m.cost > *opt.budget) ++filtered_budget;
            }
        }
        est[c] = std::move(e);
        report();
    });
    st.pruned_bound += pruned_bound;
    st.pruned_critical_path = pruned_critical_path;
    st.simulated = simulated;
    st.filtered = filtered;
    st.filtered_deadline = filtered_deadline;
    st.filtered_budget = filtered_budget;

    // 4. Rank every accepted plan (not just the running top list) by (metric, enumeration index).
    std::vector<std::pair<std::pair<double, double>, std::size_t>> ranked;
    for (std::size_t c = 0; c < cand.size(); ++c)
        if (est[c] && est[c]->fits && est[c]->step && passes_filters(metrics_of(*est[c], opt), opt))
            ranked.emplace_back(rank_key(metrics_of(*est[c], opt), opt.rank), c);
    std::sort(ranked.begin(), ranked.end(), [&](const auto& a, const auto& b) {
        return std::tie(a.first, cand[a.second]) < std::tie(b.first, cand[b.second]);
    });
    if (per_count) {
        // Each count's best is its first plan in the ranking; the Pareto front over the counts'
        // bests in (days, cost) on the search's basis: no other count is at least as good on both
        // and better on one.
        for (int g : searched) {
            CountBest cb;
            cb.gpus = g;
            for (const auto& [key, c] : ranked)
                if (nodes[choices[cand[c]].count].num_gpus() == g) {
                    cb.best = RankedPlan{plan_of(c), *est[c]};
                    break;
                }
            res.frontier.push_back(std::move(cb));
        }
        for (auto& x : res.frontier) {
            if (!x.best) continue;
            const Metrics a = metrics_of(x.best->estimate, opt);
            x.pareto = std::none_of(res.frontier.begin(), res.frontier.end(), [&](const CountBest& y) {
                if (&y == &x || !y.best) return false;
                const Metrics b = metrics_of(y.best->estimate, opt);
                return b.days <= a.days && b.cost <= a.cost && (b.days < a.days || b.cost < a.cost);
            });
        }
    }
    for (std::size_t r = 0; r < ranked.size() && r < top; ++r) {
        const std::size_t c = ranked[r].second;
        res.plans.push_back({plan_of(c), std::move(*est[c])});
    }
    st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return res;
}

std::vector<std::vector<std::string>> fold_equivalent_plans(std::vector<RankedPlan>& plans) {
    auto simplicity = [](model::Sharding s) {
        using S = model::Sharding;
        constexpr std::array<S, 7> kOrder{S::none, S::zero1, S::dist_opt, S::zero2, S::fsdp, S::hsdp, S::zero3};
        return std::find(kOrder.begin(), kOrder.end(), s) - kOrder.begin();
    };
    auto twins = [](const RankedPlan& a, const RankedPlan& b) {
        const auto& x = a.plan.parallel; // everything but the sharding must match
        const auto& y = b.plan.parallel;
        const auto& e = a.estimate;
        const auto& f = b.estimate;
        return a.plan.num_gpus() == b.plan.num_gpus() && a.plan.cluster.gpus_per_node == b.plan.cluster.gpus_per_node &&
               a.plan.training.micro_batch == b.plan.training.micro_batch && x.tp == y.tp && x.pp == y.pp &&
               x.vp == y.vp && x.pp_schedule == y.pp_schedule && x.cp == y.cp && x.dp == y.dp &&
               x.sequence_parallel == y.sequence_parallel && x.recompute == y.recompute && x.recompute_layers == y.recompute_layers && x.offload == y.offload &&
               e.step_time_s == f.step_time_s && e.memory.total() == f.memory.total() && e.cost == f.cost &&
               e.expected_days == f.expected_days;
    };
    std::vector<RankedPlan> kept;
    std::vector<std::vector<std::string>> folded;
    for (auto& p : plans) {
        auto k = std::find_if(kept.begin(), kept.end(), [&](const RankedPlan& q) { return twins(q, p); });
        if (k == kept.end()) {
            kept.push_back(std::move(p));
            folded.emplace_back();
            continue;
        }
        auto& names = folded[static_cast<std::size_t>(k - kept.begin())];
        if (simplicity(p.plan.parallel.sharding) < simplicity(k->plan.parallel.sharding)) {
            names.push_back(k->plan.name);
            *k = std::move(p);
        } else {
            names.push_back(p.plan.name);
        }
    }
    plans = std::move(kept);
    return folded;
}

std::string explain_winner(const RankedPlan& best, const RankedPlan& runner_up, const Translator& tr) {
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
    // The categories where the runner-up spends most differently, largest first.
    std::vector<std::string> diffs;
    for (const auto& r : rows) {
        if (diffs.size() == 3 || std::abs(r.diff) < 1e-4) break;
        diffs.push_back(fmt::format("{:+.3f} s {}", r.diff, tr(r.name)));
    }
    return fmt::format(
        fmt::runtime(tr("why the best wins: vs the runner-up ({}), {:.1f} vs {:.1f} days, step {:.3f} vs {:.3f} s; "
                        "per step the runner-up spends {}\n")),
        layout_label(runner_up.plan), a.days_to_train, b.days_to_train, a.step_time_s, b.step_time_s,
        diffs.empty() ? std::string(tr("the same in every category (a tie broken by cost, then by enumeration order)"))
                      : fmt::format("{}", fmt::join(diffs, tr(", "))));
}

std::vector<ScheduleOption> compare_schedules(const model::Plan& plan, const std::vector<model::PpSchedule>& offered,
                                              double memory_headroom, const std::optional<RunEstimate>& own,
                                              unsigned threads) {
    using model::PpSchedule;
    std::vector<ScheduleOption> out;
    const auto& q = plan.parallel;
    if (q.pp < 2) return out;
    const PpSchedule mine = model::effective_schedule(q.pp_schedule, q.vp);
    // Interleaved at the plan's own vp, else the smallest vp > 1 the layers split into.
    int interleave = mine == PpSchedule::interleaved ? q.vp : 0;
    for (int v : model::interleavings(plan.model.layers, q.pp))
        if (interleave == 0 && v > 1) interleave = v;
    std::vector<model::Plan> plans;
    for (auto x : {PpSchedule::one_f_one_b, PpSchedule::interleaved, PpSchedule::zb_h1, PpSchedule::zb_v,
                   PpSchedule::dualpipe_v}) {
        ScheduleOption o;
        o.schedule = x;
        o.offered = std::find(offered.begin(), offered.end(), x) != offered.end();
        o.vp = x == PpSchedule::interleaved ? std::max(interleave, 2) : model::v_shape(x) ? 2 : 1;
        model::Plan p = plan;
        p.parallel.vp = o.vp;
        // The 1F1B family as the search writes it (automatic), the others by name.
        p.parallel.pp_schedule = model::splits_backward(x) ? x : PpSchedule::automatic;
        p.name = search_name(p);
        if (x == PpSchedule::interleaved && interleave == 0) {
            o.not_applicable = fmt::format("the {} layers split into no interleaving of pp {}", plan.model.layers, q.pp);
        } else if (const auto problems = model::check_layout(p); !problems.empty()) {
            o.not_applicable = problems.front().key + ": " + problems.front().message;
        } else {
            o.fits = model::fits_in_memory(p, model::peak_memory(p), p.hardware.hbm_capacity * (1.0 - memory_headroom));
        }
        out.push_back(std::move(o));
        plans.push_back(std::move(p));
    }
    // The plan's own schedule reuses its estimate; the others are simulated (where they fit in
    // the HBM at all: estimate_plan simulates only those), in parallel.
    std::vector<std::size_t> todo;
    for (std::size_t i = 0; i < out.size(); ++i) {
        if (!out[i].not_applicable.empty()) continue;
        if (own && out[i].schedule == mine && out[i].vp == q.vp) out[i].estimate = *own;
        else todo.push_back(i);
    }
    const unsigned n = threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
    parallel_for(todo.size(), n, [&](std::size_t k) { out[todo[k]].estimate = estimate_plan(plans[todo[k]]); });
    return out;
}

std::string schedule_reason(const model::Plan& best, const std::vector<ScheduleOption>& options,
                            const std::string& offered_by, const Translator& tr) {
    auto trf = [&](std::string_view f, auto&&... args) {
        return fmt::format(fmt::runtime(tr(f)), std::forward<decltype(args)>(args)...);
    };
    if (best.parallel.pp < 2) return {};
    const auto chosen = model::effective_schedule(best.parallel.pp_schedule, best.parallel.vp);
    const ScheduleOption* mine = nullptr;
    for (const auto& o : options)
        if (o.schedule == chosen && o.vp == best.parallel.vp) mine = &o;
    if (mine == nullptr || !mine->estimate || !mine->estimate->step) return {};
    const double t = mine->estimate->step_time_s;
    std::string s = trf("{}{}: the fastest schedule {} offers that fits this layout", model::to_string(chosen),
                        best.parallel.vp > 1 ? fmt::format(" (vp {})", best.parallel.vp) : std::string(), offered_by);
    std::vector<std::string> faster, slower;
    for (const auto& o : options) {
        if (&o == mine || !o.estimate || !o.estimate->step) continue;
        const double other = o.estimate->step_time_s;
        const std::string name = model::to_string(o.schedule);
        if (other < t) {
            const std::string why = !o.offered ? trf("not offered by {}", offered_by)
                                    : !o.fits  ? std::string(tr("does not fit in memory with the headroom"))
                                               : std::string(tr("ranked lower by the search (days, then cost)"));
            faster.push_back(trf("{} would be {:.2f}% faster, {}", name, 100.0 * (1.0 - other / t), why));
        } else if (o.offered && other > t) {
            slower.push_back(trf("{} {:.2f}% slower", name, 100.0 * (other / t - 1.0)));
        }
    }
    if (!faster.empty()) s += fmt::format("{}{}", tr("; "), fmt::join(faster, tr("; ")));
    if (!slower.empty()) s += fmt::format("{}{}", tr("; "), fmt::join(slower, tr(", ")));
    return s;
}

} // namespace trainsim::sim
