// The stack profile's discrepancy (model/core/stack_discrepancy.hpp): a Gaussian process over the
// runs' residuals after the fitted factors. Expected values from the process's closed forms
// (Rasmussen and Williams 2006, eqs. 2.25-2.26 and 5.12).
#include "fixtures.hpp"
#include "trainsim/model/core/stack_discrepancy.hpp"
#include "trainsim/model/input/stack_io.hpp"
#include "trainsim/sim/run/estimate.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

using namespace trainsim;

namespace {

model::StackFitRun run_at(const std::string& id, const std::string& shape, int tp, int pp, int dp, int mb,
                          double residual_log) {
    model::StackFitRun r;
    r.id = id;
    r.shape = shape;
    r.gpus = tp * pp * dp;
    r.nodes = 1;
    r.tp = tp;
    r.pp = pp;
    r.dp = dp;
    r.micro_batch = mb;
    r.fitted = 1000;
    r.prior = 1000;
    r.measured = 1000 * std::exp(residual_log);
    return r;
}

model::StackProfile with_discrepancy(std::vector<model::StackFitRun> runs, double signal, double noise) {
    model::StackProfile s;
    s.name = "gp";
    s.fitted = true;
    s.runs = std::move(runs);
    s.discrepancy.present = true;
    s.discrepancy.signal_var = signal;
    s.discrepancy.noise_var = noise;
    s.discrepancy.length = {1, 1, 1, 1, 1};
    model::prepare_discrepancy(s.discrepancy, s.runs);
    return s;
}

} // namespace

TEST_CASE("the discrepancy at a plan is the Gaussian process's posterior: two runs at one point, another shape, far "
          "away",
          "[stack][discrepancy]") {
    const double s = 0.01, n = 0.0004, r1 = 0.10, r2 = 0.06;
    const auto st = with_discrepancy({run_at("a", "A", 2, 1, 1, 2, r1), run_at("b", "A", 2, 1, 1, 2, r2)}, s, n);
    REQUIRE(st.discrepancy.present);
    // At the runs' point, k* = (s, s) and K = s 11' + n I: mean = s (r1 + r2) / (2 s + n), and
    // var = s - 2 s^2 / (2 s + n) + n (the new run's own noise included).
    const auto at = model::discrepancy_at(st, model::layout_point(st.runs[0]));
    CHECK(at.mean_log == Approx(s * (r1 + r2) / (2 * s + n)).epsilon(1e-9));
    CHECK(at.var_log == Approx(s - 2 * s * s / (2 * s + n) + n).epsilon(1e-9));
    CHECK(at.max_corr == Approx(1.0));
    // One step of log2 in tp (tp 4): the kernel is s e^{-1/2}, the mean shrinks by that factor.
    auto p = model::layout_point(st.runs[0]);
    p.features[0] += 1.0;
    const auto near = model::discrepancy_at(st, p);
    CHECK(near.mean_log == Approx(std::exp(-0.5) * s * (r1 + r2) / (2 * s + n)).epsilon(1e-9));
    // Another shape shares nothing: mean 0, the prior variance s + n.
    model::LayoutPoint other{std::string("B"), model::layout_point(st.runs[0]).features};
    const auto b = model::discrepancy_at(st, other);
    CHECK(b.mean_log == 0.0);
    CHECK(b.var_log == Approx(s + n));
    CHECK(b.max_corr == 0.0);
    // Without a discrepancy: mean 0 and the fit's leave-one-out scatter.
    model::StackProfile plain;
    plain.fitted = true;
    plain.loo_sd_log = 0.07;
    const auto none = model::discrepancy_at(plain, p);
    CHECK(none.mean_log == 0.0);
    CHECK(none.var_log == Approx(0.07 * 0.07));
}

TEST_CASE("a stack profile's discrepancy reads back to the same predictions, and a broken one is named",
          "[stack][discrepancy]") {
    auto st = with_discrepancy({run_at("a", "A", 1, 1, 2, 1, 0.05), run_at("b", "A", 2, 1, 1, 1, -0.03),
                                run_at("c", "A", 1, 2, 1, 4, 0.02)},
                               0.004, 0.0002);
    st.discrepancy.length = {0.5, 2, 1, 4, 1};
    model::prepare_discrepancy(st.discrepancy, st.runs);
    st.evidence.max_gpus = 2;
    st.evidence.min_gpus = 2;
    st.evidence.max_nodes = 1;
    const std::string text = model::render_stack_profile(st);
    const auto back = model::load_stack_profile_text(text, "s.yaml");
    REQUIRE(back.discrepancy.present);
    CHECK(back.discrepancy.length == st.discrepancy.length);
    auto p = model::layout_point(st.runs[1]);
    p.features[4] = 1.0;  // micro-batch 2
    CHECK(model::discrepancy_at(back, p).mean_log == model::discrepancy_at(st, p).mean_log);
    CHECK(model::discrepancy_at(back, p).var_log == model::discrepancy_at(st, p).var_log);
    // A run without its shape cannot carry a residual: the profile is refused, naming the key.
    const auto at = text.find(", shape: ");
    REQUIRE(at != std::string::npos);
    const std::string broken = fmt::format("{}{}", text.substr(0, at), text.substr(text.find(", measured", at)));
    try {
        (void)model::load_stack_profile_text(broken, "broken.yaml");
        FAIL("a discrepancy over a run without a shape was accepted");
    } catch (const std::exception& e) {
        CHECK_THAT(e.what(), Catch::Contains("broken.yaml") && Catch::Contains("fit") && Catch::Contains("shape"));
    }
}

TEST_CASE("fit_discrepancy carries a residual that runs of one shape share, and needs enough runs",
          "[stack][discrepancy]") {
    // Twelve runs of one shape whose residual is set by tp alone (+8% at tp 2, -4% at tp 1, as a
    // GEMM tile that suits one width and not the other), with a small alternating scatter.
    std::vector<model::StackFitRun> runs;
    int k = 0;
    for (int tp : {1, 2})
        for (int mb : {1, 2, 4})
            for (int dp : {1, 2}) {
                const double r = (tp == 2 ? 0.08 : -0.04) + (k % 2 ? 0.004 : -0.004);
                runs.push_back(run_at(fmt::format("r{}", k++), "A", tp, 1, dp, mb, r));
            }
    const auto d = model::fit_discrepancy(runs);
    REQUIRE(d.present);
    // Each run left out is predicted from the others of its tp: far better than the residuals'
    // own rms (~6.3%).
    double rms = 0;
    for (const auto& r : runs) rms += model::run_residual_log(r) * model::run_residual_log(r);
    rms = std::sqrt(rms / static_cast<double>(runs.size()));
    CHECK(d.loo_sd_log < 0.25 * rms);
    model::StackProfile st;
    st.fitted = true;
    st.runs = runs;
    st.discrepancy = d;
    // A new layout at tp 2 (dp 4, outside the runs' dp) carries about +8%.
    auto p = model::layout_point(runs.back());
    p.features[3] = 2.0;
    CHECK(model::discrepancy_at(st, p).mean_log == Approx(0.08).margin(0.02));
    // Too few runs to say: none.
    const std::vector<model::StackFitRun> few(runs.begin(), runs.begin() + model::kDiscrepancyMinRuns - 1);
    CHECK_FALSE(model::fit_discrepancy(few).present);
}

TEST_CASE("a plan run with a fitted stack's discrepancy has its step time divided by exp(mean), in simulate and its "
          "JSON",
          "[stack][discrepancy]") {
    auto plan = test::small_plan(2, 1, 2, 16, 2);
    const auto bare = sim::estimate_plan(plan);
    REQUIRE(bare.fits);
    auto st = std::make_shared<model::StackProfile>(
        with_discrepancy({[&] {
                              auto r = run_at("a", model::layout_point(plan).shape, plan.parallel.tp, plan.parallel.pp,
                                              plan.parallel.dp, plan.training.micro_batch, std::log(0.9));
                              r.cp = plan.parallel.cp;
                              return r;
                          }()},
                         0.01, 0.0001));
    plan.stack = st;
    const auto with = sim::estimate_plan(plan);
    const double mean = 0.01 * std::log(0.9) / (0.01 + 0.0001);  // one run at the plan's own point
    CHECK(with.stack_discrepancy == Approx(std::exp(mean)).epsilon(1e-9));
    CHECK(with.step_time_s == Approx(bare.step_time_s / std::exp(mean)).epsilon(1e-9));
    CHECK(with.days_to_train == Approx(bare.days_to_train / std::exp(mean)).epsilon(1e-9));
}
