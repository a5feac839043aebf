// A step of many micro-batches from three short simulations (sim/step/periodic.hpp; issue #43):
// checked against the full simulation of the same step, field by field, on layouts of every
// schedule, sharding, recompute policy and offload the plan search enumerates.
#include "fixtures.hpp"

#include "trainsim/model/accounting/layout.hpp"
#include "trainsim/model/accounting/pipeline_schedule.hpp"
#include "trainsim/model/workload/workload.hpp"
#include "trainsim/sim/run/estimate.hpp"
#include "trainsim/sim/search/plan_search.hpp"
#include "trainsim/sim/step/periodic.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <tuple>
#include <string>
#include <vector>

using namespace trainsim;
using model::PpSchedule;
using model::Time;
using Approx = Catch::Detail::Approx;

namespace {

// 16 GPUs (two nodes of 8), a global batch of 256 sequences of 512: every layout has m >= 16
// micro-batches, most far more, so that the three short steps are worth it.
model::Plan base_plan() {
    auto p = test::small_plan(1, 1, 16, 256);
    p.training.seq_len = 512;
    p.cluster.gpus_per_node = 8;
    p.cluster.nodes = 2;
    p.hardware.host_memory_bandwidth = model::gb_per_s(100);
    p.hardware.cpu_adam_efficiency = 0.5;
    return p;
}

sim::SearchSpace wide_space() {
    sim::SearchSpace s;
    s.gpu_counts = {8, 16};
    s.max_cp = 2;
    s.max_micro_batch = 2;
    s.shardings = {model::Sharding::dist_opt, model::Sharding::zero1, model::Sharding::none, model::Sharding::fsdp,
                   model::Sharding::zero3};
    s.recomputes = {model::Recompute::none, model::Recompute::selective, model::Recompute::full};
    s.offloads = {model::Offload::none, model::Offload::optimizer};
    s.pp_schedules = {PpSchedule::one_f_one_b, PpSchedule::interleaved, PpSchedule::zb_h1, PpSchedule::zb_v,
                      PpSchedule::dualpipe_v};
    return s;
}

std::int64_t ps(Time t) { return t.count_ps(); }

} // namespace

TEST_CASE("the three short steps: past the warm-up, a period apart, congruent to the step's count", "[periodic]") {
    // 1F1B, pp 4, m = 250: it repeats every micro-batch once its pp - 1 = 3 warm-up forwards are
    // done, so from pp + 1 = 5: 5, 6, 7.
    auto p = test::small_plan(1, 4, 1, 250);
    p.cluster.gpus_per_node = 4;
    p.cluster.nodes = 1;
    auto pts = sim::periodic_points(p);
    REQUIRE(pts);
    CHECK(pts->period == 1);
    CHECK(pts->m1 == 5);
    // Not for what needs every micro-batch: a trace, the passes the report draws, every rank.
    sim::ExecOptions trace;
    trace.record_trace = true;
    CHECK_FALSE(sim::periodic_points(p, trace));
    sim::ExecOptions passes;
    passes.record_passes = true;
    CHECK_FALSE(sim::periodic_points(p, passes));
    sim::ExecOptions all;
    all.all_ranks = true;
    CHECK_FALSE(sim::periodic_points(p, all));
    // Interleaved (vp 2), m = 252: groups of pp = 4, past 2 pp = 8, and 8 = 252 mod 4 + 8: 8, 12, 16.
    p.training.global_batch = 252;
    p.parallel.vp = 2;
    pts = sim::periodic_points(p);
    REQUIRE(pts);
    CHECK(pts->period == 4);
    CHECK(pts->m1 == 8);
    // Nor where the short steps would not be at most half the step: 8 + 12 + 16 = 36 > 64 / 2.
    p.training.global_batch = 64;
    CHECK_FALSE(sim::periodic_points(p));
    // DualPipeV feeds 2 pp micro-batches at once: from 4 pp = 16.
    p.training.global_batch = 256;
    p.parallel.pp_schedule = PpSchedule::dualpipe_v;
    pts = sim::periodic_points(p);
    REQUIRE(pts);
    CHECK(pts->period == 4);
    CHECK(pts->m1 == 16);
}

TEST_CASE("a step extended from three short ones is the full simulation's, on every schedule, sharding, "
          "recompute and offload the search enumerates",
          "[periodic]") {
    const auto base = base_plan();
    const auto layouts = sim::enumerate_layouts(base, wide_space());
    // Up to 6 valid layouts per (schedule, vp > 1, sharding, recompute, offload), spread over the
    // enumeration: the search's variety in a few hundred steps.
    std::map<std::string, int> taken;
    std::map<PpSchedule, int> extended;
    int compared = 0, fell_back = 0;
    double worst = 0;
    for (const auto& p : layouts) {
        if (!model::check_layout(p).empty() || !sim::periodic_points(p)) continue;
        const auto schedule = model::effective_schedule(p.parallel.pp_schedule, p.parallel.vp);
        const auto key = fmt::format("{} {} {} {} {}", model::to_string(schedule), p.parallel.vp > 1,
                                     model::to_string(p.parallel.sharding), model::to_string(p.parallel.recompute),
                                     model::to_string(p.parallel.offload));
        if (++taken[key] > 6) continue;
        const sim::ComputeCost compute(p.hardware);
        const auto network = sim::plan_network(p);
        const auto graph = model::build_workload(p);
        const auto full = sim::execute_step(p, graph, compute, network);
        const auto ext = sim::execute_step_periodic(p, compute, network);
        ++compared;
        if (!ext) {
            ++fell_back;
            continue;
        }
        ++extended[p.parallel.pp == 1 ? PpSchedule::automatic : schedule];
        INFO(p.name);
        const double tol = sim::kPeriodicRelativeError * full.step_time.seconds();
        const auto near = [&](Time x, Time y) { return std::abs((x - y).seconds()) <= tol; };
        worst = std::max(worst, std::abs((ext->step_time - full.step_time).seconds()) / full.step_time.seconds());
        CHECK(near(ext->step_time, full.step_time));
        CHECK(ext->critical_stage == full.critical_stage);
        CHECK(std::abs(static_cast<double>(ext->events) - static_cast<double>(full.events)) <= 0.01 * static_cast<double>(full.events));
        CHECK(ext->ops == full.ops);
        CHECK(ext->simulated_ranks == full.simulated_ranks);
        CHECK(near(ext->host_busy, full.host_busy));
        const auto& e = ext->breakdown;
        const auto& f = full.breakdown;
        CHECK(near(e.forward, f.forward));
        CHECK(near(e.backward, f.backward));
        CHECK(near(e.recompute, f.recompute));
        CHECK(near(e.optimizer, f.optimizer));
        CHECK(near(e.tp_exposed, f.tp_exposed));
        CHECK(near(e.cp_exposed, f.cp_exposed));
        CHECK(near(e.dp_exposed, f.dp_exposed));
        CHECK(near(e.pp_exposed, f.pp_exposed));
        CHECK(near(e.bubble, f.bubble));
        CHECK(near(e.host_bound, f.host_bound));
        CHECK(near(e.slowdown, f.slowdown));
        // The breakdown sums to the step time, as the executor's does (exactly).
        CHECK(ps(e.total()) == ps(ext->step_time));
        REQUIRE(ext->stage_finish.size() == full.stage_finish.size());
        for (std::size_t s = 0; s < full.stage_finish.size(); ++s) CHECK(near(ext->stage_finish[s], full.stage_finish[s]));
        // Per kernel: the same names; their sum is the compute stream's kernels, as in the full step.
        REQUIRE(ext->kernel_time.size() == full.kernel_time.size());
        // An estimate through estimate_plan (which takes this way) is the full one's too.
        if (compared % 16 == 1) {
            const auto via = sim::estimate_plan(p, network, nullptr);
            const auto whole = sim::estimate_plan(p, graph, network);
            CHECK(via.expected_days == Approx(whole.expected_days).epsilon(sim::kPeriodicRelativeError));
            CHECK(via.step_time_s == Approx(whole.step_time_s).epsilon(sim::kPeriodicRelativeError));
        }
    }
    INFO(fmt::format("{} compared, {} fell back to the full simulation, worst relative step error {:.2e}", compared,
                     fell_back, worst));
    // Every schedule was extended at least once (else this test would check nothing for it), and
    // most steps were (else the search gains nothing).
    for (auto s : {PpSchedule::automatic, PpSchedule::one_f_one_b, PpSchedule::interleaved, PpSchedule::zb_h1,
                   PpSchedule::zb_v, PpSchedule::dualpipe_v})
        CHECK(extended[s] > 0);
    CHECK(fell_back * 4 < compared);
}

TEST_CASE("the stream bound from two small graphs is the direct sum over the step's graph, the interleaved "
          "schedule's laid out depth first included",
          "[periodic][search-exact]") {
    const auto base = base_plan();
    const auto layouts = sim::enumerate_layouts(base, wide_space());
    std::map<std::string, int> taken;
    std::map<PpSchedule, int> checked;
    for (const auto& p : layouts) {
        if (!model::check_layout(p).empty()) continue;
        const auto schedule = model::effective_schedule(p.parallel.pp_schedule, p.parallel.vp);
        const auto key = fmt::format("{} {} {} {} {} {}", model::to_string(schedule), p.parallel.vp,
                                     model::to_string(p.parallel.sharding), model::to_string(p.parallel.recompute),
                                     model::to_string(p.parallel.offload), p.parallel.cp);
        if (++taken[key] > 3) continue;
        INFO(p.name);
        // Integer ps either way: the extrapolation must be exact, not close.
        CHECK(sim::step_time_lower_bound_s(p) == sim::step_time_lower_bound_direct_s(p));
        ++checked[p.parallel.pp == 1 ? PpSchedule::automatic : schedule];
    }
    // The depth-first order serves the interleaved schedule: checked on it, not only on the others.
    CHECK(checked[PpSchedule::interleaved] >= 10);
    for (auto s : {PpSchedule::automatic, PpSchedule::one_f_one_b, PpSchedule::zb_h1, PpSchedule::zb_v,
                   PpSchedule::dualpipe_v})
        CHECK(checked[s] > 0);
}

TEST_CASE("a depth-first graph has the schedule's ops: the same protos, streams and peers, in another order",
          "[periodic]") {
    // Interleaved, pp 4, vp 2, 8 micro-batches (a multiple of pp, as the schedule needs).
    auto p = test::small_plan(1, 4, 2, 16);
    p.parallel.vp = 2;
    p.cluster.gpus_per_node = 8;
    p.cluster.nodes = 1;
    REQUIRE(model::check_layout(p).empty());
    const auto a = model::build_workload(p);
    const auto b = model::build_workload(p, model::WorkloadOrder::depth_first);
    REQUIRE(a.stages.size() == b.stages.size());
    REQUIRE(a.protos.size() == b.protos.size());
    for (std::size_t s = 0; s < a.stages.size(); ++s) {
        std::map<std::tuple<std::uint32_t, int, int, int, int>, int> ops_a, ops_b;
        for (const auto& o : a.stages[s].ops)
            ++ops_a[{o.proto, static_cast<int>(o.stream), o.peer_stage, o.microbatch, o.chunk}];
        for (const auto& o : b.stages[s].ops)
            ++ops_b[{o.proto, static_cast<int>(o.stream), o.peer_stage, o.microbatch, o.chunk}];
        CHECK(ops_a == ops_b);
        // ... and not in the same order (else the test would not show the order is free).
        bool same_order = a.stages[s].ops.size() == b.stages[s].ops.size();
        for (std::size_t i = 0; same_order && i < a.stages[s].ops.size(); ++i)
            same_order = a.stages[s].ops[i].microbatch == b.stages[s].ops[i].microbatch &&
                         a.stages[s].ops[i].chunk == b.stages[s].ops[i].chunk;
        CHECK_FALSE(same_order);
    }
}

TEST_CASE("the pipeline's chain of passes never exceeds the step's critical path nor its simulation, and sees "
          "the bubble the stream sums cannot",
          "[periodic][search-exact]") {
    // A global batch of 256 sequences (long accumulations: the chain's closed-form floor past
    // 4 pp micro-batches) and of 16 (the walk over every pass).
    std::vector<model::Plan> layouts;
    for (int batch : {256, 16}) {
        auto base = base_plan();
        base.training.global_batch = batch;
        for (auto& p : sim::enumerate_layouts(base, wide_space())) layouts.push_back(std::move(p));
    }
    std::map<std::string, int> taken;
    int applied = 0, tighter = 0, walked = 0;
    for (double slowdown : {0.0, 0.19}) {
        for (auto p : layouts) {
            if (!model::check_layout(p).empty() || p.parallel.pp < 2) continue;
            p.hardware.comm_compute_slowdown = slowdown;
            const auto schedule = model::effective_schedule(p.parallel.pp_schedule, p.parallel.vp);
            const auto key = fmt::format("{} {} {} {} {} {} {} {}", slowdown, model::to_string(schedule), p.parallel.vp,
                                         model::to_string(p.parallel.sharding), model::to_string(p.parallel.recompute),
                                         p.parallel.cp, p.training.micro_batch, p.training.global_batch);
            if (++taken[key] > 1) continue;
            const double chain = sim::pipeline_lower_bound_s(p);
            if (chain <= 0) continue;
            ++applied;
            if (p.grad_accum() <= 4 * p.parallel.pp) ++walked;
            INFO(p.name << " slowdown " << slowdown << " micro-batches " << p.grad_accum());
            const auto network = sim::plan_network(p);
            const auto graph = model::build_workload(p);
            const double path = sim::critical_path_lower_bound_s(p, graph, network);
            const auto full = sim::execute_step(p, graph, sim::ComputeCost(p.hardware), network);
            CHECK(chain <= path);
            CHECK(chain <= full.step_time.seconds());
            // The stream sums' bound without the chain: the chain is the larger one where the
            // bubble counts (deep pipelines, few micro-batches).
            const double bound = sim::step_time_lower_bound_s(p);
            CHECK(bound >= chain);
            if (bound == chain) ++tighter;
        }
    }
    CHECK(applied >= 30);
    CHECK(walked >= 10);
    CHECK(applied - walked >= 10);
    CHECK(tighter > 0);
}
