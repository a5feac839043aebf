// Money as renters pay it (issue #18): no price is "unknown", never 0; the CSV form of compare.
#include "cli_runner.hpp"
#include "scratch_dir.hpp"
#include "trainsim/sim/run/billing.hpp"
#include "trainsim/sim/run/estimate.hpp"
#include "trainsim/sim/run/run_model.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace {

using trainsim::test::run_trainsim;
using trainsim::test::ScratchDir;

// A small plan (Llama-2 7B on one 8x H100 node, 32 sequences per step) that simulates in well under
// a second; `pricing` is the scenario's pricing section (empty: none).
std::string small_scenario(const std::string& pricing) {
    return "title: billing fixture\n"
           "model: llama2-7b\n"
           "training: {tokens: 10B, seq_len: 4096, global_batch: 32, micro_batch: 1}\n"
           "parallel: {tp: 2, sequence_parallel: true, sharding: dist_opt}\n"
           "precision: bf16\n"
           "cluster: {gpu: h100-sxm, nodes: 1}\n" +
           pricing;
}

std::string write(const ScratchDir& dir, const std::string& name, const std::string& text) {
    const auto path = dir / name;
    std::ofstream(path) << text;
    return path.string();
}

} // namespace

TEST_CASE("without a price every money figure is null in JSON, 'no price' in text, never 0", "[billing][cli]") {
    ScratchDir dir;
    const auto file = write(dir, "noprice.yaml", small_scenario(""));
    const auto r = run_trainsim("simulate --json '" + file + "'");
    REQUIRE(r.rc == 0);
    const auto j = nlohmann::json::parse(r.out);
    REQUIRE(j["fits"] == true);
    CHECK(j["days_to_train"].get<double>() > 0);
    CHECK(j["gpu_hours"].get<double>() > 0);
    // The shipped error model gives bands: their money ends are unknown too.
    REQUIRE(j.contains("days_to_train_p10"));
    for (const char* k :
         {"price_per_gpu_hour", "cost", "expected_cost", "cost_per_million_tokens", "cost_p10", "cost_p90",
          "expected_cost_p10", "expected_cost_p90", "cost_per_million_tokens_p10", "cost_per_million_tokens_p90"}) {
        CAPTURE(k);
        REQUIRE(j.contains(k));
        CHECK(j[k].is_null());
    }
    const auto text = run_trainsim("simulate '" + file + "'");
    CHECK(text.rc == 0);
    CHECK(text.out.find("no price") != std::string::npos);
    CHECK(text.out.find(" USD") == std::string::npos); // no money printed at all

    // With a price, the same plan's cost is its GPU-hours at that rate, billed in whole seconds
    // (the default increment): at most one started second more on each of the 8 GPUs.
    const auto priced = write(dir, "priced.yaml", small_scenario("pricing: {rate: 2.0}\n"));
    const auto p = nlohmann::json::parse(run_trainsim("simulate --json '" + priced + "'").out);
    const double prorated = p["gpu_hours"].get<double>() * 2.0;
    CHECK(p["cost"].get<double>() >= prorated);
    CHECK(p["cost"].get<double>() <= prorated + 8 * 2.0 / 3600.0);
}

TEST_CASE("plan refuses a budget or a cost ranking without a price (exit 2)", "[billing][cli]") {
    const std::string base = "plan --model llama2-7b --gpu h100-sxm --gpus 8 --tokens 10B -q ";
    CHECK(run_trainsim(base + "--budget 1000").rc == 2);
    CHECK(run_trainsim(base + "--rank cost").rc == 2);
    // A deadline ranks by cost unless told otherwise.
    const auto d = run_trainsim(base + "--deadline-days 30", true);
    CHECK(d.rc == 2);
    CHECK(d.out.find("--rank days") != std::string::npos);
    // With a price, or ranked by days, the same requests are answered.
    const auto with_price = run_trainsim(base + "--deadline-days 30 --price 2 --json");
    REQUIRE(with_price.rc == 0);
    const auto j = nlohmann::json::parse(with_price.out);
    CHECK(j["search"]["rank"] == "cost");
    CHECK(j["plans"][0]["cost"].is_number());
    const auto by_days = run_trainsim(base + "--deadline-days 30 --rank days --json");
    REQUIRE(by_days.rc == 0);
    const auto k = nlohmann::json::parse(by_days.out);
    CHECK(k["plans"][0]["cost"].is_null());
    CHECK(k["plans"][0]["days_to_train"].get<double>() <= 30.0);
}

TEST_CASE("compare --csv: one header and one row per plan, the union of the JSON fields", "[billing][cli]") {
    ScratchDir dir;
    const auto file =
        write(dir, "two.yaml",
              small_scenario("pricing: {rate: 2.0}\n") +
                  "plans:\n  - name: fits\n  - name: too big\n    parallel: {tp: 1, sequence_parallel: false, "
                  "sharding: none}\n    training: {micro_batch: 4}\n");
    const auto r = run_trainsim("compare --csv '" + file + "'");
    CHECK(r.rc == 3); // the second plan does not fit
    std::vector<std::string> lines;
    std::string line;
    std::istringstream in(r.out);
    while (std::getline(in, line)) lines.push_back(line);
    REQUIRE(lines.size() == 3);
    // RFC 4180 cells: a quoted cell may hold commas, and "" inside it is one quote.
    auto cells = [](const std::string& l) {
        std::vector<std::string> out(1);
        bool quoted = false;
        for (std::size_t i = 0; i < l.size(); ++i) {
            const char c = l[i];
            if (quoted && c == '"' && i + 1 < l.size() && l[i + 1] == '"') {
                out.back() += '"';
                ++i;
            } else if (c == '"') {
                quoted = !quoted;
            } else if (c == ',' && !quoted) {
                out.emplace_back();
            } else {
                out.back() += c;
            }
        }
        return out;
    };
    const auto header = cells(lines[0]);
    CHECK(header.front() == "name");
    const auto json_plans = nlohmann::json::parse(run_trainsim("compare --json '" + file + "'").out)["plans"];
    const auto col = [&](const std::string& name) {
        return static_cast<std::size_t>(std::find(header.begin(), header.end(), name) - header.begin());
    };
    REQUIRE(col("cost") < header.size());
    REQUIRE(col("breakdown.forward_s") < header.size()); // nested fields as dotted columns
    const auto fits = cells(lines[1]);
    const auto big = cells(lines[2]);
    REQUIRE(fits.size() == header.size());
    REQUIRE(big.size() == header.size());
    CHECK(fits[col("name")] == "fits");
    CHECK(std::stod(fits[col("cost")]) == Approx(json_plans[0]["cost"].get<double>()).epsilon(1e-9));
    CHECK(big[col("fits")] == "false");
    CHECK(big[col("cost")].empty());                // null in JSON: an empty cell
    CHECK(big[col("breakdown.forward_s")].empty()); // a field only the fitting plan has
    CHECK(run_trainsim("compare --csv --json '" + file + "'").rc == 2);
}

TEST_CASE("misspelt names get a suggestion", "[billing][cli]") {
    const auto rank = run_trainsim("plan --model llama2-7b --gpu h100-sxm --gpus 8 --tokens 10B --rank dayz", true);
    CHECK(rank.rc == 2);
    CHECK(rank.out.find("did you mean 'days'") != std::string::npos);
    const auto gpu = run_trainsim("plan --model llama2-7b --gpu h100-sx --gpus 8 --tokens 10B", true);
    CHECK(gpu.rc == 2);
    CHECK(gpu.out.find("did you mean 'h100-sxm'") != std::string::npos);
    const auto preset = run_trainsim("plan --model llama2-7 --gpu h100-sxm --gpus 8 --tokens 10B", true);
    CHECK(preset.rc == 2);
    CHECK(preset.out.find("did you mean 'llama2-7b'") != std::string::npos);
    const auto op = run_trainsim("collective --gpu h100-sxm --op all_reduse", true);
    CHECK(op.rc == 2);
    CHECK(op.out.find("did you mean 'all_reduce'") != std::string::npos);
}

// ---- billing as charged (sim/billing.hpp), hand-computed ----

namespace {

trainsim::model::Pricing priced(trainsim::model::PriceBasis basis, double rate) {
    trainsim::model::Pricing p;
    p.basis = basis;
    p.rate = rate;
    return p;
}

} // namespace

TEST_CASE("a 40-day run on machine-months pays two whole months", "[billing]") {
    using namespace trainsim;
    // 1 machine of 8 GPUs at 100,000 per month, 40 days = 960 h: ceil(960 / 730) = 2 months.
    const auto p = priced(model::PriceBasis::machine_month, 100000.0);
    const auto b = sim::bill(p, model::Commitment::on_demand, 40 * 24.0, 1, 8);
    CHECK(b.unit == "machine-month");
    CHECK(b.billed_units == Approx(2.0));
    CHECK(b.billed_hours == Approx(1460.0));
    CHECK(b.cost == Approx(200000.0));
    CHECK(b.cost_prorated == Approx(960.0 / 730.0 * 100000.0));    // 131,506.85
    CHECK(b.unused_fraction == Approx((1460.0 - 960.0) / 1460.0)); // 34.2% of the bill unused
    // Two machines pay twice; 730 h exactly pays one month, not two.
    CHECK(sim::bill(p, model::Commitment::on_demand, 40 * 24.0, 2, 8).cost == Approx(400000.0));
    CHECK(sim::bill(p, model::Commitment::on_demand, 730.0, 1, 8).billed_units == Approx(1.0));
    CHECK(sim::bill(p, model::Commitment::on_demand, 730.0, 1, 8).unused_fraction == Approx(0.0).margin(1e-12));
}

TEST_CASE("an annual term used for 40 days is paid in full at its discount", "[billing]") {
    using namespace trainsim;
    // 2 machines x 8 GPUs at 2.00 per GPU-hour, 30% off for a year: 8760 h x 16 GPUs x 1.40.
    auto p = priced(model::PriceBasis::gpu_hour, 2.0);
    p.discounts[model::Commitment::annual] = 0.30;
    const auto b = sim::bill(p, model::Commitment::annual, 40 * 24.0, 2, 8);
    CHECK(b.unit == "GPU-hour");
    CHECK(b.billed_hours == Approx(8760.0));
    CHECK(b.billed_units == Approx(8760.0 * 16));
    CHECK(b.rate_after_discount == Approx(1.40));
    CHECK(b.cost == Approx(8760.0 * 16 * 1.40));                   // 196,224
    CHECK(b.unused_fraction == Approx((8760.0 - 960.0) / 8760.0)); // 89% of the year unused
    CHECK(b.cost_prorated == Approx(960.0 * 16 * 1.40));
    // On demand the same 40 days cost 960 h x 16 x 2.00 = 30,720: far cheaper than the year.
    CHECK(sim::bill(p, model::Commitment::on_demand, 960.0, 2, 8).cost == Approx(30720.0));
    // A quarterly term on machine-months: 100 days = 2400 h is two quarters (2 x 3 x 730 h).
    auto q = priced(model::PriceBasis::machine_month, 1000.0);
    q.discounts[model::Commitment::quarterly] = 0.10;
    const auto bq = sim::bill(q, model::Commitment::quarterly, 2400.0, 3, 8);
    CHECK(bq.billed_units == Approx(6.0 * 3)); // 6 months x 3 machines
    CHECK(bq.cost == Approx(18.0 * 900.0));
}

TEST_CASE("hourly bases pay whole increments: per second, per minute, per started hour", "[billing]") {
    using namespace trainsim;
    // 8 GPUs at 3.60 per GPU-hour (0.001 per GPU-second) for 1000.5 s.
    auto p = priced(model::PriceBasis::gpu_hour, 3.6);
    const double hours = 1000.5 / 3600.0;
    p.increment = model::BillingIncrement::second;
    CHECK(sim::bill(p, model::Commitment::on_demand, hours, 1, 8).cost == Approx(1001 * 8 * 0.001)); // 8.008
    p.increment = model::BillingIncrement::minute;
    CHECK(sim::bill(p, model::Commitment::on_demand, hours, 1, 8).cost == Approx(17 * 60 * 8 * 0.001)); // 8.16
    p.increment = model::BillingIncrement::hour;
    const auto h = sim::bill(p, model::Commitment::on_demand, hours, 1, 8);
    CHECK(h.cost == Approx(8 * 3.6)); // 28.80: one started hour
    CHECK(h.unused_fraction == Approx(1.0 - 1000.5 / 3600.0));
    // A machine-hour is shared by the machine's GPUs: 2 machines at 20 per hour for 90 min, hourly.
    auto m = priced(model::PriceBasis::machine_hour, 20.0);
    m.increment = model::BillingIncrement::hour;
    const auto mb = sim::bill(m, model::Commitment::on_demand, 1.5, 2, 8);
    CHECK(mb.unit == "machine-hour");
    CHECK(mb.billed_units == Approx(4.0));
    CHECK(mb.cost == Approx(80.0));
    CHECK(sim::price_per_gpu_hour(m, 8) == Approx(20.0 / 8));
}

TEST_CASE("spot capacity: preemptions join failures in the Young/Daly interval and cost the wait", "[billing][run]") {
    using namespace trainsim;
    // 1 node of 8 GPUs, 1e9 parameters: a checkpoint of 14 GB written at 5 GB/s, delta = 2.8 s.
    // Failures: 8 GPUs / 80,000 h = 1e-4 per hour; preemptions: 0.01 per node-hour; together
    // M = 1 / 0.0101 h = 356,435.6 s. tau = sqrt(2 x 2.8 x M) = 1412.8 s.
    // factor = 1 + delta/tau + tau/(2M) + R/M + W x l_p
    //        = 1 + 0.0019819 + 0.0019819 + 600/356,435.6 + 1800 x 0.01/3600 = 1.010647.
    model::RunSettings rs; // the failures of GPUs alone, as in the run model's own tests
    rs.node_mtbf_hours = std::numeric_limits<double>::infinity();
    rs.planned_per_day = 0;
    rs.slowdown = 0;
    rs.straggler_fraction = 0;
    rs.eval_fraction = 0;
    rs.gpu_mtbf_hours = 80000;
    rs.restart_s = 600;
    model::SpotOffer spot;
    spot.rate = 1.0;
    spot.preemptions_per_node_hour = 0.01;
    spot.restart_wait_s = 1800;
    const auto r = sim::run_time(10.0, 1e9, 8, 1, rs, &spot);
    const double m = 3600.0 / (8.0 / 80000 + 0.01);
    CHECK(r.interruption_interval_s == Approx(m));
    CHECK(r.cluster_mtbf_s == Approx(80000.0 / 8 * 3600));
    CHECK(r.preemption_interval_s == Approx(100.0 * 3600));
    CHECK(r.checkpoint_interval_s == Approx(std::sqrt(2 * 2.8 * m)));
    CHECK(r.overhead_factor == Approx(1.010647).epsilon(1e-6));
    CHECK(r.expected_days == Approx(10.0 * 1.010647).epsilon(1e-6));
    CHECK(r.expected_preemptions == Approx(r.expected_days * 24 * 0.01));
    CHECK(r.expected_failures == Approx(r.expected_days * 24 * 1e-4));
    // The same capacity not preempted: only failures, a longer interval, a smaller factor.
    const auto od = sim::run_time(10.0, 1e9, 8, 1, rs);
    CHECK(od.preemption_interval_s == 0);
    CHECK(od.expected_preemptions == 0);
    CHECK(od.overhead_factor < r.overhead_factor);
    CHECK(od.checkpoint_interval_s == Approx(std::sqrt(2 * 2.8 * 80000.0 / 8 * 3600)));
}

TEST_CASE("each plan lists its billing options and the cheapest on its own expected wall clock", "[billing][cli]") {
    ScratchDir dir;
    // On demand 2.00 per GPU-hour or spot at 1.00, taken back 0.01 times per node-hour with a 30 min
    // wait; an annual term at 15% off is far too long for a 1.2-day run.
    const auto file = write(dir, "options.yaml",
                            small_scenario("pricing: {rate: 2.0, discounts: {annual: 15%}, spot: {rate: 1.0, "
                                           "preemption_rate: 0.01/h, restart_wait: 30 min}}\n"));
    const auto j = nlohmann::json::parse(run_trainsim("simulate --json '" + file + "'").out);
    REQUIRE(j["fits"] == true);
    const auto& options = j["billing"]["options"];
    REQUIRE(options.size() == 5); // on demand, monthly, quarterly, annual, spot
    double cheapest = 1e300;
    std::string cheapest_name;
    for (const auto& o : options) {
        if (o["cost"].get<double>() < cheapest) {
            cheapest = o["cost"].get<double>();
            cheapest_name = o["commitment"];
        }
    }
    CHECK(j["cheapest_billing"]["commitment"] == cheapest_name);
    CHECK(cheapest_name == "spot");
    const auto& on_demand = options[0];
    CHECK(on_demand["commitment"] == "on_demand");
    // On demand: the expected wall clock billed per second at 2.00 x 8 GPUs (within one second).
    CHECK(on_demand["cost"].get<double>() ==
          Approx(on_demand["expected_days"].get<double>() * 24 * 8 * 2.0).epsilon(1e-5));
    // The annual term bills a whole year of 8 GPUs at 1.70.
    CHECK(options[3]["cost"].get<double>() == Approx(8760.0 * 8 * 1.70));
    // Spot is preempted: a longer wall clock than on demand, at half the rate.
    CHECK(options[4]["expected_days"].get<double>() > on_demand["expected_days"].get<double>());
    // `cost` stays the plan's own way of paying (on demand here), billed; cost_prorated is the old figure.
    CHECK(j["cost"].get<double>() >= j["cost_prorated"].get<double>());
    CHECK(j["cost_prorated"].get<double>() == Approx(j["gpu_hours"].get<double>() * 2.0).epsilon(1e-9));
    CHECK(j["billed_units"].get<double>() * 2.0 == Approx(j["cost"].get<double>()));
    CHECK(j["unused_fraction"].get<double>() >= 0);
    CHECK(j["unused_fraction"].get<double>() < 1e-4); // per second: at most a second of the run
    // Preempted often and kept waiting long, spot loses to on demand.
    const auto bad = write(dir, "badspot.yaml",
                           small_scenario("pricing: {rate: 2.0, spot: {rate: 1.9, preemption_rate: 0.5/h, "
                                          "restart_wait: 2 h}}\n"));
    const auto k = nlohmann::json::parse(run_trainsim("simulate --json '" + bad + "'").out);
    CHECK(k["cheapest_billing"]["commitment"] == "on_demand");
    // Paying spot: `cost` is the spot bill, and the run's figures show the preemptions.
    const auto on_spot =
        write(dir, "onspot.yaml",
              small_scenario("pricing: {commitment: spot, spot: {rate: 1.0, preemption_rate: 0.01/h}}\n"));
    const auto s = nlohmann::json::parse(run_trainsim("simulate --json '" + on_spot + "'").out);
    CHECK(s["price_per_gpu_hour"].get<double>() == Approx(1.0));
    CHECK(s["run"]["preemption_interval_s"].get<double>() == Approx(100.0 * 3600));
    CHECK(s["run"]["expected_preemptions"].get<double>() > 0);
}

TEST_CASE("spot pricing is checked: a rate needs its preemption rate, spot needs an hourly basis",
          "[billing][loader]") {
    ScratchDir dir;
    auto rc = [&](const std::string& pricing) {
        return run_trainsim("simulate '" + write(dir, "s.yaml", small_scenario(pricing)) + "'").rc;
    };
    CHECK(rc("pricing: {rate: 2.0, spot: {rate: 1.0}}\n") == 2); // no preemption rate
    CHECK(rc("pricing: {commitment: spot, rate: 2.0}\n") == 2);  // spot without its rate
    CHECK(rc("pricing: {basis: machine_month, rate: 9000, spot: {rate: 1.0, preemption_rate: 0.01/h}}\n") == 2);
    CHECK(rc("pricing: {rate: 2.0, spot: {rate: 1.0, preemption_rate: 0.01}}\n") == 2); // a rate needs its unit
    CHECK(rc("pricing: {rate: 2.0, increment: minit}\n") == 2);
    CHECK(rc("pricing: {rate: 2.0, spot: {rate: 1.0, preemption_rate: 0.01/h}}\n") == 0);
}
