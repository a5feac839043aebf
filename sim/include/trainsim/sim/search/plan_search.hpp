// `trainsim plan`: search every valid parallel layout of a model on a cluster, simulate the ones
// that fit, and rank them by days-to-train or money (docs/plan-search.md).
#pragma once

#include "trainsim/sim/report/lang.hpp"
#include "trainsim/model/core/errors.hpp"
#include "trainsim/model/core/scenario.hpp"
#include "trainsim/sim/network/network.hpp"
#include "trainsim/sim/run/estimate.hpp"

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <map>
#include <vector>

namespace trainsim::sim {

// A search request that cannot be answered (e.g. no GPU count, a GPU count that is not whole nodes).
class SearchError : public model::InputError {
public:
    explicit SearchError(std::vector<model::Diagnostic> diags) : InputError("plan search", std::move(diags)) {}
};

enum class RankBy { days, cost };

// Which days (and cost) the ranking, the deadline and the budget use: the steady state (tokens /
// throughput), or the expected wall clock with checkpoints, failures and restarts (the plan's run
// settings; cost then pays for the GPUs over that whole wall clock).
enum class DaysBasis { steady, expected };

// What is enumerated. Degrees follow Megatron-LM's rules (check_layout has the last word):
//   tp: divisors of gpus_per_node that divide the attention heads;
//   pp: divisors of the layer count; vp (pp > 1): divisors of layers / pp;
//   cp: powers of two; dp = gpus / (tp pp cp);
//   micro_batch: divisors of global_batch / dp up to max_micro_batch;
//   sequence parallelism on whenever tp > 1 (both on and off with try_without_sp);
//   every sharding in `shardings` (ZeRO-2/3 only with pp = 1) and every recompute policy.
// A full fine-tune's memory recipe: a master copy or not, the optimizer state's datatype, and
// the optimizer step inside the backward (model::Parallel).
struct MemoryRecipe {
    bool master_weights = true;
    model::OptimizerState optimizer_state = model::OptimizerState::fp32;
    bool optimizer_in_backward = false;
};

struct SearchSpace {
    std::vector<int> gpu_counts;  // empty: the base plan's GPU count
    int max_micro_batch = 8;
    int max_cp = 1 << 20;         // cp degrees tried: 1, 2, 4 ... up to this
    bool try_without_sp = false;
    std::vector<model::Sharding> shardings{model::Sharding::dist_opt, model::Sharding::zero1, model::Sharding::fsdp,
                                           model::Sharding::none};
    std::vector<model::Recompute> recomputes{model::Recompute::none, model::Recompute::selective,
                                             model::Recompute::full};
    // CPU offload modes tried (each with the shardings it runs on: check_layout has the last word).
    std::vector<model::Offload> offloads{model::Offload::none};
    // Pipeline schedules tried where pp > 1 (docs/model.md "Pipeline schedules"): 1f1b at vp 1
    // and interleaved at every vp > 1 are the default order (pp_schedule automatic, the plan as it
    // was searched before schedules were); zb-h1 is tried at vp 1, zb-v and dualpipe-v at vp 2,
    // with pp_schedule set. The default is every framework's (FrameworkProfile::pp_schedules);
    // `plan` sets the base plan's framework's, or --pp-schedules.
    std::vector<model::PpSchedule> pp_schedules{model::PpSchedule::one_f_one_b, model::PpSchedule::interleaved};
    // Full fine-tuning recipes' memory tricks tried (docs/model.md "Fine-tuning"; check_layout has
    // the last word on where each runs). Empty: the base plan's own. `plan` offers them for a
    // fine-tune when the base plan's recipe fits at none of the GPU counts.
    std::vector<MemoryRecipe> recipes;
};

struct SearchOptions {
    SearchSpace space;
    RankBy rank = RankBy::days;
    // The CLI's default is expected (`plan --days`, issue #45): what is billed.
    DaysBasis basis = DaysBasis::steady;
    std::optional<double> deadline_days;  // keep plans whose days (on `basis`) <= this
    std::optional<double> budget;         // keep plans whose bill (on `basis`) <= this (plan currency)
    std::size_t top = 10;                 // plans returned (ranked); the pruning keeps these exact
    unsigned threads = 0;                 // 0: std::thread::hardware_concurrency()
    // Provable pruning (dominated recompute policies, stream-sum and critical-path lower bounds);
    // false simulates every plan that fits (for tests of the pruning and for --no-prune).
    bool prune = true;
    // A layout is a candidate only if it leaves this fraction of the HBM free (estimate.hpp,
    // kMemoryHeadroomFraction: fragmentation).
    double memory_headroom = kMemoryHeadroomFraction;
    // Called from worker threads (serialised) as plans are evaluated: (done, total).
    std::function<void(std::size_t, std::size_t)> progress;
};

struct SearchStats {
    std::size_t enumerated = 0;         // layouts generated
    std::size_t invalid = 0;            // rejected by check_layout
    std::size_t does_not_fit = 0;       // rejected by the memory model
    std::size_t pruned_dominated = 0;   // a lighter recompute policy of the same layout fits
    std::size_t pruned_bound = 0;       // stream-sum lower bound already worse than the top plans
    std::size_t pruned_critical_path = 0;  // critical-path lower bound already worse than the top plans
    std::size_t simulated = 0;
    std::size_t filtered = 0;           // simulated but over the deadline or budget
    std::size_t filtered_deadline = 0;  // of those, over the deadline (a plan over both counts in both)
    std::size_t filtered_budget = 0;    // of those, over the budget
    double seconds = 0;
};

struct RankedPlan {
    model::Plan plan;
    RunEstimate estimate;
};

// The best plan of one searched GPU count ("8 or 64 GPUs?"), by the search's ranking.
struct CountBest {
    int gpus = 0;
    std::optional<RankedPlan> best; // absent: no layout of this count fits and meets the filters
    bool pareto = false;            // on the days-vs-cost Pareto front of the counts' best plans
};

struct SearchResult {
    std::vector<RankedPlan> plans;  // best first, at most options.top
    // One entry per searched GPU count, ascending, when more than one count was searched: its
    // best plan is exact (the pruning keeps each count's best as well as the top list).
    std::vector<CountBest> frontier;
    SearchStats stats;
    // GPU count -> how many of its layouts are valid and fit in memory (with the headroom).
    std::map<int, std::size_t> fitting_per_count;
};

// Every layout of the space for `base` (model, training, precision, cluster shape, pricing kept),
// in a fixed order, before any validity or memory check. Plans are named by their layout.
[[nodiscard]] std::vector<model::Plan> enumerate_layouts(const model::Plan& base, const SearchSpace& space);

// The search. Deterministic: the same request gives the same ranked list whatever the thread count.
[[nodiscard]] SearchResult search_plans(const model::Plan& base, const SearchOptions& opt);

// Ranked plans that differ only in their sharding and have the same step time, memory and cost
// (ZeRO-1 and FSDP under pipeline parallelism, where FSDP keeps its gathered weights; any sharding
// with dp = 1 where the model makes them equal) are one plan to a user: each group is folded into
// its simplest member (none, zero1, dist_opt, zero2, fsdp, hsdp, zero3), kept at the group's best
// rank. Returns, per kept plan, the names of the plans folded into it.
std::vector<std::vector<std::string>> fold_equivalent_plans(std::vector<RankedPlan>& plans);

// A lower bound on the step time of a plan that passes check_layout, from the sums of the nominal
// op times of each stream of one rank per stage (compute kernels, the TP collectives that block
// the compute stream, CP exchanges, DP reductions and gathers, pipeline transfers): the executor
// runs a stream's ops one at a time and only ever slows an op down (compute next to
// communication, transfers sharing a link). The compute stream's bound counts the kernels that
// must run slowed next to communication (plan_search.cpp, `largest`).
// Computed from two small graphs and extrapolated linearly in the micro-batch count (exact);
// with a pipeline, also the chain of its passes (pipeline_lower_bound_s), whichever is larger.
// `network`: built for plan.cluster (plan_network); without it, one is built. With CPU offload:
// the GPU bound less the most its optimizer kernels can take, plus CPU Adam and the parameters'
// way back (plan_search.cpp, `offload_bound_ps`).
[[nodiscard]] double step_time_lower_bound_s(const model::Plan& plan, const AnalyticNetwork& network);
[[nodiscard]] double step_time_lower_bound_s(const model::Plan& plan);
// The same from the step's full graph (for tests of the extrapolation).
[[nodiscard]] double step_time_lower_bound_direct_s(const model::Plan& plan);
// The pipeline's part of step_time_lower_bound_s: the schedule's passes as blocks of their ops'
// least times, chained as a stage must run them (fill and drain included); 0 where it does not
// apply (no pipeline, the V schedules, offload, fewer than 3 micro-batches).
[[nodiscard]] double pipeline_lower_bound_s(const model::Plan& plan);
// A tighter lower bound from the step's full graph: its contention-free critical path (each op
// starts when the executor would start it, with nothing slowed down). It sees the pipeline fill
// and drain and exposed communication. 0 if the graph cannot complete.
// Preconditions: graph = build_workload(plan); network built for plan.cluster (plan_network).
[[nodiscard]] double critical_path_lower_bound_s(const model::Plan& plan, const model::OpGraph& graph,
                                                 const AnalyticNetwork& network);

// A layout under one pipeline schedule (issue #44): `plan` lists the best layout under each.
struct ScheduleOption {
    model::PpSchedule schedule = model::PpSchedule::one_f_one_b;  // concrete, never automatic
    int vp = 1;                   // the chunks per stage it runs with
    bool offered = false;         // in the search's pp_schedules (the framework runs it)
    std::string not_applicable;   // why the layout cannot run it (check_layout's first problem), or empty
    bool fits = false;            // leaves the search's headroom of HBM free
    std::optional<RunEstimate> estimate;  // absent when not applicable
};
// `plan` (pp > 1) under 1f1b, interleaved, zb-h1, zb-v and dualpipe-v, in that order, everything
// else kept: 1f1b and zb-h1 at vp 1, zb-v and dualpipe-v at vp 2, interleaved at the plan's vp
// when it is interleaved, else the smallest vp > 1 the layers split into. The plan's own
// schedule takes `own` (its estimate from the search) instead of a second simulation. Empty for
// pp 1. `threads`: 0 for every core. Deterministic.
[[nodiscard]] std::vector<ScheduleOption> compare_schedules(const model::Plan& plan,
                                                            const std::vector<model::PpSchedule>& offered,
                                                            double memory_headroom,
                                                            const std::optional<RunEstimate>& own = std::nullopt,
                                                            unsigned threads = 0);
// Why `best` runs its schedule, from compare_schedules(best, ...): the schedule and that it is the
// fastest offered one that fits, then each faster schedule and what kept it out ("zb-v 3.1%
// faster: not offered by megatron-core"). `offered_by`: who offers the schedules, for the text.
// Empty for pp 1. `tr`: the text's language (the JSON's schedule_reason is English).
[[nodiscard]] std::string schedule_reason(const model::Plan& best, const std::vector<ScheduleOption>& options,
                                          const std::string& offered_by, const Translator& tr = Translator());

// "Why the best wins": how the winner differs from the runner-up, step-breakdown category by
// category (largest differences first). Both must have been simulated. `tr`: the text's language.
[[nodiscard]] std::string explain_winner(const RankedPlan& best, const RankedPlan& runner_up,
                                         const Translator& tr = Translator());

// Short layout label, e.g. "tp8 pp2 vp5 dp4 sp mbs1 dist_opt rc:none" (without "dp4" when
// with_dp is false, for a layout whose data-parallel degree varies).
[[nodiscard]] std::string layout_label(const model::Plan& plan, bool with_dp = true);
// The divisors of n up to max, ascending (the degrees a layout can take).
[[nodiscard]] std::vector<int> divisors(int n, int max);

} // namespace trainsim::sim
