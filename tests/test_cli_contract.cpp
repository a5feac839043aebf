// The trainsim executable as users' budgeting scripts see it: JSON field names, exit codes, and
// the arithmetic that ties days, GPU-hours and money to the simulated throughput.
#include "cli_runner.hpp"
#include "scratch_dir.hpp"
#include "trainsim/model/input/validation_set.hpp"
#include "trainsim/sim/run/estimate.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

using trainsim::test::run_trainsim;

const char* const kFields[] = {"name", "step_time_s", "tokens_per_s_per_gpu", "mfu", "memory_per_gpu_gib", "fits",
                               "days_to_train", "gpu_hours", "cost", "currency",
                               // Energy (issue #18 item 5), null when unknown.
                               "pue", "energy_kwh", "energy_kwh_per_million_tokens", "avg_power_w_per_gpu",
                               "facility_power_kw", "energy_cost", "energy_currency", "co2_kg"};

} // namespace

TEST_CASE("every question scenario prints days, GPU-hours and cost in JSON", "[cli][contract]") {
    int files = 0;
    for (const auto& entry : fs::directory_iterator(fs::path(TRAINSIM_TEST_DATA_DIR) / "questions")) {
        if (entry.path().extension() != ".yaml") continue;
        ++files;
        CAPTURE(entry.path().string());
        const auto r = run_trainsim("compare --json '" + entry.path().string() + "'");
        const auto j = nlohmann::json::parse(r.out);
        REQUIRE(j.contains("plans"));
        bool all_fit = true;
        int fitting = 0;
        for (const auto& p : j["plans"]) {
            for (const char* f : kFields) CHECK(p.contains(f));
            // The memory parts add up to the peak: the optimizer step's temporaries take the
            // place of the activations it runs after (docs/model.md "Memory").
            const auto& m = p["memory"];
            const auto gib = [&](const char* k) { return m[k].get<double>(); };
            CHECK(gib("weights_gib") + gib("gradients_gib") + gib("optimizer_gib") +
                      std::max(gib("activations_gib"), gib("step_transient_gib")) + gib("fp8_buffers_gib") +
                      gib("workspace_gib") + gib("reserved_gib") ==
                  Approx(gib("total_gib")).epsilon(1e-9));
            CHECK(p["memory_per_gpu_gib"].get<double>() == Approx(gib("total_gib")).epsilon(1e-9));
            all_fit = all_fit && p["fits"].get<bool>();
            if (!p["fits"].get<bool>()) {
                CHECK(p["days_to_train"].is_null());
                CHECK(p["memory_per_gpu_gib"].get<double>() > p["memory"]["capacity_gib"].get<double>());
                continue;
            }
            ++fitting;
            // tokens/s/GPU = global_batch * seq_len / (step_time * GPUs)  (design.md "Definitions")
            const double tps = p["global_batch"].get<double>() * p["seq_len"].get<double>() /
                               (p["step_time_s"].get<double>() * p["num_gpus"].get<double>());
            CHECK(p["tokens_per_s_per_gpu"].get<double>() == Approx(tps).epsilon(1e-9));
            // days = tokens / (tokens/s) / 86400; GPU-hours = days * 24 * GPUs; cost = GPU-h * price
            const double days = p["tokens"].get<double>() / (tps * p["num_gpus"].get<double>()) / 86400.0;
            CHECK(p["days_to_train"].get<double>() == Approx(days).epsilon(1e-9));
            CHECK(p["gpu_hours"].get<double>() == Approx(days * 24.0 * p["num_gpus"].get<double>()).epsilon(1e-9));
            // A plan whose file quotes no price (a card with no published listing, issue #42) has
            // every money figure null, never 0 (docs/report.md); the rest of its contract holds.
            const bool priced = !p["price_per_gpu_hour"].is_null();
            if (!priced)
                for (const char* k : {"cost", "cost_prorated", "expected_cost", "cost_per_million_tokens", "cost_p10",
                                      "cost_p90", "billing"})
                    CHECK(p[k].is_null());
            // cost as billed (issue #18): whole billing units; the pro-rated cost is GPU-h x price.
            if (priced) {
                CHECK(p["cost_prorated"].get<double>() ==
                      Approx(p["gpu_hours"].get<double>() * p["price_per_gpu_hour"].get<double>()).epsilon(1e-9));
                CHECK(p["cost"].get<double>() >= p["cost_prorated"].get<double>() * (1 - 1e-12));
                CHECK(p["cost"].get<double>() > 0);
                CHECK(p["unused_fraction"].get<double>() ==
                      Approx(1 - p["cost_prorated"].get<double>() / p["cost"].get<double>()).margin(1e-9));
            }
            // The whole run's stretch in JSON: 1 + the diurnal 1% + stragglers (ByteDance's
            // 0.104 / 0.896 with more than one GPU, none with one) + BLOOM's 0.7% evaluations.
            const double stragglers = p["num_gpus"].get<int>() > 1 ? 0.104 / 0.896 : 0.0;
            CHECK(p["run"]["stragglers"].get<double>() == Approx(stragglers));
            CHECK(p["run"]["stretch"].get<double>() == Approx(1.0 + 0.01 + stragglers + 0.007));
            CHECK(p["expected_days"].get<double>() >= p["days_to_train"].get<double>() * p["run"]["stretch"].get<double>());
            // Error bands (docs/trust.md): p10 / p90 beside each contract field, one time factor
            // for every time-like figure and its inverse for the throughput.
            REQUIRE(p.contains("band"));
            for (const char* k : {"basis", "rows", "regime"}) CHECK(p["band"].contains(k));
            CHECK(p.contains("out_of_domain"));
            const double f10 = p["days_to_train_p10"].get<double>() / p["days_to_train"].get<double>();
            const double f90 = p["days_to_train_p90"].get<double>() / p["days_to_train"].get<double>();
            CHECK(f10 < f90);
            CHECK(f10 > 0);
            for (const char* k : {"step_time_s", "gpu_hours", "expected_days"}) {
                CAPTURE(k);
                CHECK(p[std::string(k) + "_p10"].get<double>() == Approx(f10 * p[k].get<double>()).epsilon(1e-9));
                CHECK(p[std::string(k) + "_p90"].get<double>() == Approx(f90 * p[k].get<double>()).epsilon(1e-9));
            }
            // Money at the band's ends is billed too: the band's days at the price, rounded up to
            // whole billing units (seconds on demand, whole terms for a commitment).
            for (const auto& [k, f] : {std::pair{"cost_p10", f10}, std::pair{"cost_p90", f90}}) {
                if (!priced) break;
                CAPTURE(k);
                CHECK(p[k].get<double>() >= f * p["cost_prorated"].get<double>() * (1 - 1e-12));
                if (p["billing"]["steady"]["commitment"] == "on_demand" && p["billing"]["increment"] == "second")
                    CHECK(p[k].get<double>() == Approx(f * p["cost_prorated"].get<double>()).epsilon(1e-5));
            }
            if (priced) CHECK(p["cost_p10"].get<double>() <= p["cost_p90"].get<double>());
            CHECK(p["tokens_per_s_per_gpu_p10"].get<double>() ==
                  Approx(p["tokens_per_s_per_gpu"].get<double>() / f90).epsilon(1e-9));
            CHECK(p["tokens_per_s_per_gpu_p90"].get<double>() ==
                  Approx(p["tokens_per_s_per_gpu"].get<double>() / f10).epsilon(1e-9));
            CHECK(p["mfu"].get<double>() > 0.05);
            CHECK(p["mfu"].get<double>() < 1.0);
            // Every shipped profile gives its power: energy = facility power x expected wall clock.
            REQUIRE(p["energy_kwh"].is_number());
            CHECK(p["energy_kwh"].get<double>() ==
                  Approx(p["facility_power_kw"].get<double>() * p["expected_days"].get<double>() * 24).epsilon(1e-9));
            CHECK(p["energy_kwh_per_million_tokens"].get<double>() ==
                  Approx(p["energy_kwh"].get<double>() / (p["tokens"].get<double>() / 1e6)).epsilon(1e-9));
            CHECK(p["pue"].get<double>() >= 1.0);
        }
        CHECK(fitting > 0);
        CHECK(r.rc == (all_fit ? 0 : 3));
    }
    CHECK(files >= 6);
}

TEST_CASE("the optimizer step's temporaries set the peak when they outgrow the activations", "[cli][contract]") {
    // Llama-2 7B, FP16, ZeRO stage 0 on Megatron-DeepSpeed (DeepSpeed's FP16_Optimizer), tp 2 on
    // 8 A100 80GB: at the step the FP16 gradients (2 B per local parameter) are joined by their
    // FP32 copies and flat buffer (8 B), more than one micro-batch's activations under full
    // recompute.
    const fs::path dir = fs::temp_directory_path() / ("trainsim-step-peak-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const fs::path yaml = dir / "s.yaml";
    std::ofstream(yaml) << "model: llama2-7b\ntraining: {tokens: 10B, seq_len: 2048, global_batch: 64, micro_batch: 1}\n"
                           "parallel: {tp: 2, pp: 1, dp: auto, recompute: full, framework: megatron-deepspeed}\n"
                           "precision: fp16\ncluster: {gpu: a100-sxm-80gb, nodes: 1, gpus_per_node: 8}\n";
    const auto r = run_trainsim("simulate --json '" + yaml.string() + "'");
    fs::remove_all(dir);
    REQUIRE(r.rc == 0);
    const auto j = nlohmann::json::parse(r.out);
    const auto& m = j["memory"];
    const auto gib = [&](const char* k) { return m[k].get<double>(); };
    CHECK(gib("step_transient_gib") == Approx(4.0 * gib("gradients_gib")).epsilon(1e-9));
    REQUIRE(gib("step_transient_gib") > gib("activations_gib"));
    CHECK(gib("total_gib") == Approx(gib("weights_gib") + gib("gradients_gib") + gib("optimizer_gib") +
                                     gib("step_transient_gib") + gib("fp8_buffers_gib") + gib("workspace_gib") +
                                     gib("reserved_gib"))
                                  .epsilon(1e-9));
    CHECK(j["memory_per_gpu_gib"].get<double>() == Approx(gib("total_gib")).epsilon(1e-9));
}

TEST_CASE("one plan prints a single JSON object, bad input exits 2", "[cli][contract]") {
    const auto one = run_trainsim("simulate --json '" + std::string(TRAINSIM_TEST_DATA_DIR) + "/../bench/llama2-70b-1024xh100.yaml'");
    CHECK(one.rc == 0);
    const auto j = nlohmann::json::parse(one.out);
    CHECK(j.is_object());
    CHECK_FALSE(j.contains("plans"));
    CHECK(j["name"].is_string());
    CHECK(j.contains("framework"));
    CHECK(j["framework"].is_null()); // the scenario writes no parallel.framework
    // The host CPU the host timeline ran at: the h100-sxm profile's DGX H100 Xeon, 3.8 / 3.5 GHz.
    CHECK(j["host_cpu_speed"].get<double>() == Approx(1.09));
    CHECK(run_trainsim("simulate /nonexistent/file.yaml").rc == 2);
    CHECK(run_trainsim("simulate").rc == 2);
    CHECK(run_trainsim("no-such-command").rc == 2);
}

TEST_CASE("prices: machine-months and commitment discounts", "[pricing]") {
    using namespace trainsim;
    model::Pricing p;
    p.basis = model::PriceBasis::gpu_hour;
    p.rate = 2.0;
    CHECK(sim::price_per_gpu_hour(p, 8) == Approx(2.0));
    p.commitment = model::Commitment::annual;
    p.discounts[model::Commitment::annual] = 0.15;
    CHECK(sim::price_per_gpu_hour(p, 8) == Approx(1.7));
    // An 8-GPU machine at 14,600 per month: 14,600 / (8 x 730 h) = 2.5 per GPU-hour, 15% off.
    p.basis = model::PriceBasis::machine_month;
    p.rate = 14600.0;
    CHECK(sim::price_per_gpu_hour(p, 8) == Approx(2.5 * 0.85));
    // A 4-GPU machine at the same monthly price: its 4 GPUs share it, 5.0 per GPU-hour (issue #19:
    // it used to divide by 8 whatever the machine, halving the cost).
    CHECK(sim::price_per_gpu_hour(p, 4) == Approx(5.0 * 0.85));
}

TEST_CASE("collective on two nodes names NCCL's choice and what a forced tree would give", "[cli][network]") {
    // 2 x DGX A100, 1 GiB: NCCL's tuner takes the NIC-bound ring (docs/network.md, "Which
    // algorithm NCCL runs"); the tree, faster here, is what NCCL_ALGO=Tree would run.
    const auto r = run_trainsim("collective --gpu a100-sxm-80gb --gpus 16 --size 1GiB");
    REQUIRE(r.rc == 0);
    CHECK(r.out.find("algorithm  ring") != std::string::npos);
    CHECK(r.out.find("NCCL_ALGO=Tree would take") != std::string::npos);
    // Forced, the tree is what runs, and no note.
    const auto forced = run_trainsim("collective --gpu a100-sxm-80gb --gpus 16 --size 1GiB --algo tree");
    REQUIRE(forced.rc == 0);
    CHECK(forced.out.find("algorithm  tree") != std::string::npos);
    CHECK(forced.out.find("NCCL_ALGO=Tree") == std::string::npos);
    // One node: NCCL's choice is the fastest, nothing to add.
    const auto one = run_trainsim("collective --gpu a100-sxm-80gb --gpus 8 --size 1GiB");
    REQUIRE(one.rc == 0);
    CHECK(one.out.find("NCCL_ALGO=Tree") == std::string::npos);
}

TEST_CASE("validate: a stated cluster that is not one exits 2 naming the option", "[cli][validate]") {
    const fs::path csv = fs::path(TRAINSIM_SOURCE_DIR) / ".." / "shared" / "validation" / "published-dev.csv";
    REQUIRE(fs::exists(csv));
    const auto neg = run_trainsim("validate '" + csv.string() + "' --nics-per-node -3", true);
    CHECK(neg.rc == 2);
    CHECK(neg.out.find("--nics-per-node") != std::string::npos);
    // An explicit value that happens to be the "unset" sentinel is checked too.
    const auto sentinel = run_trainsim("validate '" + csv.string() + "' --nics-per-node -1", true);
    CHECK(sentinel.rc == 2);
    CHECK(sentinel.out.find("--nics-per-node") != std::string::npos);
    CHECK(run_trainsim("validate '" + csv.string() + "' --gpus-per-node 0").rc == 2);
    const auto unit = run_trainsim("validate '" + csv.string() + "' --nic-rate 3furlongs", true);
    CHECK(unit.rc == 2);
    CHECK(unit.out.find("--nic-rate") != std::string::npos);
    const auto ok = run_trainsim("validate '" + csv.string() + "' --json --row 2 --nics-per-node 4 --nic-rate 200Gbit/s");
    REQUIRE(ok.rc == 0);
    // Where each field of the node came from, per row: the command line's two, the profile's GPUs.
    const auto origin = nlohmann::json::parse(ok.out).at("rows").at(0).at("cluster_origin");
    CHECK(origin.at("nics_per_node") == "command line");
    CHECK(origin.at("nic_rate") == "command line");
    CHECK(origin.at("gpus_per_node") == "profile");
}

TEST_CASE("validate: a broken clusters file in the data folder exits 2 naming its file, line and key",
          "[cli][validate]") {
    const fs::path csv = fs::path(TRAINSIM_SOURCE_DIR) / ".." / "shared" / "validation" / "published-dev.csv";
    REQUIRE(fs::exists(csv));
    trainsim::test::ScratchDir dir;
    fs::copy(fs::path(TRAINSIM_SOURCE_DIR) / "scenarios", dir / "data", fs::copy_options::recursive);
    {
        std::ofstream out(dir / "data" / "validation" / "clusters.yaml");
        out << "clusters:\n  - source: Narayanan\n    nic_rate: 200Gbit/s\n    stated: x\n    nics: 8\n";
    }
    const auto bad = run_trainsim("validate '" + csv.string() + "' --data-dir '" + (dir / "data").string() + "'", true);
    CHECK(bad.rc == 2);
    CHECK(bad.out.find("clusters.yaml:5:5: clusters[0].nics: unknown key 'nics'") != std::string::npos);
    // Without the file the rows take the profile's node, and validate says so.
    fs::remove(dir / "data" / "validation" / "clusters.yaml");
    const auto none =
        run_trainsim("validate '" + csv.string() + "' --row 2 --data-dir '" + (dir / "data").string() + "'", true);
    CHECK(none.rc == 0);
    CHECK(none.out.find("note: no ") != std::string::npos);
}

TEST_CASE("validate --json --row reports just those rows with the issue's fields and an unknown id exits 2",
          "[cli][contract][validate]") {
    const fs::path csv = fs::path(TRAINSIM_SOURCE_DIR) / ".." / "shared" / "validation" / "published-dev.csv";
    REQUIRE(fs::exists(csv));
    const auto r = run_trainsim("validate '" + csv.string() + "' --json --row 14 --row 40");
    REQUIRE(r.rc == 0);
    const auto j = nlohmann::json::parse(r.out);
    REQUIRE(j.at("rows").size() == 2);
    for (const auto& row : j.at("rows")) {
        for (const char* f : {"id", "status", "predicted_tokens_per_s_per_gpu", "measured_tokens_per_s_per_gpu",
                              "error_pct", "reason"})
            CHECK(row.contains(f));
        const double p = row.at("predicted_tokens_per_s_per_gpu").get<double>();
        const double m = row.at("measured_tokens_per_s_per_gpu").get<double>();
        CHECK(row.at("error_pct").get<double>() == Approx((p - m) / m * 100.0).epsilon(1e-9));
    }
    CHECK(j.at("rows")[0].at("id") == "14");
    CHECK(j.at("rows")[1].at("id") == "40");
    // Each simulated row carries its step: the breakdown's categories add up to the step time
    // (comm_slowdown_s is part of the compute categories, not beside them), and the throughput is
    // global_batch x seq_len / (step_time x num_gpus) with the row's cells: row 14 is 1536 x 2048
    // tokens on 384 GPUs, row 40 128 x 4096 on 8.
    const std::pair<double, double> tokens_gpus[] = {{1536.0 * 2048.0, 384.0}, {128.0 * 4096.0, 8.0}};
    for (std::size_t i = 0; i < 2; ++i) {
        const auto& row = j.at("rows")[i];
        const double step = row.at("step_time_s").get<double>();
        REQUIRE(step > 0.0);
        double sum = 0.0;
        for (const auto& [k, v] : row.at("breakdown").items())
            if (k != "comm_slowdown_s") sum += v.get<double>();
        CHECK(sum == Approx(step).epsilon(1e-9));
        CHECK(row.at("host_busy_s").get<double>() > 0.0);
        CHECK(row.at("predicted_tokens_per_s_per_gpu").get<double>() ==
              Approx(tokens_gpus[i].first / (step * tokens_gpus[i].second)).epsilon(1e-9));
    }
    CHECK(j.at("summary").at("n") == 2);
    CHECK(run_trainsim("validate '" + csv.string() + "' --json --row 9999").rc == 2);
}

TEST_CASE("validate --by groups the errors by the simulated plans' properties, and an unknown key exits 2",
          "[cli][contract][validate]") {
    const fs::path csv = fs::path(TRAINSIM_SOURCE_DIR) / "tests" / "data" / "published-torchtitan.csv";
    REQUIRE(fs::exists(csv));
    const auto r = run_trainsim("validate '" + csv.string() +
                                "' --json --by tp --by tp:cp --by tokens_per_gpu --by host_bound --by regime");
    REQUIRE(r.rc == 0);
    const auto j = nlohmann::json::parse(r.out);
    const auto& by = j.at("summary").at("by");
    const int n = j.at("summary").at("n").get<int>();
    // Expected group sizes from the file itself: its tp column (all written) and its batch
    // (global batch x sequence length / GPUs, in the documented factor-of-4 buckets).
    std::map<int, int> tp_rows;
    std::map<std::string, int> token_rows;
    for (const auto& row : trainsim::model::load_validation_csv(csv, TRAINSIM_TEST_DATA_DIR)) {
        if (!row.skip_reason.empty()) continue;
        ++tp_rows[row.plan.parallel.tp];
        const double t = static_cast<double>(row.plan.training.global_batch) * row.plan.training.seq_len /
                         row.plan.num_gpus();
        ++token_rows[t <= 2048    ? "<=2k"
                     : t <= 8192   ? "2k-8k"
                     : t <= 32768  ? "8k-32k"
                     : t <= 131072 ? "32k-128k"
                                   : ">128k"];
    }
    int sum = 0, prev_tp = 0;
    for (const auto& g : by.at("tp")) {
        const int tp = g.at("tp").get<int>();
        CHECK(tp > prev_tp); // ascending
        prev_tp = tp;
        CHECK(g.at("n").get<int>() == tp_rows[tp]);
        sum += g.at("n").get<int>();
    }
    CHECK(sum == n);
    int cross = 0;
    for (const auto& g : by.at("tp:cp")) {
        CHECK(g.contains("tp"));
        CHECK(g.contains("cp"));
        cross += g.at("n").get<int>();
    }
    CHECK(cross == n);
    for (const auto& g : by.at("tokens_per_gpu")) {
        CAPTURE(g.dump());
        CHECK(g.at("n").get<int>() == token_rows[g.at("tokens_per_gpu").get<std::string>()]);
    }
    // The host-bound share of each row's own step (its breakdown in the same JSON).
    std::map<std::string, int> host_rows;
    for (const auto& row : j.at("rows")) {
        if (row.at("status") == "skipped") continue;
        const double share = row.at("breakdown").at("host_bound_s").get<double>() / row.at("step_time_s").get<double>();
        ++host_rows[share < 0.01 ? "<1%" : share < 0.10 ? "1-10%" : ">=10%"];
    }
    for (const auto& g : by.at("host_bound"))
        CHECK(g.at("n").get<int>() == host_rows[g.at("host_bound").get<std::string>()]);
    // Band coverage per regime: each row's regime and band from the same JSON, and the groups
    // together give the file's coverage.
    std::map<std::string, std::pair<int, int>> regime_rows; // regime -> (rows, inside)
    for (const auto& row : j.at("rows")) {
        if (row.at("status") == "skipped") continue;
        const double m = row.at("measured_tokens_per_s_per_gpu").get<double>();
        auto& [rows, inside] = regime_rows[row.at("regime").get<std::string>()];
        ++rows;
        inside += m >= row.at("predicted_p10").get<double>() && m <= row.at("predicted_p90").get<double>() ? 1 : 0;
    }
    double covered = 0;
    for (const auto& g : by.at("regime")) {
        const auto& [rows, inside] = regime_rows[g.at("regime").get<std::string>()];
        CHECK(g.at("n").get<int>() == rows);
        CHECK(g.at("band_coverage").get<double>() == Approx(static_cast<double>(inside) / rows));
        covered += g.at("band_coverage").get<double>() * rows;
    }
    CHECK(covered / n == Approx(j.at("summary").at("band_coverage").get<double>()));
    const auto bad = run_trainsim("validate '" + csv.string() + "' --by tq", true);
    CHECK(bad.rc == 2);
    CHECK(bad.out.find("--by tq: unknown key 'tq'") != std::string::npos);
}

TEST_CASE("validate --split-accumulation fits each layout's line through its rows' own step times",
          "[cli][contract][validate]") {
    const fs::path csv = fs::path(TRAINSIM_SOURCE_DIR) / ".." / "shared" / "validation" / "vtrain-dev.csv";
    REQUIRE(fs::exists(csv));
    const auto r = run_trainsim("validate '" + csv.string() + "' --json --split-accumulation");
    REQUIRE(r.rc == 0);
    const auto j = nlohmann::json::parse(r.out);
    // Each row's measured and simulated step time, from the same JSON: the simulated time, and
    // the measured one that the measured throughput gives for the same tokens.
    std::map<std::string, std::pair<double, double>> times;
    for (const auto& row : j.at("rows")) {
        if (row.at("status") != "ok") continue;
        const double sim = row.at("step_time_s").get<double>();
        const double meas = sim * row.at("predicted_tokens_per_s_per_gpu").get<double>() /
                            row.at("measured_tokens_per_s_per_gpu").get<double>();
        times[row.at("id").get<std::string>()] = {meas, sim};
    }
    const auto& splits = j.at("summary").at("accumulation_split");
    REQUIRE(splits.size() > 0);
    std::map<std::string, int> seen;
    for (const auto& g : splits) {
        CAPTURE(g.at("label").get<std::string>());
        const auto ids = g.at("ids").get<std::vector<std::string>>();
        const auto ga = g.at("grad_accum").get<std::vector<int>>();
        REQUIRE(ids.size() == ga.size());
        CHECK(std::is_sorted(ga.begin(), ga.end()));
        CHECK(ga.front() < ga.back());
        // Least squares with an intercept: the residuals sum to zero, and so do they weighted by
        // grad_accum (the normal equations), on both sides.
        for (const auto& [side, a, b] : {std::tuple{0, "measured_per_step_s", "measured_per_microbatch_s"},
                                         std::tuple{1, "simulated_per_step_s", "simulated_per_microbatch_s"}}) {
            const double per_step = g.at(a).get<double>(), per_mb = g.at(b).get<double>();
            double sum = 0, weighted = 0, scale = 0;
            for (std::size_t i = 0; i < ids.size(); ++i) {
                ++seen[ids[i]];
                REQUIRE(times.count(ids[i]) == 1);
                const double t = side == 0 ? times[ids[i]].first : times[ids[i]].second;
                const double res = t - per_step - ga[i] * per_mb;
                sum += res, weighted += ga[i] * res, scale += t * ga[i];
            }
            CHECK(std::abs(sum) <= 1e-9 * scale);
            CHECK(std::abs(weighted) <= 1e-9 * scale * ga.back());
        }
    }
    for (const auto& [id, n] : seen) {
        CAPTURE(id);
        CHECK(n == 2); // one group per row (counted once per side)
    }
    CHECK(run_trainsim("validate '" + csv.string() + "' --split-accumulation --row vtrain-single-0002").rc == 2);
}

TEST_CASE("validate of a file with nothing to compare exits 2 (not 0 with a 0% error), and --version", "[cli][contract]") {
    const fs::path csv = fs::path(TRAINSIM_SOURCE_DIR) / ".." / "shared" / "validation" / "published-dev.csv";
    std::ifstream in(csv);
    std::string header;
    std::getline(in, header);
    const fs::path dir = fs::temp_directory_path() / ("trainsim-empty-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const fs::path empty = dir / "header-only.csv";
    std::ofstream(empty) << header << "\n";
    const auto r = run_trainsim("validate '" + empty.string() + "' --json");
    CHECK(r.rc == 2);
    CHECK(nlohmann::json::parse(r.out).at("summary").at("n") == 0);
    fs::remove_all(dir);
    const auto v = run_trainsim("--version");
    CHECK(v.rc == 0);
    CHECK(v.out.rfind("trainsim ", 0) == 0);
}

TEST_CASE("plan marks the plans whose error bands overlap the best as tied and recommends one",
          "[cli][contract][trust]") {
    const auto r = run_trainsim("plan --model llama2-7b --gpu h100-sxm --gpus 8,64 --tokens 1T --json -q");
    REQUIRE(r.rc == 0);
    const auto j = nlohmann::json::parse(r.out);
    const auto& plans = j["plans"];
    REQUIRE(plans.size() >= 2);
    CHECK(plans[0]["tied_with_best"] == true);
    int recommended = 0;
    const double best_p90 = plans[0]["days_to_train_p90"].get<double>();
    for (std::size_t i = 0; i < plans.size(); ++i) {
        const auto& p = plans[i];
        CHECK(p["rank"] == i + 1);
        // Tied exactly when the plan's p10 is within the best plan's p90.
        CHECK(p["tied_with_best"].get<bool>() == (p["days_to_train_p10"].get<double>() <= best_p90));
        if (p["recommended"].get<bool>()) {
            ++recommended;
            CHECK(p["tied_with_best"] == true);
        }
    }
    CHECK(recommended == 1);
    // --rank p90: ordered by the pessimistic end of the band.
    const auto r90 = run_trainsim("plan --model llama2-7b --gpu h100-sxm --gpus 8,64 --tokens 1T --json -q --rank p90");
    REQUIRE(r90.rc == 0);
    const auto j90 = nlohmann::json::parse(r90.out);
    for (std::size_t i = 1; i < j90["plans"].size(); ++i)
        CHECK(j90["plans"][i - 1]["days_to_train_p90"].get<double>() <=
              j90["plans"][i]["days_to_train_p90"].get<double>());
    CHECK(j90["search"]["rank_p90"] == true);
}
