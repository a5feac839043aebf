// Error bands (docs/trust.md): the error model's quantiles, its lookup by regime, the
// out-of-domain flags, and the committed table against a regeneration.
#include "fixtures.hpp"
#include "trainsim/model/input/loader.hpp"
#include "trainsim/model/input/validation_set.hpp"
#include "trainsim/sim/step/executor.hpp"
#include "trainsim/sim/trust/trust.hpp"
#include "trainsim/sim/validate/validate.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using namespace trainsim;
using model::Time;

namespace {
sim::ErrorSample sample(const std::string& source, double error, const sim::Regime& r) {
    sim::ErrorSample s;
    s.file = "f.csv";
    s.source = source;
    s.regime = r;
    s.features.params = 7e9;
    s.features.gpus = 8;
    s.features.gpu = "test-gpu";
    s.features.precision = "bf16";
    s.features.family = r.family;
    s.features.seq_len = 4096;
    s.error = error;
    return s;
}
sim::Regime regime(const std::string& scale) {
    return {"megatron-core", "other", scale, "16k+", ""};
}

sim::ErrorModel shipped_error_model() {
    std::ifstream in(fs::path(TRAINSIM_TEST_DATA_DIR) / "trust" / "error-model.json");
    REQUIRE(in);
    return sim::error_model_from_json(nlohmann::json::parse(in), "error-model.json");
}
} // namespace

TEST_CASE("a regime's band is the 10th / 50th / 90th percentile of its rows' signed errors", "[trust]") {
    // 21 rows of one source, errors -10% ... +10% in 1% steps: type-7 quantiles at 0.1 / 0.5 / 0.9
    // are -8%, 0 and +8% (positions 2, 10 and 18 of 0..20).
    std::vector<sim::ErrorSample> s;
    for (int i = 0; i <= 20; ++i) s.push_back(sample("a", (i - 10) / 100.0, regime("1-8")));
    const auto m = sim::build_error_model(s);
    const auto it = std::find_if(m.bands.begin(), m.bands.end(), [](const auto& b) { return b.key == "all"; });
    REQUIRE(it != m.bands.end());
    CHECK(it->rows == 21);
    CHECK(it->p10 == Approx(-0.08));
    CHECK(it->p50 == Approx(0.0).margin(1e-12));
    CHECK(it->p90 == Approx(0.08));
    CHECK(it->basis.find("seen") != std::string::npos);
}

TEST_CASE("the band spans how far whole sources read (leave one source out)", "[trust]") {
    // Three sources, each tight around its own offset (-20%, 0, +30%): the pooled row quantiles
    // alone would miss how far a whole source can read; the band takes the sources' medians' spread.
    std::vector<sim::ErrorSample> s;
    const std::pair<const char*, double> src[] = {{"a", -0.2}, {"b", 0.0}, {"c", 0.3}};
    for (const auto& [name, off] : src)
        for (int i = 0; i < 2; ++i) s.push_back(sample(name, off + (i ? 0.001 : -0.001), regime("1-8")));
    for (int i = 0; i < 30; ++i) s.push_back(sample("b", 0.0, regime("1-8")));
    const auto m = sim::build_error_model(s);
    const auto& all = *std::find_if(m.bands.begin(), m.bands.end(), [](const auto& b) { return b.key == "all"; });
    // Row quantiles: 36 rows, 32 of them within 0.001 of 0 -> p10 and p90 ~0. Source medians
    // -0.2, 0, 0.3: type-7 q10 = -0.16, q90 = +0.24.
    CHECK(all.p50 == Approx(0.0).margin(1e-9));
    CHECK(all.p10 == Approx(-0.16).margin(1e-9));
    CHECK(all.p90 == Approx(0.24).margin(1e-9));
}

TEST_CASE("a regime with too few rows is looked up at a coarser key and widened", "[trust]") {
    std::vector<sim::ErrorSample> s;
    for (int i = 0; i <= 20; ++i) s.push_back(sample("a", (i - 10) / 100.0, regime("1-8")));
    for (int i = 0; i < 3; ++i) s.push_back(sample("a", 0.5, regime("257+"))); // under kMinRegimeRows
    const auto m = sim::build_error_model(s);
    auto plan = test::small_plan(1, 1, 8, 1024, 1);
    plan.cluster.nodes = 64; // 512 GPUs: regime megatron-core/other/257+/...
    plan.parallel.dp = 512;
    const auto b = sim::band_for(m, plan);
    CHECK(b.regime == "megatron-core/other"); // the finest key with enough rows
    CHECK(b.basis.find("looked up at") != std::string::npos);
    CHECK(b.time_p90 > b.time_p50);
}

TEST_CASE("a plan far outside the evidence is flagged and its band widened", "[trust]") {
    const auto m = shipped_error_model();
    model::LoadOptions opts;
    opts.data_dir = TRAINSIM_TEST_DATA_DIR;
    const std::string far = R"(
model: llama3.1-405b
training: {tokens: 1T, seq_len: 4096, global_batch: 2048, micro_batch: 1}
parallel: {tp: 8, pp: 16, dp: auto, recompute: full}
precision: fp16
cluster: {gpu: a100-sxm-40gb, nodes: 512, gpus_per_node: 8, intra_node: pcie}
)";
    const std::string near = R"(
model: llama2-70b
training: {tokens: 1T, seq_len: 4096, global_batch: 1024, micro_batch: 1}
parallel: {tp: 8, pp: 4, dp: auto, sequence_parallel: true}
precision: bf16
cluster: {gpu: h100-sxm, nodes: 8, gpus_per_node: 8}
)";
    const auto sf = model::load_scenario_text(far, "far.yaml", opts);
    const auto sn = model::load_scenario_text(near, "near.yaml", opts);
    const auto bf = sim::band_for(m, sf.plans.front());
    const auto bn = sim::band_for(m, sn.plans.front());
    CHECK(bn.out_of_domain.empty());
    // 405B is within twice the largest checked model (MT-NLG 530B is in the evidence); 4096
    // GPUs, FP16 on A100 40GB and PCIe inside the node are not.
    CHECK(bf.out_of_domain.size() >= 2);
    bool pcie = false, gpus = false;
    for (const auto& w : bf.out_of_domain) {
        pcie = pcie || w.find("pcie") != std::string::npos;
        gpus = gpus || w.find("GPUs") != std::string::npos;
    }
    CHECK(pcie);
    CHECK(gpus);
    // Widened: the far plan's band is wider than its regime's own quantiles.
    double width_regime = 0;
    for (int level = 4; level >= 0 && width_regime == 0; --level)
        for (const auto& r : m.bands)
            if (r.key == sim::regime_of(sf.plans.front()).key(level)) width_regime = r.p90 - r.p10;
    CHECK((bf.time_p90 - bf.time_p10) > 1.5 * width_regime);
    CHECK(bf.basis.find("outside the evidence") != std::string::npos);
}

TEST_CASE("the committed error-band table is what the code regenerates", "[trust][data]") {
    // scripts/error-model's inputs, in its order.
    const fs::path shared = fs::path(TRAINSIM_SOURCE_DIR) / ".." / "shared" / "validation";
    const fs::path data = fs::path(TRAINSIM_SOURCE_DIR) / "tests" / "data";
    const std::vector<std::pair<fs::path, bool>> files{
        {shared / "published-dev.csv", false},      {shared / "vtrain-dev.csv", false},
        {data / "published-torchtitan.csv", false}, {data / "published-llm-foundry.csv", false},
        {data / "published-other.csv", false},      {data / "published-nemo-h100.csv", true}};
    std::vector<sim::ErrorSample> samples;
    for (const auto& [f, held_out] : files) {
        REQUIRE(fs::exists(f));
        const auto rows = model::load_validation_csv(f, TRAINSIM_TEST_DATA_DIR);
        const auto s = sim::error_samples(rows, f.filename().string(), held_out, 2);
        samples.insert(samples.end(), s.begin(), s.end());
    }
    const auto regenerated = sim::error_model_json(sim::build_error_model(samples));
    std::ifstream in(fs::path(TRAINSIM_TEST_DATA_DIR) / "trust" / "error-model.json");
    REQUIRE(in);
    const auto committed = nlohmann::json::parse(in);
    INFO("regenerate with scripts/error-model");
    CHECK(committed == nlohmann::json::parse(regenerated.dump(1)));
}

TEST_CASE("a calibrated profile narrows the band by the variance between GPUs and adds its fits' error", "[trust]") {
    // Two GPUs, 20 rows each, errors +-0.05 around GPU means -0.1 and +0.1: total sum of squares
    // 40 x (0.01 + 0.0025) = 0.5, between GPUs 40 x 0.01 = 0.4: hardware_share 0.8.
    std::vector<sim::ErrorSample> s;
    for (int g = 0; g < 2; ++g)
        for (int i = 0; i < 20; ++i) {
            auto x = sample("a", (g ? 0.1 : -0.1) + (i % 2 ? 0.05 : -0.05), regime("1-8"));
            x.features.gpu = g ? "gpu-b" : "test-gpu";
            s.push_back(x);
        }
    const auto m = sim::build_error_model(s);
    CHECK(m.hardware_share == Approx(0.8));
    auto plan = test::small_plan(1, 1, 8, 16, 1);
    sim::StepResult st;
    st.breakdown.forward = Time::ps(600);    // compute 60% of the step
    st.breakdown.tp_exposed = Time::ps(400); // exposed communication 40%
    st.step_time = Time::ps(1000);
    const auto datasheet = sim::band_for(m, plan, &st);
    plan.hardware.compute_fit_residual = 0.02;
    plan.hardware.comm_fit_residual = 0.05;
    plan.hardware.sources["calibration.compute_residual"] = "measured";
    plan.hardware.sources["calibration.comm_residual"] = "measured";
    const auto calibrated = sim::band_for(m, plan, &st);
    // d' = sqrt(d^2 (1 - 0.8) + (1.2816 r)^2), r = hypot(0.6 x 0.02, 0.4 x 0.05).
    const double r = std::hypot(0.6 * 0.02, 0.4 * 0.05);
    const double d_hi = datasheet.time_p90 - datasheet.time_p50, d_lo = datasheet.time_p50 - datasheet.time_p10;
    CHECK(calibrated.time_p90 - calibrated.time_p50 == Approx(std::sqrt(d_hi * d_hi * 0.2 + 1.2816 * 1.2816 * r * r)));
    CHECK(calibrated.time_p50 - calibrated.time_p10 == Approx(std::sqrt(d_lo * d_lo * 0.2 + 1.2816 * 1.2816 * r * r)));
    CHECK(calibrated.time_p90 - calibrated.time_p10 < datasheet.time_p90 - datasheet.time_p10);
    CHECK(calibrated.basis.find("calibrated") != std::string::npos);
}

TEST_CASE("a host-heavy plan takes the band of the host-heavy rows and a GPU-bound plan that of the others", "[trust]") {
    // 21 host-heavy rows at +10% +- 1% steps and 21 GPU-bound rows at -5% +- 1% steps, one regime
    // otherwise: each sub-regime's median is its centre, the parent's lies between.
    const auto plan = test::small_plan(1, 1, 8, 16, 1);
    std::vector<sim::ErrorSample> s;
    for (int i = 0; i <= 20; ++i) {
        auto heavy = sample("a", 0.10 + (i - 10) / 1000.0, sim::regime_of(plan));
        heavy.regime.host = "host-heavy";
        auto bound = sample("a", -0.05 + (i - 10) / 1000.0, sim::regime_of(plan));
        bound.regime.host = "gpu-bound";
        s.push_back(heavy);
        s.push_back(bound);
    }
    const auto m = sim::build_error_model(s);
    sim::StepResult st;
    st.step_time = Time::ps(1000);
    st.host_busy = Time::ps(500); // exactly kHostHeavyShare of the step
    REQUIRE(sim::kHostHeavyShare == 0.5);
    const auto heavy = sim::band_for(m, plan, &st);
    CHECK(heavy.regime.ends_with("/host-heavy"));
    CHECK(heavy.time_p50 == Approx(1.10));
    st.host_busy = Time::ps(499);
    const auto bound = sim::band_for(m, plan, &st);
    CHECK(bound.regime.ends_with("/gpu-bound"));
    CHECK(bound.time_p50 == Approx(0.95));
    // Without a simulated step the key stops a level short, at the pooled rows: nothing skipped.
    const auto unknown = sim::band_for(m, plan);
    CHECK(unknown.regime == sim::regime_of(plan).key());
    CHECK(unknown.regime.find("host") == std::string::npos);
    CHECK(unknown.basis.find("looked up at") == std::string::npos);
}

TEST_CASE("without host-heavy rows a host-heavy plan is widened and a GPU-bound plan is not", "[trust]") {
    // 21 GPU-bound rows at -10% ... +10% and 3 host-heavy ones (under kMinRegimeRows): the
    // host-heavy key has no band, so both plans fall back to the regime's 24 pooled rows.
    const auto plan = test::small_plan(1, 1, 8, 16, 1);
    std::vector<sim::ErrorSample> s;
    for (int i = 0; i <= 20; ++i) {
        auto x = sample("a", (i - 10) / 100.0, sim::regime_of(plan));
        x.regime.host = "gpu-bound";
        x.features = sim::features_of(plan); // inside the evidence: no out-of-domain widening
        s.push_back(x);
    }
    for (int i = 0; i < 3; ++i) {
        auto x = sample("a", 0.0, sim::regime_of(plan));
        x.regime.host = "host-heavy";
        x.features = sim::features_of(plan);
        s.push_back(x);
    }
    const auto m = sim::build_error_model(s);
    const auto pooled = std::find_if(m.bands.begin(), m.bands.end(),
                                     [&](const auto& b) { return b.key == sim::regime_of(plan).key(); });
    REQUIRE(pooled != m.bands.end());
    CHECK(pooled->rows == 24);
    sim::StepResult st;
    st.step_time = Time::ps(1000);
    st.host_busy = Time::ps(900);
    const auto heavy = sim::band_for(m, plan, &st);
    st.host_busy = Time::ps(100);
    const auto bound = sim::band_for(m, plan, &st);
    const auto gpu_bound_key = std::find_if(m.bands.begin(), m.bands.end(), [&](const auto& b) {
        return b.key == sim::regime_of(plan).key() + "/gpu-bound";
    });
    REQUIRE(gpu_bound_key != m.bands.end());
    // The GPU-bound plan has its own key; the host-heavy one is looked up a level up, x1.1.
    CHECK(bound.regime == gpu_bound_key->key);
    CHECK(heavy.regime == pooled->key);
    CHECK(heavy.time_p50 - heavy.time_p10 == Approx(1.1 * (pooled->p50 - pooled->p10)));
    CHECK(heavy.time_p90 - heavy.time_p50 == Approx(1.1 * (pooled->p90 - pooled->p50)));
    CHECK(heavy.out_of_domain.empty());
    CHECK(heavy.basis.find("widened x1.10") != std::string::npos);
    // With too few GPU-bound rows too, a GPU-bound plan falls back unwidened.
    std::vector<sim::ErrorSample> few(s.begin(), s.begin() + 10);
    few.insert(few.end(), s.end() - 3, s.end());
    const auto m2 = sim::build_error_model(few);
    const auto b2 = sim::band_for(m2, plan, &st);
    const auto pooled2 = std::find_if(m2.bands.begin(), m2.bands.end(),
                                      [&](const auto& b) { return b.key == sim::regime_of(plan).key(); });
    REQUIRE(pooled2 != m2.bands.end());
    CHECK(b2.regime == pooled2->key);
    CHECK(b2.time_p90 - b2.time_p50 == Approx(pooled2->p90 - pooled2->p50));
    CHECK(b2.basis.find("not widened") != std::string::npos);
}

TEST_CASE("a layout feature with fewer published runs than a band needs is flagged and widened", "[trust]") {
    // TP 16 over two 8-GPU nodes. The evidence holds 21 rows without the feature and, first, 11
    // with it (one under kMinRegimeRows), then 12.
    auto plan = test::small_plan(16, 1, 1, 16, 1);
    REQUIRE(plan.cluster.gpus_per_node == 8);
    auto evidence = [&](int with) {
        std::vector<sim::ErrorSample> s;
        for (int i = 0; i < 21 + with; ++i) {
            auto x = sample("a", (i % 21 - 10) / 100.0, sim::regime_of(plan));
            x.features = sim::features_of(plan);
            x.features.tp_across_nodes = i >= 21;
            s.push_back(x);
        }
        return sim::build_error_model(s);
    };
    REQUIRE(sim::kMinRegimeRows == 12);
    const auto thin = evidence(11);
    CHECK(thin.evidence.tp_across_nodes_rows == 11);
    const auto flagged = sim::band_for(thin, plan);
    REQUIRE(flagged.out_of_domain.size() == 1);
    CHECK(flagged.out_of_domain[0] == "TP across nodes: 11 published run(s) did it, under the 12 a band needs");
    const auto enough = evidence(12);
    const auto inside = sim::band_for(enough, plan);
    CHECK(inside.out_of_domain.empty());
    // The same regime band, widened x1.5 (kOutOfDomainWidening) for the one reason.
    const auto own = std::find_if(thin.bands.begin(), thin.bands.end(),
                                  [&](const auto& b) { return b.key == sim::regime_of(plan).key(); });
    REQUIRE(own != thin.bands.end());
    CHECK(flagged.time_p90 - flagged.time_p50 == Approx(1.5 * (own->p90 - own->p50)));
    // A plan inside one node is not flagged by the thin evidence.
    CHECK(sim::band_for(thin, test::small_plan(8, 1, 1, 16, 1)).out_of_domain.empty());
}

TEST_CASE("a plan using a layout feature gets a band reaching the p10 / p90 of the runs that used it", "[trust]") {
    // 21 rows without CP at -10% ... +10% in 1% steps, and 12 CP rows in the same regime: one of
    // source "a" at -30%, six of "b" at +20 ... +25%, five of "c" at +26 ... +30%, all held out.
    // The CP band takes the quantiles of the 12 CP rows without the sources' spread: type-7 p10
    // 20.1% and p90 28.9%, where the sources' medians (-30, +22.5, +28%) would have put p10 at
    // -19.5%.
    auto plan = test::small_plan(1, 1, 8, 16, 1);
    plan.parallel.cp = 2;
    plan.parallel.dp = 4;
    std::vector<sim::ErrorSample> s;
    for (int i = 0; i <= 20; ++i) {
        auto x = sample("a", (i - 10) / 100.0, sim::regime_of(plan));
        x.features = sim::features_of(plan);
        x.features.cp = false;
        s.push_back(x);
    }
    for (int i = 0; i < 12; ++i) {
        const double e = i == 0 ? -0.30 : (19 + i) / 100.0;
        auto x = sample(i == 0 ? "a" : i <= 6 ? "b" : "c", e, sim::regime_of(plan));
        x.features = sim::features_of(plan);
        x.held_out = true;
        REQUIRE(x.features.cp);
        s.push_back(x);
    }
    const auto m = sim::build_error_model(s);
    const auto cp =
        std::find_if(m.bands.begin(), m.bands.end(), [](const auto& b) { return b.key == sim::kFeatureCp; });
    REQUIRE(cp != m.bands.end());
    CHECK(cp->rows == 12);
    CHECK(cp->p10 == Approx(0.201));
    CHECK(cp->p90 == Approx(0.289));
    const auto own = std::find_if(m.bands.begin(), m.bands.end(),
                                  [&](const auto& b) { return b.key == sim::regime_of(plan).key(); });
    REQUIRE(own != m.bands.end());
    REQUIRE(own->p90 < cp->p90);
    REQUIRE(own->p10 < cp->p10);
    const auto b = sim::band_for(m, plan);
    CHECK(b.out_of_domain.empty());
    // The regime's p10 and median stay; its p90 reaches the CP runs' p90.
    CHECK(b.time_p10 == Approx(1.0 + own->p10));
    CHECK(b.time_p50 == Approx(1.0 + own->p50));
    CHECK(b.time_p90 == Approx(1.0 + cp->p90));
    CHECK(b.basis.find("p10 / p90 of the 12 published runs with context parallelism") != std::string::npos);
    // The table written and read back gives the same band.
    const auto back = sim::error_model_from_json(sim::error_model_json(m), "t.json");
    CHECK(sim::band_for(back, plan).time_p90 == Approx(b.time_p90));
    // The same regime without CP keeps its own band.
    plan.parallel.cp = 1;
    plan.parallel.dp = 8;
    const auto plain = sim::band_for(m, plan);
    CHECK(plain.time_p90 == Approx(1.0 + own->p90));
    CHECK(plain.basis.find("published runs with") == std::string::npos);
}

TEST_CASE("a layout feature's band can widen the optimistic side too", "[trust]") {
    // TP 16 over two 8-GPU nodes: 21 rows without it at -10% ... +10%, 12 with it at -40% ... -29%.
    auto plan = test::small_plan(16, 1, 1, 16, 1);
    REQUIRE(plan.cluster.gpus_per_node == 8);
    std::vector<sim::ErrorSample> s;
    for (int i = 0; i < 33; ++i) {
        auto x = sample("a", i < 21 ? (i - 10) / 100.0 : (i - 61) / 100.0, sim::regime_of(plan));
        x.features = sim::features_of(plan);
        x.features.tp_across_nodes = i >= 21;
        s.push_back(x);
    }
    const auto m = sim::build_error_model(s);
    const auto tp =
        std::find_if(m.bands.begin(), m.bands.end(), [](const auto& b) { return b.key == sim::kFeatureTpAcrossNodes; });
    REQUIRE(tp != m.bands.end());
    // Type-7 p10 of -40 ... -29%: -38.9%.
    CHECK(tp->p10 == Approx(-0.389));
    const auto own = std::find_if(m.bands.begin(), m.bands.end(),
                                  [&](const auto& b) { return b.key == sim::regime_of(plan).key(); });
    REQUIRE(own != m.bands.end());
    const auto b = sim::band_for(m, plan);
    CHECK(b.out_of_domain.empty()); // 12 runs: in the evidence
    CHECK(b.time_p10 == Approx(1.0 + tp->p10));
    CHECK(b.time_p90 == Approx(1.0 + own->p90));
}

TEST_CASE("leave-file-out coverage judges each file with a table built from the other files only", "[trust][data]") {
    const fs::path data = fs::path(TRAINSIM_SOURCE_DIR) / "tests" / "data";
    std::vector<sim::PublishedFile> files;
    for (const auto* name : {"published-torchtitan.csv", "published-llm-foundry.csv"})
        files.push_back({name, model::load_validation_csv(data / name, TRAINSIM_TEST_DATA_DIR), false});
    const auto a = sim::error_samples(files[0].rows, files[0].name, false, 2);
    const auto b = sim::error_samples(files[1].rows, files[1].name, false, 2);
    REQUIRE_FALSE(a.empty());
    REQUIRE_FALSE(b.empty());
    const auto c = sim::cross_validate_bands(files, 2);
    REQUIRE(c.size() == 2);
    // Each file's leave-out table holds exactly the other file's rows.
    CHECK(c[0].rows == static_cast<int>(a.size()));
    CHECK(c[0].left_out_basis == static_cast<int>(b.size()));
    CHECK(c[1].left_out_basis == static_cast<int>(a.size()));
    // The torchtitan rows judged by a table of llm-foundry's rows alone, and by the pooled one.
    auto coverage = [&](const sim::ErrorModel& m) {
        const auto rep = sim::validate_rows(files[0].rows, "step", 2, &m);
        std::vector<const sim::RowResult*> rows;
        for (const auto& r : rep.rows)
            if (r.status != "skipped") rows.push_back(&r);
        return sim::band_stats(rows);
    };
    auto pooled = a;
    pooled.insert(pooled.end(), b.begin(), b.end());
    // Tables as they ship: through the JSON the committed table is read from.
    auto shipped = [](const std::vector<sim::ErrorSample>& x) {
        return sim::error_model_from_json(sim::error_model_json(sim::build_error_model(x)), "t");
    };
    CHECK(c[0].left_out.coverage == Approx(coverage(shipped(b)).coverage));
    CHECK(c[0].left_out.median_width == Approx(coverage(shipped(b)).median_width));
    CHECK(c[0].in_sample.coverage == Approx(coverage(shipped(pooled)).coverage));
    CHECK(c[0].left_out.rows == c[0].rows);
    // A single file has no other to build a table from.
    const auto one = sim::cross_validate_bands({files[0]}, 2);
    REQUIRE(one.size() == 1);
    CHECK(one[0].left_out_basis == 0);
    CHECK(one[0].left_out.rows == 0);
    CHECK(one[0].in_sample.rows == one[0].rows);
}

TEST_CASE("a GPU without NVLink is outside the evidence whatever cluster.intra_node says", "[trust][cards]") {
    // The L20 has no NVLink (nvlink_bandwidth "0 GB/s", scenarios/hardware/l20.yaml): its node's
    // GPUs meet over PCIe even with the default intra_node: nvswitch, and every published run the
    // bands come from used NVSwitch, so the band says so and widens. The same plan on H100 SXM
    // (NVSwitch) carries no such reason.
    const auto m = shipped_error_model();
    model::LoadOptions opts;
    opts.data_dir = TRAINSIM_TEST_DATA_DIR;
    auto scenario = [&](const char* gpu) {
        return model::load_scenario_text(fmt::format(R"(model: llama2-7b
training: {{tokens: 100B, seq_len: 4096, global_batch: 256, micro_batch: 1}}
parallel: {{tp: 1, pp: 1, dp: 8, sharding: zero3}}
precision: bf16
cluster: {{gpu: {}, nodes: 1, gpus_per_node: 8}}
)",
                                                     gpu),
                                         "nvlink.yaml", opts)
            .plans.front();
    };
    auto says_pcie = [](const sim::Band& b) {
        return std::any_of(b.out_of_domain.begin(), b.out_of_domain.end(),
                           [](const std::string& w) { return w.find("no NVLink") != std::string::npos; });
    };
    const auto l20 = scenario("l20");
    REQUIRE(l20.cluster.intra == model::IntraFabric::nvswitch);  // the default, as written
    CHECK(says_pcie(sim::band_for(m, l20)));
    CHECK_FALSE(says_pcie(sim::band_for(m, scenario("h100-sxm"))));
}
