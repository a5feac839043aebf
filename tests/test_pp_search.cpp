// Pipeline schedules in the plan search and in the HTML report (issue #44 items 2 and 3;
// docs/plan-search.md "Pipeline schedules", docs/model.md "Pipeline schedules"): what each
// framework offers, the search's choice against compare_schedules' own estimates, the closed form
// of the ZB-H1 gain, pruned == exhaustive with schedules, and the report's timeline per stage.
#include "cli_runner.hpp"
#include "fixtures.hpp"

#include "trainsim/model/accounting/layout.hpp"
#include "trainsim/model/accounting/memory_model.hpp"
#include "trainsim/model/accounting/pipeline_schedule.hpp"
#include "trainsim/model/framework/framework_profile.hpp"
#include "trainsim/model/workload/workload.hpp"
#include "trainsim/sim/report/html_report.hpp"
#include "trainsim/sim/run/estimate.hpp"
#include "trainsim/sim/search/plan_search.hpp"

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

using namespace trainsim;
using Approx = Catch::Detail::Approx;
using model::PpSchedule;

namespace {

const std::vector<PpSchedule> kMegatron{PpSchedule::one_f_one_b, PpSchedule::interleaved};
const std::vector<PpSchedule> kAll{PpSchedule::one_f_one_b, PpSchedule::interleaved, PpSchedule::zb_h1,
                                   PpSchedule::zb_v, PpSchedule::dualpipe_v};

// Four single-GPU nodes, 7 micro-batches of 1 and cp 1: dp must divide 7 and tp the one GPU of a
// node, so every layout is tp 1 pp 4 dp 1 (interleaving needs m % pp == 0, DualPipeV m >= 2 pp:
// neither applies). The search then only chooses the schedule, sharding and recompute.
model::Plan forced_pipeline() {
    auto p = test::small_plan(1, 4, 1, 7);
    p.cluster.gpus_per_node = 1;
    p.cluster.nodes = 4;
    p.pricing.rate = 2.0;
    return p;
}

sim::SearchOptions forced_options(std::vector<PpSchedule> offered) {
    sim::SearchOptions o;
    o.space.max_cp = 1;
    o.space.max_micro_batch = 1;
    o.space.shardings = {model::Sharding::dist_opt, model::Sharding::none};
    o.space.recomputes = {model::Recompute::none};
    o.space.pp_schedules = std::move(offered);
    o.threads = 2;
    o.top = 100;
    return o;
}

// pp stages of two small layers each, free communication and negligible embedding and head
// (vocab 128): every stage runs the same F, B and W, as the papers' closed forms assume.
model::Plan free_pipeline(int pp, int m, PpSchedule s, int vp) {
    auto plan = test::small_plan(1, pp, 1, m);
    plan.model.vocab = 128;
    plan.cluster.gpus_per_node = pp;
    plan.cluster.nodes = 1;
    plan.parallel.vp = vp;
    plan.parallel.pp_schedule = s;
    plan.hardware.nvlink_bandwidth = model::Bandwidth(1e18);
    plan.hardware.intra_node_latency = model::Time();
    plan.hardware.kernel_overhead = model::Time::ps(1);
    plan.hardware.comm_compute_slowdown = 0;
    return plan;
}

sim::RunEstimate with_passes(const model::Plan& plan) {
    sim::ExecOptions opt;
    opt.record_passes = true;
    return sim::estimate_plan(plan, opt);
}

const sim::ScheduleOption& option(const std::vector<sim::ScheduleOption>& opts, PpSchedule s) {
    const auto it = std::find_if(opts.begin(), opts.end(), [&](const sim::ScheduleOption& o) { return o.schedule == s; });
    REQUIRE(it != opts.end());
    return *it;
}

// Mean duration (s) of a stage's passes of one kind.
double mean_pass_s(const sim::StepResult& step, int stage, model::PipelinePass pass) {
    double sum = 0;
    int n = 0;
    for (const auto& p : step.passes)
        if (p.stage == stage && p.pass == pass) {
            sum += (p.end - p.start).seconds();
            ++n;
        }
    REQUIRE(n > 0);
    return sum / n;
}

std::size_t count(const std::string& s, const std::string& what) {
    std::size_t n = 0;
    for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
    return n;
}

} // namespace

TEST_CASE("frameworks offer their own schedules: Megatron-Core 1F1B and interleaved, torchtitan ZB-V and DualPipeV too",
          "[pp-search]") {
    for (const char* fw : {"megatron-core", "nemo", "megatron-lm-2022", "deepspeed", "some-unknown-stack"}) {
        CAPTURE(fw);
        CHECK(model::framework_profile(fw).pp_schedules == kMegatron);
    }
    const auto titan = model::framework_profile("torchtitan").pp_schedules;
    CHECK(titan == std::vector<PpSchedule>{PpSchedule::one_f_one_b, PpSchedule::interleaved, PpSchedule::zb_v,
                                           PpSchedule::dualpipe_v});
    // The default search space is every framework's offer, i.e. the search as it was.
    CHECK(sim::SearchSpace{}.pp_schedules == kMegatron);
}

TEST_CASE("with Megatron-Core's offer the enumeration is today's, and split schedules only come when offered",
          "[pp-search]") {
    const auto base = test::small_plan(1, 1, 8, 32);
    sim::SearchSpace def;
    def.max_cp = 2;
    const auto today = sim::enumerate_layouts(base, def);
    for (const auto& p : today) CHECK(p.parallel.pp_schedule == PpSchedule::automatic);
    auto all = def;
    all.pp_schedules = kAll;
    const auto more = sim::enumerate_layouts(base, all);
    // The automatic layouts of the wider space, in order, are exactly today's list; the others
    // are split-backward schedules at their vp on pp > 1.
    std::vector<std::string> autos;
    std::map<PpSchedule, int> extra;
    for (const auto& p : more) {
        if (p.parallel.pp_schedule == PpSchedule::automatic) {
            autos.push_back(p.name);
            continue;
        }
        ++extra[p.parallel.pp_schedule];
        CHECK(p.parallel.pp > 1);
        CHECK(p.parallel.vp == (model::v_shape(p.parallel.pp_schedule) ? 2 : 1));
        CHECK(p.name.find(model::to_string(p.parallel.pp_schedule)) != std::string::npos);
    }
    REQUIRE(autos.size() == today.size());
    for (std::size_t i = 0; i < today.size(); ++i) CHECK(autos[i] == today[i].name);
    CHECK(extra[PpSchedule::zb_h1] > 0);
    CHECK(extra[PpSchedule::zb_v] > 0);
    CHECK(extra[PpSchedule::dualpipe_v] > 0);
    // Only ZB-V offered: no ZB-H1 nor DualPipeV layout.
    auto zbv = def;
    zbv.pp_schedules = {PpSchedule::one_f_one_b, PpSchedule::interleaved, PpSchedule::zb_v};
    for (const auto& p : sim::enumerate_layouts(base, zbv))
        CHECK((p.parallel.pp_schedule == PpSchedule::automatic || p.parallel.pp_schedule == PpSchedule::zb_v));
}

TEST_CASE("the search takes ZB-H1 where compare_schedules says it is faster and fits, never when not offered",
          "[pp-search]") {
    const auto base = forced_pipeline();
    const auto offered = std::vector<PpSchedule>{PpSchedule::one_f_one_b, PpSchedule::interleaved, PpSchedule::zb_h1};
    const auto with_zb = sim::search_plans(base, forced_options(offered));
    REQUIRE(!with_zb.plans.empty());
    const auto& best = with_zb.plans.front();
    REQUIRE(best.plan.parallel.pp == 4);
    // The expectation from compare_schedules' own estimates of the best layout: the fastest offered
    // schedule that fits.
    const auto opts = sim::compare_schedules(best.plan, offered, sim::kMemoryHeadroomFraction);
    REQUIRE(opts.size() == 5);
    const auto& a = option(opts, PpSchedule::one_f_one_b);
    const auto& b = option(opts, PpSchedule::zb_h1);
    REQUIRE(a.estimate);
    REQUIRE(b.estimate);
    CHECK(a.offered);
    CHECK(b.offered);
    CHECK_FALSE(option(opts, PpSchedule::zb_v).offered);
    // Interleaving needs m % pp == 0 and DualPipeV m >= 2 pp: 7 micro-batches on 4 stages run neither.
    CHECK_FALSE(option(opts, PpSchedule::interleaved).not_applicable.empty());
    CHECK_FALSE(option(opts, PpSchedule::dualpipe_v).not_applicable.empty());
    // ZB-H1 holds 1F1B's first-stage peak on every stage (Qi et al. Sec. 2.1): it fits where 1F1B fits.
    REQUIRE(a.fits);
    REQUIRE(b.fits);
    REQUIRE(b.estimate->step_time_s < a.estimate->step_time_s);  // the bubble (p-1)(F+B-W) < (p-1)(F+B+W)
    CHECK(best.plan.parallel.pp_schedule == PpSchedule::zb_h1);
    CHECK(best.estimate.step_time_s == b.estimate->step_time_s);
    const auto why = sim::schedule_reason(best.plan, opts, "--pp-schedules");
    CHECK(why.rfind("zb-h1: the fastest schedule --pp-schedules offers", 0) == 0);
    CHECK(why.find("1f1b") != std::string::npos);

    // Megatron-Core's offer: never a split schedule, and the reason names what it leaves out.
    auto o = forced_options(kMegatron);
    o.prune = false;
    const auto megatron = sim::search_plans(base, o);
    REQUIRE(!megatron.plans.empty());
    for (const auto& r : megatron.plans) CHECK_FALSE(model::splits_backward(r.plan.parallel.pp_schedule));
    const auto& m0 = megatron.plans.front();
    CHECK(model::effective_schedule(m0.plan.parallel.pp_schedule, m0.plan.parallel.vp) == PpSchedule::one_f_one_b);
    const auto mopts = sim::compare_schedules(m0.plan, kMegatron, sim::kMemoryHeadroomFraction, m0.estimate);
    CHECK(option(mopts, PpSchedule::one_f_one_b).estimate->step_time_s == m0.estimate.step_time_s);
    const auto mwhy = sim::schedule_reason(m0.plan, mopts, "megatron-core");
    CHECK(mwhy.find("zb-h1 would be") != std::string::npos);
    CHECK(mwhy.find("not offered by megatron-core") != std::string::npos);
}

TEST_CASE("ZB-H1 saves 2 (p-1) W over 1F1B, from the simulated passes", "[pp-search]") {
    // Qi et al. 2024, Sec. 2: with equal stages and free transfers 1F1B takes (m + p - 1)(F + B + W)
    // and ZB-H1 (its bubble (p - 1)(F + B - W)) m (F + B + W) + (p - 1)(F + B - W): the difference is
    // 2 (p - 1) W, W the weight-gradient pass as simulated.
    const int p = 4, m = 8;
    const auto plan = free_pipeline(p, m, PpSchedule::one_f_one_b, 1);
    const auto opts = sim::compare_schedules(plan, kAll, sim::kMemoryHeadroomFraction);
    const auto& a = option(opts, PpSchedule::one_f_one_b);
    const auto& b = option(opts, PpSchedule::zb_h1);
    REQUIRE(a.estimate);
    REQUIRE(b.estimate);
    const auto zb = with_passes(free_pipeline(p, m, PpSchedule::zb_h1, 1));
    const auto ofob = with_passes(plan);
    REQUIRE(zb.step);
    REQUIRE(ofob.step);
    // A middle stage's passes: stage 1 holds two plain layers.
    const double f = mean_pass_s(*ofob.step, 1, model::PipelinePass::forward);
    const double full = mean_pass_s(*ofob.step, 1, model::PipelinePass::backward);
    const double w = mean_pass_s(*zb.step, 1, model::PipelinePass::weight_grad);
    const double bi = mean_pass_s(*zb.step, 1, model::PipelinePass::input_grad);
    CHECK(bi + w == Approx(full).epsilon(0.01));  // the split moves kernels, it adds none
    // The pipeline's makespan, first pass's start to last pass's end (the step adds the optimizer,
    // the same under both schedules).
    model::Time first = ofob.step->passes.front().start, last;
    for (const auto& x : ofob.step->passes) {
        first = std::min(first, x.start);
        last = std::max(last, x.end);
    }
    CHECK((last - first).seconds() == Approx((m + p - 1) * (f + full)).epsilon(0.02));
    const double saved = a.estimate->step_time_s - b.estimate->step_time_s;
    CHECK(saved == Approx(2.0 * (p - 1) * w).epsilon(0.05));
    // compare_schedules' estimate of the layout under ZB-H1 is the plan's own simulation.
    CHECK(b.estimate->step_time_s == zb.step_time_s);
}

TEST_CASE("pruned and exhaustive searches agree with every schedule offered", "[pp-search]") {
    auto base = test::small_plan(1, 1, 8, 32);
    sim::SearchOptions o;
    o.space.max_cp = 1;
    o.space.max_micro_batch = 2;
    o.space.shardings = {model::Sharding::dist_opt, model::Sharding::none};
    o.space.pp_schedules = kAll;
    o.threads = 2;
    o.top = 1000;
    o.prune = false;
    const auto full = sim::search_plans(base, o);
    o.prune = true;
    o.top = 5;
    const auto pruned = sim::search_plans(base, o);
    REQUIRE(full.plans.size() > 5);
    CHECK(pruned.stats.simulated < full.stats.simulated);
    // The exhaustive list holds split schedules (the space is exercised), each with its bounds
    // below its simulated step and the extrapolated stream sums equal to the direct ones.
    int split = 0;
    for (const auto& r : full.plans) {
        if (!model::splits_backward(r.plan.parallel.pp_schedule)) continue;
        ++split;
        CAPTURE(r.plan.name);
        const double lb = sim::step_time_lower_bound_s(r.plan);
        CHECK(lb == sim::step_time_lower_bound_direct_s(r.plan));
        CHECK(lb <= r.estimate.step_time_s);
        const auto g = model::build_workload(r.plan);
        CHECK(sim::critical_path_lower_bound_s(r.plan, g, sim::plan_network(r.plan)) <= r.estimate.step_time_s);
    }
    CHECK(split > 0);
    std::vector<std::string> expected;  // the exhaustive list without dominated recompute variants
    for (const auto& r : full.plans) {
        bool dominated = false;
        for (const auto& q : full.plans)
            if (q.plan.parallel.recompute < r.plan.parallel.recompute) {
                auto x = q.plan;
                x.parallel.recompute = r.plan.parallel.recompute;
                dominated = dominated || sim::layout_label(x) == sim::layout_label(r.plan);
            }
        if (!dominated) expected.push_back(r.plan.name);
    }
    REQUIRE(pruned.plans.size() == 5);
    for (std::size_t i = 0; i < pruned.plans.size(); ++i) {
        CHECK(pruned.plans[i].plan.name == expected[i]);
        const auto it = std::find_if(full.plans.begin(), full.plans.end(),
                                     [&](const sim::RankedPlan& r) { return r.plan.name == expected[i]; });
        REQUIRE(it != full.plans.end());
        CHECK(pruned.plans[i].estimate.days_to_train == it->estimate.days_to_train);
    }
}

TEST_CASE("the report draws one timeline row per stage with every pass of every micro-batch and chunk", "[pp-search]") {
    const int p = 4, m = 8;
    std::vector<model::Plan> plans{free_pipeline(p, m, PpSchedule::one_f_one_b, 1),
                                   free_pipeline(p, m, PpSchedule::zb_h1, 1), free_pipeline(p, m, PpSchedule::zb_v, 2),
                                   free_pipeline(p, m, PpSchedule::dualpipe_v, 2), test::small_plan(1, 1, 4, 8)};
    for (std::size_t i = 0; i < plans.size(); ++i) plans[i].name = "plan" + std::to_string(i);
    std::vector<sim::PlanResult> results;
    for (const auto& plan : plans) {
        REQUIRE(model::check_layout(plan).empty());
        results.push_back({&plan, with_passes(plan)});
        REQUIRE(results.back().estimate.step);
    }
    // The executor's passes: per stage in program order, one at a time on the compute stream.
    for (const auto& r : results) {
        const auto& passes = r.estimate.step->passes;
        for (std::size_t k = 1; k < passes.size(); ++k)
            if (passes[k].stage == passes[k - 1].stage) CHECK(passes[k - 1].end <= passes[k].start);
    }
    const std::string html = sim::html_report("t", "t.yaml", results, {});
    for (std::size_t i = 0; i + 1 < plans.size(); ++i) {
        CAPTURE(i);
        const auto at = html.find(fmt::format("<svg id=\"pipeline-{}\"", i));
        REQUIRE(at != std::string::npos);
        const std::string svg = html.substr(at, html.find("</svg>", at) - at);
        const int vp = plans[i].parallel.vp;
        CHECK(count(svg, "class=\"pp-stage\"") == static_cast<std::size_t>(p));
        CHECK(count(svg, "class=\"pp-run\"") == 0);
        for (int s = 0; s < p; ++s) {
            CAPTURE(s);
            const auto g = svg.find(fmt::format("data-stage=\"{}\"", s));
            const std::string row = svg.substr(g, svg.find("</g>", g) - g);
            const std::size_t f = count(row, "data-pass=\"F\""), b = count(row, "data-pass=\"B\""),
                              w = count(row, "data-pass=\"W\""), bw = count(row, "data-pass=\"BW\"");
            const auto n = static_cast<std::size_t>(m * vp);  // micro-batches x chunks per stage
            CHECK(f == n);
            CHECK(b + bw == n);
            CHECK(w == b);
            if (plans[i].parallel.pp_schedule == PpSchedule::one_f_one_b) CHECK(bw == n);
            if (plans[i].parallel.pp_schedule == PpSchedule::zb_h1 || plans[i].parallel.pp_schedule == PpSchedule::zb_v)
                CHECK(b == n);
            // Every micro-batch's forward of chunk 0 is there once.
            for (int mb = 0; mb < m; ++mb)
                CHECK(count(row, fmt::format("data-pass=\"F\" data-mb=\"{}\" data-chunk=\"0\"", mb)) == 1);
        }
    }
    // pp 1: said, not drawn.
    CHECK(html.find("<svg id=\"pipeline-4\"") == std::string::npos);
    CHECK(html.find("<p class=\"note pp-none\" data-plan=\"4\">plan4: pp 1, no pipeline") != std::string::npos);
}

TEST_CASE("plan --pp-schedules: an unknown schedule is named with the flag and the choices", "[pp-search][cli]") {
    const auto r = test::run_trainsim("plan --model llama2-7b --gpu h100-sxm --gpus 8 --tokens 1B --pp-schedules zb-h2",
                                      true);
    CHECK(r.rc == 2);
    CHECK(r.out.find("--pp-schedules") != std::string::npos);
    CHECK(r.out.find("zb-h2") != std::string::npos);
    CHECK(r.out.find("zb-h1") != std::string::npos);
}
