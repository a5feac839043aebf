// Stack profiles (issue #41): the factors' closed forms on a hardware profile, the file format,
// the fit on runs of a known stack, what runs can and cannot constrain, the bands of calibrated
// predictions, and `validate --fit-on` / `fit-stack` through the CLI.
#include "cli_runner.hpp"
#include "fixtures.hpp"
#include "scratch_dir.hpp"
#include "trainsim/model/input/loader.hpp"
#include "trainsim/model/input/stack_io.hpp"
#include "trainsim/model/input/validation_set.hpp"
#include "trainsim/sim/run/estimate.hpp"
#include "trainsim/sim/stack/stack_fit.hpp"
#include "trainsim/sim/stack/stack_report.hpp"
#include "trainsim/sim/validate/validate.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using trainsim::model::StackParam;
using trainsim::model::StackProfile;

namespace {

std::size_t idx(StackParam p) { return static_cast<std::size_t>(p); }

constexpr const char* kHeader =
    "id,source_group,source,model,layers,hidden,heads,kv_heads,ffn,ffn_type,vocab,seq_len,gpu,num_gpus,tp,pp,vp,cp,dp,"
    "sequence_parallel,sharding,micro_batch,global_batch,recompute,precision,framework,kind,tokens_per_s_per_gpu,"
    "derivation,notes";

// A fully written run (no blank cell) of a 12-layer, hidden-1024 GPT on A100 80GB: Megatron-Core.
std::string run_line(const std::string& id, int gpus, int tp, int pp, int mb, int gb, int seq = 1024,
                     double tps = 1000) {
    const int dp = gpus / (tp * pp);
    return fmt::format("{},test,synthetic,GPT test,12,1024,16,16,4096,gelu,50304,{},a100-sxm-80gb,{},{},{},1,1,{},"
                       "{},dist_opt,{},{},none,bf16,megatron-core,step,{},synthetic,",
                       id, seq, gpus, tp, pp, dp, tp > 1 ? "true" : "false", mb, gb, tps);
}

std::vector<trainsim::model::ValidationRow> load_lines(const trainsim::test::ScratchDir& dir,
                                                       const std::vector<std::string>& lines,
                                                       const std::string& name = "runs.csv") {
    {
        std::ofstream out(dir / name);
        out << kHeader << "\n";
        for (const auto& l : lines) out << l << "\n";
    }
    return trainsim::model::load_validation_csv(dir / name, TRAINSIM_TEST_DATA_DIR);
}

// Sets each row's measurement to what the simulator gives with `factors`: runs of a known stack.
void measure_with(std::vector<trainsim::model::ValidationRow>& rows, const std::array<double, 8>& factors) {
    for (auto& row : rows) {
        auto plan = row.plan;
        plan.hardware = trainsim::model::apply_stack(plan.hardware, factors, "truth");
        const auto e = trainsim::sim::estimate_plan(plan, {}, true);
        REQUIRE(e.tokens_per_s_per_gpu > 0);
        row.measured_tokens_per_s_per_gpu = e.tokens_per_s_per_gpu;
    }
}

double log_error(const trainsim::model::StackFitRun& r) { return std::abs(std::log(r.fitted / r.measured)); }

} // namespace

TEST_CASE("apply_stack multiplies what each factor scales, and nothing else", "[stack]") {
    using namespace trainsim::model;
    auto hw = trainsim::test::test_profile();
    hw.host_cpu_speed = 1.0;
    hw.collective_times = {{"all_reduce", 8, "intra_node", mib(64), Time::us(800)},
                           {"all_reduce", 16, "inter_node", mib(64), Time::us(2000)}};
    std::array<double, kStackParams> f{};
    f.fill(1.0);
    f[idx(StackParam::gemm)] = 0.5;
    f[idx(StackParam::host)] = 2.0;
    f[idx(StackParam::comm_intra)] = 0.8;
    f[idx(StackParam::kernel_overhead)] = 1.5;
    f[idx(StackParam::memory_bound)] = 2.0; // 0.8 x 2 is capped at 1: an efficiency cannot pass the peak
    const auto out = apply_stack(hw, f, "t");
    CHECK(out.gemm_efficiency.at(Precision::bf16) == Approx(0.4));  // 0.8 x 0.5
    CHECK(out.gemm_efficiency.at(Precision::fp8) == Approx(0.35));  // 0.7 x 0.5
    CHECK(out.host_cpu_speed == Approx(0.5));                       // twice the host time per launch
    CHECK(out.kernel_overhead.seconds() == Approx(6e-6));           // 4 us x 1.5
    CHECK(out.hbm_efficiency == Approx(1.0));
    CHECK(out.nvlink_efficiency == Approx(0.64));                   // 0.8 x 0.8
    CHECK(out.nic_efficiency == Approx(0.9));                       // inter-node untouched
    CHECK(out.collective_times[0].time.seconds() == Approx(1e-3));  // 800 us / 0.8
    CHECK(out.collective_times[1].time.seconds() == Approx(2e-3));  // inter-node untouched
    CHECK(out.attention_fwd_efficiency == Approx(0.5));
    CHECK(out.comm_compute_slowdown == Approx(0.1));
    CHECK(out.sources.contains("stack"));
    f[idx(StackParam::gemm)] = 0;
    CHECK_THROWS_AS(apply_stack(hw, f, "t"), std::invalid_argument);
}

TEST_CASE("factors of 1 leave every shipped profile's predictions exactly as they are", "[stack][data]") {
    using namespace trainsim;
    std::array<double, model::kStackParams> ones{};
    ones.fill(1.0);
    for (const auto& id : model::list_ids(fs::path(TRAINSIM_TEST_DATA_DIR) / "hardware")) {
        auto plan = test::small_plan(8, 1, 1, 16, 2);
        plan.hardware = model::resolve_profile(id, fs::current_path(), TRAINSIM_TEST_DATA_DIR);
        plan.cluster.gpus_per_node = 8;
        plan.parallel.sequence_parallel = true;
        auto with = plan;
        with.hardware = model::apply_stack(plan.hardware, ones, "ones");
        INFO(id);
        CHECK(sim::estimate_plan(with).step_time_s == sim::estimate_plan(plan).step_time_s);
    }
}

TEST_CASE("a stack profile reads back exactly as written, and bad ones name file, line and key", "[stack]") {
    using namespace trainsim::model;
    StackProfile s;
    s.name = "ours";
    s.factors[idx(StackParam::gemm)] = 0.9123456789;
    s.factors[idx(StackParam::host)] = 1.7;
    s.fitted = true;
    s.fitted_with = "trainsim fit-stack runs.csv";
    s.fitted_on = "runs.csv";
    s.free[idx(StackParam::gemm)] = true;
    s.constrained[idx(StackParam::gemm)] = true;
    for (std::size_t i = 0; i < kStackParams; ++i) s.covariance_log[i * kStackParams + i] = 0.01 * static_cast<double>(i + 1);
    s.covariance_log[1] = s.covariance_log[kStackParams] = -0.003;
    s.residual_sd_log = 0.02;
    s.loo_sd_log = 0.031;
    s.evidence = {2, 8, 1, 2, 4, 1, {"a100-sxm-80gb"}, {"megatron-core"}};
    trainsim::model::StackFitRun run;
    run.id = "r1";
    run.gpus = 2;
    run.nodes = 1;
    run.tp = 1;
    run.pp = 2;
    run.measured = 1000.5;
    run.prior = 1100;
    run.fitted = 1001;
    run.loo_error_pct = -1.5;
    s.runs.push_back(run);
    s.notes = {"comm_inter_node: not constrained"};
    const auto text = render_stack_profile(s);
    const auto back = load_stack_profile_text(text, "s.yaml");
    CHECK(back.name == "ours");
    CHECK(back.factors == s.factors);
    CHECK(back.covariance_log == s.covariance_log);
    CHECK(back.free == s.free);
    CHECK(back.constrained == s.constrained);
    CHECK(back.loo_sd_log == s.loo_sd_log);
    CHECK(back.evidence.max_pp == 4);
    CHECK(back.evidence.gpus == s.evidence.gpus);
    REQUIRE(back.runs.size() == 1);
    CHECK(back.runs[0].measured == 1000.5);
    CHECK(back.runs[0].loo_error_pct == -1.5);
    CHECK(back.notes == s.notes);

    auto diag = [](const std::string& yaml) {
        try {
            (void)load_stack_profile_text(yaml, "bad.yaml");
        } catch (const StackProfileError& e) {
            return e.diagnostics();
        }
        return std::vector<Diagnostic>{};
    };
    auto d = diag("stack_profile: 1\nname: x\nfactors:\n  gem_efficiency: 0.9\n");
    REQUIRE(d.size() == 1);
    CHECK(d[0].line == 4);
    CHECK(d[0].key == "factors.gem_efficiency");
    CHECK_THAT(d[0].message, Catch::Contains("did you mean 'gemm_efficiency'"));
    d = diag("stack_profile: 1\nname: x\nfactors:\n  host_time: 9\n");  // bounds 0.2-5
    REQUIRE(d.size() == 1);
    CHECK(d[0].line == 4);
    CHECK(d[0].key == "factors.host_time");
    d = diag("stack_profile: 1\nname: x\nfactors: {}\nfit:\n  covariance_log: [[1, 2]]\n");
    REQUIRE(d.size() == 3);  // the covariance's shape; no runs; no evidence
    CHECK(d[0].key == "fit.covariance_log");
    CHECK(d[0].line == 5);
    d = diag("name: x\n");
    CHECK(d.size() == 2);  // no version, no factors
    // A fit names its runs and what they covered; a covariance must be one.
    d = diag("stack_profile: 1\nname: x\nfactors: {}\nfit:\n  covariance_log: [[1,0,0,0,0,0,0,0],[0,1,0,0,0,0,0,0],"
             "[0,0,1,0,0,0,0,0],[0,0,0,1,0,0,0,0],[0,0,0,0,1,0,0,0],[0,0,0,0,0,1,0,0],[0,0,0,0,0,0,1,0],"
             "[0,0,0,0,0,0,0,1]]\n");
    CHECK(d.size() == 2);
    auto fitted = s;
    fitted.covariance_log[1] = fitted.covariance_log[kStackParams] = -0.5; // |c| > sqrt(0.01 x 0.02)
    d = diag(render_stack_profile(fitted));
    REQUIRE(d.size() == 1);
    CHECK(d[0].key == "fit");
    CHECK_THAT(d[0].message, Catch::Contains("is not a covariance"));
}

TEST_CASE("fit-stack recovers the runs of a known stack, a single run frees one parameter, one node leaves the "
          "network across nodes at its prior",
          "[stack]") {
    using namespace trainsim;
    test::ScratchDir dir;
    // Runs that differ in what each factor weighs: small and large micro-batches (host and kernel
    // overhead vs GEMMs), TP 1-8 (intra-node collectives), sequence 1024-4096 (attention).
    auto rows = load_lines(dir, {run_line("a", 1, 1, 1, 1, 8), run_line("b", 1, 1, 1, 8, 32),
                                 run_line("c", 2, 2, 1, 4, 16), run_line("d", 4, 4, 1, 2, 16, 2048),
                                 run_line("e", 8, 8, 1, 1, 8, 4096), run_line("f", 8, 2, 1, 4, 64),
                                 run_line("g", 4, 1, 2, 2, 32, 2048)});
    std::array<double, model::kStackParams> truth{};
    truth.fill(1.0);
    truth[idx(StackParam::gemm)] = 0.8;
    truth[idx(StackParam::host)] = 1.6;
    truth[idx(StackParam::comm_intra)] = 0.75;
    measure_with(rows, truth);
    sim::StackFitOptions opt;
    opt.threads = 2;
    const auto fit = sim::fit_stack(rows, opt);
    const auto& s = fit.stack;
    // The runs came from the simulator with these factors, so the fit reproduces every one of them
    // (the prior pulls each factor a little towards 1; a run's error stays under 2%).
    REQUIRE(s.runs.size() == rows.size());
    for (const auto& r : s.runs) CHECK(log_error(r) < 0.02);
    // The stock profiles were off by up to the factors' effect: the fit must be better.
    double prior = 0, fitted = 0;
    for (const auto& r : s.runs) {
        prior += std::abs(std::log(r.prior / r.measured));
        fitted += log_error(r);
    }
    CHECK(fitted < 0.2 * prior);
    // GEMM efficiency is what the larger runs spend most of their time on: recovered within 10%.
    CHECK(s.factor(StackParam::gemm) == Approx(0.8).epsilon(0.1));
    CHECK(s.constrained[idx(StackParam::gemm)]);
    // Every run sits inside one node: the NICs' efficiency is not exercised and keeps its prior.
    CHECK_FALSE(s.free[idx(StackParam::comm_inter)]);
    CHECK(s.factor(StackParam::comm_inter) == 1.0);
    CHECK(s.sd_log(StackParam::comm_inter) == Approx(model::spec_of(StackParam::comm_inter).prior_sd_log));
    CHECK(s.evidence.max_nodes == 1);
    CHECK(s.evidence.max_gpus == 8);

    // One run: at most one parameter, said in the notes.
    std::vector<model::ValidationRow> one{rows[1]};
    const auto single = sim::fit_stack(one, opt);
    int freed = 0;
    for (bool f : single.stack.free) freed += f ? 1 : 0;
    CHECK(freed == 1);
    CHECK(std::any_of(single.stack.notes.begin(), single.stack.notes.end(),
                      [](const std::string& n) { return n.find("single run") != std::string::npos; }));
    CHECK(log_error(single.stack.runs[0]) < 0.02);

    // The band: one node's plan inside the evidence, eight nodes' leaning on the unconstrained
    // network across nodes.
    auto one_node = rows[5].plan; // 8 GPUs, tp 2, dp 4
    one_node.hardware = model::apply_stack(one_node.hardware, s);
    auto eight_nodes = one_node;
    eight_nodes.cluster.nodes = 8;
    eight_nodes.parallel.dp = 32;
    eight_nodes.training.global_batch = 512;
    const auto b1 = sim::stack_band(one_node, s);
    const auto b8 = sim::stack_band(eight_nodes, s);
    // Eight nodes are not "beyond" the runs by a list: the band widens through the plan's
    // sensitivity to the network across nodes, whose factor the runs left at its prior's width.
    CHECK(b1.beyond.empty());
    CHECK(b8.beyond.empty());
    CHECK(b8.sd_log > b1.sd_log);
    CHECK(b8.prior_var > b1.prior_var);
    CHECK(b1.time_p10 < 1.0);
    CHECK(b1.time_p90 > 1.0);
    // p10 / p90 are z(0.9) = 1.2816 sd either side in log time.
    CHECK(std::log(b1.time_p90) == Approx(1.2815515655 * b1.sd_log));
}

TEST_CASE("validate with a fitted stack: rows that are runs of the fit are flagged and left out of the summary",
          "[stack]") {
    using namespace trainsim;
    test::ScratchDir dir;
    auto runs = load_lines(dir, {run_line("a", 2, 2, 1, 4, 16), run_line("b", 2, 1, 1, 1, 8)}, "runs.csv");
    std::array<double, model::kStackParams> truth{};
    truth.fill(1.0);
    truth[idx(StackParam::gemm)] = 0.85;
    measure_with(runs, truth);
    auto rest = load_lines(dir, {run_line("a", 2, 2, 1, 4, 16), run_line("x", 8, 8, 1, 4, 32)}, "rest.csv");
    measure_with(rest, truth);
    sim::StackFitOptions opt;
    const auto fit = sim::fit_stack(runs, opt);
    auto stack = std::make_shared<const model::StackProfile>(fit.stack);
    sim::apply_stack_to_rows(rest, stack);
    const auto rep = sim::validate_rows(rest, "", 2, nullptr, {}, sim::stack_band_hook(stack, nullptr), {"a", "b"});
    REQUIRE(rep.rows.size() == 2);
    CHECK(rep.rows[0].in_fit);
    CHECK_FALSE(rep.rows[1].in_fit);
    CHECK(rep.in_fit == 1);
    CHECK(rep.overall.n == 1);
    CHECK(rep.rows[1].has_band);
    // The row's band is the fit's, widened to span the uncalibrated one only where the plan is
    // beyond the runs (here none is given, so it is stack_band's own): p90 / p10 = exp(2 z sd).
    const auto sb = sim::stack_band(rest[1].plan, *stack);
    CHECK(rep.rows[1].predicted_p90 / rep.rows[1].predicted_p10 == Approx(std::exp(2 * 1.2815515655 * sb.sd_log)));
    // tp 8 on 8 GPUs is beyond runs of tp <= 2 and 2 GPUs: said.
    CHECK_FALSE(rep.rows[1].out_of_domain.empty());
    const auto j = sim::report_json(rep);
    CHECK(j["rows"][0]["in_fit"] == true);
    CHECK(j["summary"]["in_fit"] == 1);
}

TEST_CASE("parallel.stack applies a stack profile to the plan's hardware, and a broken one is named", "[stack][loader]") {
    using namespace trainsim;
    test::ScratchDir dir;
    {
        std::ofstream out(dir / "ours.yaml");
        out << "stack_profile: 1\nname: ours\nfactors:\n  gemm_efficiency: 0.5\n";
    }
    const std::string scenario = "model: llama2-7b\ntraining: {tokens: 1B, seq_len: 4096, global_batch: 64}\n"
                                 "parallel: {tp: 8, stack: ours.yaml}\ncluster: {gpu: a100-sxm-80gb, nodes: 1}\n";
    {
        std::ofstream out(dir / "s.yaml");
        out << scenario;
    }
    model::LoadOptions opts;
    opts.data_dir = TRAINSIM_TEST_DATA_DIR;
    const auto sc = model::load_scenario(dir / "s.yaml", opts);
    const auto stock = model::resolve_profile("a100-sxm-80gb", dir.path(), TRAINSIM_TEST_DATA_DIR);
    REQUIRE(sc.plans.front().stack);
    CHECK(sc.plans.front().stack->name == "ours");
    CHECK(sc.plans.front().hardware.gemm_efficiency.at(model::Precision::bf16) ==
          Approx(0.5 * stock.gemm_efficiency.at(model::Precision::bf16)));
    {
        std::ofstream out(dir / "ours.yaml");
        out << "stack_profile: 1\nname: ours\nfactors:\n  gemm_efficiency: 7\n";
    }
    try {
        (void)model::load_scenario(dir / "s.yaml", opts);
        FAIL("a stack factor out of bounds must not load");
    } catch (const model::ScenarioError& e) {
        const auto& d = e.diagnostics();
        REQUIRE(d.size() == 2);
        CHECK(d[0].key == "parallel.stack");
        CHECK(d[0].line == 3);
        CHECK(d[1].key == "factors.gemm_efficiency");
        CHECK(d[1].line == 4);
    }
}

namespace {
struct Output {
    int rc = 0;
    std::string out;
};
Output run(const std::string& args) {
    Output o;
    const std::string cmd = fmt::format("{} {} 2>/dev/null", TRAINSIM_EXE, args);
    FILE* p = ::popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[4096];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) o.out.append(buf, n);
    const int status = ::pclose(p);
    o.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return o;
}
} // namespace

TEST_CASE("trainsim fit-stack writes a profile --stack reads, and validate --fit-on reports the fit and flags its runs",
          "[stack][cli]") {
    using namespace trainsim;
    test::ScratchDir dir;
    {
        std::ofstream out(dir / "runs.csv");
        out << kHeader << "\n" << run_line("r1", 2, 2, 1, 4, 16, 1024, 30000) << "\n"
            << run_line("r2", 2, 1, 1, 2, 16, 1024, 28000) << "\n";
        std::ofstream rest(dir / "rest.csv");
        rest << kHeader << "\n" << run_line("r1", 2, 2, 1, 4, 16, 1024, 30000) << "\n"
             << run_line("x", 4, 4, 1, 4, 16, 1024, 25000) << "\n";
    }
    const auto stack = (dir / "ours.yaml").string();
    auto fit = run(fmt::format("fit-stack {} --out {} --json", (dir / "runs.csv").string(), stack));
    REQUIRE(fit.rc == 0);
    const auto j = nlohmann::json::parse(fit.out);
    CHECK(j["runs"].size() == 2);
    CHECK(j["parameters"]["gemm_efficiency"]["prior"] == 1.0);
    CHECK(j["parameters"]["comm_inter_node"]["free"] == false);
    const auto written = model::load_stack_profile(stack);
    CHECK(written.runs.size() == 2);
    // Not replaced without --force.
    CHECK(run(fmt::format("fit-stack {} --out {}", (dir / "runs.csv").string(), stack)).rc == 2);

    auto val = run(fmt::format("validate {} --fit-on {} --json", (dir / "rest.csv").string(),
                               (dir / "runs.csv").string()));
    REQUIRE(val.rc == 0);
    const auto v = nlohmann::json::parse(val.out);
    CHECK(v["rows"][0]["in_fit"] == true);
    CHECK(v["rows"][1]["in_fit"] == false);
    CHECK(v["summary"]["in_fit"] == 1);
    CHECK(v["summary"]["n"] == 1);
    CHECK(v["stack"]["parameters"].contains("host_time"));

    auto with_stack = run(fmt::format("validate {} --stack {} --json", (dir / "rest.csv").string(), stack));
    REQUIRE(with_stack.rc == 0);
    const auto w = nlohmann::json::parse(with_stack.out);
    // The stack's predictions are the same whether fitted here or read back from its file.
    CHECK(w["rows"][1]["predicted_tokens_per_s_per_gpu"].get<double>() ==
          Approx(v["rows"][1]["predicted_tokens_per_s_per_gpu"].get<double>()).epsilon(1e-9));
    CHECK(run(fmt::format("validate {} --stack {}", (dir / "rest.csv").string(), (dir / "none.yaml").string())).rc == 2);
}

TEST_CASE("fit-stack takes the runs' node from the command line as validate does, checked as its keys",
          "[stack][cli]") {
    using namespace trainsim;
    test::ScratchDir dir;
    {
        std::ofstream out(dir / "runs.csv");
        out << kHeader << "\n" << run_line("r1", 2, 2, 1, 4, 16, 1024, 30000) << "\n"
            << run_line("r2", 2, 1, 1, 2, 16, 1024, 28000) << "\n";
    }
    const auto runs = (dir / "runs.csv").string();
    // Two GPUs per node put each 2-GPU run on one node; one GPU per node puts it on two: the runs
    // then exercise the inter-node network, as validate --gpus-per-node 1 would simulate them.
    const auto one = run(fmt::format("fit-stack {} --json", runs));
    const auto two = run(fmt::format("fit-stack {} --gpus-per-node 1 --json", runs));
    REQUIRE(one.rc == 0);
    REQUIRE(two.rc == 0);
    const auto j1 = nlohmann::json::parse(one.out), j2 = nlohmann::json::parse(two.out);
    CHECK(j1["evidence"]["max_nodes"] == 1);
    CHECK(j2["evidence"]["max_nodes"] == 2);
    // Checked as cluster.gpus_per_node / cluster.nic_rate are.
    const auto bad = test::run_trainsim(fmt::format("fit-stack {} --gpus-per-node 0", runs), true);
    CHECK(bad.rc == 2);
    CHECK(bad.out.find("--gpus-per-node") != std::string::npos);
    const auto rate = test::run_trainsim(fmt::format("fit-stack {} --nic-rate fast", runs), true);
    CHECK(rate.rc == 2);
    CHECK(rate.out.find("--nic-rate") != std::string::npos);
}
